"""The attention scores against numpy with the layers' own weights: additive with the
coverage term (Eqs. 1, 8), multiplicative (Eq. 10) and Eq. 10 / sqrt(d)."""

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.attention.scores import SCORES

B, N, D, Q, U = 3, 5, 8, 12, 10


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    memory = rng.normal(size=(B, N, D)).astype(np.float32)
    query = rng.normal(size=(B, Q)).astype(np.float32)
    coverage = rng.uniform(0, 2, size=(B, N)).astype(np.float32)
    return memory, query, coverage


def _score(layer, memory, query, coverage=None):
    keys = layer.precompute(tf.constant(memory))
    out = layer.step({"keys": keys}, tf.constant(query),
                     None if coverage is None else tf.constant(coverage))
    return out.numpy()


def test_additive_score_with_coverage_is_eq_1_plus_eq_8():
    memory, query, coverage = _inputs()
    layer = SCORES.get("additive")(U, use_coverage=True)
    _score(layer, memory, query, coverage)  # builds the weights
    layer.w_k.assign(np.linspace(-1, 1, U).astype(np.float32))  # starts at zero: make it count
    W_h = layer.W_h.kernel.numpy()
    W_s, b = layer.W_s.kernel.numpy(), layer.W_s.bias.numpy()
    v, w_k = layer.v.numpy(), layer.w_k.numpy()
    want = np.einsum("bnu,u->bn", np.tanh(memory @ W_h + (query @ W_s + b)[:, None, :]
                                          + coverage[:, :, None] * w_k), v)
    np.testing.assert_allclose(_score(layer, memory, query, coverage), want, rtol=1e-5,
                               atol=1e-6)
    # without coverage, Eq. 1 alone
    want = np.einsum("bnu,u->bn", np.tanh(memory @ W_h + (query @ W_s + b)[:, None, :]), v)
    np.testing.assert_allclose(_score(layer, memory, query), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,scale", [("multiplicative", 1.0),
                                        ("scaled_multiplicative", 1.0 / np.sqrt(Q))])
def test_multiplicative_scores_are_eq_10(name, scale):
    memory, query, _ = _inputs(1)
    layer = SCORES.get(name)(Q)
    got = _score(layer, memory, query)
    W = layer.W.kernel.numpy()  # [D, Q]: keys = h W
    want = np.einsum("bnd,dq,bq->bn", memory, W, query) * scale
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_scaled_score_starts_attention_near_uniform():
    """Why the scale: at the cpu profile's sizes (|h| ~ 6, |s| ~ 6, d = 256) Eq. 10's
    initial scores spread over several units, the scaled ones over a fraction of one."""
    rng = np.random.default_rng(2)
    memory = rng.normal(size=(16, 13, 256)).astype(np.float32) * 0.4
    query = rng.normal(size=(16, 256)).astype(np.float32) * 0.4
    plain = SCORES.get("multiplicative")(256)
    scaled = SCORES.get("scaled_multiplicative")(256)
    plain_scores = _score(plain, memory, query)
    _score(scaled, memory, query)  # builds its W
    scaled.W.kernel.assign(plain.W.kernel)
    scaled_scores = _score(scaled, memory, query)
    np.testing.assert_allclose(scaled_scores * 16.0, plain_scores, rtol=1e-4, atol=1e-4)
    assert plain_scores.std() > 1.5 and scaled_scores.std() < 0.2
