"""``python -m experiments.tables status``: the state, step, metric and time left of each
run directory, read from files a run writes (no training here)."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from experiments.tables import runner, status

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _make_status(cwd, *args):
    """`make -s status ARGS` in ``cwd`` with this checkout's Makefile copied there and this
    checkout on the path (skipped where make is missing)."""
    if shutil.which("make") is None:
        pytest.skip("needs make")
    shutil.copy(os.path.join(ROOT, "Makefile"), cwd / "Makefile")
    return subprocess.run(["make", "-s", "status", *args, f"PYTHON={sys.executable}"],
                          cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=ROOT))


def _run_dir(path, flags, history, results=False, lock_pid=None, partial_line=False):
    os.makedirs(path)
    with open(os.path.join(path, "run_config.json"), "w") as f:
        json.dump({"command": "python -m experiments.translate ...", "flags": flags}, f)
    with open(os.path.join(path, "history.jsonl"), "w") as f:
        for rec in history:
            f.write(json.dumps(rec) + "\n")
        if partial_line:
            f.write('{"time": 1, "step": 9')  # the run is writing this line
    if results:
        with open(os.path.join(path, "results.json"), "w") as f:
            json.dump({"bleu": {"test": 30.0}}, f)
    if lock_pid is not None:
        with open(os.path.join(path, ".lock"), "w") as f:
            f.write(f"{lock_pid}\n")
    return str(path)


def _history(steps, seconds_per_100, evals, start=1000.0):
    recs = [{"time": start + (s / 100) * seconds_per_100, "step": s,
             "train": {"loss": 1.0, "tokens_per_sec": 2000.0}} for s in steps]
    recs += [{"time": start + (s / 100) * seconds_per_100, "step": s, "eval": e}
             for s, e in evals]
    return sorted(recs, key=lambda r: (r["step"], "eval" in r))


def test_a_live_run_its_rate_time_left_and_best_evaluation(tmp_path):
    # a process whose command line names this package's CLIs holds the lock
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                               "experiments.translate"])
    for _ in range(200):  # its command line shows once its exec has finished
        with open(f"/proc/{holder.pid}/cmdline", "rb") as f:
            if b"experiments." in f.read():
                break
        time.sleep(0.05)
    try:
        history = _history(range(100, 900, 100), 10.0,
                           [(400, {"dev_bleu": 5.0}), (600, {"dev_bleu": 9.0}),
                            (800, {"dev_bleu": 9.0})])
        path = _run_dir(tmp_path / "multi30k_soft_s1", {"train_steps": 1000}, history,
                        lock_pid=holder.pid, partial_line=True)
        s = status.run_status(path, now=history[-1]["time"] + 30)
    finally:
        holder.kill()
        holder.wait()
    assert s["state"] == "training" and s["pid"] == holder.pid
    assert (s["step"], s["train_steps"]) == (800, 1000)
    assert s["steps_per_sec"] == pytest.approx(10.0)  # 100 steps every 10 s
    assert s["eta_sec"] == pytest.approx(20.0)        # 200 steps left
    # the last evaluation, and the earliest of the equal bests (as --select_best keeps it)
    assert (s["metric"], s["last"], s["best"], s["best_step"]) == ("dev_bleu", 9.0, 9.0, 600)
    assert s["updated_sec_ago"] == pytest.approx(30.0)
    assert s["tokens_per_sec"] == 2000.0


def test_done_stopped_and_a_lock_left_by_a_dead_process(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    evals = [(500, {"dev_nll": 3.0}), (1000, {"dev_nll": 2.5}), (1500, {"dev_nll": 2.7})]
    _run_dir(tmp_path / "b_stopped", {"train_steps": 8000, "select_best": "-dev_nll"},
             _history(range(50, 1550, 50), 30.0, evals), lock_pid=gone.pid)
    done = _run_dir(tmp_path / "a_done", {"train_steps": 1500},
                    _history(range(50, 1550, 50), 30.0, [(1500, {"val_rouge_1": 21.5})]),
                    results=True)
    empty = tmp_path / "c_empty"
    empty.mkdir()
    (empty / "flags.txt").write_text("--train_steps=200\n--model_dir=x\n")
    got = {s["run"]: s for s in map(status.run_status, status.find_runs([str(tmp_path)]))}
    assert list(got) == ["a_done", "b_stopped", "c_empty"]
    assert got["b_stopped"]["state"] == "stopped" and got["b_stopped"]["eta_sec"] is None
    # -dev_nll: the lowest wins
    assert (got["b_stopped"]["best"], got["b_stopped"]["best_step"]) == (2.5, 1000)
    assert got["a_done"]["state"] == "done" and got["a_done"]["metric"] == "val_rouge_1"
    assert got["c_empty"]["state"] == "empty" and got["c_empty"]["train_steps"] == 200
    # one run directory given as the root itself
    assert status.find_runs([done]) == [done]


def test_the_cli_prints_one_line_a_run_and_names_a_missing_root(tmp_path, capsys):
    _run_dir(tmp_path / "multi30k_acvi", {"train_steps": 1000},
             _history(range(100, 1100, 100), 10.0, [(1000, {"dev_bleu": 35.1})]), results=True)
    assert runner.main(["status", "--runs_root", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:3] == ["run", "state", "step"]
    assert lines[1].split()[:3] == ["multi30k_acvi", "done", "1,000/1,000"]
    assert "dev_bleu 35.10 (35.10 @ 1,000)" in lines[1]
    assert runner.main(["status", "--runs_root", str(tmp_path / "nope")]) == 2
    assert "--runs_root=" in capsys.readouterr().out


def test_make_status_on_a_fresh_clone_says_there_are_no_runs(tmp_path):
    """`make status` before any run (no runs/) is one line and success, not a traceback;
    an explicit --runs_root that does not exist stays an error naming it."""
    done = _make_status(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("no runs yet: runs/ does not exist (make demo or a table "
                                   "target makes it)")
    with pytest.raises(FileNotFoundError, match="--runs_root=.*nope: no such directory"):
        status.find_runs([str(tmp_path / "nope")])
    # RUNS= names the runs of another checkout (a worktree's)
    _run_dir(tmp_path / "elsewhere" / "multi30k_soft", {"train_steps": 1000},
             _history(range(100, 1100, 100), 10.0, [(1000, {"dev_bleu": 35.1})]), results=True)
    done = _make_status(tmp_path, f"RUNS={tmp_path / 'elsewhere'}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split()[:3] == ["multi30k_soft", "done", "1,000/1,000"]


def test_make_status_reads_the_run_folders_beside_a_rendered_table(tmp_path):
    """A table run from a worktree writes its table next to its runs (``--out
    runs/table4_cpu.md``, the README's command): `make status` there lists the runs of
    runs/table4_cpu instead of failing on the table file as a --runs_root."""
    _run_dir(tmp_path / "runs" / "table4_cpu" / "multi30k_soft", {"train_steps": 1000},
             _history(range(100, 1100, 100), 10.0, [(1000, {"dev_bleu": 35.1})]), results=True)
    for name in ("table4_cpu.md", "table4_cpu.json", "table4_cpu_curves.png"):
        (tmp_path / "runs" / name).write_text("rendered\n")
    done = _make_status(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[1].split()[:3] == ["multi30k_soft", "done", "1,000/1,000"]


def test_python_m_status_answers_without_tensorflow(tmp_path):
    """`make status` is read-only and quick: `python -m experiments.tables status` imports
    no table module and no TensorFlow (a second, not ten and a screen of log lines), and
    prints what the runner's own `status` subcommand prints."""
    _run_dir(tmp_path / "multi30k_soft", {"train_steps": 1000},
             _history(range(100, 1100, 100), 10.0, [(1000, {"dev_bleu": 35.1})]), results=True)
    probe = ("import runpy, sys\n"
             "sys.argv = ['experiments.tables', 'status', '--runs_root', sys.argv[1]]\n"
             "try:\n"
             "    runpy.run_module('experiments.tables', run_name='__main__')\n"
             "except SystemExit as e:\n"
             "    code = e.code\n"
             "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')\n"
             "               or m.startswith('experiments.tables.table'))\n"
             "print('EXIT', code, 'HEAVY', heavy)\n")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "EXIT 0 HEAVY []"
    assert lines[1].split()[:3] == ["multi30k_soft", "done", "1,000/1,000"]
    assert "dev_bleu 35.10 (35.10 @ 1,000)" in lines[1]


def test_the_package_names_still_import_on_first_use():
    import experiments.tables as tables
    assert tables.table4_cpu is __import__(
        "experiments.tables.table4_translation", fromlist=["x"]).table4_cpu
    from experiments.tables import SPECS, main  # noqa: F401
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tables.nope  # noqa: B018
