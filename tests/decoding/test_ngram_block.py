"""Repeated n-gram blocking (acvi_tf/decoding/ngram_block.py) against brute force: the bans
against a Python scan of every earlier n-gram, and greedy / beam search with blocking
against enumeration of every allowed output of the toy model of test_search.py."""

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.decoding import beam_search, greedy_search
from acvi_tf.decoding.ngram_block import block_repeated_ngrams, repeated_ngram_bans
from tests.decoding.test_search import (ATOL, END, NORMALIZATIONS, ToyModel,
                                        assert_beam_matches, enumerate_hypotheses,
                                        reference_beam, run_beam)


def python_bans(seq, n):
    """The tokens that would repeat an n-gram of ``seq`` if appended to it."""
    if len(seq) < n - 1:
        return set()
    tail = tuple(seq[len(seq) - n + 1:]) if n > 1 else ()
    return {seq[j + n - 1] for j in range(len(seq) - n + 1) if tuple(seq[j:j + n - 1]) == tail}


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_bans_equal_a_scan_of_every_earlier_ngram(n):
    """Small vocabularies make repeats common; positions from ``step`` on hold junk that
    must be ignored."""
    rng = np.random.default_rng(n)
    length = 12
    ids = rng.integers(0, 3, size=(40, length)).astype(np.int32)
    for step in range(length + 1):
        got = repeated_ngram_bans(tf.constant(ids), tf.constant(step), n).numpy()
        expected = {(r, t) for r in range(len(ids)) for t in python_bans(list(ids[r, :step]), n)}
        assert {(int(r), int(t)) for r, t in got} == expected, (n, step)


def test_block_sets_only_the_banned_entries_to_minus_inf_and_n_zero_is_off():
    ids = tf.constant([[5, 6, 5, 0], [1, 2, 3, 4]], tf.int32)   # row 0: "5 6 5" -> ban 6
    log_probs = tf.math.log(tf.fill([2, 8], 1 / 8))
    out = block_repeated_ngrams(log_probs, ids, 3, 2).numpy()
    assert np.isneginf(out[0, 6]) and np.isfinite(np.delete(out[0], 6)).all()
    np.testing.assert_array_equal(out[1], log_probs.numpy()[1])
    assert block_repeated_ngrams(log_probs, ids, 3, 0) is log_probs
    with pytest.raises(ValueError, match="no_repeat_ngram"):
        greedy_search(lambda i, s: (None, s, {}), {}, [0], END, 4, no_repeat_ngram=-1)


class BlockingToyModel(ToyModel):
    """The toy model's numpy twin with the blocked tokens at -inf (unnormalised), as the
    search's blocking should make it."""

    def __init__(self, model, n):
        super().__init__(model.table, model.emb, model.h0)
        self.n = n

    def np_log_probs(self, b, prefix, min_length):
        log_probs = super().np_log_probs(b, prefix, min_length)
        for token in python_bans(list(prefix), self.n):
            log_probs[token] = -np.inf
        return log_probs


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_wide_beam_with_blocking_equals_brute_force(n, normalization):
    max_length, beam_width = 5, 64
    model = BlockingToyModel(ToyModel.random(seed=5, batch=2, max_length=max_length,
                                             vocab=4, scale=0.5), n)
    out = run_beam(model, beam_width, max_length, 0, normalization, no_repeat_ngram=n)
    for b in range(model.batch):
        every = enumerate_hypotheses(model, b, max_length, 0, normalization)
        assert all(not python_bans(list(seq[:i]), n) & {seq[i]}
                   for *_, seq in every for i in range(len(seq)))
        assert_beam_matches(out, b, every[:beam_width], model, max_length, 0, normalization)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("beam_width", [1, 3])
def test_narrow_beam_and_greedy_with_blocking_equal_the_references(n, beam_width):
    """A model that likes to loop (the toy with a low temperature) must not repeat an
    n-gram; greedy equals the argmax path of the blocked model."""
    max_length = 7
    model = BlockingToyModel(ToyModel.random(seed=7, batch=3, max_length=max_length,
                                             scale=0.3), n)
    out = run_beam(model, beam_width, max_length, 1, "average", no_repeat_ngram=n)
    plain = run_beam(ToyModel.random(seed=7, batch=3, max_length=max_length, scale=0.3),
                     beam_width, max_length, 1, "average")

    def repeats(result, b):
        seq = result["ids"][b, 0, :result["lengths"][b, 0]].tolist()
        return any(seq[i] in python_bans(seq[:i], n) for i in range(len(seq)))
    assert any(repeats(plain, b) for b in range(model.batch))  # the search has work to do
    assert not any(repeats(out, b) for b in range(model.batch))
    for b in range(model.batch):
        expected = reference_beam(model, b, beam_width, max_length, 1, "average")
        assert_beam_matches(out, b, expected, model, max_length, 1, "average")
    greedy = greedy_search(model.step_fn, model.initial_state(), model.start_ids(), END,
                           max_length, min_length=1, no_repeat_ngram=n)
    for b in range(model.batch):
        seq, total = (), 0.0
        while not seq or (seq[-1] != END and len(seq) < max_length):
            log_probs = model.np_log_probs(b, seq, 1)
            token = int(np.argmax(log_probs))
            seq, total = seq + (token,), total + log_probs[token]
        length = int(greedy["lengths"][b])
        assert tuple(greedy["ids"][b, :length].numpy().tolist()) == seq
        np.testing.assert_allclose(greedy["log_prob"][b], total, atol=ATOL)


def test_blocking_compiles_with_xla():
    model = BlockingToyModel(ToyModel.random(seed=9, batch=2, max_length=6, scale=0.3), 2)

    @tf.function(jit_compile=True)
    def search():
        return beam_search(model.step_fn, model.initial_state(), model.start_ids(), END, 3,
                           6, no_repeat_ngram=2)
    eager = run_beam(model, 3, 6, 0, "none", no_repeat_ngram=2)
    compiled = search()
    np.testing.assert_array_equal(compiled["ids"].numpy(), eager["ids"])
    np.testing.assert_allclose(compiled["scores"].numpy(), eager["scores"], atol=ATOL)
