"""acvi_tf/data/batching.py: batch layout, length filtering and truncation, bucketing,
seeded shuffles, exact resumption, the evaluation dataset."""

import json

import numpy as np
import pytest

from acvi_tf.data import batching as B
from acvi_tf.data.vocab import BOS_ID, EOS_ID

def _toy_corpus(n=103, seed=0, max_len=14):
    rng = np.random.default_rng(seed)
    src = [rng.integers(4, 50, size=rng.integers(1, max_len)).tolist() for _ in range(n)]
    tgt = [rng.integers(4, 50, size=rng.integers(1, max_len)).tolist() for _ in range(n)]
    return src, tgt


def _as_numpy(batch):
    return {k: v.numpy() for k, v in batch.items()}


def test_batch_layout():
    src, tgt = _toy_corpus()
    pipe = B.Batches(src, tgt, batch_size=8, seed=3, with_index=True)
    seen = []
    for batch in map(_as_numpy, pipe.dataset(epoch=0)):
        assert set(batch) == {"src", "src_len", "tgt_in", "tgt_out", "tgt_len", "index"}
        assert all(batch[k].dtype == np.int32 for k in ("src", "src_len", "tgt_in", "tgt_out",
                                                         "tgt_len"))
        assert batch["tgt_in"].shape == batch["tgt_out"].shape
        np.testing.assert_array_equal(batch["src_len"], (batch["src"] != 0).sum(1))
        np.testing.assert_array_equal(batch["tgt_len"], (batch["tgt_out"] != 0).sum(1))
        np.testing.assert_array_equal(batch["tgt_len"], (batch["tgt_in"] != 0).sum(1))
        assert batch["src"].shape[1] == batch["src_len"].max()
        for row, i in enumerate(batch["index"]):
            n, m = batch["src_len"][row], batch["tgt_len"][row]
            assert batch["src"][row, :n].tolist() == src[i]
            assert batch["tgt_in"][row, :m].tolist() == [BOS_ID] + tgt[i]
            assert batch["tgt_out"][row, :m].tolist() == tgt[i] + [EOS_ID]
        seen.extend(batch["index"].tolist())
    assert sorted(seen) == list(range(len(src)))  # every example exactly once per epoch


def test_length_filtering_and_truncation():
    src = [[5] * 3, [5] * 60, [5] * 4, [], [5] * 50]
    tgt = [[6] * 2, [6] * 2, [6] * 51, [6] * 3, [6] * 50]
    # max 50 by default; no bucketing, so that everything kept is in one batch
    pipe = B.Batches(src, tgt, batch_size=10, seed=0, bucketing=False, with_index=True)
    assert pipe.num_filtered == 3 and pipe.num_examples == 2
    (batch,) = map(_as_numpy, pipe.dataset(0))
    assert sorted(batch["index"].tolist()) == [0, 4]
    trunc = B.Batches(src, tgt, batch_size=10, seed=0, bucketing=False, overlong="truncate",
                      max_src_len=10, max_tgt_len=20, with_index=True)
    (batch,) = map(_as_numpy, trunc.dataset(0))
    assert sorted(batch["index"].tolist()) == [0, 1, 2, 4]  # only the empty line is dropped
    assert batch["src_len"].max() == 10 and batch["tgt_len"].max() == 21
    nolimit = B.Batches(src, tgt, batch_size=10, max_src_len=None, max_tgt_len=None)
    assert nolimit.num_examples == 4


def test_bucketing_and_plain_batching():
    src, tgt = _toy_corpus(n=400, max_len=40)
    pipe = B.Batches(src, tgt, batch_size=16, seed=1, num_buckets=4, max_src_len=40,
                     max_tgt_len=40)
    w = pipe.bucket_width
    assert w == 10
    for batch in pipe.plan(0):
        buckets = np.maximum(pipe.src_lens[batch] // w, pipe.tgt_lens[batch] // w)
        assert len(set(np.minimum(buckets, 4).tolist())) == 1  # one length bucket per batch
    sizes = [len(b) for b in pipe.plan(0)]
    assert sum(sizes) == 400 and sizes.count(16) >= 400 // 16 - 5
    plain = B.Batches(src, tgt, batch_size=16, seed=1, bucketing=False, max_src_len=40,
                      max_tgt_len=40)
    assert [len(b) for b in plain.plan(0)] == [16] * 25
    dropped = B.Batches(src[:50], tgt[:50], batch_size=16, bucketing=False,
                        drop_remainder=True)
    assert [len(b) for b in dropped.plan(0)] == [16] * 3


def test_shuffle_is_seeded_per_epoch():
    src, tgt = _toy_corpus()

    def order(seed, epoch, **kw):
        return np.concatenate(B.Batches(src, tgt, 8, seed=seed, **kw).plan(epoch)).tolist()

    assert order(0, 0) == order(0, 0)
    assert order(0, 0) != order(0, 1)
    assert order(0, 0) != order(1, 0)
    assert order(0, 5, shuffle=False, bucketing=False) == list(range(103))


def _collect(iterator, n):
    return [_as_numpy(next(iterator)) for _ in range(n)]


def _assert_same_batches(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])


@pytest.mark.parametrize("bucketing", [True, False])
def test_resume_sees_exactly_the_uninterrupted_batches(bucketing):
    src, tgt = _toy_corpus(n=90)
    opts = dict(batch_size=8, seed=7, bucketing=bucketing, with_index=True)
    per_epoch = B.Batches(src, tgt, **opts).num_batches(0)
    total = 2 * per_epoch + 5  # crosses two epoch boundaries

    reference = _collect(B.Batches(src, tgt, **opts).iterator(), total)

    first = B.Batches(src, tgt, **opts).iterator()
    head = _collect(first, per_epoch + 4)  # stop inside the second epoch
    state = json.loads(json.dumps(first.state_dict()))  # plain integers survive JSON
    assert state["epoch"] == 1 and state["batch"] == 4
    assert all(isinstance(v, int) for v in state.values())

    resumed = B.Batches(src, tgt, **opts).iterator()  # a fresh process, as after a restart
    resumed.load_state_dict(state)
    tail = _collect(resumed, total - len(head))
    _assert_same_batches(head + tail, reference)

    # The function form: make_dataset(epoch, start_batch) is the tail of that epoch.
    epoch1 = [_as_numpy(b) for b in B.make_dataset(src, tgt, epoch=1, start_batch=4, **opts)]
    _assert_same_batches(epoch1, reference[per_epoch + 4:2 * per_epoch])
    # ... and a dataset over several epochs is the epochs one after the other.
    two = B.make_dataset(src, tgt, epoch=0, start_batch=per_epoch - 2, num_epochs=2, **opts)
    _assert_same_batches([_as_numpy(b) for b in two], reference[per_epoch - 2:2 * per_epoch])


def test_position_at_epoch_end_and_wrong_data():
    src, tgt = _toy_corpus(n=40)
    pipe = B.Batches(src, tgt, 8, seed=0)
    it = pipe.iterator()
    _collect(it, pipe.num_batches(0))
    assert it.position == (1, 0)  # canonical: the end of epoch 0 is the start of epoch 1
    it2 = B.Batches(src, tgt, 8, seed=0).iterator(epoch=0, batch=pipe.num_batches(0))
    assert it2.position == (1, 0)
    other = B.Batches(src[:30], tgt[:30], 8, seed=0).iterator()
    with pytest.raises(ValueError, match="num_examples"):
        other.load_state_dict(it.state_dict())
    finite = B.Batches(src, tgt, 8, seed=0).iterator(num_epochs=1)
    assert len(list(finite)) == pipe.num_batches(0)


def test_pad_id_in_data_is_rejected():
    with pytest.raises(ValueError, match="target sequence 1 holds id 0"):
        B.Batches([[4], [5]], [[4], [6, 0]], batch_size=2)
    with pytest.raises(ValueError, match="2 source sequences but 1 target"):
        B.Batches([[4], [5]], [[4]], batch_size=2)


def test_eval_dataset_keeps_order_and_everything():
    src = [[4, 5], [], [6] * 70, [7]]
    batches = [_as_numpy(b) for b in B.make_eval_dataset(src, batch_size=3)]
    assert [b["index"].tolist() for b in batches] == [[0, 1, 2], [3]]
    assert batches[0]["src_len"].tolist() == [2, 0, 70]
    assert batches[0]["src"][0, :2].tolist() == [4, 5]
    cut = [_as_numpy(b) for b in B.make_eval_dataset(src, 4, max_src_len=10)]
    assert cut[0]["src_len"].tolist() == [2, 0, 10, 1]


def test_limits_cut_each_step_to_its_lengths():
    """``limits(step)`` (summarization's phases) cuts batch b of epoch e, step
    e * num_batches + b, when it is gathered; a resumed iterator cuts the same."""
    src, tgt = _toy_corpus(n=40, max_len=14)
    limits = lambda step: (3 + step, 2 + step // 2)  # noqa: E731
    pipe = B.Batches(src, tgt, batch_size=8, seed=2, bucketing=False, limits=limits,
                     with_index=True, prefetch=False)
    whole = [_as_numpy(b) for b, _ in zip(pipe.iterator(), range(12))]  # 5 an epoch
    for step, batch in enumerate(whole):
        n, m = limits(step)
        for row, i in enumerate(batch["index"]):
            assert batch["src"][row, :batch["src_len"][row]].tolist() == src[i][:n]
            assert batch["tgt_out"][row, :batch["tgt_len"][row]].tolist() == tgt[i][:m] + [EOS_ID]
    it = pipe.iterator(epoch=1, batch=2)
    for want in whole[7:]:
        got = _as_numpy(next(it))
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
