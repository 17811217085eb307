"""experiments.tables.run_length: a run's expected length from the table's archive."""

import json
import os

from experiments.tables import run_length


def _archived(root, name, seconds):
    os.makedirs(root / name)
    (root / name / "results.json").write_text(json.dumps(
        {} if seconds is None else {"wall_time_sec": seconds}))


def test_the_median_of_the_row_else_of_the_table(tmp_path):
    for name, seconds in [("multi30k_ved", 4000.0), ("multi30k_ved_s1", 5000.0),
                          ("multi30k_ved_s2", 9000.0), ("multi30k_soft", 2000.0),
                          ("multi30k_gaussian", None)]:
        _archived(tmp_path, name, seconds)
    os.makedirs(tmp_path / "multi30k_garbled")
    (tmp_path / "multi30k_garbled" / "results.json").write_text("{not json")
    archived = run_length.archived_seconds(str(tmp_path))
    assert archived == {"multi30k_ved": [4000.0, 5000.0, 9000.0], "multi30k_soft": [2000.0]}
    assert run_length.expected_seconds("multi30k_ved_s3", archived) == 5000.0
    assert run_length.expected_seconds("multi30k_soft_s1", archived) == 2000.0
    # a row with no archived run: the median of all four archived runs
    assert run_length.expected_seconds("multi30k_vrnmt_s1", archived) == 4500.0
    assert run_length.expected_seconds("x", {}) is None
    assert run_length.row_of("multi30k_soft_context_noise_s2") == "multi30k_soft_context_noise"
    assert run_length.row_of("multi30k_soft_context_noise") == "multi30k_soft_context_noise"


def test_the_dry_run_summary_adds_the_expected_lengths():
    archived = {"multi30k_soft": [3600.0], "multi30k_ved": [7200.0, 7200.0]}
    line = run_length.plan_summary(["multi30k_soft_s1", "multi30k_ved_s1", "multi30k_ved_s2"],
                                   archived, parallel=2)
    assert line.startswith("3 run(s) to train, expected ~5.0 run-hours, ~2.5 h 2 at a time")
    assert run_length.plan_summary(["a"], {}) == (
        "1 run(s) to train; 1 with no archived run to estimate from")
    assert run_length.plan_summary([], archived) == "nothing to train"
