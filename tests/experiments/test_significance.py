"""A table row against soft attention (experiments/tables/significance.py): seeds paired
i with i and pooled, on archived decodes; the table column that shows it."""

import json
import os

import pytest

from acvi_tf.metrics.significance import paired_bootstrap, paired_bootstrap_bleu
from experiments import archive, tables
from experiments.tables import significance

REFS = ["a man rides a red bike", "two dogs play in the snow", "a girl reads a book",
        "the cat sleeps on a chair"]


def _run(tmp_path, name, seed, lines=None, items=None, system="acvi", sentences=None):
    d = tmp_path / name
    d.mkdir()
    if lines is not None:
        (d / "decode_test.txt").write_text("\n".join(lines) + "\n")
    if items is not None:
        (d / archive.ROUGE_ITEMS).write_text(json.dumps(items))
    cmd = "python -m experiments.translate" + (f" --seed={seed}" if seed else "")
    r = {"system": system, "task": "translate", "dataset": "multi30k", "src": "en",
         "tgt": "de", "profile": "cpu", "train_command": cmd, "command": cmd, "steps": 1,
         "bleu": {"dev": 1.0, "test": 2.0}, "decode": {"beam_width": 5},
         "_path": str(d / "results.json")}
    if sentences is not None:  # a --max_eval_lines run records how many it decoded
        r["splits"] = {"test": {"sentences": sentences}}
    (d / "results.json").write_text(json.dumps(r))
    return r


def test_bleu_pairs_seed_i_with_seed_i_and_pools_them(tmp_path):
    soft_lines = [["a man rides a bike", "dogs play", "a girl reads", "a cat sleeps"],
                  ["a man rides", "two dogs play in snow", "girl reads a book", "cat"]]
    row_lines = [["a man rides a red bike", "two dogs play", "a girl reads a book",
                  "the cat sleeps"],
                 ["a man rides a bike", "two dogs play in the snow", "a girl reads",
                  "the cat sleeps on a chair"]]
    soft = [_run(tmp_path, f"soft{s}", s, soft_lines[s], system="soft") for s in (0, 1)]
    # seed 2 of the row has no soft partner: left out
    row = [_run(tmp_path, f"row{s}", s, row_lines[s % 2]) for s in (1, 0, 2)]
    res = significance.bleu_vs(soft, row, references=lambda r: REFS)
    assert res["seeds"] == 2
    # the row's seed 1 decode is row_lines[1], paired with soft's seed 1
    want = paired_bootstrap_bleu(soft_lines[1] + soft_lines[0], row_lines[1] + row_lines[0],
                                 REFS * 2)
    assert res["difference"] == pytest.approx(want["difference"])
    assert res["p_value"] == pytest.approx(want["p_value"])
    assert significance.bleu_vs(soft, row, references=lambda r: None) is None  # no data
    assert significance.bleu_vs(soft[:0], row, references=lambda r: REFS) is None


def test_bleu_of_runs_that_decoded_a_subset_uses_the_same_references(tmp_path):
    """A --max_eval_lines run decodes the first N sentences: scored against the first N
    references (the demo's 500 of 1,000 raised before), on the lines both runs have."""
    soft_lines = ["a man rides a bike", "dogs play", "a girl reads"]
    row_lines = ["a man rides a red bike", "two dogs play in the snow"]
    soft = [_run(tmp_path, "soft0", 0, soft_lines, system="soft", sentences=3)]
    row = [_run(tmp_path, "row0", 0, row_lines, sentences=2)]
    res = significance.bleu_vs(soft, row, references=lambda r: REFS)
    want = paired_bootstrap_bleu(soft_lines[:2], row_lines, REFS[:2])
    assert res["sentences"] == 2 and res["subset"]
    assert res["difference"] == pytest.approx(want["difference"])
    assert res["p_value"] == pytest.approx(want["p_value"])
    assert significance.cell(res).endswith("1 seed pair, first 2 sentences)")
    # a decode file that does not match its run is skipped with the reason, not raised
    (tmp_path / "row0" / "decode_test.txt").write_text("one\ntwo\nthree\nfour\nfive\n")
    res = significance.bleu_vs(soft, row, references=lambda r: REFS)
    assert "decode_test.txt: 6 lines for 2 references" in res["skipped"]
    assert significance.cell(res).startswith("skipped (")


def test_rouge1_pools_the_archived_per_summary_scores(tmp_path):
    soft = [_run(tmp_path, "soft0", 0, items=[30.0, 20.0, 25.0], system="soft")]
    row = [_run(tmp_path, "row0", 0, items=[31.0, 22.0, 24.0]), _run(tmp_path, "row1", 1)]
    res = significance.rouge1_vs(soft, row)
    p, diff = paired_bootstrap([30.0, 20.0, 25.0], [31.0, 22.0, 24.0], n_samples=1000)
    assert res["seeds"] == 1 and res["difference"] == pytest.approx(diff)
    assert res["p_value"] == pytest.approx(p)
    assert significance.cell(res) == f"{diff:+.2f} (p = {p:.3f}, 1 seed pair)"


def test_table4_cpu_shows_the_bootstrap_against_soft(tmp_path, monkeypatch):
    monkeypatch.setattr(significance, "translation_references", lambda r, split="test": REFS)
    soft = _run(tmp_path, "soft0", 0, ["a man", "dogs", "a girl", "cat"], system="soft")
    acvi = _run(tmp_path, "acvi0", 0, REFS)
    text = tables.table4_cpu([soft, acvi])
    header = next(l for l in text.split("\n") if l.startswith("| Method"))
    col = [c.strip() for c in header.strip("|").split("|")].index(
        "ours, CPU scale: test2016 vs baseline, paired bootstrap: Δ BLEU (p)")
    cells = {}
    for line in text.split("\n"):
        parts = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and len(parts) > col:
            cells[parts[0]] = parts[col]
    assert cells["ACVI"].endswith("1 seed pair)") and cells["ACVI"].startswith("+")
    assert cells["Baseline (soft attention)"] == "–"
    assert os.path.exists(soft["_path"])
