"""Masking, stateless randomness and dropout shared by every layer.

All randomness in acvi_tf is *stateless*: a random op gets a seed derived from
(run seed, global step, decoder time step, call site). A resumed run therefore
draws exactly the noise an uninterrupted run would have drawn, and no random
state has to be checkpointed.
"""

import tensorflow as tf

NEG_INF = -1e9  # finite, so that softmax and its gradient stay NaN-free on padding
# The stateless random ops name their algorithm instead of TensorFlow's "auto_select":
# on CPU both draw the same numbers (Philox), with and without XLA, but under XLA
# auto_select compiles to a generator 25-100x slower than the one "philox" compiles to
# (`python -m benchmarks.rng_xla`; results/bench_profile.md).
RNG_ALG = "philox"


def _rng_alg():
    """:data:`RNG_ALG` when building a graph (tf.function, XLA); TensorFlow's default when
    executing eagerly, where it draws the same numbers and a named algorithm costs about
    1 ms of host work per op (a 10x slower ``stateless_fold_in``, measured)."""
    return "auto_select" if tf.executing_eagerly() else RNG_ALG


def masked_logits(scores, mask):
    """Sets padded positions to a large negative logit (before the softmax of Eq. 2)."""
    return tf.where(mask, scores, tf.cast(NEG_INF, scores.dtype))


def masked_softmax(scores, mask):
    """Eq. (2) with padding: a_t = softmax(e_t) over the real source positions only."""
    return tf.nn.softmax(masked_logits(scores, mask), axis=-1)


def fold_seed(seed, *salts):
    """Derives a new stateless seed ([2] int32) from ``seed`` and integer salts."""
    seed = tf.cast(tf.convert_to_tensor(seed), tf.int32)
    if seed.shape.rank == 0:
        # Scalar seeds keep per-sequence state free of rank-1 tensors, so that beam
        # search's tiling rule (rank >= 1 means batch-major) never touches them.
        seed = tf.stack([seed, tf.constant(0x5EED, tf.int32)])
    for salt in salts:
        seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(salt, tf.int32),
                                                        alg=_rng_alg())
    return tf.cast(seed, tf.int32)


def stateless_normal(shape, seed, dtype=tf.float32):
    """``tf.random.stateless_normal`` with :func:`_rng_alg`'s algorithm."""
    return tf.random.stateless_normal(shape, seed=seed, dtype=dtype, alg=_rng_alg())


def stateless_uniform(shape, seed, minval=0.0, maxval=1.0, dtype=tf.float32):
    """``tf.random.stateless_uniform`` (floats in [minval, maxval)) with the algorithm
    :func:`_rng_alg` picks."""
    return tf.random.stateless_uniform(shape, seed=seed, minval=minval, maxval=maxval,
                                       dtype=dtype, alg=_rng_alg())


def dropout(x, rate, seed, training):
    """Stateless inverted dropout; identity when not training or rate == 0."""
    if not training or not rate:
        return x
    return tf.nn.experimental.stateless_dropout(x, rate=rate, seed=seed, rng_alg=_rng_alg())


def sequence_mask(ids, pad_id=0):
    """Non-padding positions of an id tensor."""
    return tf.not_equal(ids, pad_id)


def gaussian_kl(mean, log_var, prior_mean=None, prior_log_var=None):
    """KL(N(mean, diag e^log_var) || N(prior_mean, diag e^prior_log_var)), summed over the
    last axis, in closed form:

        0.5 * sum_d (log var_p - log var_q + (var_q + (mean_q - mean_p)^2) / var_p - 1).

    ``prior_mean`` None is 0 and ``prior_log_var`` None is 0 (unit variance), so the
    default prior is N(0, I). Every Gaussian KL of the project: ACVI's per-component
    bound (Eq. 22), Bahuleyan et al.'s attention and sentence latents, VRNMT's Eq. (26).
    """
    diff = mean if prior_mean is None else mean - prior_mean
    if prior_log_var is None:
        return 0.5 * tf.reduce_sum(tf.exp(log_var) + tf.square(diff) - 1.0 - log_var, axis=-1)
    return 0.5 * tf.reduce_sum(prior_log_var - log_var
                               + (tf.exp(log_var) + tf.square(diff)) * tf.exp(-prior_log_var)
                               - 1.0, axis=-1)



def masked_mean(memory, mask):
    """h_bar = (1 / |x|) sum_{i real} h_i, [B, D]; padded rows of memory do not count."""
    weights = tf.cast(mask, memory.dtype)
    count = tf.maximum(tf.reduce_sum(weights, axis=1, keepdims=True), 1.0)
    return tf.einsum("bn,bnd->bd", weights, memory) / count
