"""Soft attention's noise controls (issue 33): the context of a training step is Eq. 3's
plus sigma * N(0, I) (context_noise) or under inverted dropout (context_dropout); decoding
and the options at 0 give Eq. 3's context exactly."""

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.attention import ATTENTION
from acvi_tf.utils.ops import masked_softmax

B, N, D = 64, 7, 32


def _inputs():
    rng = np.random.default_rng(0)
    memory = tf.constant(rng.normal(size=(B, N, D)), tf.float32)
    mask = tf.constant(np.arange(N)[None, :] < rng.integers(2, N + 1, size=(B, 1)))
    scores = tf.constant(rng.normal(size=(B, N)), tf.float32)
    memory_state = {"memory": memory, "mask": mask, "seed": tf.constant([3, 4], tf.int32)}
    return scores, memory_state, {"time": tf.constant(2)}


def _eq3(scores, memory_state):
    probs = masked_softmax(scores, memory_state["mask"]).numpy()
    return np.einsum("bn,bnd->bd", probs, memory_state["memory"].numpy())


def _context(training, **options):
    scores, memory_state, state = _inputs()
    layer = ATTENTION.get("soft")(D, **options)
    return layer.step(scores, memory_state, state, training=training)[0].numpy(), \
        _eq3(scores, memory_state)


def test_plain_soft_attention_and_decoding_are_eq_3():
    for options in ({}, {"context_noise": 0.5}, {"context_dropout": 0.3}):
        got, want = _context(False, **options)  # decoding: no noise whatever the options
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    got, want = _context(True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_context_noise_adds_isotropic_gaussian_noise_of_the_given_sigma():
    got, want = _context(True, context_noise=0.2)
    eps = (got - want) / 0.2
    assert abs(eps.mean()) < 0.05 and eps.std() == pytest.approx(1.0, abs=0.05)
    again, _ = _context(True, context_noise=0.2)
    np.testing.assert_array_equal(got, again)  # stateless: the same seed, the same noise


def test_context_dropout_zeroes_that_share_and_rescales_the_rest():
    got, want = _context(True, context_dropout=0.25)
    kept = got != 0.0
    assert kept.mean() == pytest.approx(0.75, abs=0.03)
    np.testing.assert_allclose(got[kept], want[kept] / 0.75, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="context_dropout=1.0"):
        ATTENTION.get("soft")(D, context_dropout=1.0)
