"""The README's result figures are generated from the tables' JSON (issue 33, item 6):
the repository's README is in sync with results/*.json, and the block rewriting keeps
everything outside its markers."""

import json
import os

import pytest

from experiments import readme_results


def test_the_readme_figures_match_the_tables_json():
    """Fails when a table is re-rendered and `python -m experiments.readme_results` was
    not run (or when someone edits a generated line by hand)."""
    with open(readme_results.README, encoding="utf-8") as f:
        text = f.read()
    assert "<!-- BEGIN generated: table4-cpu -->" in text
    assert readme_results.stale_blocks(text) == [], (
        "README.md is out of date: run python -m experiments.readme_results")


def test_blocks_are_rewritten_and_the_rest_is_kept():
    blocks = {"a": lambda: ["new a"], "b": lambda: ["new b1", "new b2"]}
    text = ("intro\n<!-- BEGIN generated: a -->\nold a\n<!-- END generated: a -->\nmiddle\n"
            "<!-- BEGIN generated: b -->\n<!-- END generated: b -->\nend")
    out = readme_results.render(text, blocks)
    assert out == ("intro\n<!-- BEGIN generated: a -->\nnew a\n<!-- END generated: a -->\n"
                   "middle\n<!-- BEGIN generated: b -->\nnew b1\nnew b2\n"
                   "<!-- END generated: b -->\nend")
    assert readme_results.render(out, blocks) == out
    assert readme_results.stale_blocks(text, blocks) == ["a", "b"]
    assert readme_results.stale_blocks(out.replace("new b2", "typed by hand"), blocks) == ["b"]


def test_a_broken_block_is_an_error_naming_the_line():
    with pytest.raises(ValueError, match=r"README.md:2: .* has no <!-- END generated: a -->"):
        readme_results.render("x\n<!-- BEGIN generated: a -->\nstuff", {"a": lambda: []})
    with pytest.raises(ValueError, match=r"README.md:1: unknown generated block 'zz'"):
        readme_results.render("<!-- BEGIN generated: zz -->\n<!-- END generated: zz -->",
                              {"a": lambda: []})


def test_the_table4_lines_carry_every_number_from_the_json(tmp_path, monkeypatch):
    data = {"soft": {"name": "Baseline (soft attention)", "test_bleu": [36.0, 37.0],
                     "val_bleu": [35.0, 36.0], "commit": ["abcdef123", "abcdef123"],
                     "diff_to_soft": None, "ci95": None, "welch_p": None},
            "acvi": {"name": "ACVI", "test_bleu": [38.0, 38.0, 39.0], "val_bleu": [37.0] * 3,
                     "commit": ["1234567aa"] * 3, "diff_to_soft": 1.83,
                     "ci95": [0.5, 3.1], "welch_p": 0.04},
            "ved": {"name": "VED", "test_bleu": [37.0], "val_bleu": [36.0], "planned_seeds": 3,
                    "commit": ["1234567aa"], "diff_to_soft": 0.5, "ci95": [-0.5, 1.5],
                    "welch_p": None}}
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "table4_cpu.json").write_text(json.dumps(data))
    monkeypatch.setattr(readme_results, "REPO_ROOT", str(tmp_path))
    lines = readme_results.table4_cpu()
    assert lines[2] == ("| Baseline (soft attention) | 36.50 ± 0.71 (2 seeds) | "
                        "35.50 ± 0.71 (2 seeds) | – | abcdef1 |")
    assert lines[3] == ("| ACVI | 38.33 ± 0.58 (3 seeds) | 37.00 ± 0.00 (3 seeds) | "
                        "+1.83 [+0.50, +3.10], Welch p = 0.04 | 1234567 |")
    # a row still short of its planned seeds says so
    assert lines[4] == ("| VED | 37.00 (1 of 3 seeds) | 36.00 (1 seed) | "
                        "+0.50 [-0.50, +1.50], Welch p = – | 1234567 |")
    os.remove(tmp_path / "results" / "table4_cpu.json")
    with pytest.raises(SystemExit, match="table4_cpu.json: missing"):
        readme_results.table4_cpu()


def test_the_verdict_reads_the_interval_and_counts_the_seeds(tmp_path, monkeypatch):
    """ahead / behind only where the two-level interval excludes 0; a row not in the JSON
    yet says so; each line carries the difference, the interval, Welch's p and the seeds."""
    assert readme_results.reading(0.1, 2.0) == "**ahead**"
    assert readme_results.reading(-2.0, -0.1) == "**behind**"
    assert readme_results.reading(-0.1, 2.0).startswith("**level**")
    assert readme_results.reading(0.0, 2.0).startswith("**level**")  # 0 inside: level
    table4 = {"soft": {"name": "Baseline", "test_bleu": [36.0, 37.0, 36.5],
                       "diff_to_soft": None, "ci95": None, "welch_p": None},
              "acvi": {"name": "ACVI", "test_bleu": [38.0, 39.0], "diff_to_soft": 2.25,
                       "ci95": [0.5, 3.9], "welch_p": 0.03}}
    table1 = {"soft_coverage": {"rouge_1": [29.0, 30.0], "diff_to_soft": None},
              "acvi_coverage": {"rouge_1": [27.0, 27.5, None], "diff_to_soft": -2.2,
                                "ci95": [-3.0, -1.5], "welch_p": 0.004},
              "acvi_paper_elbo_coverage": {"rouge_1": [], "diff_to_soft": None}}
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "table4_cpu.json").write_text(json.dumps(table4))
    (tmp_path / "results" / "table1_cpu.json").write_text(json.dumps(table1))
    monkeypatch.setattr(readme_results, "REPO_ROOT", str(tmp_path))
    lines = readme_results.verdict()
    assert lines[0] == ("- ACVI (ours) against soft attention, test2016 BLEU (Multi30k En→De, "
                        "Table 4 at CPU scale, converged): **ahead**: +2.25 [+0.50, +3.90], "
                        "Welch p = 0.03, 2 vs 3 seeds.")
    assert lines[1].endswith("against soft attention, test2016 BLEU (Multi30k En→De, Table 4 "
                             "at CPU scale, converged): not run yet.")
    assert "**behind**: -2.20 [-3.00, -1.50], Welch p = 4.0e-03, 2 vs 2 seeds." in lines[2]
    assert lines[3].endswith("not run yet.")
    assert lines[-1] == ("Generated from [results/table1_cpu.json](results/table1_cpu.json) "
                         "and [results/table4_cpu.json](results/table4_cpu.json).")
    # the every-seed figures are linked where they exist
    (tmp_path / "results" / "table4_cpu_seeds.png").write_bytes(b"png")
    assert readme_results.verdict()[-1] == (
        "Every seed of every row, against its baseline's spread: "
        "[results/table4_cpu_seeds.png](results/table4_cpu_seeds.png).")
