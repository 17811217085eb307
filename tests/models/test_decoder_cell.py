"""The decoder's recurrent cell (``ModelConfig.decoder_cell``): LSTM by default, GRU
(Cho et al., VRNMT's Eqs. 22-25) as an option, for every context variant."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from tests.models.test_seq2seq import V
from tests.models.test_seq2seq import tiny_config as _config
from tests.models.test_transformer import as_references
from tests.train_helpers import train_per_token


def _batch(i, batch_size=4):
    return {k: tf.constant(v) for k, v in
            ReverseTask(vocab_size=V, batch_size=batch_size).batch_at(i).items()}


def test_lstm_stays_the_default_with_its_variable_names():
    """Old configs (no decoder_cell key) and checkpoints keep the LSTM and its names."""
    old = json.loads(_config().to_json())
    del old["decoder_cell"]
    assert ModelConfig.from_dict(old).decoder_cell == "lstm"
    model = Seq2Seq(_config())
    model.build_for_checkpoint(_batch(0))
    paths = {v.path for v in model.trainable_variables}
    assert {"lstm_0/kernel", "bridge/reduce_h_0/kernel", "bridge/reduce_c_0/kernel"} <= paths
    _, state = model.start(_batch(0))
    assert [len(s) for s in state["rnn"]] == [2]


def test_gru_state_is_h_alone_in_every_layer():
    model = Seq2Seq(_config(decoder_cell="gru", decoder_layers=2))
    memory_state, state = model.start(_batch(0))
    assert [len(s) for s in state["rnn"]] == [1, 1]
    _, state, _ = model.step(tf.fill([4], 2), state, memory_state)
    assert [len(s) for s in state["rnn"]] == [1, 1] and state["rnn"][1][0].shape == (4, 16)
    paths = {v.path for v in model.trainable_variables if not v.path.startswith("encoder/")}
    assert "gru_1/kernel" in paths and not any("lstm" in p or "reduce_c" in p for p in paths)
    assert Seq2Seq.from_config(model.get_config()).config.decoder_cell == "gru"


def test_unknown_cell_is_refused():
    with pytest.raises(ValueError, match="decoder_cell='rnn'.*lstm, gru"):
        Seq2Seq(_config(decoder_cell="rnn"))


@pytest.mark.parametrize("attention", ["soft", "acvi"])
def test_gru_decoder_learns_and_beam_score_is_the_forced_likelihood(attention):
    keras.utils.set_random_seed(0)
    model = Seq2Seq(_config(decoder_cell="gru", attention=attention))
    task = ReverseTask(vocab_size=V, batch_size=16, seed=0)
    losses = [x["nll"] for x in train_per_token(model, task.batch_at, 60)]
    assert all(np.isfinite(losses))
    assert np.mean(losses[-10:]) < np.mean(losses[:5]) - 0.2, losses
    batch = _batch(3)
    greedy = model.decode(batch, beam_width=1, max_length=6)
    beam = model.decode(batch, beam_width=3, max_length=6)
    assert np.all(beam["log_probs"].numpy()[:, 0] >= greedy["log_prob"].numpy() - 1e-4)
    ids, lengths = beam["ids"].numpy()[:, 0], beam["lengths"].numpy()[:, 0]
    forced = model.teacher_forced(dict(batch, **as_references(ids, lengths)))
    clean = np.all((ids != 0) | (np.arange(ids.shape[1]) >= lengths[:, None]), axis=1)
    assert clean.any()
    np.testing.assert_allclose(-forced["nll"].numpy()[clean],
                               beam["log_probs"].numpy()[clean, 0], atol=1e-4)


def test_decoder_cell_flag_reaches_the_model_config():
    from experiments import flags as xflags
    from experiments import translate
    fv = flags.FlagValues()
    translate.define_flags(fv)
    fv(["prog", "--decoder_cell=gru", "--latent=vrnmt", "--latent_option=latent_dim=4"])
    config = xflags.model_config_from_flags(fv, src_vocab_size=10, tgt_vocab_size=11)
    assert (config.decoder_cell, config.latent, config.latent_options) == \
        ("gru", "vrnmt", {"latent_dim": 4})
    # restored from model_dir in eval/decode
    assert "decoder_cell" in xflags.shared_flags(xflags.RESTORED)
    fv = flags.FlagValues()
    translate.define_flags(fv)
    with pytest.raises(flags.IllegalFlagValueError):
        fv(["prog", "--decoder_cell=rnn"])


def test_the_decoder_config_names_its_constructor_arguments():
    """AttentionDecoder.get_config (lost once in a refactor without any test noticing)."""
    from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
    model = Seq2Seq(ModelConfig(src_vocab_size=12, tgt_vocab_size=11, embed_dim=4,
                                encoder_units=4, decoder_units=6, attention_units=4,
                                head_units=4, decoder_layers=2, decoder_cell="gru",
                                coverage=True, dropout=0.1))
    config = model.decoder.get_config()
    assert {k: config[k] for k in ("vocab_size", "embed_dim", "units", "num_layers", "dropout",
                                   "use_coverage", "cell")} == {
        "vocab_size": 11, "embed_dim": 4, "units": 6, "num_layers": 2, "dropout": 0.1,
        "use_coverage": True, "cell": "gru"}
