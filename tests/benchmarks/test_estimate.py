"""benchmarks/estimate.py (``python -m benchmarks.estimate``): FLOPs of a paper run
are its steps times benchmarks.flops' count at the data's lengths (per phase for
summarization), a make bench JSON's measured rate replaces the assumed ones, and the
README's "Paper scale" table is this script's output."""

import dataclasses
import json
import os

import pytest

from benchmarks import estimate, flops
from experiments import flags as xflags
from experiments import summarize, translate
from experiments.tables.spec import CONFIG_DIR, REPO_ROOT


@pytest.fixture(scope="module")
def printed():
    return estimate.markdown()


def test_a_translation_run_is_its_steps_times_one_steps_flops():
    path = os.path.join(CONFIG_DIR, "table4_envi_soft.flags")
    total, steps, complete = estimate.run_flops("translate", path)
    fv = estimate._parse(translate, [f"--flagfile={path}"])
    config = dataclasses.replace(xflags.model_config_from_flags(fv), src_vocab_size=17_191,
                                 tgt_vocab_size=7_709)
    one, _ = flops.analytic_flops(config, 128, 20, 23)
    assert steps == 12_000 and complete and total == 12_000 * one


def test_a_summarization_run_sums_table5s_phases():
    path = os.path.join(CONFIG_DIR, "table1_pg_soft.flags")
    total, steps, complete = estimate.run_flops("summarize", path)
    assert steps == 253_000 and complete
    fv = estimate._parse(summarize, [f"--flagfile={path}"])
    config = dataclasses.replace(xflags.model_config_from_flags(fv), src_vocab_size=50_000,
                                 tgt_vocab_size=50_000)
    shortest, _ = flops.analytic_flops(config, 16, 10, 11)
    longest, _ = flops.analytic_flops(config, 16, 400, 101)
    assert 253_000 * shortest < total < 253_000 * longest
    # 30,000 steps at the full lengths (phase 5 and coverage) are a lower bound on their own
    assert total > 30_000 * longest


def test_the_readme_table_is_the_scripts_output(printed):
    readme = open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8").read()
    assert printed in readme, printed
    rows = [line for line in printed.split("\n") if line.startswith("| table")]
    assert [r.split(" | ")[0] for r in rows[1:]] == ["| table4", "| table1", "| table3"]


def test_measured_rates_replace_the_assumed_ones(tmp_path, printed, capsys):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"train": [
        {"size": "translation", "variant": "soft", "gflops_per_s": 5000.0},
        {"size": "translation", "variant": "soft", "gflops_per_s": 4000.0},
        {"size": "translation", "variant": "acvi", "gflops_per_s": 9000.0},
        {"size": "summarization", "variant": "soft", "gflops_per_s": None}]}))
    assert estimate.measured_rates(str(bench)) == {"translation": 5.0}
    assert estimate.main(["--bench", str(bench)]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.split("\n") if line.startswith("| table4 |"))
    e = estimate.table_estimate("table4")
    assert f"| 5.00 (translation) | ≥{e['flops'] / 5e12 / 3600:,.1f} |" in row, row
    assert "not measured (summarization)" in text
    assert text != printed
