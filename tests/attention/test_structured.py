"""Structured (segmentation CRF) attention against brute-force enumeration."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.attention.structured import StructuredAttention, crf_marginals

D = 4


def _brute_force(unary, mask, transition):
    """log Z, p(z_i = 1) and expected transition counts by enumerating all 2^n labelings.

    Only the real positions (mask) form the chain; padded ones are left out.
    """
    real = np.where(mask)[0]
    n = len(real)
    labelings = np.array(list(itertools.product([0, 1], repeat=n)), np.int64).reshape(-1, n)
    u = unary[real].astype(np.float64)
    scores = labelings @ u
    for i in range(n - 1):
        scores = scores + transition[labelings[:, i], labelings[:, i + 1]]
    top = scores.max()
    log_z = top + np.log(np.exp(scores - top).sum())
    p = np.exp(scores - log_z)
    marginals = np.zeros(len(unary))
    marginals[real] = p @ labelings
    counts = np.zeros([2, 2])
    for i in range(n - 1):
        np.add.at(counts, (labelings[:, i], labelings[:, i + 1]), p)
    return log_z, marginals, counts


def _problem(seed, batch=4, n=8, scale=2.0):
    rng = np.random.default_rng(seed)
    unary = (scale * rng.normal(size=[batch, n])).astype(np.float32)
    transition = (scale * rng.normal(size=[2, 2])).astype(np.float32)
    mask = np.ones([batch, n], bool)
    mask[1, 5:] = False          # trailing padding
    mask[2, 1:] = False          # a single real position
    mask[3, [i for i in (0, 3, 4) if i < n]] = False  # padding anywhere is skipped too
    unary[~mask] = rng.normal(scale=50.0, size=(~mask).sum())  # garbage must not matter
    return unary, mask, transition


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_log_partition_and_marginals_match_brute_force(seed, n):
    unary, mask, transition = _problem(seed, n=n)
    mask[:, 0] = mask[:, 0] | (mask.sum(1) == 0)  # keep at least one real position
    log_z, marginals = crf_marginals(unary, mask, transition)
    for b in range(len(unary)):
        ref_z, ref_m, _ = _brute_force(unary[b], mask[b], transition)
        assert float(log_z[b]) == pytest.approx(ref_z, rel=1e-5, abs=1e-4)
        np.testing.assert_allclose(marginals[b], ref_m, atol=2e-5)
    assert np.all(marginals.numpy()[~mask] == 0.0)


def test_marginals_are_the_gradient_of_log_partition():
    """p(z_i = 1) = d log Z / d e_i, and d log Z / d W = expected transition counts."""
    unary, mask, transition = _problem(3)
    u, w = tf.Variable(unary), tf.Variable(transition)
    with tf.GradientTape() as tape:
        log_z, marginals = crf_marginals(u, mask, w)
        total = tf.reduce_sum(log_z)
    du, dw = tape.gradient(total, [u, w])
    np.testing.assert_allclose(du, marginals, atol=1e-5)
    expected_counts = sum(_brute_force(unary[b], mask[b], transition)[2] for b in range(4))
    np.testing.assert_allclose(dw, expected_counts, atol=1e-4)


def test_zero_transitions_give_independent_sigmoid_marginals():
    unary, mask, _ = _problem(4)
    _, marginals = crf_marginals(unary, mask, np.zeros([2, 2], np.float32))
    expected = np.where(mask, 1.0 / (1.0 + np.exp(-unary)), 0.0)
    np.testing.assert_allclose(marginals, expected, atol=1e-6)


def test_large_scores_stay_finite():
    unary, mask, transition = _problem(5, scale=40.0)
    log_z, marginals = crf_marginals(unary, mask, transition)
    assert np.all(np.isfinite(log_z)) and np.all(np.isfinite(marginals))
    assert np.all((marginals.numpy() >= 0) & (marginals.numpy() <= 1 + 1e-5))


def _memory_state(mask, memory):
    return {"memory": tf.constant(memory), "mask": tf.constant(mask), "seed": tf.constant(1),
            "variant": {}}


def _step(variant, scores, mask, memory, training=False):
    return variant.step(tf.constant(scores), _memory_state(mask, memory),
                        {"time": tf.constant(0), "variant": {}}, training=training)


def _set_transition(variant, transition):
    variant.transition.assign(transition)
    return variant


def test_step_context_and_probabilities():
    unary, mask, transition = _problem(6)
    memory = np.random.default_rng(6).normal(size=[4, 8, D]).astype(np.float32)
    _, ref = crf_marginals(unary, mask, transition)
    ref = ref.numpy()
    normalised = ref / ref.sum(-1, keepdims=True)

    variant = _set_transition(StructuredAttention(D), transition)
    context, probs, aux, _ = _step(variant, unary, mask, memory)
    assert aux == {}
    np.testing.assert_allclose(probs, normalised, atol=1e-6)
    np.testing.assert_allclose(probs.numpy().sum(-1), 1.0, atol=1e-5)
    assert np.all(probs.numpy()[~mask] == 0.0)
    np.testing.assert_allclose(context, 2.0 * np.einsum("bn,bnd->bd", normalised, memory),
                               atol=1e-5)

    raw = _set_transition(StructuredAttention(D, normalize=False), transition)
    context, probs, _, _ = _step(raw, unary, mask, memory)
    np.testing.assert_allclose(probs, normalised, atol=1e-6)  # returned probs still sum to 1
    np.testing.assert_allclose(context, np.einsum("bn,bnd->bd", ref, memory), atol=1e-5)


def test_padding_changes_nothing():
    rng = np.random.default_rng(7)
    scores = rng.normal(size=[3, 5]).astype(np.float32)
    memory = rng.normal(size=[3, 5, D]).astype(np.float32)
    mask = np.ones([3, 5], bool)
    mask[0, 3:] = False
    transition = rng.normal(size=[2, 2]).astype(np.float32)
    variant = _set_transition(StructuredAttention(D), transition)
    context, probs, _, _ = _step(variant, scores, mask, memory)

    pad = 4  # extra padded positions with garbage scores and states
    scores_p = np.concatenate([scores, rng.normal(scale=30, size=[3, pad])], 1).astype(np.float32)
    memory_p = np.concatenate([memory, rng.normal(size=[3, pad, D])], 1).astype(np.float32)
    mask_p = np.concatenate([mask, np.zeros([3, pad], bool)], 1)
    context_p, probs_p, _, _ = _step(variant, scores_p, mask_p, memory_p)
    np.testing.assert_allclose(context_p, context, atol=1e-6)
    np.testing.assert_allclose(probs_p[:, :5], probs, atol=1e-7)
    assert np.all(probs_p.numpy()[~mask_p] == 0.0)


def test_gradients_reach_scores_and_transition():
    unary, mask, transition = _problem(8)
    memory = np.random.default_rng(8).normal(size=[4, 8, D]).astype(np.float32)
    variant = _set_transition(StructuredAttention(D), transition)
    s = tf.Variable(unary)
    w = tf.constant(np.random.default_rng(9).normal(size=[D]).astype(np.float32))
    with tf.GradientTape() as tape:
        context, _, _, _ = variant.step(s, _memory_state(mask, memory),
                                        {"time": tf.constant(0), "variant": {}}, training=True)
        objective = tf.reduce_sum(context * w)
    g_s, g_w = tape.gradient(objective, [s, variant.transition])
    g_s, g_w = g_s.numpy(), g_w.numpy()
    assert np.all(np.isfinite(g_s)) and np.all(np.isfinite(g_w))
    assert np.abs(g_s[mask]).max() > 1e-4
    assert np.all(g_s[~mask] == 0.0)  # padded scores are not part of the chain
    assert np.abs(g_w).max() > 1e-4


def _brute_force_second_order(unary, mask, transition):
    """d/dW of sum_i p_i^2 by enumeration: d p_i / d W_ab = Cov(z_i, N_ab), with N_ab the
    number of (a, b) transitions of a labeling, so the gradient is
    2 sum_i p_i (E[z_i N_ab] - p_i E[N_ab]) (float64, all 2^n labelings)."""
    real = np.where(mask)[0]
    n = len(real)
    labelings = np.array(list(itertools.product([0, 1], repeat=n)), np.int64).reshape(-1, n)
    scores = labelings @ unary[real].astype(np.float64)
    counts = np.zeros([len(labelings), 2, 2])
    for i in range(n - 1):
        np.add.at(counts, (np.arange(len(labelings)), labelings[:, i], labelings[:, i + 1]), 1)
    scores = scores + (counts * transition.astype(np.float64)).sum((1, 2))
    p = np.exp(scores - scores.max())
    p /= p.sum()
    marginal = p @ labelings  # [n]
    joint = np.einsum("l,li,lab->iab", p, labelings, counts)  # E[z_i N_ab]
    expected_counts = np.einsum("l,lab->ab", p, counts)
    cov = joint - marginal[:, None, None] * expected_counts
    return 2.0 * np.einsum("i,iab->ab", marginal, cov)


def test_second_order_gradients_through_the_scan():
    """The step runs inside an outer tape during training; nested differentiation through
    the scan equals enumeration: the inner gradient d log Z / d u is the brute-force
    marginals, and the outer gradient of sum_i p_i^2 with respect to the transition scores
    is 2 sum_i p_i Cov(z_i, N_ab), summed over the batch."""
    unary, mask, transition = _problem(10)
    u, w = tf.Variable(unary), tf.Variable(transition)
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            log_z, _ = crf_marginals(u, mask, w)
            total = tf.reduce_sum(log_z)
        du = inner.gradient(total, u)
        second = tf.reduce_sum(tf.square(du))
    g = outer.gradient(second, w).numpy()
    expected = np.zeros([2, 2])
    for b in range(len(unary)):
        _, ref_m, _ = _brute_force(unary[b], mask[b], transition)
        np.testing.assert_allclose(du.numpy()[b], ref_m, atol=2e-5)
        expected += _brute_force_second_order(unary[b], mask[b], transition)
    assert np.abs(expected).max() > 1e-2
    np.testing.assert_allclose(g, expected, rtol=1e-3, atol=1e-4)


def test_variable_and_config():
    variant = StructuredAttention(D, normalize=False, scale=3.0, name="structured")
    assert [v.name for v in variant.trainable_variables] == ["transition"]
    config = variant.get_config()
    assert config["normalize"] is False and config["scale"] == 3.0
    clone = StructuredAttention.from_config(config)
    assert clone.normalize is False and clone.scale == 3.0 and clone.memory_dim == D
