"""--pad_multiple bounds the training batch shapes XLA compiles: the distinct shapes over
an epoch of tiny synthetic data, translation (bucketed tf.data batches) and summarization
(Table 5's phases), against the bound the multiple gives; captioning pads its captions."""

import math
import random

import numpy as np

from acvi_tf.data import cnndm
from acvi_tf.data.article_batches import ArticleBatches, padded_length
from acvi_tf.data.batching import Batches
from acvi_tf.data.vocab import Vocab
from acvi_tf.tasks.captioning import train_transform
from acvi_tf.tasks.translation import make_train_data
from acvi_tf.training.schedules import PhaseSchedule

MAX_LEN, MULTIPLE, BUCKETS, BATCH = 50, 8, 25, 16


def _translation_epoch(pad_multiple):
    """The (src, tgt_in) shapes of one epoch of 600 pairs of lengths 1..MAX_LEN."""
    rng = np.random.default_rng(0)
    src = [[5] * n for n in rng.integers(1, MAX_LEN + 1, 600)]
    tgt = [[6] * n for n in rng.integers(1, MAX_LEN + 1, 600)]
    batches = Batches(src, tgt, BATCH, seed=0, num_buckets=BUCKETS, max_src_len=MAX_LEN,
                      max_tgt_len=MAX_LEN, prefetch=False)
    shapes = []
    for batch, position in make_train_data(batches, pad_multiple)(None):
        shapes.append((tuple(batch["src"].shape), tuple(batch["tgt_in"].shape)))
        assert batch["tgt_out"].shape == batch["tgt_in"].shape
        if position["epoch"] >= 1:
            return shapes


def test_translation_shapes_are_bounded():
    shapes = _translation_epoch(MULTIPLE)
    lengths = {(s[1], t[1]) for s, t in shapes}
    # sources up to 50 tokens, targets up to 51 (<s> + 50): 7 multiples of 8 each
    bound = math.ceil(MAX_LEN / MULTIPLE) * math.ceil((MAX_LEN + 1) / MULTIPLE)
    assert len(lengths) <= bound and all(n % MULTIPLE == 0 for pair in lengths for n in pair)
    full = {shape for shape in shapes if shape[0][0] == BATCH}
    assert len(full) <= bound
    # the epoch's last partial bucket batches add batch sizes (fixed when partial batches
    # are dropped or padded), at most one per bucket
    assert len(set(shapes)) <= bound * (1 + BUCKETS)
    unpadded = {(s[1], t[1]) for s, t in _translation_epoch(0)}
    assert len(unpadded) > 2 * len(lengths)  # the count sees what padding saves


_WORDS = [f"w{i}" for i in range(30)]


def _store(rng, pairs=40):
    vocab = Vocab(_WORDS)
    store = cnndm.EncodedPairs(vocab, 60, 20)
    for _ in range(pairs):
        article = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 70)))
        summary = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 25)))
        store.add(article, [summary])
    return store


def _summarization_steps(store, phases, pad_multiple, steps=20):
    """(phase index, article length, summary length) of each of the first ``steps``."""
    it = ArticleBatches(store, 4, phases, seed=1, pad_multiple=pad_multiple).iterator()
    out = []
    for step in range(steps):
        b = next(it)
        assert b["src_ext"].shape == b["src"].shape
        assert b["tgt_out"].shape == b["tgt_in"].shape
        out.append((phases.phase(step)["index"], b["src"].shape[1], b["tgt_in"].shape[1]))
    return out


def test_summarization_shapes_are_bounded_per_phase():
    phases = PhaseSchedule([(10, 30, 10), (20, 60, 20)], coverage_steps=0)
    store = _store(random.Random(0))  # 40 pairs, batches of 4: an epoch a phase
    padded = _summarization_steps(store, phases, MULTIPLE)
    unpadded = _summarization_steps(store, phases, 0)
    for index, (_, enc, dec) in enumerate(phases.phases):
        lengths = {(s, t) for i, s, t in padded if i == index}
        assert len(lengths) <= math.ceil(enc / MULTIPLE) * math.ceil(dec / MULTIPLE)
        assert all(s == enc or s % MULTIPLE == 0 for s, _ in lengths)
        assert all(t == dec or t % MULTIPLE == 0 for _, t in lengths)
    # the same examples (same seed): padding only lengthens, never past the phase's cap
    for (i, s, t), (_, s0, t0) in zip(padded, unpadded):
        _, enc, dec = phases.phases[i]
        assert s0 <= s <= enc and t0 <= t <= dec
    assert len(set(padded)) < len(set(unpadded))


def test_captioning_pads_the_captions_only():
    frames = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)

    def with_features(batch):
        return {"src": frames, "src_len": np.full(2, 3, np.int32),
                "tgt_in": batch["tgt_in"], "tgt_out": batch["tgt_out"]}
    for length, padded in ((1, 8), (8, 8), (9, 16), (31, 32)):
        tgt = np.ones([2, length], np.int32)
        batch = train_transform(with_features, MULTIPLE)({"tgt_in": tgt, "tgt_out": tgt})
        assert batch["tgt_in"].shape == batch["tgt_out"].shape == (2, padded)
        assert int(np.sum(batch["tgt_in"])) == 2 * length  # zeros (<pad>) appended
        assert np.shape(batch["src"]) == (2, 3, 4)
    assert train_transform(with_features)({"tgt_in": tgt, "tgt_out": tgt})["tgt_in"] is tgt


def test_padded_length():
    assert [padded_length(n, 8, 30) for n in (1, 8, 9, 24, 25, 30)] == [8, 8, 16, 24, 30, 30]
    assert padded_length(13, 0, 30) == 13
