"""Summarization's training batches (acvi_tf/data/article_batches.py): the same as before
they went through the shared batching path (digests recorded from the old stream,
tests/data/summary_batch_digests.py), on a synthetic store and on the real CNN/DM mirror;
See et al.'s construction at each phase's lengths; exact resumption mid-phase."""

import json

import numpy as np
import pytest

from acvi_tf.data import cnndm, sources
from acvi_tf.data.article_batches import ArticleBatches
from acvi_tf.tasks.base import resumable_train_data
from tests.data import summary_batch_digests as recorded

_HAVE_CNNDM = sources.locate("cnn_dailymail", cnndm.chunk_path("train", 0), required=False)


def _stream(store, batch_size, phases, seed, pointer, pad_multiple):
    return ArticleBatches(store, batch_size, phases, seed, pointer, pad_multiple).iterator()


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


def _numpy(batch):
    return {k: np.asarray(v) for k, v in batch.items()}


def _assert_batches_equal(got, want):
    assert len(got) == len(want)
    for step, (g, w) in enumerate(zip(got, want)):
        assert set(g) == set(w), step
        for k in w:
            np.testing.assert_array_equal(g[k], w[k], err_msg=f"batch {step}, {k}")


@pytest.mark.parametrize("pointer,pad_multiple", [(True, 0), (False, 8)])
def test_a_restart_mid_phase_resumes_with_the_uninterrupted_batches(pointer, pad_multiple):
    """Through the Trainer's data protocol (the position saved with a checkpoint): a run
    stopped after any step, restarted in a new process's objects, gets the batches of the
    uninterrupted run, with the phase's truncation of each step."""
    store, batch_size, phases, seed, steps = recorded.synthetic()

    def train_data():
        batches = ArticleBatches(store, batch_size, phases, seed, pointer, pad_multiple)
        return resumable_train_data(batches.iterator)

    whole, positions = [], []
    for batch, position in train_data()(None):
        whole.append(_numpy(batch))
        positions.append(position)
        if len(whole) == steps:
            break
    # 9 batches an epoch; steps 6 and 14 start phases 2 and 3, 22 the coverage steps
    for stop in (4, 8, 9, 11, 17, 23):
        assert positions[stop - 1]["epoch"] == stop // 9, positions[stop - 1]
        resumed = []
        for batch, _ in train_data()(json.loads(json.dumps(positions[stop - 1]))):
            resumed.append(_numpy(batch))
            if len(resumed) == steps - stop:
                break
        _assert_batches_equal(resumed, whole[stop:])
    for step, batch in enumerate(whole):
        phase = phases.phase(step)
        assert batch["src"].shape[1] <= phase["max_enc_steps"]
        assert batch["tgt_in"].shape[1] <= phase["max_dec_steps"]
        assert ("src_ext" in batch) == pointer


def test_a_position_saved_by_the_old_stream_resumes():
    """A run checkpointed before summarization batched through Batches saved
    ``{"epoch", "index", "step"}`` (``index``: pairs into the epoch); it resumes at the
    batch that position names."""
    store, batch_size, phases, seed, _ = recorded.synthetic()
    batches = ArticleBatches(store, batch_size, phases, seed)
    whole = [_numpy(b) for b, _ in zip(batches.iterator(), range(14))]
    it = batches.iterator()
    it.load_state_dict({"epoch": 1, "index": 8, "step": 11})  # 9 batches of 4 an epoch
    _assert_batches_equal([_numpy(next(it)) for _ in range(3)], whole[11:14])


def test_the_batches_are_see_et_als():
    """Each batch against cnndm.make_batch of EncodedPairs.example at its phase's lengths
    (the construction the recorded stream used), OOV ids included."""
    store, batch_size, phases, seed, steps = recorded.synthetic()
    batches = ArticleBatches(store, batch_size, phases, seed)
    vocab, seen_oov, it = store.vocab, False, batches.iterator()
    for step in range(steps):
        epoch, index = divmod(step, batches.num_batches())
        batch = _numpy(next(it))
        phase = phases.phase(step)
        examples = [store.example(i, phase["max_enc_steps"], phase["max_dec_steps"])
                    for i in batches.plan(epoch)[index]]
        want = cnndm.make_batch(examples, vocab)
        for k in ("src", "src_ext", "tgt_in", "tgt_out", "max_oovs"):
            np.testing.assert_array_equal(batch[k], want[k], err_msg=f"step {step}, {k}")
        seen_oov |= bool((batch["tgt_out"] >= len(vocab)).any())
    assert seen_oov
