"""One process per run directory (issue 12, defect 2): the lock names its holder."""

import os
import subprocess
import sys
import time

import pytest

from acvi_tf.errors import RunError
from acvi_tf.run.directory import LOCK_FILE, locked_run_dir
from tests import cli

HOLD = """
import sys, time
from acvi_tf.run.directory import locked_run_dir
with locked_run_dir(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def _holder(model_dir):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(model_dir)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_process_is_refused_with_the_holders_pid(tmp_path):
    proc = _holder(tmp_path / "run")
    try:
        with pytest.raises(RunError, match=f"in use by another run \\(pid {proc.pid}\\)"):
            with locked_run_dir(str(tmp_path / "run")):
                pass
    finally:
        proc.kill()
        proc.wait()
    with locked_run_dir(str(tmp_path / "run")):  # a killed holder frees the lock
        assert open(tmp_path / "run" / LOCK_FILE).read().strip() == str(os.getpid())


def test_second_cli_run_is_refused_and_writes_nothing(tmp_path):
    proc = _holder(tmp_path / "run")
    try:
        before = sorted(os.listdir(tmp_path / "run"))
        t0 = time.time()
        r = cli.run("experiments.translate", ["--profile=smoke",
                                              f"--model_dir={tmp_path / 'run'}", "--mode=train"])
        assert r.returncode != 0
        assert f"in use by another run (pid {proc.pid})" in r.stderr
        assert "Traceback" not in r.stderr
        assert sorted(os.listdir(tmp_path / "run")) == before
        assert time.time() - t0 < 120
    finally:
        proc.kill()
        proc.wait()


def test_a_failed_first_run_leaves_no_empty_directory(tmp_path):
    with pytest.raises(ValueError):
        with locked_run_dir(str(tmp_path / "new")):
            raise ValueError("bad option")
    assert not (tmp_path / "new").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunError, match="is a file"):
        with locked_run_dir(str(tmp_path / "file")):
            pass
