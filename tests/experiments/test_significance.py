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
                                 REFS * 2, n_samples=significance.N_SAMPLES)
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
    want = paired_bootstrap_bleu(soft_lines[:2], row_lines, REFS[:2],
                                 n_samples=significance.N_SAMPLES)
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
    p, diff = paired_bootstrap([30.0, 20.0, 25.0], [31.0, 22.0, 24.0],
                               n_samples=significance.N_SAMPLES, alternative="two-sided")
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
        "ours: test2016 vs baseline, sentences only (seed i vs seed i): Δ BLEU (p)")
    cells = {}
    for line in text.split("\n"):
        parts = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and len(parts) > col:
            cells[parts[0]] = parts[col]
    assert cells["ACVI"].endswith("1 seed pair)") and cells["ACVI"].startswith("+")
    assert cells["Baseline (soft attention)"] == "–"
    assert os.path.exists(soft["_path"])


def test_seeds_vs_counts_every_seed_of_both_rows(tmp_path):
    """Every seed of each row enters (no pairing: 2 soft seeds, 3 row seeds), the interval
    is the two-level bootstrap of their decodes and Welch's p is over their test BLEU."""
    from acvi_tf.metrics import significance as sig
    soft_lines = [["a man rides a bike", "dogs play", "a girl reads", "a cat sleeps"],
                  ["a man rides", "two dogs play in snow", "girl reads a book", "cat"]]
    row_lines = [REFS, ["a man rides a bike", "two dogs play in the snow", "a girl reads",
                        "the cat sleeps on a chair"], ["a man rides a red bike", "dogs play",
                                                       "a girl reads a book", "a cat"]]
    soft = [_run(tmp_path, f"soft{s}", s, soft_lines[s], system="soft") for s in (0, 1)]
    row = [_run(tmp_path, f"row{s}", s, row_lines[s]) for s in (0, 1, 2)]
    for r, score in zip(soft + row, (10.0, 12.0, 30.0, 25.0, 20.0)):
        r["bleu"]["test"] = score
    res = significance.bleu_seeds_vs(soft, row, references=lambda r: REFS, n_samples=2000)
    want = sig.two_level_bootstrap([sig.bleu_statistics(h, REFS) for h in soft_lines],
                                   [sig.bleu_statistics(h, REFS) for h in row_lines],
                                   sig.bleu_from_statistics, n_samples=2000)
    assert res["seeds"] == [2, 3] and res["ci95"] == pytest.approx(want["ci95"])
    assert res["difference"] == pytest.approx(want["difference"])
    assert res["welch_p"] == pytest.approx(sig.welch_t([10.0, 12.0], [30.0, 25.0, 20.0])["p_value"])
    cell = significance.seeds_cell(res)
    assert cell.startswith(f"{want['difference']:+.2f} [") and cell.endswith("(3 vs 2 seeds)")
    # one seed a side: the interval still comes (sentences only), Welch cannot
    res = significance.bleu_seeds_vs(soft[:1], row[:1], references=lambda r: REFS, n_samples=500)
    assert res["welch_p"] is None and "Welch p = –" in significance.seeds_cell(res)
    assert significance.p_text(1 / 10001, 10_000) == "< 1e-4"
    assert significance.p_text(0.0123, 10_000) == "0.012"


def test_table4_cpu_writes_its_json_beside_the_markdown(tmp_path, monkeypatch):
    """results/table4_cpu.json: one entry per row, keyed by the row (soft, acvi, ...),
    every seed's scores, and against soft the difference, interval and Welch's p that
    the markdown shows."""
    from experiments.tables import runner
    monkeypatch.setattr(significance, "translation_references", lambda r, split="test": REFS)
    soft = [_run(tmp_path, f"soft{s}", s, ["a man", "dogs", "a girl", "cat"], system="soft")
            for s in (0, 1)]
    acvi = [_run(tmp_path, f"acvi{s}", s, REFS) for s in (0, 1)]
    for r, (dev, test) in zip(soft + acvi, ((10, 11), (12, 13), (30, 31), (32, 29))):
        r["bleu"] = {"dev": float(dev), "test": float(test)}
    acvi[1]["selected_checkpoint"] = {"step": 4000}
    acvi[1]["provenance"] = {"commit": "abc"}
    for r in soft + acvi:
        r["profile"] = "cpu_converged"  # table4-cpu's recipe
    out = tmp_path / "t.md"
    text = runner.write_table("table4-cpu", soft + acvi, str(out))
    data = json.loads((tmp_path / "t.json").read_text())
    assert sorted(data) == ["acvi", "soft"]
    assert data["soft"]["test_bleu"] == [11.0, 13.0] and data["soft"]["welch_p"] is None
    a = data["acvi"]
    assert a["test_bleu"] == [31.0, 29.0] and a["val_bleu"] == [30.0, 32.0]
    assert a["best_step"] == [None, 4000] and a["commit"] == [None, "abc"]
    from acvi_tf.metrics import significance as sig
    assert a["welch_p"] == pytest.approx(sig.welch_t([11.0, 13.0], [31.0, 29.0])["p_value"])
    assert a["ci95"][0] <= a["diff_to_soft"] <= a["ci95"][1]
    assert f"{a['diff_to_soft']:+.2f} [{a['ci95'][0]:+.2f}, {a['ci95'][1]:+.2f}]" in text
