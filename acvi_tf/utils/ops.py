"""Masking, stateless randomness and dropout shared by every layer.

All randomness in acvi_tf is *stateless*: a random op gets a seed derived from
(run seed, global step, decoder time step, call site). A resumed run therefore
draws exactly the noise an uninterrupted run would have drawn, and no random
state has to be checkpointed.
"""

import tensorflow as tf

NEG_INF = -1e9  # finite, so that softmax and its gradient stay NaN-free on padding
# In graphs the stateless random ops name their algorithm, Philox, instead of TensorFlow's
# "auto_select": on CPU both draw the same numbers, with and without XLA, but under XLA
# auto_select compiles to a generator 25-100x slower than the one "philox" compiles to
# (`python -m benchmarks.rng_xla`; results/bench_profile.md). RNG_ALG names it (the
# kernels below are Philox's whatever it says; benchmarks.rng_xla labels with it).
RNG_ALG = "philox"
_PHILOX = 1  # tensorflow/core/framework/rng_alg.h
# The key TensorFlow's Philox seed scrambling starts from (random_ops_util.py,
# core/kernels/stateless_random_ops.cc).
_PHILOX_SCRAMBLE_KEY = 0x02461E293EC8F720


def _philox_key_counter(seed):
    """The Philox key [1] and counter [2] (uint64) that ``alg="philox"`` derives from a
    [2] seed, in 5 graph ops where TensorFlow's ``_philox_scramble_seed`` takes 40: the
    four scrambled 32-bit words are bitcast pairwise to (key, counter high word), the
    little-endian join TensorFlow writes as ``lo | hi << 32``. Each random op of a traced
    step paid those extra ops in tracing and graph building (a tiny ACVI train step:
    5,301 graph nodes with TensorFlow's Philox, 4,289 with this, 3,957 with
    auto_select)."""
    mix = tf.raw_ops.StatelessRandomUniformFullIntV2(
        shape=[2, 2], key=tf.constant([_PHILOX_SCRAMBLE_KEY], tf.uint64),
        counter=tf.cast(seed, tf.uint64), alg=_PHILOX, dtype=tf.uint32)
    words = tf.bitcast(mix, tf.uint64)  # [key, counter's high word]
    return words[:1], words * tf.constant([0, 1], tf.uint64)


def _graph_philox():
    """Whether to draw with :func:`_philox_key_counter` and the Philox kernels (building
    a graph: tf.function, XLA) rather than TensorFlow's calls with their default
    algorithm (executing eagerly, where both draw the same numbers and each extra op is
    host work: a named algorithm made ``stateless_fold_in`` 10x slower, measured)."""
    return not tf.executing_eagerly()


def masked_logits(scores, mask):
    """Sets padded positions to a large negative logit (before the softmax of Eq. 2)."""
    return tf.where(mask, scores, tf.cast(NEG_INF, scores.dtype))


def masked_softmax(scores, mask):
    """Eq. (2) with padding: a_t = softmax(e_t) over the real source positions only."""
    return tf.nn.softmax(masked_logits(scores, mask), axis=-1)


def fold_seed(seed, *salts):
    """Derives a new stateless seed ([2] int32) from ``seed`` and integer salts
    (``tf.random.experimental.stateless_fold_in``, salt by salt)."""
    seed = tf.cast(tf.convert_to_tensor(seed), tf.int32)
    if seed.shape.rank == 0:
        # Scalar seeds keep per-sequence state free of rank-1 tensors, so that beam
        # search's tiling rule (rank >= 1 means batch-major) never touches them.
        seed = tf.stack([seed, tf.constant(0x5EED, tf.int32)])
    for salt in salts:
        salt = tf.cast(salt, tf.int32)
        if _graph_philox():
            key, counter = _philox_key_counter(seed)
            seed = tf.stack([tf.raw_ops.StatelessRandomUniformFullIntV2(
                shape=[], key=key, counter=counter, alg=_PHILOX, dtype=tf.int32), salt])
        else:
            seed = tf.random.experimental.stateless_fold_in(seed, salt)
    return tf.cast(seed, tf.int32)


def part_seed(seed, index, salt):
    """The seed of part ``index`` of several that run side by side on one step's seed
    (a replica's, a batch shard's): part 0 keeps ``seed`` (one part is the one-part run,
    draw for draw), part k > 0 draws from ``seed`` folded with ``salt`` (which kind of
    part) and k. ``index`` is a Python int or an int tensor (a replica id); a scalar
    ``seed`` gives a scalar.

    fold_seed's result is [f(seed so far), last salt]: a scalar seed keeps only the first
    element, which ignores the last salt, so a scalar part seed folds once more after k
    (else replica 1 and batch shard 1 of a step would draw alike)."""
    if isinstance(index, int) and index == 0:
        return seed
    seed = tf.convert_to_tensor(seed)
    scalar = seed.shape.rank == 0
    folded = fold_seed(seed, salt, index, 0)[0] if scalar else fold_seed(seed, salt, index)
    if isinstance(index, int):
        return folded
    return tf.where(tf.equal(tf.cast(index, tf.int32), 0), tf.cast(seed, tf.int32), folded)


def stateless_normal(shape, seed, dtype=tf.float32):
    """``tf.random.stateless_normal(shape, seed, dtype=dtype)`` (mean 0, stddev 1): the
    same numbers, with the Philox kernel named when building a graph."""
    if not _graph_philox():
        return tf.random.stateless_normal(shape, seed=seed, dtype=dtype)
    key, counter = _philox_key_counter(seed)
    return tf.raw_ops.StatelessRandomNormalV2(shape=shape, key=key, counter=counter,
                                              alg=_PHILOX, dtype=dtype)


def stateless_uniform(shape, seed, minval=0.0, maxval=1.0, dtype=tf.float32):
    """``tf.random.stateless_uniform`` (floats in [minval, maxval)): the same numbers,
    with the Philox kernel named when building a graph."""
    if not _graph_philox():
        return tf.random.stateless_uniform(shape, seed=seed, minval=minval, maxval=maxval,
                                           dtype=dtype)
    key, counter = _philox_key_counter(seed)
    unit = tf.raw_ops.StatelessRandomUniformV2(shape=shape, key=key, counter=counter,
                                               alg=_PHILOX, dtype=dtype)
    if isinstance(minval, float) and isinstance(maxval, float) and (minval, maxval) == (0.0, 1.0):
        return unit  # u * 1 + 0 == u exactly
    minval = tf.convert_to_tensor(minval, dtype=dtype)
    maxval = tf.convert_to_tensor(maxval, dtype=dtype)
    return unit * (maxval - minval) + minval  # TensorFlow's own affine map, same rounding


def dropout(x, rate, seed, training, salts=()):
    """Stateless inverted dropout at a rate that is a number (the same mask as
    ``tf.nn.experimental.stateless_dropout``); identity when not training or rate == 0.

    The mask's seed is ``fold_seed(seed, *salts)``; ``seed`` is a [2] seed or a function
    returning one. Both are resolved only when the dropout draws: a model without
    dropout, and every decode or evaluation graph, then builds no seed-folding ops (in a
    beam search over a tiny model they were a seventh of its nodes, most of them inside
    the loop, run at every step)."""
    if not training or not rate:
        return x
    if callable(seed):
        seed = seed()
    if salts:
        seed = fold_seed(seed, *salts)
    if not _graph_philox():
        return tf.nn.experimental.stateless_dropout(x, rate=rate, seed=seed)
    # TensorFlow's _dropout with a number for the rate, drawing through stateless_uniform
    rate = float(rate)
    x = tf.convert_to_tensor(x)
    kept = x * tf.convert_to_tensor(1 / (1 - rate), dtype=x.dtype)
    keep = stateless_uniform(tf.shape(x), seed, dtype=x.dtype) >= rate
    return tf.where(keep, kept, tf.zeros([], x.dtype))


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
