"""Summarization's training batches: the same as before they went through the shared
batching path (digests recorded from the old stream, tests/data/summary_batch_digests.py),
on a synthetic store and on the real CNN/DM mirror."""

import json

import pytest

from acvi_tf.data import cnndm, sources
from acvi_tf.tasks.summarization import TrainStream
from tests.data import summary_batch_digests as recorded

_HAVE_CNNDM = sources.locate("cnn_dailymail", cnndm.chunk_path("train", 0), required=False)


def _stream(store, batch_size, phases, seed, pointer, pad_multiple):
    return TrainStream(store, batch_size, phases, seed, pointer, pad_multiple)


def _golden(which):
    with open(recorded.GOLDEN, encoding="utf-8") as f:
        return json.load(f)[which]


def _assert_same(got, want):
    for run in want:
        for step, (g, w) in enumerate(zip(got[run], want[run])):
            assert g == w, f"{run}, batch {step}"
        assert len(got[run]) == len(want[run])


def test_synthetic_batches_are_the_recorded_ones():
    _assert_same(recorded.digests(_stream, recorded.synthetic()), _golden("synthetic"))


@pytest.mark.skipif(not _HAVE_CNNDM, reason="CNN/DM chunks not found (no ../shared/data mirror)")
def test_real_batches_are_the_recorded_ones():
    _assert_same(recorded.digests(_stream, recorded.real()), _golden("real"))
