"""benchmarks/mmap_faults.py: what it measures is real, and our training pipeline is clear of it."""

import json

from benchmarks import mmap_faults
from tests import cli

PROBE = """
import json, sys
from benchmarks import mmap_faults as m
m.before(sys.argv[1])
m.faults_per_allocation(count=2)  # the first free raises a dynamic threshold past 1 MiB
print(json.dumps(m.faults_per_allocation()))
"""


def test_from_generator_pins_the_threshold_and_our_pipeline_does_not(tmp_path):
    """Each row in a fresh process (forked from tests/cli.py's server), after it iterated
    the row's dataset: 1 MiB allocations reuse freed memory (few faults), except after a
    from_generator dataset, when each is a new mapping faulted in page by page (256)."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    rows = {}
    for row in mmap_faults.ROWS:
        r = cli.run(str(script), [row], timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        rows[row] = json.loads(r.stdout.strip().splitlines()[-1])
    pages = (1 << 20) // 4096
    assert rows["nothing"] < 0.1 * pages, rows
    assert rows["Batches.dataset"] < 0.1 * pages, rows
    assert rows["from_generator"] > 0.9 * pages, rows


def test_markdown_reports_each_row_against_nothing():
    rows = {row: {"s_per_step": s, "faults_per_step": f}
            for row, s, f in (("nothing", 0.5, 100), ("from_generator", 0.65, 80000),
                              ("Batches.dataset", 0.5, 120))}
    result = {"rounds": 1, "rows": rows, "code": "abc1234", "date": "2026-11-26",
              "load_start": [0, 0, 0], "load_end": [0, 0, 0],
              "others_cores_during_timing": 0.0, "idle": True,
              "command": "python -m benchmarks.mmap_faults"}
    md = mmap_faults.markdown(result)
    assert "| from_generator | 0.650 | 80,000 | 1.30 |" in md, md
    assert "| nothing | 0.500 | 100 | 1.00 |" in md, md
