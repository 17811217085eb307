"""The ``tf.distribute`` side of training (issue 42): making a strategy before TensorFlow
starts, which process is the chief, the shared-``model_dir`` check of a multi-worker run,
and cutting a global batch into whole per-replica shares.

* :func:`make_strategy` -- ``default``, ``mirrored`` (on a machine without GPUs,
  ``num_devices=N`` splits the CPU into N logical devices, so two replicas can be run and
  tested on CPU) and ``multiworker`` (``TF_CONFIG``). Both of the latter must be made
  before TensorFlow's runtime starts; a strategy made too late is a
  :class:`StrategyError` saying so, not TensorFlow's "Collective ops must be configured at
  program startup".
* :func:`check_shared_model_dir` -- the chief writes a marker with a fresh token into
  ``model_dir``; every worker must read it back, else all of them stop with one message
  naming ``--model_dir`` (workers resume from the chief's checkpoints there, so a
  directory that is not shared would silently train from different states).
* :func:`xla_replicas_supported` -- an XLA-compiled step runs on several replicas on GPUs
  only (:data:`XLA_REPLICAS_MESSAGE` says so).
* :func:`trim_to_replicas` -- a batch whose rows the replicas do not divide (the last,
  partial batch of a length bucket; a batch of 16 on 3 replicas) loses its last rows, so
  that every replica gets the same number; the Trainer says so.
"""

import itertools
import json
import os
import secrets
import time

import numpy as np
import tensorflow as tf

from acvi_tf.errors import RunError

SHARED_MARKER = "shared_dir_check.json"  # written by the chief, read by every worker
# How long a worker looks for the chief's marker: a network filesystem may show a new file
# late. ACVI_SHARED_DIR_WAIT (seconds) changes it (a slower filesystem; the tests' 1 s).
SHARED_DIR_WAIT_ENV = "ACVI_SHARED_DIR_WAIT"
_KEY_BASES = itertools.count(0, 100_000)  # collective group keys of each MirroredStrategy


class StrategyError(RunError):
    """A strategy that cannot be made or run as asked (the message says why and what to
    do); the CLIs print it as one ``error:`` line."""


def runtime_started():
    """Whether TensorFlow's eager context exists (a first op, a variable, a device list):
    logical devices and collective ops can no longer be configured then."""
    from tensorflow.python.eager import context  # no public accessor for this
    return bool(context.context()._initialized)  # noqa: SLF001


def is_chief(strategy=None):
    """Whether this process writes the run's files. Under ``MultiWorkerMirroredStrategy``
    only the chief does (the ``chief`` task, else worker 0); the cluster comes from the
    strategy's resolver, or from ``TF_CONFIG`` before a strategy exists."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is not None and resolver.task_type is not None:
        task_type, task_id = resolver.task_type, resolver.task_id
        cluster = resolver.cluster_spec().as_dict()
    else:
        config = json.loads(os.environ.get("TF_CONFIG") or "{}")
        if not config.get("task"):
            return True
        task_type, task_id = config["task"].get("type"), config["task"].get("index", 0)
        cluster = config.get("cluster", {})
    if task_type == "chief":
        return True
    return task_type == "worker" and int(task_id) == 0 and "chief" not in cluster


def split_cpu(num_devices):
    """Splits the one physical CPU into ``num_devices`` logical devices (replicas of a
    ``MirroredStrategy`` on a machine without GPUs); must run before TensorFlow starts."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    have = tf.config.get_logical_device_configuration(cpu)
    if have and len(have) >= num_devices:  # (make_strategy takes the first num_devices)
        return
    if runtime_started():
        raise StrategyError(
            f"--num_devices={num_devices}: the CPU can only be split into logical devices "
            f"before TensorFlow starts, and it has started (make the strategy first)")
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)


def make_strategy(name="default", num_devices=None):
    """``default`` (one device), ``mirrored`` (all local GPUs, or ``num_devices`` of them;
    without GPUs, ``num_devices`` logical CPU devices), ``multiworker`` (``TF_CONFIG``)."""
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = None
        if num_devices and not tf.config.list_physical_devices("GPU"):
            if num_devices > 1:
                split_cpu(num_devices)
            devices = [d.name for d in tf.config.list_logical_devices("CPU")][:num_devices]
        elif num_devices:
            devices = [d.name for d in tf.config.list_logical_devices("GPU")][:num_devices]
        # Every MirroredStrategy numbers its collective groups from the same key, so a
        # second one over other devices in this process would join the first's groups
        # ("joining a group with size3, but that group has size 2"): each gets its own.
        tf.distribute.MirroredStrategy._collective_key_base = next(_KEY_BASES)  # noqa: SLF001
        return tf.distribute.MirroredStrategy(devices)
    if name == "multiworker":
        cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster", {})
        workers = sum(len(v) for k, v in cluster.items() if k in ("chief", "worker"))
        if workers > 1 and runtime_started():
            raise StrategyError(
                "--strategy=multiworker: TensorFlow started before the strategy was made, "
                "and its collective ops can only be set up at start-up; make the strategy "
                "first (the CLIs do, right after reading their flags)")
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"--strategy={name!r}: choose default, mirrored or multiworker")


def num_workers(strategy):
    """How many processes train together (1 for every strategy but a multi-worker one)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or resolver.task_type is None:
        return 1
    spec = resolver.cluster_spec().as_dict()
    return sum(len(spec.get(k, [])) for k in ("chief", "worker"))


def _sum_over_workers(strategy, value):
    """The sum over the workers of one float from each (a collective: every worker calls
    it). Each worker's replicas share its value equally, so the sum counts it once."""
    local = strategy.extended.worker_devices
    share = tf.constant(float(value) / len(local), tf.float64)

    @tf.function  # (run eagerly, a collective strategy warns of its overhead)
    def total():
        return strategy.reduce(tf.distribute.ReduceOp.SUM,
                               strategy.run(lambda: tf.identity(share)), axis=None)
    return float(total())


def shared_dir_wait_seconds():
    """The seconds a worker looks for the chief's marker: $ACVI_SHARED_DIR_WAIT, else 10;
    a value that is not a number >= 0 is a :class:`StrategyError` naming the variable."""
    raw = os.environ.get(SHARED_DIR_WAIT_ENV, "10")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise StrategyError(f"${SHARED_DIR_WAIT_ENV}={raw!r}: give the seconds a worker "
                            f"waits for the chief's marker, a number >= 0")
    return value


def check_shared_model_dir(strategy, model_dir, chief, wait_seconds=None):
    """Stops every worker of a multi-worker run, with a message naming ``--model_dir``,
    when one of them does not see the chief's ``model_dir``: the chief writes a marker
    with a fresh token, the token is summed over the workers (only the chief adds it), and
    each worker looks for the marker with that token (for up to ``wait_seconds``, for a
    network filesystem's caching; None: :func:`shared_dir_wait_seconds`). No-op for a
    single process."""
    if num_workers(strategy) < 2:
        return
    if wait_seconds is None:
        wait_seconds = shared_dir_wait_seconds()
    path = os.path.join(model_dir, SHARED_MARKER)
    token = secrets.randbelow(2 ** 31 - 1) + 1  # exact in the float64 sum
    if chief:
        os.makedirs(model_dir, exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"token": token, "time": time.time()}, f)
        os.replace(path + ".tmp", path)
    token = int(round(_sum_over_workers(strategy, token if chief else 0)))
    deadline = time.time() + (0 if chief else wait_seconds)
    seen = False
    while True:
        try:
            with open(path, encoding="utf-8") as f:
                seen = json.load(f).get("token") == token
        except (OSError, ValueError):
            seen = False
        if seen or time.time() >= deadline:
            break
        time.sleep(0.2)
    try:
        missing = int(round(_sum_over_workers(strategy, 0 if seen else 1)))
    except (tf.errors.UnavailableError, tf.errors.CancelledError) as e:
        # A worker that has its sum may exit (below) while a peer still receives its
        # share of the last collective: that peer's error is the same one.
        raise StrategyError(
            f"--model_dir={model_dir}: another worker stopped during the check that all "
            f"workers share --model_dir (its own error names the cause; "
            f"{type(e).__name__})") from None
    if missing:
        time.sleep(2.0)  # let the peers finish receiving the collective before this exits
        raise StrategyError(
            f"--model_dir={model_dir}: {missing} of the {num_workers(strategy)} workers do "
            f"not see the chief's marker {path}{'' if seen else ' (this one included)'}; "
            f"every worker of --strategy=multiworker must be given the same --model_dir, on "
            f"a filesystem they all share (they resume from the chief's checkpoints there)")


def trim_to_replicas(batch, num_replicas):
    """``(batch, dropped)``: the batch cut to the largest multiple of ``num_replicas``
    rows (each replica then gets the same share), and how many rows were cut. Scalars
    (rank 0) are kept whole. A batch of fewer rows than replicas becomes None."""
    sizes = {int(np.shape(v)[0]) for v in batch.values() if np.ndim(v)}
    if not sizes or num_replicas <= 1:
        return batch, 0
    (size,) = sizes
    keep = size - size % num_replicas
    if keep == size:
        return batch, 0
    if keep == 0:
        return None, size
    return {k: (v[:keep] if np.ndim(v) else v) for k, v in batch.items()}, size - keep


XLA_REPLICAS_MESSAGE = (
    "XLA cannot compile the cross-replica training step of --strategy={strategy} on CPU "
    "devices (TensorFlow reads replica_1's variables from CPU:0 and fails); drop --xla, or "
    "use --strategy=default")


def xla_replicas_supported():
    """Whether an XLA-compiled step can run on several replicas here (GPUs only)."""
    return bool(tf.config.list_physical_devices("GPU"))
