"""The task CLIs under --strategy (issue 42), end to end on tiny fixture data.

MULTI-PROCESS TESTS (expensive: each starts two worker processes with TF_CONFIG on
localhost ports, forked from tests/cli.py's server). Kept to two:

* translation (Multi30k and the WMT reader) and summarization train on two workers
  (--strategy=multiworker: the strategy is made before anything starts TensorFlow, which
  it could not be before); the two workers log the same losses, and on Multi30k they are
  those of --strategy=mirrored over two logical CPU devices in one process (the same two
  replicas, so the same rows cut from partial batches): each worker trains on its own
  share of each global batch.
* workers given different --model_dir values stop, all of them, with one line naming the
  flag (the chief's marker is not seen), instead of training from different states.
"""

import json
import os

import numpy as np

from tests import cli
from tests.train_helpers import free_ports
from tests.data.test_translation import _wmt_fixture
from tests.experiments import test_summarize, test_translate

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# --mode=train: the evaluation is the chief's alone, and tested elsewhere
TRANSLATE = ["experiments.translate", "--profile=smoke", "--mode=train", "--train_steps=4"]
CASES = {
    "multi30k": TRANSLATE,
    "wmt": TRANSLATE + ["--dataset=wmt16_en_ro", "--bpe_vocab_size=400", "--deterministic"],
    "summarize": ["experiments.summarize", "--profile=smoke", "--mode=train", "--phases=none",
                  "--train_steps=4", "--coverage_steps=2"],
}


def _env(tmp_path):
    mirror = str(tmp_path / "mirror")
    test_translate._write_mirror(mirror)
    test_summarize._write_mirror(mirror)
    _wmt_fixture(mirror)
    env = dict(os.environ, ACVI_DATA_MIRROR=mirror, ACVI_DATA_DIR=str(tmp_path / "data"),
               TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO, TF_NUM_INTRAOP_THREADS="1",
               TF_NUM_INTEROP_THREADS="1", ACVI_SHARED_DIR_WAIT="1")  # (a local disk)
    env.pop("TF_CONFIG", None)
    return env


def _start_workers(argv, model_dirs, env):
    """Two workers of one cluster running ``argv`` (module first), worker i in
    ``model_dirs[i]``."""
    ports = free_ports(2)
    workers = []
    for i, model_dir in enumerate(model_dirs):
        tf_config = {"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                     "task": {"type": "worker", "index": i}}
        workers.append(cli.start(argv[0], argv[1:] + ["--strategy=multiworker",
                                                      f"--model_dir={model_dir}"],
                                 env=dict(env, TF_CONFIG=json.dumps(tf_config))))
    return workers


def _losses(stderr):
    return [float(line.split(" loss=")[1].split()[0]) for line in stderr.splitlines()
            if line.startswith("step ") and " loss=" in line]


def test_translation_and_summarization_train_on_two_workers(tmp_path):
    env = _env(tmp_path)
    runs = {name: _start_workers(argv, [tmp_path / name] * 2, env)
            for name, argv in CASES.items()}
    # the one-process reference: two mirrored replicas on two logical CPU devices
    mirrored = cli.run(TRANSLATE[0], TRANSLATE[1:] + [
        "--strategy=mirrored", "--num_devices=2", f"--model_dir={tmp_path / 'mirrored'}"],
        env=env, timeout=900)
    assert mirrored.returncode == 0, mirrored.stderr[-3000:]
    done = {name: [w.wait(timeout=900) for w in workers] for name, workers in runs.items()}
    for name, (chief, other) in done.items():
        assert chief.returncode == 0, (name, chief.stderr[-3000:])
        assert other.returncode == 0, (name, other.stderr[-3000:])
        assert _losses(chief.stderr) and _losses(chief.stderr) == _losses(other.stderr), name
        results = json.load(open(tmp_path / name / "results.json"))
        assert results["steps"] == 4
    np.testing.assert_allclose(_losses(done["multi30k"][0].stderr), _losses(mirrored.stderr),
                               rtol=1e-4)
    assert len(_losses(mirrored.stderr)) == 2  # (smoke: a line every 2 steps)
    config = json.load(open(tmp_path / "wmt" / "train_config.json"))
    assert config["deterministic"] is True


def test_workers_that_do_not_share_model_dir_stop_naming_the_flag(tmp_path):
    env = _env(tmp_path)
    dirs = [tmp_path / "chief", tmp_path / "elsewhere"]
    workers = _start_workers(TRANSLATE, dirs, env)
    for w in workers:
        done = w.wait(timeout=900)
        assert done.returncode != 0
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        assert f"error: --model_dir={dirs[0]}: 1 of the 2 workers do not see the chief's " \
               f"marker" in done.stderr or f"error: --model_dir={dirs[1]}: 1 of the 2 " \
               f"workers do not see" in done.stderr, done.stderr[-2000:]
    assert not list((tmp_path / "chief").glob("ckpt/ckpt-*"))
