"""experiments/convergence.py: the plateau and take-off steps of a run's evaluations,
and the report rendered from the archived history."""

import json

from experiments import convergence


def _history(path, points, last_train=None):
    path.mkdir(parents=True, exist_ok=True)
    with open(path / "history.jsonl", "w") as f:
        for step, bleu in points:
            f.write(json.dumps({"step": step, "eval": {"dev_bleu": bleu,
                                                        "dev_nll": 5 - bleu / 10}}) + "\n")
        if last_train:
            f.write(json.dumps({"step": last_train, "train": {"nll": 1.0}}) + "\n")


def test_plateau_and_takeoff_steps():
    history = [{"step": s, "eval": {"dev_bleu": b}} for s, b in
               ((250, 0.0), (500, 4.0), (750, 12.0), (1000, 30.0), (1250, 30.6), (1500, 30.2))]
    s = convergence.summarize(history, plateau_tolerance=0.5, takeoff_bleu=10.0)
    assert (s["best"], s["best_step"], s["plateau_step"], s["takeoff_step"]) == \
        (30.6, 1250, 1250, 750)
    s = convergence.summarize(history, plateau_tolerance=1.0)
    assert s["plateau_step"] == 1000
    assert convergence.summarize([])["best"] is None


def test_report_archives_and_renders_each_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _history(tmp_path / "a", [(250, 1.0), (500, 12.0), (750, 20.0)])
    (tmp_path / "a" / "results.json").write_text(json.dumps({"command": "python -m x --a"}))
    _history(tmp_path / "b", [(250, 0.5)], last_train=300)
    assert convergence.main(["--runs", f"soft={tmp_path / 'a'}", f"late={tmp_path / 'b'}",
                             "--out", "results/conv.md",
                             "--archive", "results/convergence/runs"]) == 0
    text = (tmp_path / "results" / "conv.md").read_text()
    assert "| soft | 3 | 20.00 | 750 | 750 | 500 | finished |" in text
    assert "| late | 1 | 0.50 | 250 | 250 | not yet | no results.json: training or stopped, last logged step 300 |" in text
    assert "`python -m x --a`" in text and (tmp_path / "results" / "conv_curves.png").exists()
    assert (tmp_path / "results" / "convergence" / "runs" / "soft" / "history.jsonl").exists()
