"""What every export test shares: a run environment on a fixture mirror, and serving
an exported SavedModel in a new Python process that never imports acvi_tf."""

import json
import os

import numpy as np

from tests import cli

# Runs outside the repository, with no PYTHONPATH: only TensorFlow is importable there
# (unless acvi_tf is pip-installed, which is why sys.modules is checked too).
LOADER = r"""
import json, sys
import numpy as np
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
inputs = {k: tf.constant(v) for k, v in np.load(sys.argv[2]).items()}
out = model.signatures["serving_default"](**inputs)
assert not [m for m in sys.modules if m.startswith("acvi_tf")], "acvi_tf was imported"
print(json.dumps({k: v.numpy().tolist() for k, v in out.items()}, default=bytes.decode))
"""


def run_env(root, write_mirror):
    """The environment of a CLI run on the fixture mirror ``write_mirror`` writes under
    ``root`` (data dir beside it, the repository importable)."""
    return dict(os.environ, ACVI_DATA_MIRROR=write_mirror(str(root / "mirror")),
                ACVI_DATA_DIR=str(root / "data"), TF_CPP_MIN_LOG_LEVEL="3",
                PYTHONPATH=os.getcwd())


def serve_in_fresh_process(export_dir, cwd, fresh_interpreter=False, **inputs):
    """The export's ``serving_default`` outputs (as lists, strings decoded) on
    ``inputs`` (signature name -> a list of strings or an array), computed in a new
    process without acvi_tf.

    The process is forked from :mod:`tests.cli`'s fork server, which imported
    TensorFlow, Keras, TensorFlow Probability, NumPy and sacrebleu and nothing of this
    repository (the loader checks ``sys.modules``), so it saves the 4-5 CPU-seconds of
    importing TensorFlow again; ``fresh_interpreter=True`` starts a new interpreter
    instead, where nothing but what the loader imports is loaded."""
    path = os.path.join(cwd, "serving_inputs.npz")
    np.savez(path, **{k: np.asarray(v) for k, v in inputs.items()})
    script = os.path.join(cwd, "serve_export.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(LOADER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    if fresh_interpreter:
        env["ACVI_TEST_AS_RUN"] = "1"
    r = cli.run(script, [export_dir, path], env=env, cwd=cwd, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])
