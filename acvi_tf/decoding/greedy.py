"""Greedy decoding over a decoder step function, and the helpers both searches share.

A search strategy is a pure function of a step function (OpenNMT-tf's ``decoding.py``)::

    step_fn(input_ids, state) -> (log_probs, new_state, extras)

* ``input_ids``: int32 [batch], the previous output token of every row.
* ``state``: any nest of tensors. A tensor of rank >= 1 has the batch dimension
  first; a rank-0 tensor (e.g. a time counter) is shared by all rows.
* ``log_probs``: float32 [batch, V] normalized log-probabilities (V may exceed the
  embedding vocabulary, e.g. a pointer-generator's extended vocabulary).
* ``extras``: a dict of batch-leading tensors; its ``"attention"`` [batch, N], if
  present, is recorded per output step.

Everything runs in-graph with fixed-shape loop variables (buffers of length
``max_length`` written with one-hot masks), so it works under ``tf.function`` and
compiles with ``tf.function(jit_compile=True)``.
"""

import tensorflow as tf

from acvi_tf.decoding.ngram_block import block_repeated_ngrams, check_no_repeat_ngram

ATTENTION = "attention"
NEG_INF = float("-inf")


def check_lengths(max_length, min_length):
    """Validates the length limits; max_length must be a Python int (it sizes the buffers)."""
    if not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be a Python int >= 1, got {max_length!r}")
    if not isinstance(min_length, int) or min_length < 0:
        raise ValueError(f"min_length must be a Python int >= 0, got {min_length!r}")


def forbid_end(log_probs, end_id, step, min_length):
    """Returns log_probs [..., V] with the end_id column set to -inf while step < min_length.

    ``step`` is the number of tokens emitted before this one, so every hypothesis
    holds at least ``min_length`` tokens before its end token.
    """
    if min_length <= 0:
        return log_probs
    is_end = tf.equal(tf.range(tf.shape(log_probs)[-1]), end_id)
    forbidden = tf.logical_and(is_end, step < min_length)
    return tf.where(forbidden, tf.constant(NEG_INF, log_probs.dtype), log_probs)


def never_emit(step_fn, token_ids):
    """Wraps a decoding ``step_fn`` so that ``token_ids`` (padding, the start token) are
    never chosen: their log-probabilities become -inf.

    The output layer normalises over the whole vocabulary, so an under-trained model
    can put mass on <pad> or <s>; a hypothesis made of them would pass ``min_length``
    and decode to an empty string. The other columns are unchanged, so the scores of
    the hypotheses that remain are the model's own log-likelihoods.
    """
    token_ids = sorted({int(i) for i in token_ids})
    if not token_ids:
        return step_fn

    def masked_step_fn(ids, state):
        log_probs, state, extras = step_fn(ids, state)
        vocab = tf.range(tf.shape(log_probs)[-1])
        banned = tf.reduce_any(tf.equal(vocab[:, None], tf.constant(token_ids)[None, :]),
                               axis=1)
        return (tf.where(banned, tf.constant(NEG_INF, log_probs.dtype), log_probs),
                state, extras)
    return masked_step_fn


def write_time(buffer, values, step, time_axis):
    """Returns buffer with index ``step`` of its (static-length) time axis replaced by values.

    ``values`` has buffer's shape without the time axis. A broadcast mask instead
    of a scatter keeps the shapes fixed and the op XLA-friendly.
    """
    length = buffer.shape[time_axis]
    mask_shape = [1] * buffer.shape.rank
    mask_shape[time_axis] = length
    mask = tf.reshape(tf.equal(tf.range(length), step), mask_shape)
    return tf.where(mask, tf.expand_dims(values, time_axis), buffer)


def get_attention(extras):
    """Returns extras["attention"], or None when the step function gives none."""
    return (extras or {}).get(ATTENTION)


def relaxed_shapes(structure):
    """Shape invariants for tf.while_loop: every rank >= 1 tensor may change its batch size.

    The step function may report a less specific static batch size than the
    tensors entering the loop (e.g. after a reshape); relaxing only dimension 0
    keeps every other static dimension.
    """
    def relax(tensor):
        if isinstance(tensor, tf.TensorArray):  # its element shape is its own invariant
            return tf.TensorShape(None)
        shape = tensor.shape
        if shape.rank is None or shape.rank == 0:
            return shape
        return tf.TensorShape([None]).concatenate(shape[1:])
    return tf.nest.map_structure(relax, structure)


def set_batch_size(structure, batch_size):
    """Restores the static batch size (lost by relaxed_shapes) on every rank >= 1 tensor."""
    if batch_size is None or tf.executing_eagerly():
        return structure

    def restore(tensor):
        if tensor.shape.rank:
            tensor.set_shape(tf.TensorShape([batch_size]).concatenate(tensor.shape[1:]))
        return tensor
    return tf.nest.map_structure(restore, structure)


def _greedy_step(step_fn, end_id, min_length, step, loop, no_repeat_ngram=0):
    """One greedy step: appends each unfinished row's most probable token (none that
    repeats one of the row's n-grams with ``no_repeat_ngram`` = n > 0).

    Rows that have emitted end_id keep emitting it, add no log-probability and
    record zero attention, so the buffers stay padded after the end.
    """
    log_probs, state, extras = step_fn(loop["inputs"], loop["state"])
    log_probs = forbid_end(tf.cast(log_probs, tf.float32), end_id, step, min_length)
    if no_repeat_ngram:
        log_probs = block_repeated_ngrams(log_probs, loop["ids"], step, no_repeat_ngram)
    was_done = loop["finished"]
    tokens = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
    tokens = tf.where(was_done, tf.cast(end_id, tf.int32), tokens)
    token_log_probs = tf.gather(log_probs, tokens, batch_dims=1)
    new = {
        "inputs": tokens,
        "state": state,
        "finished": tf.logical_or(was_done, tf.equal(tokens, end_id)),
        "ids": write_time(loop["ids"], tokens, step, time_axis=1),
        "lengths": tf.where(was_done, loop["lengths"], step + 1),
        # tf.where, not a multiply by a mask: a done row's end log-prob may be -inf.
        "log_prob": loop["log_prob"] + tf.where(was_done, 0.0, token_log_probs),
    }
    attention = get_attention(extras)
    if attention is not None:
        buffer = loop.get(ATTENTION)
        if buffer is None:
            max_length = loop["ids"].shape[1]
            buffer = tf.zeros(tf.concat([tf.shape(attention)[:1], [max_length],
                                         tf.shape(attention)[1:]], 0), attention.dtype)
        attention = tf.where(was_done[:, None], tf.zeros_like(attention), attention)
        new[ATTENTION] = write_time(buffer, attention, step, time_axis=1)
    return new


def greedy_search(step_fn, initial_state, start_ids, end_id, max_length, min_length=0,
                  no_repeat_ngram=0):
    """Decodes by taking the most probable token at every step, until end_id or max_length.

    Args:
        step_fn: ``(input_ids [B], state) -> (log_probs [B, V], state, extras)``.
        initial_state: the decoder state for the batch (nest of tensors, see module doc).
        start_ids: int32 [B], the first input of every row.
        end_id: the end-of-sequence id (Python int or int32 scalar).
        max_length: Python int, the most output tokens per row (end token included).
        min_length: Python int; end_id is forbidden until this many tokens are out.
        no_repeat_ngram: Python int n; n > 0: no row repeats one of its own n-grams
            (:mod:`acvi_tf.decoding.ngram_block`); 0: off.

    Returns:
        dict with ``ids`` int32 [B, max_length] (end_id after the end), ``lengths``
        int32 [B] (end token included; max_length if none was emitted), ``log_prob``
        float32 [B] (sum of the chosen log-probs, end token included) and, when the
        step function gives it, ``attention`` [B, max_length, N] (zero after the end).
    """
    check_lengths(max_length, min_length)
    check_no_repeat_ngram(no_repeat_ngram)
    start_ids = tf.convert_to_tensor(start_ids, tf.int32)
    batch = tf.shape(start_ids)[0]
    loop = {
        "inputs": start_ids,
        "state": initial_state,
        "finished": tf.zeros([batch], tf.bool),
        "ids": tf.fill([batch, max_length], tf.cast(end_id, tf.int32)),
        "lengths": tf.zeros([batch], tf.int32),
        "log_prob": tf.zeros([batch], tf.float32),
    }

    def body(step, loop):
        return step + 1, _greedy_step(step_fn, end_id, min_length, step, loop,
                                      no_repeat_ngram)

    def cond(step, loop):
        return tf.logical_and(step < max_length,
                              tf.logical_not(tf.reduce_all(loop["finished"])))

    # The first step runs outside the loop: it reveals whether (and with which
    # shape) attention is returned, so its buffer can enter the loop preallocated.
    step, loop = body(tf.constant(0, tf.int32), loop)
    _, loop = tf.while_loop(cond, body, (step, loop),
                            shape_invariants=(step.shape, relaxed_shapes(loop)),
                            maximum_iterations=max_length - 1)
    outputs = {key: loop[key] for key in ("ids", "lengths", "log_prob", ATTENTION)
               if key in loop}
    return set_batch_size(outputs, start_ids.shape[0])
