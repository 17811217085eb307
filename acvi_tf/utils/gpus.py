"""The GPUs TensorFlow sees, and the one-line refusal of a paper-scale run without one.

A paper-profile run on the CPU (plain ``tensorflow`` installed, or the CUDA libraries
missing, so TensorFlow silently falls back) takes weeks; the task CLIs refuse it
unless ``--allow_cpu`` (:func:`cpu_only_problem`), and ``python -m
acvi_tf.setup_check`` lists what :func:`visible_gpus` finds.

Listing physical devices does not create TensorFlow's context, so this may run before a
``MultiWorkerMirroredStrategy`` configures its collective ops.
"""

GPU_INSTALL = 'pip install -e ".[gpu]"'  # TensorFlow with its CUDA and cuDNN wheels
NEEDS_GPU = ("paper",)  # the profiles sized for a GPU (ARCHITECTURE.md: "paper ... needs a GPU")


def visible_gpus():
    """``[description]`` of each GPU TensorFlow sees: its name and, when TensorFlow
    knows them, the device's model and compute capability."""
    import tensorflow as tf
    out = []
    for device in tf.config.list_physical_devices("GPU"):
        try:
            details = tf.config.experimental.get_device_details(device)
        except Exception:  # noqa: BLE001  (details are a nicety)
            details = {}
        name = details.get("device_name")
        capability = details.get("compute_capability")
        extra = ", ".join(filter(None, [name, capability and
                                        "compute capability %d.%d" % tuple(capability)]))
        out.append(f"{device.name} ({extra})" if extra else device.name)
    return out


def cuda_build():
    """Whether this TensorFlow was built with CUDA (False for the CPU-only wheel)."""
    import tensorflow as tf
    return bool(tf.test.is_built_with_cuda())


def cpu_only_problem(profile, allow_cpu, gpus=None, built_with_cuda=None):
    """The one-line reason to refuse training ``profile`` here, or None: a profile of
    :data:`NEEDS_GPU` with no GPU visible and no ``allow_cpu``. ``gpus`` /
    ``built_with_cuda`` default to what TensorFlow reports (tests pass them)."""
    if profile not in NEEDS_GPU or allow_cpu:
        return None
    gpus = visible_gpus() if gpus is None else gpus
    if gpus:
        return None
    built_with_cuda = cuda_build() if built_with_cuda is None else built_with_cuda
    # Linux wheels of TensorFlow are built with CUDA but load its libraries from the
    # nvidia-* wheels of the [and-cuda] extra: without them a GPU machine shows no GPU.
    why = ("this TensorFlow has no CUDA support" if not built_with_cuda else
           "TensorFlow sees no GPU (none here, or its CUDA libraries are not installed)")
    return (f"--profile={profile} trains for days on a GPU and {why}: install the GPU "
            f"build with {GPU_INSTALL}, or pass --allow_cpu to train on the CPU anyway")
