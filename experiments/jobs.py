"""Runs experiment jobs, N at a time: the one runner of the tables and the ACVI study.

A :class:`Job` is a chain of commands on one run directory (train, then evaluations),
asked for afresh before each command with ``job.todo()``: a finished command is never
repeated, so a stopped runner starts again where it was, and a run that an interrupted
command left half-done resumes from its checkpoint.

With ``parallel > 1`` every command gets one intra-op and one inter-op thread (on 2
cores, two single-threaded LSTM runs train faster together than one run on both cores;
training minutes of such runs are not comparable with runs alone) and writes its output
to ``<log_dir>/<job name>.log``; with ``parallel == 1`` and no ``log_dir`` it writes to
the terminal, as a single run would.
"""

import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import time
from typing import Callable, Optional

from acvi_tf.training.stop_signal import StopRequests

# the exit codes of a command stopped by SIGINT or SIGTERM (128 + the signal's number)
STOPPED_CODES = (128 + signal.SIGINT, 128 + signal.SIGTERM)
SINGLE_THREAD = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
                 "OMP_NUM_THREADS": "1"}


@dataclasses.dataclass
class Job:
    """``todo()``: the argv lists still to run, in order (empty: done). ``waits_for``: a
    run directory whose ``results.json`` must exist before the job starts (a warm start's
    source), or None. ``done()``: called once the job's last command has succeeded, while
    the other jobs still run (the tables archive each run there as soon as it ends), or
    None; what it returns is printed when it is a non-empty string. ``expected_seconds``:
    how long the job is expected to run (None: unknown), for ``finish_until``."""
    name: str
    todo: Callable[[], list]
    waits_for: Optional[str] = None
    done: Optional[Callable[[], Optional[str]]] = None
    expected_seconds: Optional[float] = None


def shell(argv):
    """``argv`` as a command to paste, with ``python`` for the interpreter."""
    if argv and argv[0] == sys.executable:
        argv = ["python"] + list(argv[1:])
    return " ".join(shlex.quote(a) for a in argv)


def finished(model_dir):
    return os.path.exists(os.path.join(model_dir, "results.json"))


def run_jobs(jobs, parallel=1, log_dir=None, stream=None, poll_seconds=0.2,
             start_until=None, finish_until=None):
    """Runs every job's :attr:`Job.todo` commands, ``parallel`` jobs at a time and a job's
    commands one after the other; a failed command ends its job. Returns the number of
    jobs that failed or could not start (their ``waits_for`` never finished).

    ``start_until`` (seconds since the epoch, or None): no job starts after it; a started
    job still runs its remaining commands. The jobs left are listed and are not failures
    (a session or a Slurm allocation ends at a known time: a run that cannot finish
    before it would only be lost, its checkpoint with the machine). ``finish_until``
    (seconds since the epoch, or None): a job starts only if its
    :attr:`Job.expected_seconds` end before it (a job with no estimate is not held back);
    a shorter job later in the list may still start when a longer one does not fit.

    On SIGTERM or SIGINT nothing more starts; a SIGTERM is passed on to the running
    commands (a training run saves its step and stops: :mod:`acvi_tf.training.stop_signal`;
    SIGINT from a terminal reaches them itself), the runner waits for them and exits with
    128 + the signal's number. Running the same command again resumes every run."""
    with StopRequests() as stops:
        return _run_jobs(jobs, parallel, log_dir, stream, poll_seconds, stops, start_until,
                         finish_until)


def _run_jobs(jobs, parallel, log_dir, stream, poll_seconds, stops, start_until=None,
              finish_until=None):
    stream = stream or sys.stdout
    parallel = max(1, parallel)
    if parallel > 1 and log_dir is None:
        raise ValueError("run_jobs: parallel jobs need a log_dir for their output")
    pending = [j for j in jobs if j.todo()]
    if log_dir is not None:
        os.makedirs(log_dir, exist_ok=True)
    env = dict(os.environ, **(SINGLE_THREAD if parallel > 1 else {}))
    running, failed = [], 0

    def start(job, log, argv):
        print(f"=== {time.strftime('%H:%M:%S')} {job.name}: {shell(argv)}", file=stream,
              flush=True)
        out = dict(stdout=log, stderr=subprocess.STDOUT) if log is not None else {}
        return subprocess.Popen(argv, env=env, **out)

    def fits(job):
        return (finish_until is None or job.expected_seconds is None
                or time.time() + job.expected_seconds <= finish_until)

    passed_on = False
    while pending or running:
        if stops.requested and not passed_on:
            passed_on = True
            print(f"=== {time.strftime('%H:%M:%S')} {signal.Signals(stops.signum).name}: "
                  f"starting nothing more; waiting for {len(running)} running command(s) "
                  f"to save and stop", file=stream, flush=True)
            if stops.signum == signal.SIGTERM:
                for _, proc, _, _ in running:
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)
        closed = start_until is not None and time.time() >= start_until
        while len(running) < parallel and not stops.requested and not closed:
            ready = [j for j in pending
                     if (j.waits_for is None or finished(j.waits_for)) and fits(j)]
            if not ready:
                break
            job = ready[0]
            pending.remove(job)
            log = (open(os.path.join(log_dir, f"{job.name}.log"), "a", encoding="utf-8")
                   if log_dir is not None else None)
            argv = job.todo()[0]
            running.append([job, start(job, log, argv), log, argv])
        if not running and stops.requested:
            print(f"=== stopped: run the same command again to resume ({len(pending)} "
                  f"job(s) not started)", file=stream, flush=True)
            raise SystemExit(128 + stops.signum)
        if not running and closed:
            print(f"=== {time.strftime('%H:%M:%S')} the start window has closed: "
                  f"{len(pending)} job(s) not started ({', '.join(j.name for j in pending)}); "
                  f"run the same command again to start them", file=stream, flush=True)
            return failed
        if not running and not any(fits(j) for j in pending):
            left = ", ".join(f"{j.name} ~{j.expected_seconds / 60:.0f} min" for j in pending)
            print(f"=== {time.strftime('%H:%M:%S')} no run left ends before the finish "
                  f"window closes: {len(pending)} job(s) not started ({left}); run the same "
                  f"command again to start them", file=stream, flush=True)
            return failed
        if not running:  # what is left waits for a run nobody will make
            for job in pending:
                print(f"{job.name}: not run, the run it starts from ({job.waits_for}) is not "
                      f"done (run it first)", file=stream)
            return failed + len(pending)
        time.sleep(poll_seconds)  # (a poll is one waitpid per running job: cheap)
        for item in list(running):
            job, proc, log, argv = item
            if proc.poll() is None:
                continue
            code = proc.returncode
            following = job.todo() if code == 0 else []
            if following and following[0] == argv:
                # It exited 0 without writing what marks it done: running it again would
                # loop forever.
                print(f"{job.name}: `{shell(argv)}` exited 0 but is still to do",
                      file=stream)
                code = 1
            elif following and not stops.requested:  # the job's next command
                item[1], item[3] = start(job, log, following[0]), following[0]
                continue
            if log is not None:
                log.close()
            running.remove(item)
            status = ("done" if code == 0 else
                      f"stopped by a signal (exit code {code}); it resumes when run again"
                      if code in STOPPED_CODES else f"FAILED (exit code {code})")
            if code == 0 and following:
                status = "stopped after a finished command; it resumes when run again"
                code = 1
            failed += code != 0
            where = f"; its output: {log.name}" if log is not None and code else ""
            print(f"=== {time.strftime('%H:%M:%S')} {job.name}: {status}{where}", file=stream,
                  flush=True)
            if code == 0 and job.done is not None:
                try:
                    said = job.done()
                except OSError as e:  # a full disk or a missing folder: the run stays
                    said = f"FAILED after the run: {e}"
                    failed += 1
                if said:
                    print(f"=== {time.strftime('%H:%M:%S')} {job.name}: {said}", file=stream,
                          flush=True)
    return failed
