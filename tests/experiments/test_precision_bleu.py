"""experiments/precision_bleu.py: two precisions' runs side by side, paired by seed."""

import json

import pytest
import sacrebleu

from experiments import precision_bleu
from experiments.tables import significance

REFS = ["a man runs on the grass .", "two dogs play in the snow .", "a girl reads a book ."]


def _run(path, seed, precision, hyps, test_bleu):
    path.mkdir()
    cmd = (f"python -m experiments.translate --flagfile=x.flags --model_dir={path} "
           f"--seed={seed}" + (f" --precision={precision}" if precision else ""))
    (path / "results.json").write_text(json.dumps({
        "task": "translate", "bleu": {"dev": test_bleu - 1, "test": test_bleu},
        "train_command": cmd, "command": cmd, "train_wall_time_sec": 600}))
    (path / "decode_test.txt").write_text("".join(h + "\n" for h in hyps))
    return str(path)


def test_report_pairs_seeds_and_bootstraps_the_test_decodes(tmp_path, monkeypatch):
    monkeypatch.setattr(significance, "translation_references", lambda r, split="test": REFS)
    fp32 = _run(tmp_path / "fp32", 0, None, REFS, 30.0)
    worse = ["a man runs .", "two dogs play in the snow .", "a girl reads ."]
    bf16 = _run(tmp_path / "bf16", 0, "mixed_bfloat16", worse, 29.0)
    out = tmp_path / "report.md"
    precision_bleu.main(["--baseline", fp32, "--candidate", bf16, "--out", str(out)])
    result = json.loads((tmp_path / "report.json").read_text())
    assert result["baseline"]["precision"] == ["float32"]
    assert result["candidate"]["precision"] == ["mixed_bfloat16"]
    assert result["difference_test_bleu"] == pytest.approx(-1.0)
    boot = result["paired_bootstrap_test_bleu"]
    assert boot["seeds"] == 1
    # the bootstrap scores the decodes themselves, as sacrebleu does
    assert boot["candidate"] == pytest.approx(
        sacrebleu.corpus_bleu(worse, [REFS], tokenize="none", force=True).score)
    assert boot["baseline"] == pytest.approx(100.0)
    text = out.read_text()
    assert "--precision=mixed_bfloat16" in text and "Candidate − baseline, test BLEU: -1.00" in text


def test_a_directory_without_results_is_named(tmp_path):
    with pytest.raises(SystemExit, match="--baseline: no translate results.json in"):
        precision_bleu.main(["--baseline", str(tmp_path), "--candidate", str(tmp_path),
                             "--out", str(tmp_path / "r.md")])
