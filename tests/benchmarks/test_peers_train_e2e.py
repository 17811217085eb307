"""benchmarks.peers.train_e2e: reading each side's training log, the vocabulary handed to
OpenNMT-tf, and the flags. The end-to-end run itself needs .venv-peers and minutes."""

import json

import pytest

from benchmarks.peers import train_e2e

# Two lines as OpenNMT-tf 2.32's Trainer logs them (opennmt/training.py), among others.
ONMT_LOG = """\
2026-11-26 03:20:01.1: I runner.py:310] Training on 29000 examples
2026-11-26 03:20:41.2: I training.py:193] Step = 20 ; steps/s = 0.60, tokens/s = 3100 (1500 source, 1600 target) ; Learning rate = 1.000000 ; Loss = 7.1
2026-11-26 03:21:11.2: I training.py:193] Step = 40 ; steps/s = 0.80, tokens/s = 4200 (2000 source, 2200 target) ; Learning rate = 1.000000 ; Loss = 6.2
2026-11-26 03:21:36.2: I training.py:193] Step = 60 ; steps/s = 1.00, tokens/s = 5000 (2400 source, 2600 target) ; Learning rate = 1.000000 ; Loss = 5.9
"""


def test_opennmt_log_gives_steps_per_second_and_target_words():
    rates = train_e2e.onmt_rates(ONMT_LOG)
    assert rates == [(20, 0.6, 1600.0), (40, 0.8, 2200.0), (60, 1.0, 2600.0)]
    # the first interval (startup, tracing) is left out; the rest averaged
    s = train_e2e.summary(rates, first_step=20)
    assert s["intervals"] == 2
    assert s["steps_per_s"] == pytest.approx(0.9)
    assert s["target_tokens_per_s"] == pytest.approx(2400.0)
    assert train_e2e.summary(rates, first_step=60)["steps_per_s"] is None


def test_our_history_gives_steps_per_second_from_the_log_times(tmp_path):
    path = tmp_path / "history.jsonl"
    rows = [{"time": 100.0, "step": 20, "train": {"tokens_per_sec": 900.0}},
            {"time": 101.0, "step": 20, "dev": {"bleu": 1.0}},  # eval rows carry no rate
            {"time": 125.0, "step": 40, "train": {"tokens_per_sec": 1000.0}},
            {"time": 145.0, "step": 60, "train": {"tokens_per_sec": 1200.0}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rates = train_e2e.our_rates(str(path))
    assert rates == [(40, 20 / 25.0, 1000.0), (60, 20 / 20.0, 1200.0)]
    assert train_e2e.summary(rates, 20)["steps_per_s"] == pytest.approx((0.8 + 1.0) / 2)


def test_opennmt_vocabulary_has_our_words_and_our_size(tmp_path):
    ours = tmp_path / "vocab.en.txt"
    ours.write_text("<pad>\n<unk>\n<s>\n</s>\na\nman\nruns\n")
    out = tmp_path / "src.vocab"
    assert train_e2e.onmt_vocab(str(ours), str(out)) == 7  # OpenNMT-tf adds its OOV bucket
    assert out.read_text().split("\n")[:-1] == ["<blank>", "<s>", "</s>", "a", "man", "runs"]


def test_too_few_steps_and_a_missing_peer_are_flag_errors(capsys, tmp_path):
    with pytest.raises(SystemExit):
        train_e2e.main(["--steps=10", "--log_every=5"])
    assert "--steps=10 must be at least 3 x --log_every=5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_e2e.main([f"--peer_python={tmp_path}/python"])
    assert f"--peer_python: {tmp_path}/python not found" in capsys.readouterr().err


def test_our_command_passes_the_device_check_without_a_gpu():
    """Our side trains the paper profile's sizes on the CPU, as the peer does: the flags
    must get past --profile=paper's refusal without a GPU (they did not, 2026-11-27:
    make bench-peers-train exited at once)."""
    from absl import flags

    from experiments import flags as xflags
    from experiments import translate
    fv = flags.FlagValues()
    translate.define_flags(fv)
    fv(["prog", *train_e2e.OURS_FLAGS, "--model_dir=unused"])
    xflags.apply_profile(translate.PROFILES, fv)
    xflags.check_device(fv)  # SystemExit with the one-line refusal otherwise
    without = flags.FlagValues()
    translate.define_flags(without)
    without(["prog", *[f for f in train_e2e.OURS_FLAGS if f != "--allow_cpu"]])
    xflags.apply_profile(translate.PROFILES, without)
    from acvi_tf.utils import gpus
    if not gpus.cpu_only_problem("paper", False):
        pytest.skip("a GPU is visible: the refusal does not apply here")
    with pytest.raises(SystemExit, match="--profile=paper"):
        xflags.check_device(without)
