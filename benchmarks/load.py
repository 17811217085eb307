"""Is the machine idle while a benchmark times? The load average cannot say: a benchmark's
own warm-up (building, tracing, first steps) raises the 1-minute load by about the number of
threads it uses, whether or not anything else runs. This measures what other processes used
instead: the machine's busy CPU time (``/proc/stat``) over a window, minus the CPU time of the
benchmark's own processes (``/proc/<pid>/stat``) over the same window, in cores.
"""
import os
import time

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_busy_seconds():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / _TICK  # guest time is already inside user


def _process_seconds(pid):
    """User + system CPU seconds of ``pid`` (and of its waited-for children); 0 if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()  # the name may hold spaces
    except OSError:
        return 0.0
    return sum(int(x) for x in rest[11:15]) / _TICK  # utime stime cutime cstime


def load_average():
    """``os.getloadavg()`` (1/5/15 min) rounded to 0.01, or None where it is missing. Recorded
    beside every benchmark; it decides nothing (see the module docstring)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def is_idle(others_cores, cpus=None):
    """Idle: other processes used under a tenth of the CPUs while the steps were timed
    (``others_cores`` from :meth:`OtherLoad.stop`; None, not measured, is not idle)."""
    cpus = cpus or os.cpu_count() or 1
    return others_cores is not None and others_cores < 0.1 * cpus


class OtherLoad:
    """``start()`` before the timed window and ``stop()`` after it; ``stop`` returns the cores
    that processes other than ``pids`` (and this one) used on average meanwhile, or None where
    ``/proc`` is missing (not Linux)."""

    def __init__(self, pids=()):
        self.pids = [os.getpid(), *pids]
        self._start = None

    def _snapshot(self):
        return (time.monotonic(), _machine_busy_seconds(),
                sum(_process_seconds(pid) for pid in self.pids))

    def start(self):
        try:
            self._start = self._snapshot()
        except OSError:
            self._start = None
        return self

    def stop(self):
        if self._start is None:
            return None
        try:
            wall, busy, ours = (b - a for a, b in zip(self._start, self._snapshot()))
        except OSError:
            return None
        return round(max(0.0, busy - ours) / wall, 3) if wall > 0 else None
