"""The job runner of the tables and the ACVI study, on stand-in commands (no training)."""

import json
import os
import sys

import pytest

from experiments.jobs import Job, run_jobs, shell


def _writer(path, key):
    """A command that adds ``key`` to the results.json at ``path`` (making it if needed),
    and records its thread count setting."""
    code = ("import json, os, sys; p = sys.argv[1]; os.makedirs(os.path.dirname(p), "
            "exist_ok=True); r = json.load(open(p)) if os.path.exists(p) else {}; "
            "r[sys.argv[2]] = os.environ.get('TF_NUM_INTRAOP_THREADS'); "
            "json.dump(r, open(p, 'w'))")
    return [sys.executable, "-c", code, path, key]


def _chain(tmp_path, name, keys):
    """A job that runs one command per missing key of its results.json."""
    path = str(tmp_path / name / "results.json")

    def todo():
        have = json.load(open(path)) if os.path.exists(path) else {}
        return [_writer(path, k) for k in keys if k not in have]
    return Job(name, todo), path


def test_chains_run_in_order_in_parallel_with_one_thread_each(tmp_path, capsys):
    (a, pa), (b, pb) = _chain(tmp_path, "a", ["train", "eval"]), _chain(tmp_path, "b", ["train"])
    assert run_jobs([a, b], parallel=2, log_dir=str(tmp_path / "logs"), poll_seconds=0.1) == 0
    assert json.load(open(pa)) == {"train": "1", "eval": "1"}
    assert json.load(open(pb)) == {"train": "1"}
    assert os.path.exists(tmp_path / "logs" / "a.log")
    out = capsys.readouterr().out
    assert out.count("a: python -c") == 2 and "a: done" in out and "b: done" in out
    # done jobs run nothing again
    assert run_jobs([a, b], parallel=2, log_dir=str(tmp_path / "logs")) == 0
    assert "python -c" not in capsys.readouterr().out


def test_one_at_a_time_keeps_the_threads_and_writes_to_the_terminal(tmp_path, capsys):
    a, pa = _chain(tmp_path, "a", ["train"])
    assert run_jobs([a]) == 0
    assert json.load(open(pa)) == {"train": os.environ.get("TF_NUM_INTRAOP_THREADS")}
    with pytest.raises(ValueError, match="log_dir"):
        run_jobs([a], parallel=2)


def test_a_failure_ends_its_job_only_and_is_counted(tmp_path, capsys):
    bad = Job("bad", lambda: [[sys.executable, "-c", "raise SystemExit(3)"]])
    good, path = _chain(tmp_path, "good", ["train"])
    assert run_jobs([bad, good], parallel=2, log_dir=str(tmp_path / "logs"),
                    poll_seconds=0.1) == 1
    out = capsys.readouterr().out
    assert "bad: FAILED (exit code 3); its output: " in out and os.path.exists(path)


def test_done_runs_as_each_job_ends_and_only_after_success(tmp_path, capsys):
    """A job's ``done`` runs once its last command succeeded, while a slower job still
    runs (the tables archive each run there), never for a failed job; an OSError in it
    is reported and counted, not raised."""
    calls = []
    mark = tmp_path / "slow.done"
    slow = Job("slow", lambda: [] if mark.exists() else [
        [sys.executable, "-c", f"import time; time.sleep(1.5); open({str(mark)!r}, 'w')"]],
        done=lambda: calls.append("slow") or "slow archived")
    fast, path = _chain(tmp_path, "fast", ["train", "eval"])
    fast = Job("fast", fast.todo,
               done=lambda: calls.append(("fast", os.path.exists(path), calls.copy())))
    bad = Job("bad", lambda: [[sys.executable, "-c", "raise SystemExit(3)"]],
              done=lambda: calls.append("bad"))
    assert run_jobs([slow, fast, bad], parallel=3, log_dir=str(tmp_path / "logs"),
                    poll_seconds=0.05) == 1
    # fast finished (both commands) before slow, and its done ran before slow ended
    assert calls == [("fast", True, []), "slow"]
    assert "slow: slow archived" in capsys.readouterr().out

    def full():
        raise OSError("No space left on device")
    broken = Job("broken", lambda: [] if os.path.exists(tmp_path / "x") else [
        [sys.executable, "-c", f"open({str(tmp_path / 'x')!r}, 'w')"]], done=full)
    assert run_jobs([broken], poll_seconds=0.05) == 1
    assert "broken: FAILED after the run: No space left on device" in capsys.readouterr().out


def test_a_command_that_succeeds_without_finishing_is_not_rerun_forever(tmp_path, capsys):
    lazy = Job("lazy", lambda: [[sys.executable, "-c", "pass"]])
    assert run_jobs([lazy]) == 1
    assert "exited 0 but is still to do" in capsys.readouterr().out


def test_a_job_waits_for_the_run_it_starts_from(tmp_path, capsys):
    source, spath = _chain(tmp_path, "source", ["train"])
    warm, wpath = _chain(tmp_path, "warm", ["train"])
    warm.waits_for = os.path.dirname(spath)
    assert run_jobs([warm]) == 1  # nobody makes its source
    assert "not done (run it first)" in capsys.readouterr().out
    assert run_jobs([warm, source], parallel=2, log_dir=str(tmp_path / "logs"),
                    poll_seconds=0.1) == 0
    assert os.path.getmtime(wpath) >= os.path.getmtime(spath)


def test_shell_names_the_interpreter_python_and_quotes():
    assert shell([sys.executable, "-m", "x", "--a=b c"]) == "python -m x '--a=b c'"


def test_sigterm_passes_to_the_running_command_and_starts_nothing_more(tmp_path, capsys):
    """The runner is sent SIGTERM (here by its own command, so that it arrives while that
    command runs): it passes it on, waits for the command to save and stop (exit 143),
    starts no other job and exits with 143; the stopped job resumes when run again."""
    marker = tmp_path / "saved"
    child = ("import os, signal, sys, time\n"
             "def stop(signum, frame):\n"
             "    open(sys.argv[1], 'w').write('saved'); sys.exit(128 + signum)\n"
             "signal.signal(signal.SIGTERM, stop)\n"
             "os.kill(os.getppid(), signal.SIGTERM)\n"
             "time.sleep(120)\n")
    running = Job("running", lambda: [] if marker.exists() else
                  [[sys.executable, "-c", child, str(marker)]])
    later, path = _chain(tmp_path, "later", ["train"])
    with pytest.raises(SystemExit) as stopped:
        run_jobs([running, later], poll_seconds=0.05)
    assert stopped.value.code == 128 + 15
    assert marker.read_text() == "saved" and not os.path.exists(path)
    out = capsys.readouterr().out
    assert "SIGTERM: starting nothing more" in out
    assert "running: stopped by a signal (exit code 143); it resumes when run again" in out
    assert "run the same command again to resume (1 job(s) not started)" in out
    assert run_jobs([running, later]) == 0 and os.path.exists(path)


def test_no_job_starts_after_the_start_window(tmp_path, capsys):
    """``start_until``: a job that started finishes (all its commands); the jobs not yet
    started when the window closes are listed, not run, and not counted as failures."""
    import time
    slow, slow_path = _chain(tmp_path, "slow", ["train", "eval"])
    late, late_path = _chain(tmp_path, "late", ["train"])
    slow_todo = slow.todo

    def todo():  # the first command takes a second, longer than the window
        commands = slow_todo()
        if commands and commands[0][-1] == "train":
            commands[0] = commands[0][:2] + ["import time; time.sleep(1.0); "
                                             + commands[0][2]] + commands[0][3:]
        return commands
    slow.todo = todo
    assert run_jobs([slow, late], poll_seconds=0.05, start_until=time.time() + 0.5) == 0
    assert json.load(open(slow_path)) == {"train": os.environ.get("TF_NUM_INTRAOP_THREADS"),
                                          "eval": os.environ.get("TF_NUM_INTRAOP_THREADS")}
    assert not os.path.exists(late_path)
    out = capsys.readouterr().out
    assert "the start window has closed: 1 job(s) not started (late)" in out
    # a closed window starts nothing; the same command later starts what is left
    assert run_jobs([late], start_until=time.time() - 1) == 0 and not os.path.exists(late_path)
    assert run_jobs([late], start_until=time.time() + 60) == 0 and os.path.exists(late_path)


def test_a_job_starts_only_if_it_is_expected_to_end_before_the_finish_window(tmp_path, capsys):
    """``finish_until``: a job expected to outlast the window is not started (listed, not a
    failure) while a shorter one after it is; a job with no estimate is not held back."""
    import time
    long, long_path = _chain(tmp_path, "long", ["train"])
    short, short_path = _chain(tmp_path, "short", ["train"])
    unknown, unknown_path = _chain(tmp_path, "unknown", ["train"])
    long.expected_seconds, short.expected_seconds = 3600.0, 1.0
    assert run_jobs([long, short, unknown], poll_seconds=0.05,
                    finish_until=time.time() + 600) == 0
    assert not os.path.exists(long_path)
    assert os.path.exists(short_path) and os.path.exists(unknown_path)
    out = capsys.readouterr().out
    assert "no run left ends before the finish window closes: 1 job(s) not started " \
           "(long ~60 min)" in out
    assert run_jobs([long], finish_until=time.time() + 4000) == 0 and os.path.exists(long_path)
