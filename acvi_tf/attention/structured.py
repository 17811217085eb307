"""Structured (segmentation) attention: Kim, Denton, Hoang and Rush, "Structured
Attention Networks", ICLR 2017, Section 3.2 -- the first-order Markov attention
of Eq. (20) in the ACVI paper, its structured-attention baseline.

Each source position i carries a binary latent z_i (1: "selected"), and
z = (z_1, ..., z_N) is a linear-chain CRF over the source:

    p(z | x, s_t) = exp( sum_i z_i e_t^i + sum_{i=1}^{N-1} W[z_i, z_{i+1}] ) / Z_t

with unary potential e_t^i (the task's attention score, Eqs. 1/8/10) for
z_i = 1, potential 0 for z_i = 0, and a learned 2 x 2 transition matrix W
(trainable, zero-initialised, so training starts from independent Bernoulli
"sigmoid attention", p(z_i = 1) = sigmoid(e_t^i)). There are no start/end
potentials (the authors' Torch code adds the mean of W's rows/columns there).

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

    a_t^i = p(z_i = 1) / sum_j p(z_j = 1)      (the returned attention, sums to 1)
    c_t   = scale * sum_i a_t^i h_i             (normalize=True, the default, scale=2)
    c_t   = sum_i p(z_i = 1) h_i                (normalize=False: the raw marginals)

The authors also put an L2 penalty (0.005) on W; the loss here has none.
"""

import tensorflow as tf

from acvi_tf.attention.base import ContextVariant, register_attention, weighted_sum


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


def crf_marginals(unary, mask, transition):
    """log Z [B] and node marginals p(z_i = 1) [B, N] of the binary chain CRF.

    ``unary`` [B, N] is the potential of z_i = 1 (z_i = 0 has 0), ``mask``
    [B, N] bool marks the real positions, ``transition`` [2, 2] is W[z_i, z_{i+1}].

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
    both = _chain_forward(
        tf.concat([node, tf.reverse(node, [1])], axis=0),
        tf.concat([mask, tf.reverse(mask, [1])], axis=0),
        tf.concat([tf.tile(transition[None], [batch, 1, 1]),
                   tf.tile(tf.transpose(transition)[None], [batch, 1, 1])], axis=0))
    alpha, beta = both[:batch], tf.reverse(both[batch:], [1])
    log_z = tf.reduce_logsumexp(alpha[:, -1], axis=-1)
    log_marginal = alpha[..., 1] + beta[..., 1] - unary - log_z[:, None]
    # Double where: exp() never sees the (meaningless) values at padded positions,
    # so their zero gradient stays zero rather than 0 * inf.
    safe = tf.where(mask, log_marginal, tf.zeros_like(log_marginal))
    marginals = tf.where(mask, tf.exp(safe), tf.zeros_like(safe))
    return log_z, marginals


@register_attention("structured")
class StructuredAttention(ContextVariant):
    """Segmentation attention (Kim et al. 2017; ACVI paper Eq. 20), a binary linear-chain CRF.

    Args:
      memory_dim: dim(h_i).
      normalize: normalise the marginals to sum to 1 before weighting h_i (the
        authors' NMT code); False uses the raw marginals sum_i p(z_i = 1) h_i.
      scale: lambda, the factor on the normalised context (2 in the authors' code;
        ignored with normalize=False).

    The attention probabilities returned are always the normalised marginals
    (they sum to 1 over the real positions, 0 on padding), so the pointer head
    and coverage get a distribution.
    """

    def __init__(self, memory_dim, normalize=True, scale=2.0, **kwargs):
        super().__init__(memory_dim, **kwargs)
        self.normalize = bool(normalize)
        self.scale = float(scale)
        # W[z_i, z_{i+1}]; zero start = independent Bernoulli (sigmoid) attention.
        self.transition = self.add_weight(name="transition", shape=(2, 2),
                                          initializer="zeros")

    def step(self, scores, memory_state, state, training=False):
        memory, mask = memory_state["memory"], memory_state["mask"]
        _, marginals = crf_marginals(scores, mask, self.transition)
        total = tf.reduce_sum(marginals, axis=-1, keepdims=True)
        # Every real position has p(z_i = 1) > 0, so total > 0 whenever a row has one.
        probs = marginals / tf.maximum(total, 1e-30)
        if self.normalize:
            context = self.scale * weighted_sum(probs, memory, memory_state, "memory")
        else:
            context = weighted_sum(marginals, memory, memory_state, "memory")
        return context, probs, {}, state.get("variant", {})

    def get_config(self):
        return {**super().get_config(), "normalize": self.normalize, "scale": self.scale}
