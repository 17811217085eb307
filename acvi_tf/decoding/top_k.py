"""The k largest entries of each row of a wide matrix, as ``tf.math.top_k`` gives them,
in a fraction of its time: the first stage of beam search's candidate selection over the
vocabulary (:meth:`acvi_tf.decoding.beam._Search.top_candidates`).

``tf.math.top_k`` on CPU walks every entry of a row through a heap test, ~1.6 ns an
entry; at the peer benchmark's beam (320 rows of 7,709 log-probabilities, k = 22) that
was a fifth of the search's op time. :func:`row_top_k` cuts each row into contiguous
chunks of ``c`` entries, takes each chunk's maximum (one vectorised reduction), keeps
the k chunks with the largest maxima and runs ``top_k`` over their k * c entries only.

Exact, ties included: order entries by (value descending, index ascending), the order
``top_k`` returns them in, and chunks by (maximum descending, chunk index ascending), the
order the chunk ``top_k`` keeps them in. An entry x of a chunk C outside the kept k has,
for each kept chunk D, D's first maximal entry ranked before x: max(D) > max(C) >= x, or
max(D) = max(C) with D before C, whose entries all have smaller indices. So k entries
rank before x and x is not among the k largest. The kept chunks are put back in index
order, so the second ``top_k`` breaks ties by index as the first would have. Padding
(the last chunk filled with -inf) sits after every real entry and is never preferred to
one; rows need k real entries (they have: ``k <= width``). NaN entries are not supported
(``top_k``'s own order for NaN is not reproduced).
"""

import math

import tensorflow as tf

# Below this many chunks per row the two stages cost more than one top_k over the row.
MIN_CHUNKS_PER_K = 4


def chunk_size(width, k):
    """The chunk length for rows of ``width`` entries and ``k`` outputs: a power of two
    near 1.7 * sqrt(width / k), which balances the two stages (the chunk maxima's top_k
    costs more per entry than the second stage's: measured on 320 x 7,709 with k = 22,
    c = 32 beat c = 16, 24 and 48 to 128); None where one top_k over the row is cheaper
    (fewer than MIN_CHUNKS_PER_K * k chunks)."""
    c = 2 ** max(0, round(math.log2(1.7 * math.sqrt(width / k))))
    return c if width >= MIN_CHUNKS_PER_K * k * c else None


def row_top_k(x, k):
    """``(values, indices)`` [R, k] of the k largest entries of each row of ``x`` [R, V],
    equal to ``tf.math.top_k(x, k)`` (values descending, ties by lower index; see the
    module docstring). ``V`` must be static; x must hold no NaN."""
    width = x.shape[-1]
    if width is None:
        raise ValueError(f"row_top_k needs a static row width, got shape {x.shape}")
    c = chunk_size(width, k)
    if c is None:
        return tf.math.top_k(x, k=k)
    chunks_per_row = -(-width // c)
    rows = tf.shape(x)[0]
    if chunks_per_row * c > width:
        x = tf.concat([x, tf.fill([rows, chunks_per_row * c - width],
                                  tf.constant(-math.inf, x.dtype))], axis=1)
    chunks = tf.reshape(x, [rows, chunks_per_row, c])
    _, kept = tf.math.top_k(tf.reduce_max(chunks, axis=-1), k=k)
    kept = tf.sort(kept, axis=-1)                                       # index order
    candidates = tf.reshape(tf.gather(chunks, kept, batch_dims=1), [rows, k * c])
    values, positions = tf.math.top_k(candidates, k=k)
    indices = tf.gather(kept, positions // c, batch_dims=1) * c + positions % c
    return values, indices
