"""Repeated n-gram blocking: a hypothesis never emits a token that would repeat one of its
own n-grams (Paulus et al. 2018's trigram avoidance in summarization; OpenNMT's
``block_ngram_repeat``, fairseq's ``no_repeat_ngram_size``).

A decoding option, not part of any model: the scores of the hypotheses that remain are the
model's own log-probabilities (the blocked tokens get -inf, nothing is renormalised), as
for :func:`acvi_tf.decoding.greedy.never_emit`. Off (n = 0) in every table unless a
results.json's ``decode`` says otherwise.

Ids are those the search records (a pointer-generator's extended-vocabulary ids
included), so two different out-of-vocabulary words copied from the source are different
tokens, as they are in the decoded text.
"""

import tensorflow as tf

NEG_INF = float("-inf")  # as greedy.NEG_INF (greedy imports this module)


def check_no_repeat_ngram(n):
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"no_repeat_ngram must be a Python int >= 0 (0: off), got {n!r}")


def repeated_ngram_matches(ids, step, n):
    """``(match, completing)``, both [R, W] (W = T - n + 1, one per n-gram start j):
    ``match[r, j]`` when the n-gram of row r of ``ids`` [R, T] starting at j lies within
    its first ``step`` tokens (j + n - 1 < step) and the token at ``step`` would repeat it,
    i.e. its first n - 1 tokens equal the last n - 1 emitted (positions step - n + 1 ..
    step - 1); ``completing[r, j] = ids[r, j + n - 1]``, the token that would. Positions
    from ``step`` on are ignored (whatever they hold). n = 1 matches every token already
    emitted. None when no n-gram fits in T. Needs a static T."""
    length = ids.shape[-1]
    if length is None:
        raise ValueError(f"n-gram blocking needs a static length, got shape {ids.shape}")
    windows = length - n + 1
    if n < 1 or windows < 1:
        return None
    step = tf.cast(step, tf.int32)
    completing = ids[:, n - 1:n - 1 + windows]
    match = tf.broadcast_to((tf.range(windows) <= step - n)[None, :], tf.shape(completing))
    for m in range(n - 1):
        # where any window is valid, step >= n, so the position is >= 1
        last = tf.gather(ids, tf.maximum(step - n + 1 + m, 0), axis=1)    # [R]
        match = tf.logical_and(match, tf.equal(ids[:, m:m + windows], last[:, None]))
    return match, completing


def repeated_ngram_bans(ids, step, n):
    """[M, 2] int64 ``(row, token)`` pairs: ``token`` would repeat, at position ``step`` of
    row ``row`` of ``ids`` [R, T], an n-gram within the row's first ``step`` tokens (see
    :func:`repeated_ngram_matches`; pairs may repeat). For inspection and tests; the search
    uses :func:`block_repeated_ngrams`, whose shapes are static."""
    found = repeated_ngram_matches(ids, step, n)
    if found is None:
        return tf.zeros([0, 2], tf.int64)
    match, completing = found
    where = tf.where(match)                                                 # [M, 2] (row, j)
    return tf.stack([where[:, 0], tf.cast(tf.gather_nd(completing, where), tf.int64)], 1)


def block_repeated_ngrams(log_probs, ids, step, n):
    """``log_probs`` [R, V] with -inf at every token that would repeat one of its row's
    n-grams (:func:`repeated_ngram_matches`); unchanged when ``n`` is 0.

    Every (row, window) is scattered with a minimum, -inf where it matches and +inf
    (no change) where not: static shapes, so it compiles under XLA, and a token banned
    by two windows is simply banned."""
    if not n:
        return log_probs
    found = repeated_ngram_matches(ids, step, n)
    if found is None:
        return log_probs
    match, completing = found
    rows = tf.broadcast_to(tf.range(tf.shape(completing)[0])[:, None], tf.shape(completing))
    indices = tf.reshape(tf.stack([rows, tf.cast(completing, tf.int32)], -1), [-1, 2])
    values = tf.where(tf.reshape(match, [-1]), tf.constant(NEG_INF, log_probs.dtype),
                      tf.constant(float("inf"), log_probs.dtype))
    return tf.tensor_scatter_nd_min(log_probs, indices, values)
