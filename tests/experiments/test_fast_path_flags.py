"""The flags of the fast path per device (issue 42): the paper profiles' --pad_multiple
(applied under --xla only, unless given explicitly) reaches the task configs, and
--lstm_impl reaches the model config."""

import pytest
from absl import flags

from acvi_tf.tasks.captioning import CaptioningConfig
from acvi_tf.tasks.summarization import SummarizationConfig
from acvi_tf.tasks.translation import TranslationConfig
from experiments import caption, summarize, translate
from experiments import flags as xflags

CLIS = [(translate, TranslationConfig, 8), (summarize, SummarizationConfig, 25),
        (caption, CaptioningConfig, 8)]


def _parsed(cli, *args):
    fv = flags.FlagValues()
    cli.define_flags(fv)
    fv(["prog", *args])
    xflags.apply_profile(cli.PROFILES, fv)
    return fv


@pytest.mark.parametrize("cli, config_cls, multiple", CLIS)
def test_paper_profile_pads_under_xla_only(cli, config_cls, multiple):
    def pad(*args):
        fv = _parsed(cli, "--profile=paper", *args)
        return xflags.config_from_flags(config_cls, fv).pad_multiple
    assert pad("--xla") == multiple
    assert pad() == 0  # one trace takes every shape: padding would only add steps
    assert pad("--pad_multiple=4") == 4  # explicit: always
    assert pad("--pad_multiple=0", "--xla") == 0


@pytest.mark.parametrize("cli", [translate, summarize, caption])
def test_other_profiles_do_not_pad(cli):
    fv = _parsed(cli, "--profile=cpu", "--xla")
    assert fv.pad_multiple == 0
    # saved with the run, never restored from it
    assert "pad_multiple" in xflags.shared_flags(xflags.SAVED)
    assert "pad_multiple" not in xflags.shared_flags(xflags.RESTORED, xflags.DECODING)


def test_lstm_impl_reaches_the_model_config():
    assert xflags.model_config_from_flags(_parsed(translate, "--profile=smoke")).lstm_impl \
        == "auto"
    fv = _parsed(translate, "--profile=smoke", "--lstm_impl=keras")
    assert xflags.model_config_from_flags(fv).lstm_impl == "keras"
    # how this machine runs the model, not what it is: saved, not restored
    assert "lstm_impl" in xflags.shared_flags(xflags.SAVED)
    assert "lstm_impl" not in xflags.shared_flags(xflags.RESTORED)
    with pytest.raises(flags.IllegalFlagValueError):
        _parsed(translate, "--lstm_impl=cudnn")
