"""A clean stop on SIGTERM or SIGINT: the trainer finishes its step, saves a checkpoint
and ends the run with :class:`Interrupted`, so that running the same command again
resumes where it stopped and nothing is lost.

A cluster's scheduler (Slurm at a time limit or on preemption, Kubernetes on eviction)
sends SIGTERM and kills the process some seconds later; Ctrl-C sends SIGINT. Without
this, a run loses everything since its last periodic checkpoint. What it does:

* the first signal only records a request; the training loop reads it after each step
  (and after an evaluation, which it does not cut short), saves and stops;
* a repeated SIGTERM changes nothing (the scheduler's SIGKILL is the hard stop, and a
  runner that forwards the signal must not cut the save short); a second SIGINT raises
  ``KeyboardInterrupt`` at once, as Ctrl-C always did;
* handlers can only be installed in the main thread: elsewhere (a test's worker thread,
  an embedding application) nothing changes.
"""

import signal
import threading

from acvi_tf.errors import RunError

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(RunError):
    """Training stopped on a signal after saving a checkpoint; ``exit_code`` is the
    shell's convention for a process ended by that signal (128 + its number)."""

    def __init__(self, signum, step, model_dir):
        name = signal.Signals(signum).name
        super().__init__(f"stopped by {name} at step {step:,}: checkpoint saved in "
                         f"{model_dir}; run the same command again to resume")
        self.signum, self.step = signum, step
        self.exit_code = 128 + signum


class StopRequests:
    """Context manager: while open, SIGTERM and SIGINT set :attr:`signum` (the first
    one received) instead of ending the process; on exit the previous handlers return."""

    def __init__(self, enabled=True):
        self.enabled = enabled
        self.signum = None
        self._previous = {}

    def __enter__(self):
        if self.enabled and threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc):
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}
        return False

    def _handle(self, signum, frame):
        if signum == signal.SIGINT and self.signum is not None:
            raise KeyboardInterrupt  # Ctrl-C twice: stop now, as without this
        if self.signum is None:
            self.signum = signum

    @property
    def requested(self):
        return self.signum is not None
