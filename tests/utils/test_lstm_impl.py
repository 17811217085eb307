"""The encoder's two BiLSTM implementations (acvi_tf.utils.lstm_impl): the choice, and
that ``keras`` (cuDNN on a GPU; Keras' generic loop on this CPU) and ``scan`` give the
same values and gradients on the same weights, with variable lengths, an empty row and
two layers, and that a checkpoint written under one restores under the other."""

import dataclasses
import json
import logging
import re

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.errors import ConfigError
from acvi_tf.models.encoder import Encoder
from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from acvi_tf.run.directory import check_model_config, load_model_config
from acvi_tf.run.restore import restore_model
from acvi_tf.training.trainer import TrainConfig, make_optimizer
from acvi_tf.utils import lstm_impl
from acvi_tf.utils.lstm_impl import choose_lstm_impl, in_xla_context
from tests.train_helpers import train_per_token

VOCAB, EMBED, UNITS = 12, 8, 8
LENGTHS = [6, 3, 1, 0]  # the last row has no real step (cuDNN's fully masked case)


@pytest.mark.parametrize("requested, gpu, xla, want", [
    ("auto", False, False, "scan"),
    ("auto", True, False, "keras"),
    ("auto", True, True, "scan"),
    ("auto", False, True, "scan"),
    ("scan", True, False, "scan"),
    ("keras", False, False, "keras"),
    ("keras", False, True, "keras"),  # Keras' generic loop compiles; cuDNN's does not
    ("block", False, False, "block"),
    ("block", True, False, "block"),
])
def test_choice(requested, gpu, xla, want):
    assert choose_lstm_impl(requested, gpu=gpu, xla=xla)[0] == want


def test_bad_choices_name_the_flag():
    with pytest.raises(ConfigError, match="lstm_impl: keras runs cuDNN"):
        choose_lstm_impl("keras", gpu=True, xla=True)
    with pytest.raises(ConfigError, match="lstm_impl: block runs TensorFlow's BlockLSTM"):
        choose_lstm_impl("block", gpu=False, xla=True)
    with pytest.raises(ConfigError, match="lstm_impl: 'cudnn'"):
        choose_lstm_impl("cudnn", gpu=False, xla=False)
    with pytest.raises(ConfigError, match="lstm_impl"):
        Encoder(VOCAB, EMBED, UNITS, lstm_impl="fast")


def test_portable_graphs_take_scan():
    """SavedModel exports trace inside portable(): no cuDNN op in a graph that may serve
    on a CPU."""
    with lstm_impl.portable():
        assert choose_lstm_impl("auto", gpu=True, xla=False)[0] == "scan"
        assert choose_lstm_impl("keras", gpu=True, xla=True)[0] == "scan"
    assert choose_lstm_impl("auto", gpu=True, xla=False)[0] == "keras"


def test_each_choice_is_logged_once(caplog, monkeypatch):
    monkeypatch.setattr(lstm_impl, "_logged", set())
    with caplog.at_level(logging.INFO, logger=lstm_impl.__name__):
        for _ in range(3):
            choose_lstm_impl("auto", gpu=True, xla=False)
        choose_lstm_impl("auto", gpu=False, xla=False)
    assert [r.getMessage() for r in caplog.records] == [
        "encoder LSTM: keras (auto on a GPU (Keras' LSTM runs cuDNN))",
        "encoder LSTM: scan (auto without a GPU)"]


def test_xla_context_is_seen_when_tracing():
    seen = []

    def probe():
        seen.append(in_xla_context())
        return tf.constant(0)

    tf.function(probe, jit_compile=True)()
    tf.function(probe)()
    assert seen == [True, False] and not in_xla_context()


def _encoders(layers=2, dropout=0.0, other="keras"):
    """A scan encoder with random weights (biases too) and an ``other`` one holding the
    same."""
    scan = Encoder(VOCAB, EMBED, UNITS, layers, dropout, lstm_impl="scan", name="encoder")
    keras_ = Encoder(VOCAB, EMBED, UNITS, layers, dropout, lstm_impl=other, name="encoder")
    ids, mask = _batch()
    scan(ids, mask), keras_(ids, mask)  # build
    rng = np.random.default_rng(0)
    for a, b in zip(scan.weights, keras_.weights):
        value = rng.normal(scale=0.5, size=a.shape).astype(np.float32)
        a.assign(value), b.assign(value)
    return scan, keras_


def _paths(encoder):
    """The weights' paths without Keras' uniquifying suffixes (forward_lstm_3), which
    checkpoints do not use: they key weights by attribute."""
    return [re.sub(r"_lstm_\d+/", "_lstm/", v.path) for v in encoder.weights]


def _batch():
    rng = np.random.default_rng(1)
    mask = tf.sequence_mask(LENGTHS, max(LENGTHS))
    ids = tf.where(mask, rng.integers(1, VOCAB, size=mask.shape), 0)
    return ids, mask


def _run(encoder, ids, mask, training):
    """Memory, final states and the gradients of a fixed random projection of them with
    respect to every weight."""
    rng = np.random.default_rng(2)
    with tf.GradientTape() as tape:
        memory, finals = encoder(ids, mask, training=training, seed=tf.constant(7))
        outs = [memory] + [s for pair in finals for s in pair]
        loss = sum(tf.reduce_sum(o * rng.normal(size=o.shape).astype(np.float32))
                   for o in outs)
    return outs, tape.gradient(loss, encoder.trainable_variables)


@pytest.mark.parametrize("other", ["keras", "block"])
def test_keras_and_block_equal_scan_in_values_and_gradients(other):
    """In training (dropout between the layers, drawn the same for both)."""
    training = True
    scan, keras_ = _encoders(dropout=0.3, other=other)
    ids, mask = _batch()
    want_outs, want_grads = tf.function(lambda: _run(scan, ids, mask, training))()
    outs, grads = tf.function(lambda: _run(keras_, ids, mask, training))()
    assert _paths(scan) == _paths(keras_)
    for a, b in zip(outs + grads, want_outs + want_grads):
        np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b),
                                   rtol=2e-5, atol=2e-6)
    # the empty row: zero memory, the zero state, and no gradient through its forced step
    assert not np.any(outs[0][3].numpy()) and not any(np.any(s[3].numpy()) for s in outs[1:])
    assert all(np.all(np.isfinite(tf.convert_to_tensor(g))) for g in grads)


def _model(impl, **overrides):
    return Seq2Seq(ModelConfig(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, embed_dim=EMBED,
                               encoder_units=UNITS, decoder_units=16, attention_units=8,
                               head_units=16, lstm_impl=impl, **overrides))


def _model_batch(seed=1):
    return {k: tf.constant(v) for k, v in ReverseTask(vocab_size=VOCAB, batch_size=4,
                                                      seed=seed).batch_at(0).items()}


@pytest.mark.parametrize("other", ["keras", "block"])
def test_training_steps_match(other):
    """Two Adam steps with dropout from the same weights: the same loss terms at every
    step under either implementation (the first step's gradients moved the weights)."""
    models = [_model(impl, dropout=0.2) for impl in ("scan", other)]
    for m in models:
        m.build_for_checkpoint(_model_batch())
    for a, b in zip(*(m.weights for m in models)):
        b.assign(a)
    logs = [train_per_token(m, lambda i: {k: v.numpy() for k, v in _model_batch(i).items()}, 2)
            for m in models]
    for want, got in zip(*logs):
        for key in want:
            np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-6, err_msg=key)


def test_checkpoint_written_under_scan_restores_under_keras(tmp_path):
    """A run's checkpoint (the Trainer's layout: weights reached through the optimizer's
    variable list, in the model's order) trained under ``scan`` restores into a
    ``keras`` model by the evaluation's own restore, and gives the same loss."""
    batch = _model_batch()
    trained = _model("scan")
    trained.build_for_checkpoint(batch)
    rng = np.random.default_rng(0)
    for v in trained.weights:
        v.assign(rng.normal(scale=0.3, size=v.shape).astype(np.float32))
    optimizer = make_optimizer(TrainConfig(model_dir=str(tmp_path)))
    optimizer.build(trained.trainable_variables)
    ckpt = tf.train.Checkpoint(model=trained, optimizer=optimizer,
                               step=tf.Variable(3, dtype=tf.int64))
    tf.train.CheckpointManager(ckpt, str(tmp_path / "ckpt"), 1).save(checkpoint_number=3)
    restored = _model("keras")
    assert restore_model(restored, str(tmp_path), batch) == 3
    assert _paths(restored.encoder) == _paths(trained.encoder)
    np.testing.assert_allclose(restored.teacher_forced(batch)["nll"],
                               trained.teacher_forced(batch)["nll"], rtol=2e-5, atol=2e-6)


def test_resumed_run_may_change_the_implementation_only(tmp_path):
    config = ModelConfig(tgt_vocab_size=VOCAB, lstm_impl="scan")
    # a run saved before the field existed resumes, and reads as auto
    old = dataclasses.asdict(config)
    del old["lstm_impl"]
    (tmp_path / "model_config.json").write_text(json.dumps(old))
    assert load_model_config(str(tmp_path)).lstm_impl == "auto"
    check_model_config(str(tmp_path), config)
    check_model_config(str(tmp_path), dataclasses.replace(config, lstm_impl="keras"))
    with pytest.raises(ConfigError, match="different configuration"):
        check_model_config(str(tmp_path), dataclasses.replace(config, encoder_units=4))
