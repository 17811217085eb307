"""The one train step with loss scaling (``precision="mixed_float16"``): the update it
applies, the overflowed steps it skips, and what counts as a diverged step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models import build_model
from acvi_tf.models.seq2seq import ModelConfig
from acvi_tf.training.step import MIN_LOSS_SCALE, train_step
from acvi_tf.training.trainer import TrainConfig, make_optimizer

V = 12
LR = 0.5
CLIP = 0.1  # below the gradient norm of these models: the clipping acts


def _model(precision, batch):
    keras.utils.set_random_seed(4)
    model = build_model(ModelConfig(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8,
                                    encoder_units=8, decoder_units=16, attention_units=8,
                                    head_units=16, attention="acvi", precision=precision))
    model.build_for_checkpoint(batch)
    return model


def _setup(precision, batch, weights_from=None):
    model = _model(precision, batch)
    if weights_from is not None:
        for a, b in zip(weights_from.weights, model.weights):
            b.assign(a)
    optimizer = make_optimizer(TrainConfig(model_dir="", optimizer="sgd", learning_rate=LR),
                               precision)
    optimizer.build(model.trainable_variables)
    step = tf.function(lambda b, s: train_step(model, optimizer, b, s, clip_norm=CLIP),
                       autograph=False)
    return model, optimizer, step


def _batch():
    return {k: tf.constant(v)
            for k, v in ReverseTask(vocab_size=V, batch_size=8, seed=1).batch_at(0).items()}


def _values(model):
    return [v.numpy().copy() for v in model.trainable_variables]


def test_float16_step_applies_the_float32_update_of_the_clipped_true_gradient():
    batch = _batch()
    m32, o32, step32 = _setup("float32", batch)
    m16, o16, step16 = _setup("mixed_float16", batch, weights_from=m32)
    assert isinstance(o16, keras.optimizers.LossScaleOptimizer)
    assert not isinstance(o32, keras.optimizers.LossScaleOptimizer)
    before = _values(m32)
    r32 = step32(batch, tf.constant(5))
    r16 = step16(batch, tf.constant(5))
    assert float(r16["finite"]) == 1.0 and float(r16["loss_scale"]) == 2.0 ** 15
    assert "loss_scale" not in r32
    np.testing.assert_allclose(float(r16["loss"]), float(r32["loss"]), rtol=1e-3)
    # The logged norm is the true gradient's, not the scaled one's ...
    np.testing.assert_allclose(float(r16["grad_norm"]), float(r32["grad_norm"]), rtol=1e-2)
    assert float(r32["grad_norm"]) > CLIP
    d32 = np.concatenate([(v.numpy() - b).ravel() for v, b in zip(m32.trainable_variables,
                                                                    before)])
    d16 = np.concatenate([(v.numpy() - b).ravel() for v, b in zip(m16.trainable_variables,
                                                                    before)])
    # ... and the clipping acted on it: SGD moved by exactly lr * clip_norm.
    np.testing.assert_allclose(np.linalg.norm(d32), LR * CLIP, rtol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(d16), LR * CLIP, rtol=1e-4)
    assert np.linalg.norm(d16 - d32) < 1e-2 * np.linalg.norm(d32)
    np.testing.assert_allclose(d16, d32, atol=1e-2 * np.abs(d32).max())
    assert int(o16.iterations) == 1 and int(o16.step_counter) == 1


def test_a_step_whose_scaled_loss_overflows_is_skipped_and_the_scale_halved():
    batch = _batch()
    model, optimizer, step = _setup("mixed_float16", batch)
    optimizer.dynamic_scale.assign(2.0 ** 127)  # loss * scale > the float32 maximum
    before = _values(model)
    metrics = step(batch, tf.constant(1))
    with np.errstate(over="ignore"):  # the scaled loss, in float32
        assert np.isinf(np.float32(metrics["loss"]) * np.float32(metrics["loss_scale"]))
    assert not np.isfinite(float(metrics["grad_norm"]))
    assert float(metrics["finite"]) == 1.0  # an overflow is the loss scale's, not divergence
    for a, b in zip(before, _values(model)):
        np.testing.assert_array_equal(a, b)
    assert int(optimizer.iterations) == 0
    assert float(optimizer.dynamic_scale) == 2.0 ** 126
    # A scale the gradients fit under: the next step is applied.
    optimizer.dynamic_scale.assign(2.0 ** 10)
    metrics = step(batch, tf.constant(2))
    assert float(metrics["finite"]) == 1.0 and np.isfinite(float(metrics["grad_norm"]))
    assert int(optimizer.iterations) == 1
    assert any(not np.array_equal(a, b) for a, b in zip(before, _values(model)))


@pytest.mark.parametrize("scale,diverged", [(2.0 ** 15, False), (2.0 ** -15, True)])
def test_a_nan_gradient_is_divergence_only_once_the_scale_is_down_to_the_minimum(scale,
                                                                                  diverged):
    """A finite loss with a NaN gradient (the norm of a zero vector: 0, with gradient 0/0)
    is skipped like an overflow while the scale can still come down; at the minimum it is
    a diverged step."""
    batch = _batch()
    assert (scale <= MIN_LOSS_SCALE) == diverged
    model, optimizer, step = _setup("mixed_float16", batch)
    real = model.loss_terms

    def loss_terms(batch, **kw):
        terms = real(batch, **kw)
        v = model.trainable_variables[0]
        terms["objective"] = terms["objective"] + tf.norm(v - tf.stop_gradient(v))
        return terms
    model.loss_terms = loss_terms
    optimizer.dynamic_scale.assign(scale)
    before = _values(model)
    metrics = step(batch, tf.constant(1))
    assert np.isfinite(float(metrics["loss"])) and not np.isfinite(float(metrics["grad_norm"]))
    assert float(metrics["finite"]) == (0.0 if diverged else 1.0)
    for a, b in zip(before, _values(model)):
        np.testing.assert_array_equal(a, b)
    assert float(optimizer.dynamic_scale) == scale / 2


def test_a_non_finite_loss_is_not_applied_and_leaves_the_scale():
    batch = _batch()
    model, optimizer, step = _setup("mixed_float16", batch)
    real = model.loss_terms

    def loss_terms(batch, **kw):
        terms = real(batch, **kw)
        terms["objective"] = terms["objective"] + np.float32(np.nan)
        return terms
    model.loss_terms = loss_terms
    before = _values(model)
    metrics = step(batch, tf.constant(1))
    assert float(metrics["finite"]) == 0.0
    for a, b in zip(before, _values(model)):
        np.testing.assert_array_equal(a, b)
    assert float(optimizer.dynamic_scale) == 2.0 ** 15 and int(optimizer.iterations) == 0


def test_an_unbuilt_loss_scale_optimizer_is_refused():
    batch = _batch()
    model = _model("mixed_float16", batch)
    optimizer = make_optimizer(TrainConfig(model_dir=""), "mixed_float16")
    with pytest.raises(ValueError, match="build the LossScaleOptimizer"):
        train_step(model, optimizer, batch, tf.constant(0))
