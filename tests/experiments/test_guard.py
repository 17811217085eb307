"""How a CLI ends: SIGTERM stops a training run with a checkpoint and the shell's exit
code, and the same command resumes it (experiments/guard.py, acvi_tf/training/stop_signal.py)."""

import json
import os
import re
import signal
import time

from tests import cli
from tests.experiments.test_translate import REPO, _write_mirror


def test_sigterm_saves_the_step_exits_143_and_the_same_command_resumes(tmp_path):
    env = dict(os.environ, ACVI_DATA_MIRROR=_write_mirror(str(tmp_path / "mirror")),
               ACVI_DATA_DIR=str(tmp_path / "data"), TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=REPO)
    model_dir = str(tmp_path / "run")
    args = ["--profile=smoke", "--mode=train", "--train_steps=100000", "--log_every=1",
            f"--model_dir={model_dir}"]
    run = cli.start("experiments.translate", args, env=env)
    history = os.path.join(model_dir, "history.jsonl")
    deadline = time.time() + 300
    while not (os.path.exists(history) and os.path.getsize(history)):  # training
        assert time.time() < deadline and run._proc.exitcode is None, "no step was logged"
        time.sleep(0.2)
    os.kill(run._proc.pid, signal.SIGTERM)
    done = run.wait(timeout=300)
    assert done.returncode == 143, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    found = re.search(r"stopped by SIGTERM at step (\d+): checkpoint saved in (\S+); run the "
                      r"same command again to resume", done.stderr)
    assert found and found.group(2) == model_dir, done.stderr[-2000:]
    step = int(found.group(1))
    assert os.path.exists(os.path.join(model_dir, "ckpt", f"ckpt-{step}.index"))
    again = cli.run("experiments.translate", args[:2] + [f"--train_steps={step + 2}"]
                    + args[3:], env=env, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"at step {step}" in again.stderr and "resumed from" in again.stderr
    # --mode=train's results.json names the commit, over both starts of the run
    provenance = json.load(open(os.path.join(model_dir, "results.json")))["provenance"]
    assert provenance["segments"] == 2 and "commit" in provenance
