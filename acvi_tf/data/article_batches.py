"""Summarization's training batches: See et al.'s (2017) pointer-generator batches of
article/abstract pairs, through the shared batching path (:class:`Batches`), with the
truncation of Table 5's phases (Appendix A) growing step by step.

Each batch is one optimiser step, so batch ``b`` of epoch ``e`` is step
``e * num_batches() + b`` and is cut to that step's phase. Epochs are permutations drawn
from ``(seed, epoch)`` in consecutive batches, the last partial one dropped; a restart
mid-phase resumes at the saved ``(epoch, batch)`` with the batches of an uninterrupted
run (:class:`acvi_tf.data.batching.BatchIterator`).

A batch is what ``acvi_tf.data.cnndm.make_batch`` builds from
``EncodedPairs.example(i, enc, dec)`` at the phase's lengths ``enc``/``dec``, cut for the
model's head, computed in the tf.data graph:

* ``src_ext`` [B, S]: the article's first ``enc`` extended ids (its OOVs ``V, V+1, ...``
  in order of first occurrence, so the OOVs of a prefix are a prefix: an article's OOV
  count there is its largest id ``- V + 1``); ``src``: the same with ``[UNK]`` for OOVs;
  ``max_oovs``: the batch's most OOVs (pointer head only, as ``src_ext``).
* ``tgt_in`` [B, T]: ``[START]`` + abstract, ``[UNK]`` for OOVs; ``tgt_out``: abstract +
  ``[STOP]`` in extended ids, ``[UNK]`` for an OOV the cut article does not hold (for
  the softmax head: for every OOV); both cut to ``dec``, a cut target without
  ``[STOP]`` (See et al.'s ``get_dec_inp_targ_seqs``).
* S and T are the batch's longest, rounded up to a multiple of ``pad_multiple`` but not
  past the phase's ``enc``/``dec``; padding is ``[PAD]``.
"""

import tensorflow as tf

from acvi_tf.data.batching import Batches, rows


def padded_length(length, multiple, cap):
    """``length`` rounded up to a multiple of ``multiple`` but not past ``cap`` (the
    phase's truncation, which no example exceeds); ``multiple`` 0 keeps ``length``.
    A phase of caps (S, T) then yields at most ceil(S / m) * ceil(T / m) batch shapes,
    so XLA compiles a bounded number of steps whatever the lengths drawn. (Python ints
    or tensors.)"""
    if not multiple:
        return length
    rounded = (length + multiple - 1) // multiple * multiple
    return min(rounded, cap) if isinstance(rounded, int) else tf.minimum(rounded, cap)


def phase_limits(phases):
    """``limits`` of :class:`Batches` from a :class:`~acvi_tf.training.schedules.
    PhaseSchedule`: a step's (max_enc_steps, max_dec_steps)."""
    def limits(step):
        phase = phases.phase(step)
        return phase["max_enc_steps"], phase["max_dec_steps"]
    return limits


class ArticleBatches(Batches):
    """The training batches of an ``EncodedPairs`` store (:mod:`acvi_tf.data.cnndm`).

    Args:
      store: the encoded pairs (``enc_ext``, ``abs_ext``, ``vocab``).
      batch_size: pairs per batch (at most the store's size).
      phases: a ``PhaseSchedule``: each step's truncation (``phase(step)``'s
        ``max_enc_steps`` / ``max_dec_steps``).
      seed: the order, as :class:`Batches`.
      pointer: the pointer head's batch (``src_ext``, ``max_oovs``, targets in extended
        ids); False: the softmax head's (every OOV ``[UNK]``).
      pad_multiple: see the module docstring (0: off).
    """

    def __init__(self, store, batch_size, phases, seed=0, pointer=True, pad_multiple=0,
                 prefetch=True):
        vocab = store.vocab
        self.vocab_size, self.unk_id, self.pad_id = len(vocab), vocab.unk_id, vocab.pad_id
        self.pointer, self.pad_multiple = bool(pointer), int(pad_multiple)
        super().__init__(store.enc_ext, store.abs_ext, min(int(batch_size), len(store)),
                         seed=seed, shuffle=True, bucketing=False, max_src_len=None,
                         max_tgt_len=None, min_len=0, drop_remainder=True,
                         bos_id=vocab.bos_id, eos_id=vocab.eos_id, prefetch=prefetch,
                         limits=phase_limits(phases), pad_free=False)

    def position(self, state):
        """Also reads the position of a run saved before summarization batched through
        :class:`Batches` (``{"epoch", "index", "step"}``: ``index`` pairs into the epoch)."""
        if "batch" not in state and "index" in state:
            return int(state["epoch"]), int(state["index"]) // self.batch_size
        return super().position(state)

    def _gather(self, idx, limits):
        enc, dec = limits[0], limits[1]
        size, unk, pad = self.vocab_size, self.unk_id, self.pad_id
        # The article cut to enc ids: rows no longer than the longest cut row.
        ext, src_len = rows(self._src, idx, enc, pad)
        width = tf.reduce_max(src_len)
        num_oovs = tf.maximum(tf.reduce_max(ext, axis=1) - size + 1, 0)  # [B]
        # [START] + abstract and abstract + [STOP], both cut to dec: tgt_len of each.
        words, abstract_len = rows(self._tgt, idx, pad=pad)
        tgt_len = tf.minimum(abstract_len + 1, dec)
        height = tf.reduce_max(tgt_len)
        n = tf.shape(words)[0]
        column = tf.range(tf.shape(words)[1] + 1, dtype=tf.int64)[None, :]
        known = tf.where(words >= size, unk, words)
        copied = tf.where(words >= size + num_oovs[:, None], unk, words) if self.pointer \
            else known
        tgt_in = tf.concat([tf.fill([n, 1], tf.constant(self.bos_id, tf.int32)), known], 1)
        tgt_out = tf.concat([copied, tf.fill([n, 1], tf.constant(pad, tf.int32))], 1)
        tgt_out = tf.where(column == abstract_len[:, None], self.eos_id, tgt_out)
        inside = column < tgt_len[:, None]
        tgt_in, tgt_out = (tf.where(inside, x, pad)[:, :height] for x in (tgt_in, tgt_out))

        def padded(x, length, cap):
            extra = padded_length(length, self.pad_multiple, cap) - length
            return tf.pad(x, [[0, 0], [0, extra]], constant_values=pad)

        batch = {"src": padded(tf.where(ext >= size, unk, ext), width, enc),
                 "tgt_in": padded(tgt_in, height, dec), "tgt_out": padded(tgt_out, height, dec)}
        if self.pointer:
            batch["src_ext"] = padded(ext, width, enc)
            batch["max_oovs"] = tf.reduce_max(num_oovs)
        return batch

