"""Batched, in-graph beam search over a decoder step function (contract: see greedy.py).

The search keeps, per batch element, ``beam_width`` *alive* hypotheses and a
separate set of ``beam_width`` *finished* ones (GNMT / tensor2tensor / OpenNMT-tf
v1). Each step extends the alive hypotheses, takes the ``2 * beam_width`` most
probable candidates (at most ``beam_width`` of them end, one per parent, so at
least ``beam_width`` do not), moves those that emitted ``end_id`` into the
finished set (ranked by the length-normalized score) and keeps the best
``beam_width`` others alive. A finished hypothesis is never extended. At
``max_length`` the alive hypotheses are finished as they are.

Rows of the step function's batch are batch-major: row ``b * beam_width + k`` is
beam ``k`` of batch element ``b``.

Attention histories are not carried per hypothesis (reordering a [B, K, T, N] buffer at
every step moves O(T) data per step, a quarter of the search's time at translation sizes).
Each step's attention is written once, by the row that computed it, with the parent of
every surviving beam; a finished hypothesis keeps only the row of its last step, and its
history is read back through the parents after the search (as ``gather_tree`` does for
ids in tfa's BeamSearchDecoder).
"""

import tensorflow as tf

from acvi_tf.decoding.greedy import (ATTENTION, NEG_INF, check_lengths, get_attention,
                                     relaxed_shapes, set_batch_size, write_time)
from acvi_tf.decoding.ngram_block import block_repeated_ngrams, check_no_repeat_ngram
from acvi_tf.decoding.top_k import row_top_k

NORMALIZATIONS = ("none", "average", "gnmt")


def length_penalty(lengths, length_normalization="none", alpha=0.6):
    """Returns the divisor d(L) of a hypothesis' summed log-probability: score = log p / d(L).

    "none": d = 1; "average": d = L, the average log-probability per token (See et
    al. 2017); "gnmt": d = ((5 + L) / 6) ** alpha (Wu et al. 2016). L counts the
    end token.
    """
    lengths = tf.cast(lengths, tf.float32)
    if length_normalization == "none":
        return tf.ones_like(lengths)
    if length_normalization == "average":
        return lengths
    if length_normalization == "gnmt":
        return tf.pow((5.0 + lengths) / 6.0, alpha)
    raise ValueError(f"length_normalization must be one of {NORMALIZATIONS}, "
                     f"got {length_normalization!r}")


def tile_beam(structure, beam_width):
    """Repeats every rank >= 1 tensor of a nest beam_width times along its batch dimension.

    [B, ...] -> [B * beam_width, ...], row ``b * beam_width + k`` a copy of row b.
    Rank-0 tensors (shared by all rows, e.g. a time counter) are returned untouched.
    """
    def tile(tensor):
        tensor = tf.convert_to_tensor(tensor)
        rank = tensor.shape.rank
        if rank is None:
            raise ValueError(f"tile_beam needs tensors of known rank, got {tensor!r}")
        if rank == 0:
            return tensor
        tiled = tf.tile(tf.expand_dims(tensor, 1), [1, beam_width] + [1] * (rank - 1))
        return tf.reshape(tiled, tf.concat([[-1], tf.shape(tensor)[1:]], 0))
    return tf.nest.map_structure(tile, structure)


def gather_rows(structure, rows):
    """Gathers rows [R] of every rank >= 1 tensor of a nest; rank-0 tensors pass through."""
    def gather(tensor):
        return tensor if tensor.shape.rank == 0 else tf.gather(tensor, rows, axis=0)
    return tf.nest.map_structure(gather, structure)


def _check_arguments(beam_width, max_length, min_length, length_normalization, alpha,
                     num_best, no_repeat_ngram=0):
    check_lengths(max_length, min_length)
    check_no_repeat_ngram(no_repeat_ngram)
    if not isinstance(beam_width, int) or beam_width < 1:
        raise ValueError(f"beam_width must be a Python int >= 1, got {beam_width!r}")
    if length_normalization not in NORMALIZATIONS:
        raise ValueError(f"length_normalization must be one of {NORMALIZATIONS}, "
                         f"got {length_normalization!r}")
    if num_best is not None and not 1 <= num_best <= beam_width:
        raise ValueError(f"num_best must be in [1, beam_width={beam_width}], got {num_best!r}")


class _Search:
    """The fixed parameters of one beam search and its loop body.

    The loop state is a dict: ``inputs`` [B*K], ``state`` (the step function's),
    ``alive_ids`` [B, K, T], ``alive_log_probs`` [B, K], ``finished_ids``,
    ``finished_scores``, ``finished_log_probs``, ``finished_lengths`` (all [B, K, ...])
    and, when the step function returns attention, ``attention_steps`` and
    ``parent_steps`` (TensorArrays over time of each step's attention [B, K, N], by the
    row that computed it, and of the surviving beams' parents [B, K]), ``alive_parents``
    [B, K] (the last step's) and ``finished_rows`` [B, K] (the row that computed a
    finished hypothesis' last step). Finished sets are kept sorted, best first.
    """

    def __init__(self, step_fn, end_id, beam_width, max_length, min_length,
                 length_normalization, alpha, banned_ids=(), no_repeat_ngram=0):
        self.step_fn = step_fn
        self.no_repeat_ngram = no_repeat_ngram
        self.end_id = end_id
        self.banned_ids = tuple(sorted({int(i) for i in banned_ids}))
        self.beam_width = beam_width
        self.max_length = max_length
        self.min_length = min_length
        self.length_normalization = length_normalization
        self.alpha = alpha

    def penalty(self, lengths):
        return length_penalty(lengths, self.length_normalization, self.alpha)

    def initial_loop(self, initial_state, start_ids):
        """The loop state before the first step: only beam 0 alive, nothing finished."""
        batch = tf.shape(start_ids)[0]
        k, t = self.beam_width, self.max_length
        end_id = tf.cast(self.end_id, tf.int32)
        # Beams 1..K-1 start at -inf so the first step does not pick K copies of
        # the same candidate.
        first = tf.constant([0.0] + [NEG_INF] * (k - 1), tf.float32)
        return {
            "inputs": tile_beam(start_ids, k),
            "state": tile_beam(initial_state, k),
            "alive_ids": tf.fill([batch, k, t], end_id),
            "alive_log_probs": tf.tile(first[None], [batch, 1]),
            "finished_ids": tf.fill([batch, k, t], end_id),
            "finished_scores": tf.fill([batch, k], NEG_INF),
            "finished_log_probs": tf.fill([batch, k], NEG_INF),
            "finished_lengths": tf.zeros([batch, k], tf.int32),
        }

    def num_candidates(self, vocab_size):
        """2K candidates, or all K*V of them when the vocabulary is tinier than 2."""
        k = self.beam_width
        return 2 * k if vocab_size is None else min(2 * k, k * vocab_size)

    def step(self, step, loop):
        """Extends the alive hypotheses by one token; returns the next loop state."""
        log_probs, state, extras = self.step_fn(loop["inputs"], loop["state"])
        log_probs = tf.cast(log_probs, tf.float32)
        batch = tf.shape(loop["alive_log_probs"])[0]
        if self.no_repeat_ngram:  # rows b * K + k are alive_ids[b, k]
            log_probs = block_repeated_ngrams(
                log_probs, tf.reshape(loop["alive_ids"], [-1, self.max_length]), step,
                self.no_repeat_ngram)
        scores, parents, tokens = self.top_candidates(loop["alive_log_probs"], log_probs,
                                                      step)
        candidates = {
            "parents": parents,
            "tokens": tokens,
            "log_probs": scores,
            "ids": write_time(tf.gather(loop["alive_ids"], parents, batch_dims=1),
                              tokens, step, time_axis=2),
        }
        attention = get_attention(extras)
        is_end = tf.equal(tokens, self.end_id)
        new = self.select_alive(candidates, is_end, state)
        if attention is not None:
            new.update(self.record_attention(loop, attention, new["alive_parents"], step,
                                             batch))
            candidates["rows"] = parents
        else:
            del new["alive_parents"]
        finished = self.merge_finished(
            loop, candidates, tf.where(is_end, scores, NEG_INF),
            tf.fill(tf.shape(scores), step + 1))
        new.update(finished)
        return new

    def num_masked(self):
        """How many tokens a step may forbid: the banned ones, and the end token while
        fewer than ``min_length`` tokens are out."""
        return len(self.banned_ids) + (1 if self.min_length > 0 else 0)

    def mask(self, tokens, scores, step):
        """``scores`` with -inf where ``tokens`` is banned, or is the end token before
        ``min_length`` (:func:`greedy.forbid_end`)."""
        forbidden = tf.zeros_like(tokens, tf.bool)
        for token in self.banned_ids:
            forbidden = tf.logical_or(forbidden, tf.equal(tokens, token))
        if self.min_length > 0:
            forbidden = tf.logical_or(forbidden, tf.logical_and(
                tf.equal(tokens, tf.cast(self.end_id, tokens.dtype)), step < self.min_length))
        return tf.where(forbidden, tf.constant(NEG_INF, scores.dtype), scores)

    def top_candidates(self, alive_log_probs, log_probs, step):
        """The 2K best extensions: (log-probs, parents, tokens), each [B, 2K], best first.

        Two stages: each row's best 2K + m tokens (m: :meth:`num_masked`), with the
        forbidden ones among them set to -inf, then the best 2K of those K * (2K + m).
        A row's best 2K allowed tokens are among its best 2K + m, no row can place more
        than 2K candidates in the overall best 2K, and top_k breaks ties by position in
        both stages as a single top_k over the masked [B, K * V] does (parent, then
        token), so the result is the same; the masks and the additions shrink from
        K * V entries to K * (2K + m). Each row's best 2K + m come from
        :func:`acvi_tf.decoding.top_k.row_top_k`, ``tf.math.top_k``'s result in less time.
        """
        k = self.beam_width
        batch = tf.shape(alive_log_probs)[0]
        vocab = log_probs.shape[-1]
        n = self.num_candidates(vocab)
        m = self.num_masked()
        if vocab is None or vocab <= n + m:
            vocab = tf.shape(log_probs)[-1]
            log_probs = self.mask(tf.range(vocab)[None, :], log_probs, step)
            totals = alive_log_probs[:, :, None] + tf.reshape(log_probs, [batch, k, -1])
            scores, flat = tf.math.top_k(tf.reshape(totals, [batch, -1]), k=n)
            return scores, flat // vocab, flat % vocab
        row_scores, row_tokens = row_top_k(log_probs, n + m)              # [B*K, 2K+m]
        row_scores = self.mask(row_tokens, row_scores, step)
        totals = alive_log_probs[:, :, None] + tf.reshape(row_scores, [batch, k, n + m])
        scores, flat = tf.math.top_k(tf.reshape(totals, [batch, k * (n + m)]), k=n)
        tokens = tf.gather(tf.reshape(row_tokens, [batch, k * (n + m)]), flat, batch_dims=1)
        return scores, flat // (n + m), tokens

    def record_attention(self, loop, attention, alive_parents, step, batch):
        """Writes this step's attention (by computing row) and the new beams' parents."""
        attention = tf.reshape(attention, tf.concat([[batch, self.beam_width],
                                                     tf.shape(attention)[1:]], 0))
        steps = loop.get("attention_steps")
        if steps is None:
            steps = tf.TensorArray(attention.dtype, size=self.max_length,
                                   element_shape=tf.TensorShape([None, self.beam_width])
                                   .concatenate(attention.shape[2:]))
            parents = tf.TensorArray(tf.int32, size=self.max_length,
                                     element_shape=[None, self.beam_width])
        else:
            parents = loop["parent_steps"]
        return {"attention_steps": steps.write(step, attention),
                "parent_steps": parents.write(step, alive_parents),
                "alive_parents": alive_parents}

    def backtrack_attention(self, loop, rows, lengths):
        """[B, n, T, N]: the attention history of the hypotheses whose last step (index
        ``lengths - 1``) was computed by beam row ``rows`` [B, n]; zero after the end."""
        attention = loop["attention_steps"].stack()                       # [T, B, K, N]
        parents = loop["parent_steps"].stack()                            # [T, B, K]
        # Step t's row holds a beam that survived step t - 1; its parent is the row that
        # computed step t - 1 of the same hypothesis.
        previous_parents = tf.concat([tf.zeros_like(parents[:1]), parents[:-1]], 0)
        last = lengths - 1

        def back(row, inputs):
            # ``row`` [B, n]: the row that computed step t (valid where t <= last).
            t, step_attention, step_previous_parents = inputs
            row = tf.where(tf.equal(last, t), rows, row)
            out = tf.gather(step_attention, row, batch_dims=1)
            out = tf.where((t <= last)[:, :, None], out, tf.zeros_like(out))
            return tf.gather(step_previous_parents, row, batch_dims=1), out

        times = tf.range(self.max_length - 1, -1, -1)
        _, history = tf.scan(lambda carry, x: back(carry[0], x),
                             (times, tf.reverse(attention, [0]),
                              tf.reverse(previous_parents, [0])),
                             initializer=(tf.zeros_like(rows),
                                          tf.zeros(tf.concat([tf.shape(rows),
                                                              tf.shape(attention)[3:]], 0),
                                                   attention.dtype)))
        # history [T, B, n, N], time reversed
        return tf.transpose(tf.reverse(history, [0]), [1, 2, 0, 3])

    def select_alive(self, candidates, is_end, state):
        """The best K candidates that did not end, with their state rows and next inputs."""
        k = self.beam_width
        masked = tf.where(is_end, NEG_INF, candidates["log_probs"])
        log_probs, positions = tf.math.top_k(masked, k=k)
        pick = lambda x: tf.gather(x, positions, batch_dims=1)
        parents = pick(candidates["parents"])
        batch = tf.shape(parents)[0]
        rows = tf.reshape(parents + k * tf.range(batch)[:, None], [-1])
        new = {
            "inputs": tf.reshape(pick(candidates["tokens"]), [-1]),
            "state": gather_rows(state, rows),
            "alive_ids": pick(candidates["ids"]),
            # Not the picked log-probs: if fewer than K candidates did not end,
            # the ended ones filling the beam must stay at -inf.
            "alive_log_probs": log_probs,
            "alive_parents": parents,
        }
        return new

    def merge_finished(self, loop, candidates, log_probs, lengths):
        """Merges newly finished candidates (log_probs -inf where not finished) into the set.

        Returns the best K of old and new by length-normalized score, sorted.
        """
        new_scores = tf.where(tf.math.is_finite(log_probs),
                              log_probs / self.penalty(lengths), NEG_INF)
        merged = {
            "finished_ids": (loop["finished_ids"], candidates["ids"]),
            "finished_scores": (loop["finished_scores"], new_scores),
            "finished_log_probs": (loop["finished_log_probs"], log_probs),
            "finished_lengths": (loop["finished_lengths"], lengths),
        }
        if "rows" in candidates:
            old = loop.get("finished_rows")
            if old is None:
                old = tf.zeros_like(candidates["rows"][:, :self.beam_width])
            merged["finished_rows"] = (old, candidates["rows"])
        merged = {key: tf.concat(pair, axis=1) for key, pair in merged.items()}
        _, positions = tf.math.top_k(merged["finished_scores"], k=self.beam_width)
        return {key: tf.gather(value, positions, batch_dims=1)
                for key, value in merged.items()}

    def finish_alive(self, loop, reached_max_length):
        """Finishes the alive hypotheses as they are (length max_length, no end token).

        Skipped when the loop stopped early: then no alive hypothesis can enter
        the finished set, and their lengths would be wrong.
        """
        candidates = {"ids": loop["alive_ids"]}
        if "alive_parents" in loop:
            candidates["rows"] = loop["alive_parents"]
        log_probs = tf.where(reached_max_length, loop["alive_log_probs"], NEG_INF)
        lengths = tf.fill(tf.shape(log_probs), self.max_length)
        return self.merge_finished(loop, candidates, log_probs, lengths)

    def can_stop_early(self):
        """Whether a score bound exists: penalties grow with length (log-probs are <= 0)."""
        return self.length_normalization != "gnmt" or self.alpha >= 0

    def all_done(self, loop):
        """True when, for every batch element, no alive hypothesis can beat the worst finished.

        Log-probabilities only decrease as a hypothesis grows and the penalty
        d(L) only grows, so log p / d(max_length) bounds any completion's score.
        """
        best_alive = tf.reduce_max(loop["alive_log_probs"], axis=1)
        bound = best_alive / self.penalty(self.max_length)
        worst_finished = tf.reduce_min(loop["finished_scores"], axis=1)
        return tf.reduce_all(bound < worst_finished)


def beam_search(step_fn, initial_state, start_ids, end_id, beam_width, max_length,
                min_length=0, length_normalization="none", alpha=0.6, num_best=None,
                banned_ids=(), no_repeat_ngram=0):
    """Beam search for the best-scoring outputs of a batch.

    Args:
        step_fn: ``(input_ids [B*K], state) -> (log_probs [B*K, V], state, extras)``,
            rows batch-major (``b * K + k``).
        initial_state: the decoder state for the un-tiled batch; tiled here with
            :func:`tile_beam` (rank-0 tensors are shared, never tiled or reordered).
        start_ids: int32 [B], the first input of every batch element.
        end_id: the end-of-sequence id (Python int or int32 scalar).
        beam_width: Python int K.
        max_length: Python int, the most output tokens per hypothesis (end included).
        min_length: Python int; end_id is forbidden until this many tokens are out.
        length_normalization: "none", "average" or "gnmt" (see :func:`length_penalty`).
        alpha: the "gnmt" exponent.
        num_best: how many hypotheses to return (default K).
        banned_ids: tokens never chosen (padding, the start token), as
            :func:`greedy.never_emit` forbids them, masked among each row's best
            candidates instead of over the whole vocabulary.
        no_repeat_ngram: Python int n; n > 0: no hypothesis repeats one of its own
            n-grams (:mod:`acvi_tf.decoding.ngram_block`; e.g. 3 for summaries); 0: off.

    Returns:
        dict, n = num_best or K hypotheses per batch element, best first:
        ``ids`` int32 [B, n, max_length] (end_id after the end), ``lengths`` int32
        [B, n] (end token included), ``scores`` float32 [B, n] (the normalized
        score used for ranking), ``log_probs`` float32 [B, n] (summed log-probs) and,
        when the step function gives it, ``attention`` [B, n, max_length, N] (zero
        after the end). A score of -inf marks a slot with no possible hypothesis
        (fewer than n outputs have non-zero probability).
    """
    _check_arguments(beam_width, max_length, min_length, length_normalization, alpha,
                     num_best, no_repeat_ngram)
    start_ids = tf.convert_to_tensor(start_ids, tf.int32)
    search = _Search(step_fn, end_id, beam_width, max_length, min_length,
                     length_normalization, alpha, banned_ids, no_repeat_ngram)

    def body(step, loop):
        return step + 1, search.step(step, loop)

    def cond(step, loop):
        running = step < max_length
        if search.can_stop_early():
            running = tf.logical_and(running, tf.logical_not(search.all_done(loop)))
        return running

    # The first step runs outside the loop: it reveals whether (and with which
    # shape) attention is returned, so its buffers can enter the loop preallocated.
    step, loop = body(tf.constant(0, tf.int32), search.initial_loop(initial_state, start_ids))
    step, loop = tf.while_loop(cond, body, (step, loop),
                               shape_invariants=(step.shape, relaxed_shapes(loop)),
                               maximum_iterations=max_length - 1)
    finished = search.finish_alive(loop, step >= max_length)
    n = num_best or beam_width
    outputs = {
        "ids": finished["finished_ids"][:, :n],
        "lengths": finished["finished_lengths"][:, :n],
        "scores": finished["finished_scores"][:, :n],
        "log_probs": finished["finished_log_probs"][:, :n],
    }
    if "finished_rows" in finished:
        outputs[ATTENTION] = search.backtrack_attention(loop, finished["finished_rows"][:, :n],
                                                        outputs["lengths"])
    return set_batch_size(outputs, start_ids.shape[0])
