"""Digests of summarization training batches, for the equivalence test of the batching
path (tests/data/test_article_batches.py): the first batches of a run, each key's
dtype, shape and SHA-1, on a synthetic store and on the real CNN/DM mirror.

``summary_batch_digests.json`` was recorded with the summarization stream before it went
through :mod:`acvi_tf.data.batching` (``TrainStream`` of acvi_tf/tasks/summarization.py
at d41303c), by ``record`` below; the test computes the same digests with today's
stream and compares.
"""

import hashlib
import json
import os
import random

import numpy as np

from acvi_tf.data import cnndm
from acvi_tf.data.vocab import Vocab
from acvi_tf.training.schedules import PhaseSchedule

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "summary_batch_digests.json")
# (pointer head, pad_multiple) of each recorded run
RUNS = {"pointer_pad0": (True, 0), "pointer_pad8": (True, 8), "softmax_pad0": (False, 0),
        "softmax_pad8": (False, 8)}


def synthetic():
    """(store, batch size, phases, seed, steps): 37 pairs of 40 words, 30 of them in the
    vocabulary (article OOVs copied into abstracts), batches of 4 (9 an epoch, one pair
    dropped), three phases and coverage over 26 steps (three epochs)."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(40)]
    store = cnndm.EncodedPairs(Vocab(words[:30]), 60, 20)
    for _ in range(37):
        article = " ".join(rng.choice(words) for _ in range(rng.randint(3, 70)))
        summary = " ".join(rng.choice(words) for _ in range(rng.randint(1, 25)))
        store.add(article, [summary])
    return store, 4, PhaseSchedule([(6, 12, 5), (14, 30, 10), (22, 60, 20)], 4), 5, 26


def real():
    """The same on the mirror's CNN/DM: the first 240 train pairs, a 2,000-word vocabulary
    (many OOVs), Table 5 laid over 48 steps at 80 / 24 tokens, batches of 8 (30 an
    epoch)."""
    vocab = cnndm.load_vocab(2_000)
    store = cnndm.EncodedPairs(vocab, 80, 24)
    for pair in cnndm.iter_pairs("train", limit=240):
        store.add(pair.article, pair.abstract_sents)
    return store, 8, PhaseSchedule.fit(48, 8, 80, 24), 7, 48


def digest(batch):
    """One batch (arrays or tensors) as ``"key:dtype[shape] ... sha1"``: each key's dtype
    and shape, then the SHA-1 of all their bytes, in key order."""
    sha, parts = hashlib.sha1(), []
    for key in sorted(batch):
        x = np.array(batch[key], order="C")  # (ascontiguousarray makes a scalar 1-d)
        parts.append(f"{key}:{x.dtype}{list(x.shape)}".replace(" ", ""))
        sha.update(key.encode() + x.dtype.str.encode() + str(x.shape).encode() + x.tobytes())
    return " ".join(parts + [sha.hexdigest()])


def digests(make_stream, setup):
    """{run: [digest of each batch]} of ``make_stream(store, batch_size, phases, seed,
    pointer, pad_multiple)`` (an iterable of batches) over each run of RUNS."""
    store, batch_size, phases, seed, steps = setup
    out = {}
    for name, (pointer, pad_multiple) in RUNS.items():
        it = iter(make_stream(store, batch_size, phases, seed, pointer, pad_multiple))
        out[name] = [digest(next(it)) for _ in range(steps)]
    return out


def record(make_stream, with_real=True):
    golden = {"synthetic": digests(make_stream, synthetic())}
    if with_real:
        golden["real"] = digests(make_stream, real())
    with open(GOLDEN, "w", encoding="utf-8") as f:
        json.dump(golden, f, indent=1, sort_keys=True)
        f.write("\n")
    return golden
