import os
import sys
import time

import pytest

from benchmarks import load as load_module
from benchmarks.load import OtherLoad
from benchmarks.peers import run


def test_other_load_is_the_machines_busy_time_minus_ours_over_the_window(monkeypatch):
    """(machine busy seconds - our processes' seconds) / wall seconds, never below 0; the
    clocks and /proc are replaced, so no other work on the machine changes the answer."""
    clock = {"wall": 100.0, "busy": 50.0, 1: 10.0, 2: 5.0}
    monkeypatch.setattr(load_module.time, "monotonic", lambda: clock["wall"])
    monkeypatch.setattr(load_module, "_machine_busy_seconds", lambda: clock["busy"])
    monkeypatch.setattr(load_module, "_process_seconds", lambda pid: clock.get(pid, 0.0))
    monkeypatch.setattr(load_module.os, "getpid", lambda: 1)
    meter = OtherLoad([2]).start()
    # 4 s pass: the machine was busy 6 CPU-s, ours 1.5 + 0.5 of it: others used 1 core.
    clock.update(wall=104.0, busy=56.0)
    clock[1], clock[2] = 11.5, 5.5
    assert meter.stop() == 1.0
    meter = OtherLoad([2]).start()
    clock.update(wall=110.0, busy=57.5)  # ours used more than the machine counted
    clock[1] = 25.0
    assert meter.stop() == 0.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_on_this_machine_it_reads_proc_and_gives_cores():
    meter = OtherLoad([os.getpid()]).start()
    time.sleep(1.0)
    others = meter.stop()
    # /proc counts in clock ticks (10 ms): over 1 s, a few ticks of rounding either way.
    assert others is not None and 0.0 <= others <= 1.1 * (os.cpu_count() or 1)


def test_idle_is_decided_by_the_other_processes_during_timing():
    quiet = {"start": [1.5, 1.0, 1.0], "others_cores_during_timing": 0.05}
    assert run.is_idle(quiet, cpus=2)  # a lagging load average alone does not disqualify
    assert not run.is_idle({**quiet, "others_cores_during_timing": 0.9}, cpus=2)
    assert not run.is_idle({"start": [0.1, 0.1, 0.1]}, cpus=2)  # not measured: not idle
