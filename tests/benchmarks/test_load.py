import subprocess
import sys
import time

import pytest

from benchmarks.load import OtherLoad
from benchmarks.peers import run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")

SPIN = "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass\n"


def _measure(own):
    """Other processes' cores over the window in which a 1.5 s busy loop runs; the loop is
    ours (its pid passed) or another process's."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN])
    load = OtherLoad([proc.pid] if own else []).start()
    time.sleep(1.0)
    others = load.stop()
    proc.wait()
    return others


def test_a_busy_process_that_is_not_ours_counts_and_our_own_worker_does_not():
    # The child's interpreter start-up is outside the 1.0 s window's first moments only
    # roughly, so the bounds are loose; a spinning process uses about one core.
    assert _measure(own=False) > 0.5
    assert _measure(own=True) < 0.5


def test_idle_is_decided_by_the_other_processes_during_timing():
    quiet = {"start": [1.5, 1.0, 1.0], "others_cores_during_timing": 0.05}
    assert run.is_idle(quiet, cpus=2)  # a lagging load average alone does not disqualify
    assert not run.is_idle({**quiet, "others_cores_during_timing": 0.9}, cpus=2)
    assert not run.is_idle({"start": [0.1, 0.1, 0.1]}, cpus=2)  # not measured: not idle
