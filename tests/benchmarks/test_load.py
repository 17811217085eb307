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


def _busy_ticks():
    """The machine's non-idle clock ticks, read here: user nice system irq softirq steal
    of /proc/stat's first line (proc(5); idle and iowait are the idle ones)."""
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
    return user + nice + system + irq + softirq + steal


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_on_this_machine_it_reads_proc_and_gives_cores():
    """Over a 1-second window in which this process itself burns CPU, the meter's answer
    equals the same window's counters read here: (the machine's busy ticks - this process'
    CPU time by os.times()) / wall seconds, up to the counters' 10 ms ticks and the few
    microseconds between the two sets of readings (whatever else runs on the machine)."""
    tick = os.sysconf("SC_CLK_TCK")
    cpus = os.cpu_count() or 1
    before = (time.monotonic(), _busy_ticks(), sum(os.times()[:2]))
    meter = OtherLoad().start()
    spin_until = time.process_time() + 0.4
    while time.process_time() < spin_until:  # ours: must not count as another's load
        pass
    time.sleep(max(0.0, 1.0 - (time.monotonic() - before[0])))
    others = meter.stop()
    after = (time.monotonic(), _busy_ticks(), sum(os.times()[:2]))
    wall = after[0] - before[0]
    reference = ((after[1] - before[1]) / tick - (after[2] - before[2])) / wall
    # a tick per CPU either way at each end of both windows, and the meter's own rounding
    slack = (4 * cpus + 2) / tick / wall + 0.002
    assert others is not None
    assert abs(others - max(0.0, reference)) <= slack, (others, reference, slack)


def test_idle_is_decided_by_the_other_processes_during_timing():
    quiet = {"start": [1.5, 1.0, 1.0], "others_cores_during_timing": 0.05}
    assert run.is_idle(quiet, cpus=2)  # a lagging load average alone does not disqualify
    assert not run.is_idle({**quiet, "others_cores_during_timing": 0.9}, cpus=2)
    assert not run.is_idle({"start": [0.1, 0.1, 0.1]}, cpus=2)  # not measured: not idle
