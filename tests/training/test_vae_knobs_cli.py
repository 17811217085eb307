"""The translation CLI with Bahuleyan et al.'s training knobs: KL annealing, word dropout,
and the diversity metrics in results.json (smoke profile, a tiny fixture Multi30k)."""

import json
import os

import pytest

from tests.experiments.test_translate import REPO, _cli, _write_mirror


@pytest.fixture
def env(tmp_path):
    mirror = _write_mirror(str(tmp_path / "mirror"))
    return dict(os.environ, ACVI_DATA_MIRROR=mirror, ACVI_DATA_DIR=str(tmp_path / "data"),
                TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)


def test_ved_gaussian_with_annealing_and_word_dropout(tmp_path, env):
    model_dir = str(tmp_path / "run")
    r = _cli(["--profile=smoke", "--attention=gaussian", "--attention_option=kl_weight=0.1",
              "--latent=ved", "--latent_option=latent_dim=4", "--kl_anneal_steps=4",
              "--kl_anneal=sigmoid", "--word_dropout=0.25", "--log_every=1",
              f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "kl_scale=" in r.stderr
    assert "test diversity: entropy " in r.stdout and "distinct-2 " in r.stdout, r.stdout
    results = json.load(open(os.path.join(model_dir, "results.json")))
    for split in ("dev", "test"):
        div = results["diversity"][split]
        assert div == results["splits"][split]["diversity"]
        # 6 smoke steps may decode one repeated word: only the ranges are certain.
        assert div["entropy"] >= 0 and 0 <= div["distinct_1"] <= 1 and 0 <= div["distinct_2"] <= 1
        assert set(div) == {"entropy", "distinct_1", "distinct_2", "tokens"}
    assert results["train_metrics"]["kl_scale"] == 1.0  # the last of 6 steps, past 4
    flags = json.load(open(os.path.join(model_dir, "run_config.json")))["flags"]
    assert flags["kl_anneal_steps"] == 4 and flags["word_dropout"] == 0.25
    assert json.load(open(os.path.join(model_dir, "model_config.json")))["word_dropout"] == 0.25
    assert json.load(open(os.path.join(model_dir, "train_config.json")))["kl_anneal"] == "sigmoid"
    # eval mode rebuilds the trained model (word_dropout restored) and rescores
    r = _cli([f"--model_dir={model_dir}", "--mode=eval"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "dev diversity: entropy " in r.stdout


def test_word_dropout_is_refused_for_the_transformer(tmp_path, env):
    r = _cli(["--profile=smoke", "--model=transformer", "--word_dropout=0.2",
              f"--model_dir={tmp_path / 'run'}"], env)
    assert r.returncode != 0 and "--word_dropout" in r.stderr


@pytest.mark.parametrize("argv, flag", [
    (["--model=transformer", "--word_dropout=0.2"], "word_dropout"),
    (["--model=transformer", "--decoder_cell=gru"], "decoder_cell"),
])
def test_seq2seq_only_flags_are_refused_for_the_transformer_in_process(argv, flag):
    from absl import flags
    from experiments import flags as xflags
    from experiments import translate
    fv = flags.FlagValues()
    translate.define_flags(fv)
    fv(["translate"] + argv)
    with pytest.raises(xflags.FlagError, match=flag):
        xflags.check_run_flags(fv)
