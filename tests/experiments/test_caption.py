"""The captioning CLI end to end (smoke profile, a tiny fixture MSVD, synthetic
features), its stops when no real features exist, and the Table 3 rendering."""

import json
import os
import types

import numpy as np
import pytest
from absl import flags

from acvi_tf.tasks import captioning as caption_task
from experiments import caption, tables
from experiments import flags as xflags
from tests import cli
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SUBJECTS = ["a man", "a woman", "a cat", "a dog"]
_ACTIONS = ["is cooking", "is dancing", "is playing a guitar", "is running"]


def _write_mirror(root):
    """All 1,970 clips in the S2VT layout, 2 captions each; the first caption of
    ``vidN`` names the clip (``clipN``) so a batch row can be traced to its clip."""
    d = os.path.join(root, "msvd")
    os.makedirs(d)
    files = {"train": (1, 1200), "val": (1201, 1300), "test": (1301, 1970)}
    for split, (lo, hi) in files.items():
        with open(os.path.join(d, f"sents_{split}_lc_nopunc.txt"), "w") as f:
            for n in range(lo, hi + 1):
                s, a = _SUBJECTS[n % 4], _ACTIONS[(n // 4) % 4]
                f.write(f"vid{n}\tclip{n} {s} {a}\nvid{n}\t{s} {a}\n")
    return root


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    return _write_mirror(str(tmp_path_factory.mktemp("mirror")))


@pytest.fixture
def env(mirror, tmp_path):
    return dict(os.environ, ACVI_DATA_MIRROR=mirror, ACVI_DATA_DIR=str(tmp_path / "data"),
                TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)


def _cli(args, env, stdin=None):
    return cli.run("experiments.caption", args, env=env, input=stdin)


SMOKE = ["--profile=smoke", "--synthetic_features", "--max_eval_clips=6"]


def test_train_eval_decode_with_synthetic_features(tmp_path, env):
    model_dir = str(tmp_path / "acvi")
    r = _cli(SMOKE + ["--attention=acvi", f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    # Scores of both splits on stdout, each line marked as synthetic; the banner on stderr.
    for split in ("val", "test"):
        line = next(l for l in r.stdout.splitlines() if l.startswith(f"{split} (6 clips"))
        assert "ROUGE-L" in line and "CIDEr-D" in line and "BLEU-4" in line
        assert "[SYNTHETIC features: not results]" in line
    assert "SYNTHETIC FEATURES" in r.stderr and "say NOTHING about the paper" in r.stderr
    results = json.load(open(os.path.join(model_dir, "results.json")))
    assert results["task"] == "caption" and results["system"] == "acvi"
    assert results["synthetic_features"] is True and results["pretrained_features"] is False
    assert "SYNTHETIC" in results["WARNING"] and results["partial_eval"] is True
    assert results["steps"] == 6 and results["decode"]["beam_width"] == 2
    assert results["command"].startswith("python -m experiments.caption --profile=smoke")
    for split in ("val", "test"):
        scores = results["scores"][split]
        assert {"ROUGE-L", "CIDEr-D", "BLEU-4"} <= set(scores)
        assert "METEOR" not in scores  # the smoke profile skips the jar (--nometeor)
        assert all(0.0 <= v <= 10.0 for v in scores.values())  # raw scale (CIDEr-D <= 10)
    config = json.load(open(os.path.join(model_dir, "model_config.json")))
    assert config["src_vocab_size"] is None and config["feature_dim"] == 1024
    # One caption per clip, in clip order: the paper split's first val/test clips.
    with open(os.path.join(model_dir, "decode_test.tsv")) as f:
        test_rows = [l.split("\t") for l in f.read().splitlines()]
    assert [c for c, _ in test_rows] == [f"vid{i}" for i in range(1371, 1377)]

    # --mode=eval rebuilds the model: the same beam-search captions.
    r = _cli(["--mode=eval", f"--model_dir={model_dir}", "--max_eval_clips=6"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(os.path.join(model_dir, "decode_test.tsv")) as f:
        assert [l.split("\t") for l in f.read().splitlines()] == test_rows
    # --mode=decode: clip ids in, "clip<TAB>caption" out, matching the eval decode.
    r = _cli(["--mode=decode", f"--model_dir={model_dir}"], env,
              stdin=f"{test_rows[1][0]}\n{test_rows[0][0]}\n")
    assert r.returncode == 0, r.stderr[-3000:]
    assert [l.split("\t") for l in r.stdout.splitlines()] == [test_rows[1], test_rows[0]]
    r = _cli(["--mode=decode", f"--model_dir={model_dir}"], env, stdin="clip7\n")
    assert r.returncode != 0 and "--input" in r.stderr and "vidN" in r.stderr
    # Another variant for an existing model_dir is refused, naming the flag.
    r = _cli(["--mode=eval", f"--model_dir={model_dir}", "--attention=soft"], env)
    assert r.returncode != 0 and "--attention" in r.stderr


def test_structured_attention_runs_the_same_path(tmp_path, env):
    model_dir = str(tmp_path / "structured")
    r = _cli(SMOKE + ["--attention=structured", "--train_steps=2", "--eval_every=0",
                      "--max_eval_clips=3", f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.load(open(os.path.join(model_dir, "results.json")))
    assert results["system"] == "structured" and results["steps"] == 2
    assert set(results["scores"]) == {"val", "test"}


def test_no_features_stops_and_says_how_to_make_them(tmp_path, env):
    r = _cli(["--profile=smoke", f"--model_dir={tmp_path / 'm'}"], env)
    assert r.returncode != 0
    assert "no --features store given" in r.stderr
    assert "--mode=extract_features" in r.stderr and "--synthetic_features" in r.stderr
    r = _cli(["--profile=smoke", f"--features={tmp_path / 'nothing'}",
              f"--model_dir={tmp_path / 'm'}"], env)
    assert r.returncode != 0 and "no feature store there" in r.stderr
    assert "bvlc_googlenet" in r.stderr
    r = _cli(["--profile=smoke", "--synthetic_features", f"--features={tmp_path}",
              f"--model_dir={tmp_path / 'm'}"], env)
    assert r.returncode != 0 and "--synthetic_features" in r.stderr
    # Feature extraction names the missing weights, then the missing videos.
    r = _cli(["--mode=extract_features", f"--features={tmp_path / 'f'}"], env)
    assert r.returncode != 0 and "--cnn_weights: is required" in r.stderr
    r = _cli(["--mode=extract_features", "--allow_random_cnn", f"--features={tmp_path / 'f'}",
              f"--videos={tmp_path / 'novideos'}"], env)
    assert r.returncode != 0 and "YouTubeClips.tar" in r.stderr


def test_feature_store_coverage_is_checked(tmp_path, monkeypatch, mirror):
    """A real store missing clips stops with the clip names; a full one passes."""
    from acvi_tf.data import msvd
    from acvi_tf.data import video_features as vf
    monkeypatch.setenv("ACVI_DATA_MIRROR", mirror)
    store = vf.FeatureStore.create(str(tmp_path / "s"), num_frames=2, dim=3,
                                   weights="/w/bvlc_googlenet.npz")
    clips = msvd.split_clips("paper")
    for c in clips["train"] + clips["val"] + clips["test"][:-1]:
        store.put(c, np.ones([2, 3], np.float32), flush=False)
    store.flush()
    ok, lines = caption_task.features_status(store.root, False, "paper")
    assert not ok and "1 of the 600 paper test clips have no features (e.g. vid1970)" in lines[0]
    store.put("vid1970", np.ones([2, 3], np.float32))
    ok, lines = caption_task.features_status(store.root, False, "paper")
    assert ok and "pretrained" in lines[0]


def test_training_batches_pair_each_caption_with_its_clip(monkeypatch, mirror):
    from acvi_tf.data import video_features as vf
    monkeypatch.setenv("ACVI_DATA_MIRROR", mirror)
    fv = types.SimpleNamespace(features=None, synthetic_features=False, split_scheme="paper",
                               caption_source="s2vt", max_eval_clips=4, min_count=1,
                               max_vocab_size=None, seed=3, num_buckets=2, max_length=20,
                               overlong="filter")
    store = vf.SyntheticFeatures(num_frames=3, dim=5, warn=False)
    data = caption_task.load_data(os.path.join(mirror, "unused_model_dir"), fv, store=store)
    assert [len(data.splits[s].clips) for s in ("train", "val", "test")] == [1200, 4, 4]
    batches = data.batches("train", 16, fv)
    assert batches.num_examples == 2400
    transform = data.with_features("train")
    seen = 0
    for batch in batches.dataset(num_epochs=1).take(5):
        b = transform(batch)
        assert b["src"].shape[1:] == (3, 5) and list(b["src_len"]) == [3] * len(b["src_len"])
        for row, ids in enumerate(np.asarray(b["tgt_out"])):
            first = data.vocab.id_to_token(int(ids[0]))
            if first.startswith("clip"):  # the caption names its clip
                want = vf.synthetic_clip_features("vid" + first[4:], 3, 5, seed=0)
                np.testing.assert_array_equal(b["src"][row], want)
                seen += 1
    assert seen > 10


def _fresh_flags():
    fv = flags.FlagValues()
    caption.define_flags(fv)
    return fv


def test_flags_and_the_paper_profile():
    from acvi_tf import attention
    fv = _fresh_flags()
    assert fv["attention"].parser.enum_values == attention.available()
    fv(["prog", "--profile=paper", "--attention=acvi"])
    xflags.apply_profile(caption.PROFILES, fv)
    # Section 4.2 / Appendix B: 1000-d LSTMs, 100-d W_h and W_s, 256-d embeddings,
    # additive attention, dropout 0.5, Adam, beam width 5.
    assert (fv.encoder_units, fv.decoder_units, fv.attention_units, fv.embed_dim) == \
        (1000, 1000, 100, 256)
    assert (fv.score, fv.dropout, fv.optimizer, fv.beam_width) == ("additive", 0.5, "adam", 5)
    assert fv.split_scheme == "paper" and fv.min_count == 1
    for name in ("soft", "structured", "gaussian", "acvi"):
        path = os.path.join(tables.CONFIG_DIR, f"table3_{name}.flags")
        settings = tables.spec.read_flagfile(path)
        assert settings["attention"] == name and settings["profile"] == "paper"


def _fake(root, name, **fields):
    d = os.path.join(root, name)
    os.makedirs(d)
    r = {"task": "caption", "dataset": "msvd", "steps": 300, "train_wall_time_sec": 60.0,
         "eval_wall_time_sec": 5.0, "decode": {"beam_width": 5}, "pretrained_features": False}
    r.update(fields)
    with open(os.path.join(d, "results.json"), "w") as f:
        json.dump(r, f)


def test_table3_renders_ours_apart_from_the_paper(tmp_path):
    root = str(tmp_path)
    scores = {"val": {"ROUGE-L": 0.31234, "CIDEr-D": 0.05, "BLEU-4": 0.01, "METEOR": 0.1},
              "test": {"ROUGE-L": 0.30001, "CIDEr-D": 0.04, "BLEU-4": 0.02, "METEOR": 0.09}}
    _fake(root, "soft", system="soft", profile="smoke", scores=scores, synthetic_features=True,
          command="python -m experiments.caption --synthetic_features A")
    _fake(root, "acvi", system="acvi", profile="paper", scores=scores, synthetic_features=False,
          pretrained_features=True, command="python -m experiments.caption B")
    _fake(root, "gaussian", system="gaussian", profile="paper", scores=scores,
          synthetic_features=False, pretrained_features=True, command="python -m C")
    out = str(tmp_path / "t.md")
    assert tables.main(["table3", "--runs", root, "--out", out]) == 0
    text = open(out).read()
    assert "WARNING: SYNTHETIC FEATURES" in text and "say NOTHING about the paper" in text
    lines = [l for l in text.split("\n") if l.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    col = {h: i for i, h in enumerate(header)}
    rows = {c[0]: c for c in ([x.strip() for x in l.strip("|").split("|")] for l in lines[2:])}
    syn = "ours, smoke test, SYNTHETIC features"
    assert rows["SA (soft attention)"][col[f"{syn}: ROUGE-L val"]] == "0.3123"
    assert rows["SA (soft attention)"][col["paper (Table 3): CIDEr test"]] == "0.4210"
    assert rows["SA (soft attention)"][col["ours, paper profile: ROUGE-L val"]] == "–"
    assert rows["ACVI"][col["ours, paper profile: CIDEr-D test"]] == "0.0400"
    assert rows["ACVI"][col["paper (Table 3): ROUGE-L val"]] == "0.5968"
    assert rows["ACVI"][col[f"{syn}: ROUGE-L val"]] == "–"
    assert "§" in rows["SA (soft attention)"][col["our run"]]
    assert rows["VED (Bahuleyan et al. 2018)"][col["our run"]] == "not run"  # VED is registered (acvi_tf/latent) but was not run here
    gauss = rows["Gaussian variational attention (Bahuleyan et al. 2018)"]
    assert gauss[col["paper (Table 3): ROUGE-L val"]] == "–"
    assert "`python -m experiments.caption --synthetic_features A`" in text


def test_table3_run_stops_without_features(tmp_path, monkeypatch, mirror, capsys):
    monkeypatch.setenv("ACVI_DATA_MIRROR", mirror)
    monkeypatch.chdir(tmp_path)  # the flagfiles' relative feature path does not exist here
    code = tables.run_table("table3", str(tmp_path / "runs"), str(tmp_path / "t.md"))
    out = capsys.readouterr().out
    assert code == 2 and not os.path.exists(tmp_path / "t.md")
    assert "STOP: no video features for table3" in out
    assert "python -m experiments.caption --mode=extract_features" in out
    assert len([l for l in out.split("\n") if "[to run]" in l]) == len(tables.TABLES["table3"])
    assert "table3_acvi.flags" in out and "make table3-smoke" in out
    # The smoke table needs no features: its dry run passes the check.
    assert tables.run_table("table3-smoke", str(tmp_path / "s"), str(tmp_path / "s.md"),
                            dry_run=True) == 0


def test_the_sampled_diversity_protocol_is_refused_by_name():
    """Captioning does not run --diversity_samples yet: a flag error, not a silent no-op
    (translate and summarize run it)."""
    fv = _fresh_flags()
    fv(["prog", "--profile=smoke", "--diversity_samples=10"])
    xflags.apply_profile(caption.PROFILES, fv)
    with pytest.raises(xflags.FlagError, match="diversity_samples.*experiments.summarize"):
        caption.check_flags(fv)
