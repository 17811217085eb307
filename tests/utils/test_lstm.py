"""lstm_sequence (the input projection out of the loop) equals Keras' LSTM on the same
weights: outputs, final states and every gradient, with padding, in both directions."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.models.encoder import Encoder
from acvi_tf.utils.lstm import bidirectional_sequence, block_bidirectional
from acvi_tf.utils.precision import policy_scope

UNITS, FEATURES = 6, 5
LENGTHS = [7, 4, 1]


def _layer(seed=0):
    layer = keras.layers.Bidirectional(
        keras.layers.LSTM(UNITS, return_sequences=True, return_state=True))
    layer.build((None, None, FEATURES))
    rng = np.random.default_rng(seed)
    for v in layer.weights:  # random biases too: Keras initialises them to 0 / 1
        v.assign(rng.normal(scale=0.5, size=v.shape).astype(v.dtype))
    return layer


def _inputs(dtype=tf.float32):
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=[len(LENGTHS), max(LENGTHS), FEATURES]), dtype)
    mask = tf.sequence_mask(LENGTHS, max(LENGTHS))
    return x, mask


def _ours(layer, x, mask):
    outputs, (fh, fc), (bh, bc) = bidirectional_sequence(layer, x, mask)
    return [outputs, fh, fc, bh, bc]


def _keras(layer, x, mask):
    return list(layer(x, mask=mask))


def _with_gradients(run, layer, x, mask):
    """run's five outputs and the gradients of a fixed random projection of them with
    respect to x and every weight."""
    rng = np.random.default_rng(2)
    with tf.GradientTape() as tape:
        tape.watch(x)
        outs = run(layer, x, mask)
        loss = sum(tf.reduce_sum(tf.cast(o, tf.float32)
                                 * rng.normal(size=o.shape).astype(np.float32)) for o in outs)
    grads = tape.gradient(loss, [x] + layer.trainable_variables)
    return outs, grads


@pytest.mark.parametrize("mode", ["function", "xla"])
def test_equals_keras_lstm_in_values_and_gradients(mode):
    layer = _layer()
    x, mask = _inputs()
    compiled = {"function": lambda f: tf.function(f), "xla": lambda f: tf.function(
        f, jit_compile=True)}[mode]
    ours = compiled(lambda: _with_gradients(_ours, layer, x, mask))()
    want = tf.function(lambda: _with_gradients(_keras, layer, x, mask))()
    for a, b in zip(tf.nest.flatten(ours), tf.nest.flatten(want)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-5, atol=2e-6)
    # Keras' masking: zero outputs at padding; the one-step row's backward final state is
    # its only step's, and its forward final state the same step's.
    outputs = ours[0][0].numpy()
    assert np.all(outputs[2, 1:] == 0) and np.all(outputs[1, 4:] == 0)
    np.testing.assert_allclose(ours[0][1][2], outputs[2, 0, :UNITS], rtol=1e-6)
    np.testing.assert_allclose(ours[0][3][2], outputs[2, 0, UNITS:], rtol=1e-6)


def test_bfloat16_policy_computes_in_bfloat16_as_keras_does():
    with policy_scope("mixed_bfloat16"):
        layer = _layer()
    x, mask = _inputs(tf.bfloat16)
    ours = _ours(layer, x, mask)
    want = _keras(layer, x, mask)
    for a, b in zip(ours, want):
        assert a.dtype == b.dtype == tf.bfloat16
        np.testing.assert_allclose(tf.cast(a, tf.float32), tf.cast(b, tf.float32),
                                   rtol=0.05, atol=0.03)


def test_encoder_runs_its_keras_layers_weights():
    """The encoder's memory and final states are those of its Keras BiLSTM layers called
    directly (the path before lstm_sequence): checkpoints keep their meaning."""
    enc = Encoder(vocab_size=None, embed_dim=0, units=UNITS, num_layers=2)
    x, mask = _inputs()
    memory, finals = enc(x, mask)
    h = x
    for i, layer in enumerate(enc.layers_):
        h, fh, fc, bh, bc = layer(h, mask=mask)
        np.testing.assert_allclose(finals[i][0], tf.concat([fh, bh], -1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(finals[i][1], tf.concat([fc, bc], -1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(memory, h * tf.cast(mask, h.dtype)[:, :, None], rtol=1e-5,
                               atol=1e-6)
    assert [v.path for v in enc.weights] == [v.path for layer in enc.layers_
                                             for v in layer.weights]


def _block(layer, x, mask):
    outputs, (fh, fc), (bh, bc) = block_bidirectional(layer, x, mask)
    return [outputs, fh, fc, bh, bc]


def test_fused_block_lstm_equals_keras_in_values_and_gradients():
    """TensorFlow's BlockLSTM kernel (``--lstm_impl=block``) on the Keras layer's weights:
    Keras' values and gradients, with right padding both ways."""
    layer = _layer()
    x, mask = _inputs()
    ours = tf.function(lambda: _with_gradients(_block, layer, x, mask))()
    want = tf.function(lambda: _with_gradients(_keras, layer, x, mask))()
    for a, b in zip(tf.nest.flatten(ours), tf.nest.flatten(want)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-5, atol=2e-6)


def test_fused_block_lstm_gives_an_empty_row_the_zero_state_and_no_gradient():
    layer = _layer()
    x, mask = _inputs()
    mask = tf.concat([mask[:2], tf.zeros_like(mask[2:])], 0)  # the one-step row emptied
    ours = _with_gradients(_block, layer, x, mask)
    want = _with_gradients(_ours, layer, x, mask)
    for a, b in zip(tf.nest.flatten(ours), tf.nest.flatten(want)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-5, atol=2e-6)
    assert np.all(ours[0][1][2] == 0) and np.all(ours[1][0][2] == 0)  # h, d loss / d x
