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


# --- Issue 34: the marginals at realistic source lengths, Kim et al.'s boundary
# potentials, the unary bias. -------------------------------------------------------------

def _log_partition_np(unary, transition, start=None, end=None, clamp=None):
    """float64 log Z of one unpadded chain by transfer-matrix products (log space),
    written apart from ``crf_marginals``: log Z = log 1^T D_1 M D_2 M ... M D_n 1 with
    D_i = diag(exp(node_i)), M = exp(W). ``clamp=(i, z)`` fixes z_i = z (the other label's
    node potential -inf), so p(z_i = z) = exp(log Z_clamped - log Z): no backward pass."""
    unary = np.asarray(unary, np.float64)
    w = np.asarray(transition, np.float64)
    node = np.stack([np.zeros_like(unary), unary], -1)
    if start is not None:
        node[0] += start
    if end is not None:
        node[-1] += end
    if clamp is not None:
        node[clamp[0], 1 - clamp[1]] = -np.inf
    log_v = node[0]
    for i in range(1, len(unary)):
        log_v = np.logaddexp.reduce(log_v[:, None] + w, axis=0) + node[i]
    return np.logaddexp.reduce(log_v)


def _marginals_np(unary, transition, start=None, end=None):
    log_z = _log_partition_np(unary, transition, start, end)
    return log_z, np.array([np.exp(_log_partition_np(unary, transition, start, end, (i, 1))
                                   - log_z) for i in range(len(unary))])


def _padded_batch(seed, lengths, width, unary_scale=3.0):
    """A batch of chains of the given lengths padded to ``width``: rows after the first
    two are padded at interior positions too; padded scores are garbage (+-50)."""
    rng = np.random.default_rng(seed)
    unary = rng.normal(scale=unary_scale, size=[len(lengths), width])
    mask = np.zeros([len(lengths), width], bool)
    for b, n in enumerate(lengths):
        if b < 2:
            mask[b, :n] = True
        else:  # real positions scattered over the row
            mask[b, np.sort(rng.choice(width, n, replace=False))] = True
    unary[~mask] = rng.normal(scale=50.0, size=(~mask).sum())
    return unary, mask


def test_transfer_matrix_reference_matches_enumeration():
    """The float64 reference used at lengths 30-50 against brute force at length 14."""
    rng = np.random.default_rng(11)
    unary, w = 2.0 * rng.normal(size=14), 2.0 * rng.normal(size=[2, 2])
    ref_z, ref_m, _ = _brute_force(unary, np.ones(14, bool), w)
    log_z, marginals = _marginals_np(unary, w)
    assert log_z == pytest.approx(ref_z, abs=1e-10)
    np.testing.assert_allclose(marginals, ref_m, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_marginals_match_brute_force_at_length_16(seed):
    """All 2^16 labelings of a 16-position chain, padded rows in the batch."""
    unary, mask = _padded_batch(seed, [16, 12, 16, 9], 20)
    transition = 2.0 * np.random.default_rng(seed + 100).normal(size=[2, 2])
    log_z, marginals = crf_marginals(unary.astype(np.float32), mask,
                                     transition.astype(np.float32))
    for b in range(len(unary)):
        ref_z, ref_m, _ = _brute_force(unary[b], mask[b], transition)
        assert float(log_z[b]) == pytest.approx(ref_z, rel=1e-5, abs=1e-4)
        np.testing.assert_allclose(marginals[b], ref_m, atol=2e-5)


# float32: log p(z_i = 1) = alpha + beta - node - log Z cancels terms of size |log Z|
# (100-250 here), so its error is ~ eps_32 * |log Z| ~ 1e-4 (measured max 1.0e-4 over 5
# seeds); float64 shows that the recursion itself is exact (measured max 3e-13).
@pytest.mark.parametrize("dtype, atol", [(np.float64, 1e-11), (np.float32, 3e-4)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_marginals_at_source_lengths_30_to_50(seed, dtype, atol):
    """Lengths 30-50 (Multi30k's long sources), padded and interior-masked rows, against
    the float64 transfer-matrix reference; scores of a trained model's scale (std 3)
    and strong transitions (std 2)."""
    lengths = [50, 30, 41, 33]
    unary, mask = _padded_batch(seed, lengths, 50)
    transition = 2.0 * np.random.default_rng(seed + 200).normal(size=[2, 2])
    log_z, marginals = crf_marginals(unary.astype(dtype), mask, transition.astype(dtype))
    for b in range(len(unary)):
        ref_z, ref_m = _marginals_np(unary[b][mask[b]], transition)
        assert float(log_z[b]) == pytest.approx(ref_z, rel=2e-6 if dtype == np.float32 else 1e-13)
        np.testing.assert_allclose(marginals.numpy()[b][mask[b]], ref_m, atol=atol)
        assert np.all(marginals.numpy()[b][~mask[b]] == 0.0)


def test_marginals_are_the_gradient_of_log_partition_at_length_40():
    """d log Z / d e_i (autodiff through the scan) = p(z_i = 1) of the reference, float64."""
    unary, mask = _padded_batch(3, [40, 35, 38], 40)
    transition = 1.5 * np.random.default_rng(3).normal(size=[2, 2])
    u = tf.Variable(unary)
    with tf.GradientTape() as tape:
        log_z, _ = crf_marginals(u, mask, transition)
        total = tf.reduce_sum(log_z)
    grad = tape.gradient(total, u).numpy()
    for b in range(len(unary)):
        _, ref_m = _marginals_np(unary[b][mask[b]], transition)
        np.testing.assert_allclose(grad[b][mask[b]], ref_m, atol=1e-11)
        assert np.all(grad[b][~mask[b]] == 0.0)


def _brute_force_kim(unary, transition):
    """Kim et al.'s chain (``CRF.lua``) by enumeration: a dummy state 0 before z_1 and
    after z_n with edge potentials (mean of W's column z_1) and (mean of W's row z_n)."""
    n = len(unary)
    labelings = np.array(list(itertools.product([0, 1], repeat=n)), np.int64)
    scores = labelings @ unary
    for i in range(n - 1):
        scores = scores + transition[labelings[:, i], labelings[:, i + 1]]
    scores = scores + transition.mean(0)[labelings[:, 0]] + transition.mean(1)[labelings[:, -1]]
    log_z = np.logaddexp.reduce(scores)
    return log_z, np.exp(scores - log_z) @ labelings


@pytest.mark.parametrize("seed", [0, 1])
def test_boundary_potentials_match_kims_chain(seed):
    from acvi_tf.attention.structured import boundary_potentials
    unary, mask = _padded_batch(seed, [12, 7, 10], 14)
    transition = 2.0 * np.random.default_rng(seed + 300).normal(size=[2, 2])
    start, end = boundary_potentials(tf.constant(transition))
    log_z, marginals = crf_marginals(unary, mask, transition, start, end)
    for b in range(len(unary)):
        ref_z, ref_m = _brute_force_kim(unary[b][mask[b]], transition)
        assert float(log_z[b]) == pytest.approx(ref_z, abs=1e-10)
        np.testing.assert_allclose(marginals.numpy()[b][mask[b]], ref_m, atol=1e-10)
    # and at length 45 against the transfer-matrix reference
    unary, mask = _padded_batch(seed, [45, 31], 45)
    start, end = boundary_potentials(tf.constant(transition))
    _, marginals = crf_marginals(unary, mask, transition, start, end)
    for b in range(2):
        _, ref_m = _marginals_np(unary[b][mask[b]], transition, transition.mean(0),
                                 transition.mean(1))
        np.testing.assert_allclose(marginals.numpy()[b][mask[b]], ref_m, atol=1e-11)


def test_boundary_option_in_step_and_its_gradient_reaches_the_transition():
    unary, mask, transition = _problem(12)
    memory = np.random.default_rng(12).normal(size=[4, 8, D]).astype(np.float32)
    variant = _set_transition(StructuredAttention(D, boundary="mean"), transition)
    with tf.GradientTape() as tape:
        _, probs, _, _ = _step(variant, unary, mask, memory)
        objective = tf.reduce_sum(probs[:, 0])
    start, end = transition.mean(0), transition.mean(1)
    _, ref = crf_marginals(unary, mask, transition, start, end)
    ref = ref.numpy() / ref.numpy().sum(-1, keepdims=True)
    np.testing.assert_allclose(probs, ref, atol=1e-6)
    assert np.abs(tape.gradient(objective, variant.transition).numpy()).max() > 1e-4


def test_unary_bias_is_added_to_the_scores_and_learned():
    unary, mask, transition = _problem(13)
    memory = np.random.default_rng(13).normal(size=[4, 8, D]).astype(np.float32)
    variant = _set_transition(StructuredAttention(D, unary_bias=-2.5), transition)
    assert sorted(v.name for v in variant.trainable_variables) == ["transition", "unary_bias"]
    with tf.GradientTape() as tape:
        context, probs, _, _ = _step(variant, unary, mask, memory)
        objective = tf.reduce_sum(context)
    _, ref = crf_marginals(unary - 2.5, mask, transition)
    ref = ref.numpy() / ref.numpy().sum(-1, keepdims=True)
    np.testing.assert_allclose(probs, ref, atol=1e-6)
    assert abs(float(tape.gradient(objective, variant.bias))) > 1e-4


def test_a_very_negative_unary_bias_gives_soft_attention():
    """sigma(e + b) / sum_j sigma(e_j + b) -> softmax(e) as b -> -inf (W = 0): the limit
    the unary_bias option starts from."""
    rng = np.random.default_rng(14)
    scores = (3.0 * rng.normal(size=[3, 40])).astype(np.float32)
    mask = np.ones([3, 40], bool)
    mask[1, 30:] = False
    memory = rng.normal(size=[3, 40, D]).astype(np.float32)
    _, probs, _, _ = _step(StructuredAttention(D, unary_bias=-30.0), scores, mask, memory)
    soft = np.where(mask, np.exp(scores - scores.max(-1, keepdims=True)), 0.0)
    np.testing.assert_allclose(probs, soft / soft.sum(-1, keepdims=True), atol=1e-5)
    _, spread, _, _ = _step(StructuredAttention(D), scores, mask, memory)  # b = 0
    entropy = lambda p: -np.sum(np.where(p > 0, p * np.log(np.maximum(p, 1e-30)), 0), -1)
    assert np.all(entropy(spread.numpy()) > entropy(probs.numpy()) + 0.5)


def test_transition_scale_multiplies_the_trained_variable():
    unary, mask, transition = _problem(15)
    memory = np.random.default_rng(15).normal(size=[4, 8, D]).astype(np.float32)
    variant = _set_transition(StructuredAttention(D, transition_scale=10.0), transition / 10.0)
    with tf.GradientTape() as tape:
        _, probs, _, _ = _step(variant, unary, mask, memory)
        objective = tf.reduce_sum(probs[:, 0])
    _, ref = crf_marginals(unary, mask, transition)
    np.testing.assert_allclose(probs, ref.numpy() / ref.numpy().sum(-1, keepdims=True),
                               atol=1e-5)
    # d/dV = 10 d/dW
    plain = _set_transition(StructuredAttention(D), transition)
    with tf.GradientTape() as tape_w:
        _, probs_w, _, _ = _step(plain, unary, mask, memory)
        objective_w = tf.reduce_sum(probs_w[:, 0])
    np.testing.assert_allclose(tape.gradient(objective, variant.transition),
                               10.0 * tape_w.gradient(objective_w, plain.transition),
                               rtol=1e-3, atol=1e-6)


def test_new_options_config_and_bad_values():
    variant = StructuredAttention(D, unary_bias=-5, boundary="mean", transition_scale=10)
    config = variant.get_config()
    assert config["unary_bias"] == -5.0 and config["boundary"] == "mean"
    assert config["transition_scale"] == 10.0
    clone = StructuredAttention.from_config(config)
    assert clone.unary_bias == -5.0 and clone.boundary == "mean"
    assert clone.transition_scale == 10.0
    with pytest.raises(ValueError, match="transition_scale"):
        StructuredAttention(D, transition_scale=0)
    assert StructuredAttention(D).get_config()["unary_bias"] is None
    with pytest.raises(ValueError, match="boundary"):
        StructuredAttention(D, boundary="start")
    with pytest.raises(ValueError, match="unary_bias"):
        StructuredAttention(D, unary_bias="high")


def test_normalised_marginals_survive_float32_underflow():
    """Issue 34: when every score is far below 0 (a decoder state that attends nowhere),
    each p(z_i = 1) underflows to 0 in float32; the attention must still be the
    normalised marginals (a softmax of log p: here softmax(e), as log sigmoid(e) ~ e),
    summing to 1 with a gradient to the scores, not 0 / 0 -> a zero context for good."""
    rng = np.random.default_rng(16)
    scores = (-150.0 + 3.0 * rng.normal(size=[3, 12])).astype(np.float32)
    mask = np.ones([3, 12], bool)
    mask[2, 7:] = False
    memory = rng.normal(size=[3, 12, D]).astype(np.float32)
    _, raw = crf_marginals(scores, mask, np.zeros([2, 2], np.float32))
    assert np.all(raw.numpy() == 0.0)  # the underflow itself
    variant = StructuredAttention(D)
    s = tf.Variable(scores)
    with tf.GradientTape() as tape:
        context, probs, _, _ = variant.step(s, _memory_state(mask, memory),
                                            {"time": tf.constant(0), "variant": {}})
        objective = tf.reduce_sum(context * rng.normal(size=[D]).astype(np.float32))
    soft = np.where(mask, np.exp(scores - scores.max(-1, keepdims=True)), 0.0)
    np.testing.assert_allclose(probs, soft / soft.sum(-1, keepdims=True), atol=1e-5)
    np.testing.assert_allclose(context, 2.0 * np.einsum("bn,bnd->bd", probs, memory),
                               atol=1e-5)
    grad = tape.gradient(objective, s).numpy()
    assert np.all(np.isfinite(grad)) and np.abs(grad[mask]).max() > 1e-3
    assert np.all(grad[~mask] == 0.0)
