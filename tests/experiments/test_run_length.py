"""experiments.tables.run_length: a run's expected length from the table's archive."""

import json
import os

from experiments.tables import run_length


AVX2 = "AMD EPYC [avx2 fma]"
AVX512 = "AMD EPYC [avx2 fma avx512f avx512_vnni avx512_bf16]"


def _archived(root, name, seconds, cpus=None):
    os.makedirs(root / name)
    result = {} if seconds is None else {"wall_time_sec": seconds}
    if cpus is not None:
        result["provenance"] = {"cpu_models": cpus}
    (root / name / "results.json").write_text(json.dumps(result))


def test_the_median_of_the_row_else_of_the_table(tmp_path):
    for name, seconds in [("multi30k_ved", 4000.0), ("multi30k_ved_s1", 5000.0),
                          ("multi30k_ved_s2", 9000.0), ("multi30k_soft", 2000.0),
                          ("multi30k_gaussian", None)]:
        _archived(tmp_path, name, seconds)
    os.makedirs(tmp_path / "multi30k_garbled")
    (tmp_path / "multi30k_garbled" / "results.json").write_text("{not json")
    archived = run_length.archived_seconds(str(tmp_path))
    assert archived == {"multi30k_ved": [(4000.0, None), (5000.0, None), (9000.0, None)],
                        "multi30k_soft": [(2000.0, None)]}
    assert run_length.expected_seconds("multi30k_ved_s3", archived) == 5000.0
    assert run_length.expected_seconds("multi30k_soft_s1", archived) == 2000.0
    # a row with no archived run: the median of all four archived runs
    assert run_length.expected_seconds("multi30k_vrnmt_s1", archived) == 4500.0
    assert run_length.expected_seconds("x", {}) is None
    assert run_length.row_of("multi30k_soft_context_noise_s2") == "multi30k_soft_context_noise"
    assert run_length.row_of("multi30k_soft_context_noise") == "multi30k_soft_context_noise"


def test_the_runs_on_this_machines_cpu_estimate_first(tmp_path):
    """A row's runs on this CPU give its length when it has any (a Transformer seed
    trains at ~0.56x the tokens/s on an AVX2-only EPYC as with AVX-512), else all its
    runs; a run resumed across machines (two CPUs) or older than ``cpu_models`` counts as
    an unknown CPU."""
    for name, seconds, cpus in [
            ("multi30k_transformer", 4800.0, [AVX512]),
            ("multi30k_transformer_s1", 8600.0, [AVX2]),
            ("multi30k_transformer_s2", 9000.0, [AVX2]),
            ("multi30k_transformer_s3", 20000.0, [AVX512, AVX2]),
            ("multi30k_soft", 2400.0, None),
            ("multi30k_ved", 5000.0, [AVX512])]:
        _archived(tmp_path, name, seconds, cpus)
    archived = run_length.archived_seconds(str(tmp_path))
    assert archived["multi30k_transformer"] == [(4800.0, AVX512), (8600.0, AVX2),
                                                (9000.0, AVX2), (20000.0, None)]
    assert archived["multi30k_soft"] == [(2400.0, None)]
    assert run_length.expected_seconds("multi30k_transformer_s4", archived, AVX2) == 8800.0
    assert run_length.expected_seconds("multi30k_transformer_s4", archived, AVX512) == 4800.0
    # no CPU given, or one with no run of the row: the row's median over every CPU
    assert run_length.expected_seconds("multi30k_transformer_s4", archived) == 8800.0
    assert run_length.expected_seconds("multi30k_ved_s1", archived, AVX2) == 5000.0
    assert run_length.estimate("multi30k_ved_s1", archived, AVX2) == (5000.0, False)
    assert run_length.estimate("multi30k_ved_s1", archived, AVX512) == (5000.0, True)
    # a row with no run: the table's runs on this CPU
    assert run_length.estimate("multi30k_vrnmt_s1", archived, AVX2) == (8800.0, True)
    assert run_length.estimate("multi30k_vrnmt_s1", {}, AVX2) == (None, False)
    line = run_length.plan_summary(["multi30k_transformer_s4", "multi30k_ved_s1"], archived,
                                   parallel=2, cpu=AVX2)
    assert line == ("2 run(s) to train, expected ~3.8 run-hours, ~1.9 h 2 at a time (each run: "
                    "the median length of its row's archived runs; 1 of 2 from runs on this "
                    f"CPU, {AVX2})")


def test_the_dry_run_summary_adds_the_expected_lengths():
    archived = {"multi30k_soft": [(3600.0, None)],
                "multi30k_ved": [(7200.0, None), (7200.0, None)]}
    line = run_length.plan_summary(["multi30k_soft_s1", "multi30k_ved_s1", "multi30k_ved_s2"],
                                   archived, parallel=2)
    assert line.startswith("3 run(s) to train, expected ~5.0 run-hours, ~2.5 h 2 at a time")
    assert run_length.plan_summary(["a"], {}) == (
        "1 run(s) to train; 1 with no archived run to estimate from")
    assert run_length.plan_summary([], archived) == "nothing to train"
