"""experiments.checkpoint_curve: a run's kept checkpoints scored by its CLI's --mode=val, each
in a scratch copy, the run directory left as it was."""

import json
import os

import pytest

from experiments import checkpoint_curve, summarize
from tests import cli
from tests.experiments.test_summarize import REPO, _write_mirror


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("curve")
    env = dict(os.environ, ACVI_DATA_MIRROR=_write_mirror(str(root / "mirror")),
               ACVI_DATA_DIR=str(root / "data"), TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
    model_dir = str(root / "s2s")
    r = cli.run(summarize.MODULE, ["--profile=smoke", "--attention=soft", "--mode=train",
                                   "--train_steps=4", "--checkpoint_every=2",
                                   "--coverage_steps=0", "--phases=none", "--keep_checkpoints=5",
                                   f"--model_dir={model_dir}"], env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return model_dir, env


def _files(model_dir):
    return {os.path.relpath(os.path.join(d, f), model_dir): os.path.getmtime(os.path.join(d, f))
            for d, _, names in os.walk(model_dir) for f in names}


def test_scores_each_kept_checkpoint_as_its_cli_does(trained, tmp_path, monkeypatch):
    model_dir, env = trained
    for key in ("ACVI_DATA_MIRROR", "ACVI_DATA_DIR", "PYTHONPATH"):
        monkeypatch.setenv(key, env[key])
    assert sorted(checkpoint_curve.kept_checkpoints(model_dir)) == [2, 4]
    before = _files(model_dir)
    out = str(tmp_path / "curve.md")
    assert checkpoint_curve.main([f"--model_dir={model_dir}", "--steps=all",
                                  f"--work_dir={tmp_path / 'work'}", f"--out={out}"]) == 0
    assert _files(model_dir) == before  # the run directory is only read
    curve = json.load(open(str(tmp_path / "curve.json")))
    assert [row["step"] for row in curve["rows"]] == [2, 4]
    scored = [json.load(open(row["results"]))["val"] for row in curve["rows"]]
    assert [s["steps"] for s in scored] == [2, 4]  # each copy restored its own step

    # The last step scored in place, by the CLI itself, gives the same ROUGE-1.
    r = cli.run(summarize.MODULE, ["--mode=val", f"--model_dir={model_dir}"], env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    direct = json.load(open(os.path.join(model_dir, "results.json")))["val"]
    assert direct["steps"] == 4
    assert curve["rows"][1]["value"] == pytest.approx(direct["rouge"]["rouge_1"])
    text = open(out).read()
    assert "python -m experiments.checkpoint_curve" in text and "--mode=val" in text

    # The same command again reads the scored copies back instead of decoding again.
    def no_decode(*args, **kwargs):
        raise AssertionError(f"decoded again: {args}")
    monkeypatch.setattr(checkpoint_curve.subprocess, "run", no_decode)
    assert checkpoint_curve.main([f"--model_dir={model_dir}", "--steps=all",
                                  f"--work_dir={tmp_path / 'work'}", f"--out={out}"]) == 0
    assert json.load(open(str(tmp_path / "curve.json")))["rows"] == curve["rows"]
    with pytest.raises(AssertionError, match="decoded again"):
        checkpoint_curve.main([f"--model_dir={model_dir}", "--steps=4", "--rescore",
                               f"--work_dir={tmp_path / 'work'}", f"--out={out}"])


def test_errors_name_the_flag(trained, tmp_path, capsys):
    model_dir, _ = trained
    out = str(tmp_path / "c.md")
    assert checkpoint_curve.main([f"--model_dir={model_dir}", "--steps=3", f"--out={out}"]) == 2
    err = capsys.readouterr().err
    assert "--steps" in err and "step(s) 3" in err and "2, 4" in err
    assert checkpoint_curve.main([f"--model_dir={tmp_path}", f"--out={out}"]) == 2
    assert "--model_dir" in capsys.readouterr().err
    with pytest.raises(checkpoint_curve.CurveError, match="--metric.*'val.bleu'"):
        checkpoint_curve.lookup({"val": {"rouge": {}}}, "val.bleu", "results.json")
    assert not os.path.exists(out)


def test_target_gives_where_the_line_through_the_scores_reaches_it():
    # scores 2, 4, 6 at steps 2,000, 4,000, 6,000: the line is step / 1,000, so it
    # reaches 20 at step 20,000 (closed form); a 3,000-step window holds too few points
    rows = [{"step": s, "value": s / 1000, "command": f"c{s}"} for s in (2000, 4000, 6000)]
    text = checkpoint_curve.render("runs/x", "val", "val.rouge.rouge_1", rows, "cmd", 20, 4000)
    assert "| x | 3 evaluations, steps 2,000-6,000 | +1.00 | 6.00 | 20,000 |" in text
    text = checkpoint_curve.render("runs/x", "val", "val.rouge.rouge_1", rows, "cmd", 20, 3000)
    assert "fewer than 3 evaluations" in text
    assert "Where a straight line" not in checkpoint_curve.render(
        "runs/x", "val", "val.rouge.rouge_1", rows, "cmd")
