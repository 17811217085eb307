"""Structured (segmentation) attention: Kim, Denton, Hoang and Rush, "Structured
Attention Networks", ICLR 2017, Section 3.2 -- the first-order Markov attention
of Eq. (20) in the ACVI paper, its structured-attention baseline.

Each source position i carries a binary latent z_i (1: "selected"), and
z = (z_1, ..., z_N) is a linear-chain CRF over the source:

    p(z | x, s_t) = exp( sum_i z_i e_t^i + sum_{i=1}^{N-1} W[z_i, z_{i+1}] ) / Z_t

with unary potential e_t^i (the task's attention score, Eqs. 1/8/10) for
z_i = 1, potential 0 for z_i = 0, and a learned 2 x 2 transition matrix W
(trainable, zero-initialised, so training starts from independent Bernoulli
"sigmoid attention", p(z_i = 1) = sigmoid(e_t^i)). By default there are no start/end
potentials; ``boundary="mean"`` adds the authors' (their ``CRF.lua``: the column means
of W for z_1, the row means for z_N). ``unary_bias`` and ``transition_scale`` are
diagnostics of issue 34 (results/structured_attention.md), off by default.

log Z_t comes from the log-space forward algorithm and the node marginals
p(z_i = 1) from forward-backward (exactly d log Z / d e_t^i, which the tests
check against autodiff and against brute-force enumeration). Both recursions
are sequential over the N source positions, vectorised over the batch.

Padding is *excluded* from the chain, not labelled z = 0: the recursions skip
padded positions (carry their messages through unchanged), so log Z and the
marginals of a padded source equal those of the unpadded one, and padded
positions get marginal exactly 0.

The context (Kim et al. c = sum_i p(z_i = 1 | x, q) x_i; their NMT code
``models-nmt.lua`` normalises the marginals and scales them by lambda = 2):

    a_t^i = p(z_i = 1) / sum_j p(z_j = 1)      (the returned attention, sums to 1;
                                                computed as a softmax of log p(z_i = 1),
                                                which float32 cannot underflow)
    c_t   = scale * sum_i a_t^i h_i             (normalize=True, the default, scale=2)
    c_t   = sum_i p(z_i = 1) h_i                (normalize=False: the raw marginals)

The authors also put an L2 penalty (0.005) on W and initialise it U(-0.1, 0.1); here
it has no penalty and starts at 0.
"""

import keras
import tensorflow as tf

from acvi_tf.attention.base import ContextVariant, register_attention, weighted_sum
from acvi_tf.utils.ops import masked_softmax


def _chain_forward(potentials, mask, transition):
    """Masked log-space forward recursion, one scan over positions for every row.

    ``potentials`` [R, N, 2] node log-potentials, ``mask`` [R, N] bool,
    ``transition`` [R, 2, 2] (from state, to state). Returns alpha [R, N, 2],
    alpha_i(z) = log of the summed scores of all labelings of the real
    positions <= i ending with z_i = z. A padded position carries the previous
    alpha unchanged (it is not part of the chain), so alpha at the last
    position is the alpha of the last real position.
    """
    rows = tf.shape(potentials)[0]

    def body(carry, elems):
        alpha, started = carry
        node, real = elems
        # log sum_{z'} exp(alpha(z') + W[z', z]): the message into this position.
        message = tf.reduce_logsumexp(alpha[:, :, None] + transition, axis=1)
        # The first real position has no predecessor (no start potentials).
        new = tf.where(started[:, None], message, tf.zeros_like(message)) + node
        alpha = tf.where(real[:, None], new, alpha)
        return alpha, tf.logical_or(started, real)

    init = (tf.zeros([rows, 2], potentials.dtype), tf.zeros([rows], tf.bool))
    alphas, _ = tf.scan(body, (tf.transpose(potentials, [1, 0, 2]), tf.transpose(mask)),
                        initializer=init)
    return tf.transpose(alphas, [1, 0, 2])


def crf_log_marginals(unary, mask, transition, start=None, end=None):
    """log Z [B] and the log node marginals log p(z_i = 1) [B, N] of the binary chain CRF
    (0 at padded positions: use ``mask``).

    ``unary`` [B, N] is the potential of z_i = 1 (z_i = 0 has 0), ``mask``
    [B, N] bool marks the real positions, ``transition`` [2, 2] is W[z_i, z_{i+1}].
    ``start`` / ``end`` ([2] each, optional) are potentials of the first / last real
    position's label (Kim et al.'s boundary potentials, see ``boundary_potentials``).

    Forward-backward in log space: the backward messages are the forward
    recursion run on the reversed sequence with W transposed (beta~_i(z) =
    node_i(z) + beta_i(z)), so both run as ONE scan over N positions on a
    batch of 2B rows. Then log p(z_i = z) = alpha_i(z) + beta~_i(z) - node_i(z) - log Z.
    Padded positions get marginal exactly 0 (and no gradient); a row with no
    real position gets all-zero marginals.
    """
    unary = tf.convert_to_tensor(unary)
    mask = tf.convert_to_tensor(mask, tf.bool)
    transition = tf.cast(transition, unary.dtype)
    batch = tf.shape(unary)[0]
    # Padded unaries are replaced by 0 so that no inf/NaN score can reach the graph.
    unary = tf.where(mask, unary, tf.zeros_like(unary))
    node = tf.stack([tf.zeros_like(unary), unary], axis=-1)  # [B, N, 2]
    if start is not None or end is not None:
        real = tf.cast(mask, tf.int32)
        if start is not None:  # the first real position: the one where the count reaches 1
            first = mask & tf.equal(tf.cumsum(real, axis=1), 1)
            node += tf.cast(first, unary.dtype)[..., None] * tf.cast(start, unary.dtype)
        if end is not None:
            last = mask & tf.equal(tf.cumsum(real, axis=1, reverse=True), 1)
            node += tf.cast(last, unary.dtype)[..., None] * tf.cast(end, unary.dtype)
    both = _chain_forward(
        tf.concat([node, tf.reverse(node, [1])], axis=0),
        tf.concat([mask, tf.reverse(mask, [1])], axis=0),
        tf.concat([tf.tile(transition[None], [batch, 1, 1]),
                   tf.tile(tf.transpose(transition)[None], [batch, 1, 1])], axis=0))
    alpha, beta = both[:batch], tf.reverse(both[batch:], [1])
    log_z = tf.reduce_logsumexp(alpha[:, -1], axis=-1)
    log_marginal = alpha[..., 1] + beta[..., 1] - node[..., 1] - log_z[:, None]
    # Double where: nothing downstream sees the (meaningless) values at padded
    # positions, so their zero gradient stays zero rather than 0 * inf.
    return log_z, tf.where(mask, log_marginal, tf.zeros_like(log_marginal))


def crf_marginals(unary, mask, transition, start=None, end=None):
    """log Z [B] and node marginals p(z_i = 1) [B, N] of the binary chain CRF (the
    arguments of :func:`crf_log_marginals`); padded positions get exactly 0.

    In float32 p(z_i = 1) underflows to 0 once log p(z_i = 1) < ~ -87 (-103 with
    denormals): normalise the marginals from :func:`crf_log_marginals`, never these.
    """
    log_z, log_marginal = crf_log_marginals(unary, mask, transition, start, end)
    mask = tf.convert_to_tensor(mask, tf.bool)
    return log_z, tf.where(mask, tf.exp(log_marginal), tf.zeros_like(log_marginal))


def normalized_marginals(log_marginal, mask):
    """p(z_i = 1) / sum_j p(z_j = 1) over the real positions, computed as a softmax of the
    log marginals: exact when every p(z_j = 1) underflows in float32 (all scores far
    below 0), where exp-then-divide gives 0 / 0 -> an all-zero attention, a zero
    context and no gradient to leave it (the bug of the archived 2,500-step run's code,
    issue 34). Padded positions get 0; a row with no real position gets all zeros."""
    mask = tf.convert_to_tensor(mask, tf.bool)
    probs = masked_softmax(log_marginal, mask)
    return tf.where(mask, probs, tf.zeros_like(probs))


def boundary_potentials(transition):
    """Kim et al.'s start and end potentials (their ``CRF.lua``): the chain starts from,
    and ends in, a dummy state, with the potential of z_1 = z the mean of W's column z,
    mean_{z'} W[z', z], and of z_N = z the mean of W's row z, mean_{z'} W[z, z']."""
    return tf.reduce_mean(transition, axis=0), tf.reduce_mean(transition, axis=1)


@register_attention("structured")
class StructuredAttention(ContextVariant):
    """Segmentation attention (Kim et al. 2017; ACVI paper Eq. 20), a binary linear-chain CRF.

    Args:
      memory_dim: dim(h_i).
      normalize: normalise the marginals to sum to 1 before weighting h_i (the
        authors' NMT code); False uses the raw marginals sum_i p(z_i = 1) h_i.
      scale: lambda, the factor on the normalised context (2 in the authors' code;
        ignored with normalize=False).
      unary_bias: None (the default): the unary potential of z_i = 1 is the score e_t^i.
        A number: a learned scalar b, starting at this value, is added to it,
        e_t^i + b. A negative b starts the chain where p(z_i = 1) ~ exp(e_t^i + b), so the
        normalised marginals start as softmax(e_t) (b -> -inf with W = 0 is exactly soft
        attention) rather than as sigmoid(e_t) / sum sigmoid(e_t), which stays spread
        unless every unaligned score is pushed far below 0.
      boundary: "none" (the default): no start/end potentials; "mean": Kim et al.'s
        start/end potentials, the column/row means of W (:func:`boundary_potentials`).
      transition_scale: W = transition_scale * V with V the trained variable (1: W is
        trained directly). Adam moves each variable by about the learning rate a step
        whatever its gradient's size, so at lr 1e-3 W moves ~0.04 in 1,000 steps and the
        chain stays independent; a scale s lets W move s times faster (Kim et al. train W
        by SGD at learning rate 1, where its steps follow its gradient's size).

    The attention probabilities returned are always the normalised marginals
    (they sum to 1 over the real positions, 0 on padding), so the pointer head
    and coverage get a distribution.
    """

    BOUNDARIES = ("none", "mean")

    def __init__(self, memory_dim, normalize=True, scale=2.0, unary_bias=None, boundary="none",
                 transition_scale=1.0, **kwargs):
        super().__init__(memory_dim, **kwargs)
        if boundary not in self.BOUNDARIES:
            raise ValueError(f"structured attention: boundary={boundary!r}, choose one of "
                             f"{', '.join(self.BOUNDARIES)}")
        if unary_bias is not None and (isinstance(unary_bias, bool)
                                       or not isinstance(unary_bias, (int, float))):
            raise ValueError(f"structured attention: unary_bias={unary_bias!r} must be a "
                             "number or None")
        if not float(transition_scale) > 0:
            raise ValueError(f"structured attention: transition_scale={transition_scale!r} "
                             "must be > 0")
        self.transition_scale = float(transition_scale)
        self.normalize = bool(normalize)
        self.scale = float(scale)
        self.unary_bias = None if unary_bias is None else float(unary_bias)
        self.boundary = boundary
        # W[z_i, z_{i+1}]; zero start = independent Bernoulli (sigmoid) attention.
        self.transition = self.add_weight(name="transition", shape=(2, 2),
                                          initializer="zeros")
        if self.unary_bias is not None:
            self.bias = self.add_weight(
                name="unary_bias", shape=(),
                initializer=keras.initializers.Constant(self.unary_bias))

    def step(self, scores, memory_state, state, training=False):
        memory, mask = memory_state["memory"], memory_state["mask"]
        if self.unary_bias is not None:
            scores = scores + tf.cast(self.bias, scores.dtype)
        transition = self.transition_matrix()
        start = end = None
        if self.boundary == "mean":
            start, end = boundary_potentials(transition)
        _, log_marginal = crf_log_marginals(scores, mask, transition, start, end)
        probs = normalized_marginals(log_marginal, mask)
        if self.normalize:
            context = self.scale * weighted_sum(probs, memory, memory_state, "memory")
        else:
            marginals = tf.where(mask, tf.exp(log_marginal), tf.zeros_like(log_marginal))
            context = weighted_sum(marginals, memory, memory_state, "memory")
        return context, probs, {}, state.get("variant", {})

    def transition_matrix(self):
        """W[z_i, z_{i+1}] = transition_scale * the trained variable."""
        if self.transition_scale == 1.0:
            return self.transition
        return self.transition_scale * self.transition

    def get_config(self):
        return {**super().get_config(), "normalize": self.normalize, "scale": self.scale,
                "unary_bias": self.unary_bias, "boundary": self.boundary,
                "transition_scale": self.transition_scale}
