"""Bucketed, resumable, reproducible batches of id sequences (tf.data): the one batching
path of every task. Translation batches its (source, target) pairs with :class:`Batches`;
captioning too (its "source" is a clip's row, swapped for its frame features after
batching); summarization with its subclass
:class:`acvi_tf.data.article_batches.ArticleBatches` (See et al.'s extended vocabulary,
Table 5's phases of growing truncation as ``limits``).

What a batch holds is :meth:`Batches._gather`'s (a subclass's own); which examples, in
which order, and where a resumed run continues is :meth:`Batches.plan`'s and
:class:`BatchIterator`'s, the same for every task.
"""

import numpy as np
import tensorflow as tf

from acvi_tf.data.vocab import BOS_ID, EOS_ID, PAD_ID

def _flatten(seqs, what, pad_free=True):
    """Sequences of ids -> (int32 values, int64 lengths); rejects pad ids (unless not
    ``pad_free``) and ids past int32."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    if lengths.sum():
        # (in the sequences' own integer type: int32 arrays, a whole corpus of them, are
        # not widened to int64 first)
        values = np.concatenate([np.asarray(s).reshape(-1) for s in seqs])
        if not np.issubdtype(values.dtype, np.integer):
            values = values.astype(np.int64)
    else:
        values = np.zeros([0], np.int64)
    bad = (values < (1 if pad_free else 0)) | (values > np.iinfo(np.int32).max)
    if bad.any():
        example = int(np.repeat(np.arange(len(seqs)), lengths)[np.flatnonzero(bad)[0]])
        raise ValueError(f"{what} sequence {example} holds id {values[bad][0]}; ids must be in "
                         f"[1, 2^31) because {PAD_ID} is <pad> and lengths are counted as "
                         f"non-zero ids")
    return values.astype(np.int32), lengths


def to_ragged(seqs):
    """Sequences of ints -> int32 RaggedTensor [N, None], without Python-level
    per-element conversion (tf.ragged.constant is slow on large corpora)."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    values = (np.concatenate([np.asarray(s, np.int64).reshape(-1) for s in seqs])
              if lengths.sum() else np.zeros([0], np.int64))
    return tf.RaggedTensor.from_row_lengths(tf.constant(values, tf.int32),
                                            tf.constant(lengths, tf.int64))


class Batches:
    """The training batches of a parallel corpus, epoch by epoch, reproducibly.

    Args:
      src_ids, tgt_ids: aligned sequences of token ids (lists or arrays), without
        ``<s>``/``</s>``; id 0 (``<pad>``) must not occur.
      batch_size: sentence pairs per batch.
      seed: the epoch-``e`` order is a permutation drawn from
        ``np.random.default_rng((seed, e))`` -- a different shuffle every epoch,
        the same one on every run (``(seed, e)`` rather than ``seed + e`` so that
        seed 1 epoch 0 and seed 0 epoch 1 do not coincide).
      shuffle: False keeps the corpus order (for dev-set loss).
      bucketing: group examples of similar length, as tensorflow/nmt does with
        ``group_by_window``: bucket ``min(max(src_len // w, tgt_len // w),
        num_buckets)`` with ``w = ceil(max_src_len / num_buckets)`` (10 if no
        maximum); a batch is emitted when its bucket holds ``batch_size``
        examples, and the partial buckets are flushed at the end of the epoch.
        False: plain consecutive batches of the shuffled order.
      max_src_len, max_tgt_len: token limits (None: no limit). tensorflow/nmt's
        default is 50.
      overlong: ``"filter"`` drops pairs beyond a limit; ``"truncate"`` cuts them
        (what tensorflow/nmt's ``src_max_len``/``tgt_max_len`` do).
      min_len: pairs with a side shorter than this are dropped (1: empty lines,
        which Europarl and IWSLT train contain, as tensorflow/nmt does).
      drop_remainder: drop batches smaller than ``batch_size``.
      with_index: add ``"index"`` (int64 [B], the example's position in the input
        lists) to each batch.
      limits: ``limits(step) -> (max_src_len, max_tgt_len)``, truncation that changes
        during training (summarization's phases): batch ``b`` of epoch ``e`` is step
        ``e * num_batches() + b``, its sequences are cut to those lengths when it is
        gathered (here before ``<s>``/``</s>`` are added). None: no such cut.
      pad_free: False lets id 0 occur inside a sequence (See et al.'s articles may
        hold the word ``<pad>``, read as padding); lengths are the sequences' own.

    Batches are dicts of int32 tensors: ``src`` [B, S], ``src_len`` [B],
    ``tgt_in`` [B, T] = ``<s>`` + tokens, ``tgt_out`` [B, T] = tokens + ``</s>``,
    ``tgt_len`` [B] (= tokens + 1), padded with 0.
    """

    def __init__(self, src_ids, tgt_ids, batch_size, seed=0, shuffle=True, bucketing=True,
                 num_buckets=5, max_src_len=50, max_tgt_len=50, overlong="filter", min_len=1,
                 drop_remainder=False, with_index=False, bos_id=BOS_ID, eos_id=EOS_ID,
                 prefetch=True, num_parallel_calls=tf.data.AUTOTUNE, limits=None,
                 pad_free=True):
        if len(src_ids) != len(tgt_ids):
            raise ValueError(f"{len(src_ids)} source sequences but {len(tgt_ids)} target sequences")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if overlong not in ("filter", "truncate"):
            raise ValueError(f"overlong must be 'filter' or 'truncate', got {overlong!r}")
        self.batch_size, self.seed = int(batch_size), int(seed)
        self.shuffle, self.bucketing, self.num_buckets = shuffle, bucketing, int(num_buckets)
        self.drop_remainder, self.with_index = drop_remainder, with_index
        self.bos_id, self.eos_id = int(bos_id), int(eos_id)
        self.prefetch, self.num_parallel_calls = prefetch, num_parallel_calls
        self.limits = limits
        self.num_input_examples = len(src_ids)

        src_vals, src_lens = _flatten(src_ids, "source", pad_free)
        tgt_vals, tgt_lens = _flatten(tgt_ids, "target", pad_free)
        keep = (src_lens >= min_len) & (tgt_lens >= min_len)
        if overlong == "filter":
            if max_src_len is not None:
                keep &= src_lens <= max_src_len
            if max_tgt_len is not None:
                keep &= tgt_lens <= max_tgt_len
        self.example_ids = np.flatnonzero(keep)  # kept example -> input position
        self.num_filtered = self.num_input_examples - len(self.example_ids)

        src_vals, src_lens = self._select(src_vals, src_lens, keep, max_src_len)
        tgt_vals, tgt_lens = self._select(tgt_vals, tgt_lens, keep, max_tgt_len)
        self.src_lens, self.tgt_lens = src_lens, tgt_lens
        self._src, self._tgt = row_store(src_vals, src_lens), row_store(tgt_vals, tgt_lens)
        self._example_ids_t = tf.constant(self.example_ids, tf.int64)
        limit = max_src_len if max_src_len is not None else max_tgt_len
        self.bucket_width = -(-limit // self.num_buckets) if limit else 10
        self._bucket = np.minimum(np.maximum(src_lens // self.bucket_width,
                                             tgt_lens // self.bucket_width), self.num_buckets)
        # The number of batches is the same in every epoch: only the order of
        # examples changes, never how many fall into each bucket.
        if bucketing:
            sizes = np.bincount(self._bucket, minlength=self.num_buckets + 1)
        else:
            sizes = np.asarray([self.num_examples])
        full, partial = sizes // self.batch_size, (sizes % self.batch_size) > 0
        self._num_batches = int(full.sum() + (0 if drop_remainder else partial.sum()))
        self._plans = {}  # epoch -> plan, a few recent epochs

    @staticmethod
    def _select(values, lengths, keep, max_len):
        """Keeps the rows in ``keep``, each cut to ``max_len`` ids."""
        new_lengths = lengths if max_len is None else np.minimum(lengths, max_len)
        if keep.all() and np.array_equal(new_lengths, lengths):
            return values, lengths  # nothing dropped or cut (summarization's articles)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        new_lengths = np.where(keep, new_lengths, 0)
        row = np.repeat(np.arange(len(lengths)), lengths)
        offset = np.arange(values.size) - np.repeat(starts, lengths)
        mask = offset < new_lengths[row] if values.size else np.zeros([0], bool)
        return values[mask], new_lengths[keep]

    @property
    def num_examples(self):
        """Examples left after length filtering."""
        return len(self.example_ids)

    def plan(self, epoch):
        """The batches of ``epoch``: a list of arrays of (kept) example indices."""
        epoch = int(epoch)
        if epoch in self._plans:
            return self._plans[epoch]
        n = self.num_examples
        if self.shuffle:
            order = np.random.default_rng((self.seed, int(epoch))).permutation(n)
        else:
            order = np.arange(n)
        bs = self.batch_size
        if not self.bucketing:
            batches = [order[i:i + bs] for i in range(0, n, bs)]
        else:
            bucket = self._bucket
            position = np.empty(n, np.int64)
            position[order] = np.arange(n)
            full, rest = [], []
            for b in range(self.num_buckets + 1):
                members = order[bucket[order] == b]  # in arrival (shuffled) order
                cut = len(members) - len(members) % bs
                for i in range(0, cut, bs):
                    chunk = members[i:i + bs]
                    full.append((position[chunk[-1]], chunk))  # emitted when it fills up
                if cut < len(members):
                    rest.append(members[cut:])
            full.sort(key=lambda item: item[0])
            batches = [chunk for _, chunk in full] + rest  # flush at the end, bucket order
        if self.drop_remainder:
            batches = [b for b in batches if len(b) == bs]
        assert len(batches) == self._num_batches, (len(batches), self._num_batches)
        # tf.data (prefetching) runs ahead of the consumer into the next epoch;
        # keep a few plans so neither recomputes the other's.
        if len(self._plans) >= 3:
            del self._plans[min(self._plans)]
        self._plans[epoch] = batches
        return batches

    def num_batches(self, epoch=0):
        """Batches per epoch (the same for every epoch)."""
        del epoch
        return self._num_batches

    def step_limits(self, steps):
        """int64 [len(steps), 2]: the ``limits`` of each step (0, 0 without limits)."""
        if self.limits is None:
            return np.zeros([len(steps), 2], np.int64)
        return np.asarray([self.limits(int(s)) for s in steps], np.int64).reshape(-1, 2)

    def _gather(self, idx, limits):
        """The batch of the (kept) examples ``idx``, cut to ``limits`` (int64 [2],
        :meth:`step_limits`)."""
        cut = (limits[0], limits[1]) if self.limits is not None else (None, None)
        src, src_len = rows(self._src, idx, cut[0])
        tgt, tgt_len = rows(self._tgt, idx, cut[1])
        n = tf.shape(idx)[0]
        # <s> + tokens, and tokens + </s> (the </s> at each row's own length)
        tgt_in = tf.concat([tf.fill([n, 1], tf.constant(self.bos_id, tf.int32)), tgt], 1)
        tgt_out = tf.concat([tgt, tf.fill([n, 1], tf.constant(PAD_ID, tf.int32))], 1)
        column = tf.range(tf.shape(tgt_out)[1], dtype=tgt_len.dtype)
        batch = {
            "src": src,
            "src_len": tf.cast(src_len, tf.int32),
            "tgt_in": tgt_in,
            "tgt_out": tf.where(column[None, :] == tgt_len[:, None], self.eos_id, tgt_out),
            "tgt_len": tf.cast(tgt_len, tf.int32) + 1,
        }
        if self.with_index:
            batch["index"] = tf.gather(self._example_ids_t, idx)
        return batch

    def dataset(self, epoch=0, start_batch=0, num_epochs=1):
        """A tf.data.Dataset of the batches from batch ``start_batch`` of ``epoch``
        on, for ``num_epochs`` epochs (counting ``epoch``; None: forever).

        The example indices of each batch come from :meth:`plan`, one epoch at a time
        (a ``tf.numpy_function`` hands the epoch's plan to tf.data as one ragged
        tensor, sliced into batches, with each batch's ``limits``); gathering and padding
        (:meth:`_gather`) run in the tf.data graph.
        One dataset spans epochs, so the pipeline is built (and its function traced)
        once per run or resume, and prefetching continues across epoch boundaries.

        Not ``Dataset.from_generator``: under Python 3.11 its kernel pins glibc's mmap
        threshold at 128 KiB for the rest of the process (``mallopt`` in TensorFlow's
        ``ApplyPython311MemoryPatch``), so every tensor above that size is mapped and
        unmapped and its pages faulted in again at every training step: 85,000 page
        faults and 1.30x the time per step of the peer benchmark's model on 2 cores
        (``benchmarks/mmap_faults.py``, which tests/benchmarks/test_mmap_faults.py runs
        on this pipeline; results/bench_profile.md, 2026-11-26).
        """
        if not 0 <= start_batch <= self._num_batches:
            raise ValueError(f"start_batch={start_batch} is outside the epoch's "
                             f"{self._num_batches} batches")

        def epoch_plan(e):
            """The batches of epoch ``e`` (from ``start_batch`` in the first) as the values
            and row lengths of a ragged [batches, None] tensor of example indices, and each
            batch's ``limits`` (its step's: :meth:`step_limits`)."""
            e = int(e)
            first = int(start_batch) if e == int(epoch) else 0
            chunks = self.plan(e)[first:]
            lengths = np.asarray([len(c) for c in chunks], np.int64)
            values = (np.concatenate(chunks).astype(np.int64) if chunks
                      else np.zeros([0], np.int64))
            steps = e * self._num_batches + first + np.arange(len(chunks))
            return values, lengths, self.step_limits(steps)

        def epoch_batches(e):
            values, lengths, limits = tf.numpy_function(
                epoch_plan, [e], (tf.int64, tf.int64, tf.int64), stateful=False)
            values.set_shape([None])
            lengths.set_shape([None])
            limits.set_shape([None, 2])
            return tf.data.Dataset.from_tensor_slices(
                (tf.RaggedTensor.from_row_lengths(values, lengths), limits))

        epochs = (tf.data.Dataset.counter(int(epoch)) if num_epochs is None
                  else tf.data.Dataset.range(int(epoch), int(epoch) + int(num_epochs)))
        # Neither function has tensor-dependent Python control flow: AutoGraph's source
        # conversion, which tf.data applies by default, only costs time (about a second
        # of CPU per pipeline, more than the gathering's own tracing).
        ds = epochs.flat_map(tf.autograph.experimental.do_not_convert(epoch_batches))
        ds = ds.map(tf.autograph.experimental.do_not_convert(self._gather),
                    num_parallel_calls=self.num_parallel_calls, deterministic=True)
        if self.prefetch:
            ds = ds.prefetch(tf.data.AUTOTUNE)
        return ds

    def iterator(self, epoch=0, batch=0, num_epochs=None):
        return BatchIterator(self, epoch=epoch, batch=batch, num_epochs=num_epochs)

    def position(self, state):
        """``(epoch, batch)`` of a saved :meth:`BatchIterator.state_dict`."""
        return int(state["epoch"]), int(state["batch"])


def row_store(values, lengths):
    """Sequences of ids kept as one flat int32 tensor of their ``values`` with each row's
    start and length (int64): what :func:`rows` gathers from."""
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(lengths) else lengths
    return (tf.constant(values, tf.int32), tf.constant(starts, tf.int64),
            tf.constant(lengths, tf.int64))


def rows(store, idx, limit=None, pad=PAD_ID):
    """Rows ``idx`` of a :func:`row_store`, each cut to ``limit`` ids (a scalar tensor;
    None: no cut), as a dense int32 [B, W] padded with ``pad`` (W: the longest cut row)
    and their cut lengths (int64 [B]). What ``tf.gather`` on a RaggedTensor and
    ``to_tensor(pad)`` give, in a dozen dense ops: tracing the ragged ops cost more than
    the rest of building the input pipeline."""
    values, starts, lengths = store
    length = tf.gather(lengths, idx)
    if limit is not None:
        length = tf.minimum(length, tf.cast(limit, tf.int64))
    width = tf.reduce_max(tf.concat([length, [0]], 0))
    column = tf.range(width)
    inside = column[None, :] < length[:, None]
    position = tf.where(inside, tf.gather(starts, idx)[:, None] + column[None, :], 0)
    return tf.where(inside, tf.gather(values, position), tf.constant(pad, tf.int32)), length


def make_dataset(src_ids, tgt_ids, batch_size, seed=0, epoch=0, start_batch=0, num_epochs=1,
                 **options):
    """Training batches as a tf.data.Dataset (see :class:`Batches` for
    ``options``). ``make_dataset(..., epoch=e, start_batch=b)`` yields exactly the
    batches ``b, b+1, ...`` of epoch ``e`` of an uninterrupted run (then the next
    epochs, if ``num_epochs`` > 1 or None)."""
    return Batches(src_ids, tgt_ids, batch_size, seed=seed, **options).dataset(
        epoch, start_batch, num_epochs)


class BatchIterator:
    """Endless (or ``num_epochs``-long) iteration over :class:`Batches`, resumable.

    ``position`` is ``(epoch, batch)``: the next batch to be returned is batch
    ``batch`` of epoch ``epoch``. ``state_dict()`` holds it as plain integers (plus
    the seed and example count, checked on restore so that a position is never
    applied to different data); ``load_state_dict(state)`` continues from there,
    returning exactly the batches an uninterrupted iterator would have. Prefetched
    but unreturned batches do not count.
    """

    def __init__(self, batches, epoch=0, batch=0, num_epochs=None):
        self.batches = batches
        self.num_epochs = num_epochs
        self._epoch, self._batch = int(epoch), int(batch)
        self._it = None
        self._normalize()

    @property
    def position(self):
        return self._epoch, self._batch

    @property
    def epoch(self):
        return self._epoch

    def state_dict(self):
        return {"epoch": self._epoch, "batch": self._batch, "seed": self.batches.seed,
                "num_examples": self.batches.num_examples}

    def load_state_dict(self, state):
        for key in ("seed", "num_examples"):
            mine = self.state_dict()[key]
            if key in state and int(state[key]) != mine:
                raise ValueError(f"saved data position has {key}={state[key]} but this pipeline "
                                 f"has {key}={mine}; it was saved for different data or settings")
        self._epoch, self._batch = self.batches.position(state)
        self._it = None
        self._normalize()

    def _normalize(self):
        # The end of an epoch is the start of the next one; this keeps saved
        # positions canonical.
        n = self.batches.num_batches()
        if n == 0:
            raise ValueError("the data pipeline has no batches (all examples filtered out?)")
        if not 0 <= self._batch <= n:
            raise ValueError(f"position (epoch {self._epoch}, batch {self._batch}) is outside "
                             f"the epoch's {n} batches")
        if self._batch == n:
            self._epoch, self._batch = self._epoch + 1, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.num_epochs is not None and self._epoch >= self.num_epochs:
            raise StopIteration
        if self._it is None:
            remaining = None if self.num_epochs is None else self.num_epochs - self._epoch
            self._it = iter(self.batches.dataset(self._epoch, self._batch, remaining))
        batch = next(self._it)
        self._batch += 1
        if self._batch == self.batches.num_batches():
            self._epoch, self._batch = self._epoch + 1, 0
        return batch


def make_eval_dataset(src_ids, batch_size, max_src_len=None):
    """Source batches for decoding, in corpus order, nothing filtered:
    ``{"src": int32 [B, S], "src_len": int32 [B], "index": int64 [B]}``.
    ``max_src_len`` truncates (None: keep everything, as tensorflow/nmt's
    inference). Empty lines give ``src_len`` 0."""
    values, lengths = _flatten(src_ids, "source")
    if max_src_len is not None:
        values, lengths = Batches._select(values, lengths, np.ones(len(lengths), bool),
                                          max_src_len)
    store = row_store(values, lengths)
    ds = tf.data.Dataset.range(len(lengths)).batch(batch_size)

    def gather(idx):
        src, src_len = rows(store, idx)
        return {"src": src, "src_len": tf.cast(src_len, tf.int32), "index": idx}

    return ds.map(tf.autograph.experimental.do_not_convert(gather)).prefetch(tf.data.AUTOTUNE)
