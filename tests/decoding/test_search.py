"""Tests of greedy and beam search against brute-force enumeration and a list-based reference.

The "model" is a toy recurrent step function with a fixed random table, so every
score can be recomputed in numpy:

    h_t      = 0.5 * h_{t-1} + emb[x_t]               (h_{-1} = h0[b], per example)
    log p_t  = log_softmax(table[t, x_t] + h_t + bias)  (x_t = previous token)

Its state holds a rank-0 time counter (must not be tiled), the rank-2 ``h`` and
a rank-2 bag of the inputs so far (must be tiled and reordered with the beams);
its attention is ``concat(one_hot(x_t), bag)``, a function of the whole history.
"""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.decoding import beam_search, greedy_search, length_penalty, never_emit, tile_beam

START, END = 0, 1
VOCAB = 5
ATOL = 1e-4
NORMALIZATIONS = ("none", "average", "gnmt")
ALPHA = 0.6


class ToyModel:
    """The step function above, with its numpy twin."""

    def __init__(self, table, emb, h0, bias=None):
        self.table = np.asarray(table, np.float32)      # [T, V, V]
        self.emb = np.asarray(emb, np.float32)          # [V, V]
        self.h0 = np.asarray(h0, np.float32)            # [B, V]
        vocab = self.table.shape[-1]
        # The start token can never be emitted: -inf log-probs must be handled.
        self.bias = (np.where(np.arange(vocab) == START, -np.inf, 0.0).astype(np.float32)
                     if bias is None else np.asarray(bias, np.float32))
        self.calls = 0

    @classmethod
    def random(cls, seed, batch, max_length, vocab=VOCAB, scale=1.5):
        rng = np.random.default_rng(seed)
        return cls(scale * rng.normal(size=(max_length, vocab, vocab)),
                   rng.normal(size=(vocab, vocab)), rng.normal(size=(batch, vocab)))

    @property
    def batch(self):
        return self.h0.shape[0]

    @property
    def vocab(self):
        return self.table.shape[-1]

    def initial_state(self):
        return {"time": tf.constant(0, tf.int32),
                "rnn": (tf.constant(self.h0), tf.zeros(self.h0.shape, tf.float32))}

    def start_ids(self):
        return tf.fill([self.batch], START)

    def step_fn(self, input_ids, state):
        self.calls += 1
        time = state["time"]
        h, bag = state["rnn"]
        one_hot = tf.one_hot(input_ids, self.vocab)
        h = 0.5 * h + tf.gather(self.emb, input_ids)
        bag = bag + one_hot
        logits = tf.gather(tf.gather(self.table, time), input_ids) + h + self.bias
        extras = {"attention": tf.concat([one_hot, bag], axis=-1)}
        return tf.nn.log_softmax(logits), {"time": time + 1, "rnn": (h, bag)}, extras

    def np_log_probs(self, b, prefix, min_length):
        """log p(. | prefix) of example b, float64, with the end forbidden before min_length."""
        h = self.h0[b].astype(np.float64)
        inputs = (START,) + tuple(prefix)
        for x in inputs:
            h = 0.5 * h + self.emb[x]
        logits = self.table[len(prefix), inputs[-1]] + h + self.bias
        log_probs = logits - np.logaddexp.reduce(logits)
        if len(prefix) < min_length:
            log_probs[END] = -np.inf
        return log_probs

    def np_attention(self, seq, max_length):
        """The attention the step function records along seq, zero after its end."""
        out = np.zeros((max_length, 2 * self.vocab))
        bag = np.zeros(self.vocab)
        for t, x in enumerate((START,) + tuple(seq[:-1])):
            bag[x] += 1
            out[t] = np.concatenate([np.eye(self.vocab)[x], bag])
        return out


def np_penalty(length, normalization, alpha=ALPHA):
    return {"none": 1.0, "average": float(length),
            "gnmt": ((5.0 + length) / 6.0) ** alpha}[normalization]


def enumerate_hypotheses(model, b, max_length, min_length, normalization):
    """Every possible output of example b as (score, log_prob, seq), best first."""
    out = []

    def extend(prefix, log_prob):
        log_probs = model.np_log_probs(b, prefix, min_length)
        for token in range(model.vocab):
            if not np.isfinite(log_probs[token]):
                continue
            seq, total = prefix + (token,), log_prob + log_probs[token]
            if token == END or len(seq) == max_length:
                out.append((total / np_penalty(len(seq), normalization), total, seq))
            else:
                extend(seq, total)

    extend((), 0.0)
    return sorted(out, key=lambda h: -h[0])


def reference_beam(model, b, beam_width, max_length, min_length, normalization):
    """Beam search on Python lists: top 2K candidates, split into finished and alive."""
    alive = [((), 0.0)]
    finished = []
    for _ in range(max_length):
        candidates = []
        for seq, log_prob in alive:
            log_probs = model.np_log_probs(b, seq, min_length)
            candidates += [(log_prob + log_probs[v], seq + (v,))
                           for v in range(model.vocab) if np.isfinite(log_probs[v])]
        candidates = sorted(candidates, key=lambda c: -c[0])[:2 * beam_width]
        finished += [(lp / np_penalty(len(seq), normalization), lp, seq)
                     for lp, seq in candidates if seq[-1] == END]
        finished = sorted(finished, key=lambda h: -h[0])[:beam_width]
        alive = [(seq, lp) for lp, seq in candidates if seq[-1] != END][:beam_width]
    finished += [(lp / np_penalty(max_length, normalization), lp, seq) for seq, lp in alive]
    return sorted(finished, key=lambda h: -h[0])[:beam_width]


def run_beam(model, beam_width, max_length, min_length=0, normalization="none", **kwargs):
    model.calls = 0
    out = beam_search(model.step_fn, model.initial_state(), model.start_ids(), END,
                      beam_width, max_length, min_length=min_length,
                      length_normalization=normalization, alpha=ALPHA, **kwargs)
    return {key: value.numpy() for key, value in out.items()}


def run_greedy(model, max_length, min_length=0):
    out = greedy_search(model.step_fn, model.initial_state(), model.start_ids(), END,
                        max_length, min_length=min_length)
    return {key: value.numpy() for key, value in out.items()}


def output_sequence(out, b, j):
    """Hypothesis j of example b as a tuple, after checking it is padded with END."""
    length = out["lengths"][b, j]
    ids = out["ids"][b, j]
    assert np.all(ids[length:] == END), f"b={b} j={j}: not padded after the end: {ids}"
    assert END not in ids[:length - 1], f"b={b} j={j}: extended after the end: {ids}"
    return tuple(int(i) for i in ids[:length])


def assert_beam_matches(out, b, expected, model, max_length, min_length, normalization):
    """Row b of a beam_search output holds the expected (score, log_prob, seq) list.

    Scores must match rank by rank; each returned sequence must be distinct and
    carry its own true score and log-prob. This equals comparing the sequences
    when scores are distinct, and does not hinge on the order of float32 near-ties.
    """
    truth = {seq: (score, lp) for score, lp, seq in
             enumerate_hypotheses(model, b, max_length, min_length, normalization)}
    n = len(expected)
    np.testing.assert_allclose(out["scores"][b, :n], [h[0] for h in expected], atol=ATOL)
    np.testing.assert_allclose(out["log_probs"][b, :n], [h[1] for h in expected], atol=ATOL)
    seqs = [output_sequence(out, b, j) for j in range(n)]
    assert len(set(seqs)) == n, f"duplicate hypotheses: {seqs}"
    for j, seq in enumerate(seqs):
        assert seq in truth, f"impossible hypothesis {seq}"
        np.testing.assert_allclose((out["scores"][b, j], out["log_probs"][b, j]), truth[seq],
                                   atol=ATOL, err_msg=f"b={b} j={j} seq={seq}")
    # Slots beyond the possible hypotheses are marked -inf.
    assert np.all(np.isneginf(out["scores"][b, n:]))


# 1. Brute force: a beam wide enough to keep every candidate finds the exact top list.

@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize("min_length", [0, 2])
def test_wide_beam_equals_brute_force(normalization, min_length):
    max_length, beam_width = 4, 64   # 27 alive x 4 tokens = 108 <= 2K candidates
    model = ToyModel.random(seed=1, batch=2, max_length=max_length)
    out = run_beam(model, beam_width, max_length, min_length, normalization)
    for b in range(model.batch):
        every = enumerate_hypotheses(model, b, max_length, min_length, normalization)
        assert_beam_matches(out, b, every[:beam_width], model, max_length, min_length,
                            normalization)


class BannedToyModel(ToyModel):
    """The toy model searched through ``never_emit(step_fn, [BANNED])``: its numpy twin
    drops the banned token after normalising (the other log-probs are unchanged)."""
    BANNED = 2

    def __init__(self, model):
        super().__init__(model.table, model.emb, model.h0)
        self.step_fn = never_emit(super().step_fn, [self.BANNED])

    def np_log_probs(self, b, prefix, min_length):
        log_probs = super().np_log_probs(b, prefix, min_length)
        log_probs[self.BANNED] = -np.inf
        return log_probs


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_never_emit_equals_brute_force_without_the_token(normalization):
    """Banned tokens (<pad>, <s> in the models) never appear, and every remaining
    hypothesis keeps the model's own, unrenormalised log-probability."""
    max_length, beam_width, min_length = 4, 64, 1
    model = BannedToyModel(ToyModel.random(seed=3, batch=2, max_length=max_length))
    out = run_beam(model, beam_width, max_length, min_length, normalization)
    greedy = run_greedy(model, max_length, min_length)
    for b in range(model.batch):
        every = enumerate_hypotheses(model, b, max_length, min_length, normalization)
        assert all(model.BANNED not in seq for *_, seq in every)
        assert_beam_matches(out, b, every[:beam_width], model, max_length, min_length,
                            normalization)
        assert model.BANNED not in greedy["ids"][b, :greedy["lengths"][b]].tolist()


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize("beam_width,min_length", [(1, 0), (2, 0), (3, 1), (4, 3)])
def test_narrow_beam_equals_reference(normalization, beam_width, min_length):
    max_length = 5
    model = ToyModel.random(seed=2, batch=3, max_length=max_length)
    out = run_beam(model, beam_width, max_length, min_length, normalization)
    for b in range(model.batch):
        expected = reference_beam(model, b, beam_width, max_length, min_length,
                                  normalization)
        assert_beam_matches(out, b, expected, model, max_length, min_length, normalization)
        best = enumerate_hypotheses(model, b, max_length, min_length, normalization)[0]
        assert out["scores"][b, 0] <= best[0] + ATOL


def test_num_best_returns_the_top_of_the_beam():
    model = ToyModel.random(seed=3, batch=2, max_length=4)
    full = run_beam(model, 4, 4, normalization="gnmt")
    top = run_beam(model, 4, 4, normalization="gnmt", num_best=2)
    assert top["ids"].shape == (2, 2, 4)
    for key in top:
        np.testing.assert_allclose(top[key], full[key][:, :2])
    assert np.all(np.diff(full["scores"], axis=1) <= 0)


# 2. Width 1 equals greedy search.

class EndingModel(ToyModel):
    """A ToyModel whose example b ends exactly at step end_times[b] (if allowed), never else.

    The end logit is -30 at every other step, so an end that greedy decoding does
    not take is never competitive: a width-1 beam must then return the greedy
    output. (In general it need not: the finished set may keep an end that
    greedy decoding passed by; test_narrow_beam_equals_reference covers that.)
    """

    def __init__(self, end_times, max_length, seed=4):
        base = ToyModel.random(seed, batch=len(end_times), max_length=max_length, scale=1.0)
        table = base.table.copy()
        table[:, :, END] = -30.0
        super().__init__(table, base.emb, base.h0)
        self.end_times = np.asarray(end_times, np.int32)

    def initial_state(self):
        # end_time is a rank-1 batch tensor: beam search must tile it with the rows.
        return {"toy": super().initial_state(), "end_time": tf.constant(self.end_times)}

    def step_fn(self, input_ids, state):
        log_probs, toy_state, extras = super().step_fn(input_ids, state["toy"])
        ends_now = tf.equal(state["end_time"], state["toy"]["time"])[:, None]
        is_end = tf.equal(tf.range(self.vocab), END)[None]
        log_probs = tf.nn.log_softmax(log_probs + tf.where(ends_now & is_end, 60.0, 0.0))
        return log_probs, {"toy": toy_state, "end_time": state["end_time"]}, extras


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize("min_length", [0, 2])
def test_width_one_equals_greedy(normalization, min_length):
    max_length = 6
    model = EndingModel([0, 2, 3, 5, 9], max_length)   # 9: never ends in time
    greedy = run_greedy(model, max_length, min_length)
    beam = run_beam(model, 1, max_length, min_length, normalization)
    np.testing.assert_array_equal(beam["ids"][:, 0], greedy["ids"])
    np.testing.assert_array_equal(beam["lengths"][:, 0], greedy["lengths"])
    np.testing.assert_allclose(beam["log_probs"][:, 0], greedy["log_prob"], atol=ATOL)
    np.testing.assert_allclose(beam["attention"][:, 0], greedy["attention"], atol=ATOL)
    # The test model does what it says: examples end where told (or at max_length).
    expected = [t + 1 if min_length <= t < max_length else max_length
                for t in model.end_times]
    np.testing.assert_array_equal(greedy["lengths"], expected)


@pytest.mark.parametrize("min_length", [0, 3])
def test_greedy_equals_argmax_path(min_length):
    max_length = 5
    model = ToyModel.random(seed=10, batch=4, max_length=max_length)
    out = run_greedy(model, max_length, min_length)
    for b in range(model.batch):
        seq, log_prob = (), 0.0
        while len(seq) < max_length and END not in seq:
            log_probs = model.np_log_probs(b, seq, min_length)
            seq += (int(np.argmax(log_probs)),)
            log_prob += log_probs[seq[-1]]
        np.testing.assert_array_equal(out["ids"][b], list(seq) + [END] * (max_length - len(seq)))
        assert out["lengths"][b] == len(seq)
        np.testing.assert_allclose(out["log_prob"][b], log_prob, atol=ATOL)
        np.testing.assert_allclose(out["attention"][b], model.np_attention(seq, max_length),
                                   atol=ATOL)
        assert END not in seq[:min_length]
    assert np.any(out["lengths"] < max_length), "the seed should make some example end early"


# 3. min_length, and finished hypotheses kept while longer ones go on.

def end_first_model(max_length, seed=11):
    """Ending at once is the best output (p ~ 0.5); later, ending is unlikely (p ~ 0.04).

    So [END] finishes at the first step while the alive hypotheses, all worse,
    go on; under "average" no score bound stops them before max_length.
    """
    base = ToyModel.random(seed, batch=2, max_length=max_length, scale=0.3)
    table = base.table.copy()
    table[0, START, END] += np.log(3.0)
    table[1:, :, END] -= 2.0
    return ToyModel(table, 0.1 * base.emb, 0.1 * base.h0)


@pytest.mark.parametrize("normalization", ["none", "average"])
@pytest.mark.parametrize("beam_width", [1, 2, 3])
def test_finished_hypothesis_is_kept(normalization, beam_width):
    max_length = 6
    model = end_first_model(max_length)
    out = run_beam(model, beam_width, max_length, normalization=normalization)
    np.testing.assert_array_equal(out["ids"][:, 0], [[END] * max_length] * 2)
    np.testing.assert_array_equal(out["lengths"][:, 0], [1, 1])
    for b in range(2):
        expected = reference_beam(model, b, beam_width, max_length, 0, normalization)
        assert_beam_matches(out, b, expected, model, max_length, 0, normalization)
        assert expected[0] == enumerate_hypotheses(model, b, max_length, 0, normalization)[0]
    if normalization == "average":
        # The alive hypotheses went on after [END] finished; it was kept meanwhile.
        assert model.calls > 2
        assert np.all(out["lengths"][:, 1:] > 1)


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize("min_length", [1, 3])
def test_min_length_is_respected(normalization, min_length):
    max_length = 6
    model = end_first_model(max_length)
    out = run_beam(model, 3, max_length, min_length, normalization)
    assert np.all(out["lengths"] >= min_length + 1)
    assert not np.any(out["ids"][:, :, :min_length] == END)
    for b in range(2):
        expected = reference_beam(model, b, 3, max_length, min_length, normalization)
        assert_beam_matches(out, b, expected, model, max_length, min_length, normalization)
    greedy = run_greedy(model, max_length, min_length)
    assert np.all(greedy["lengths"] >= min_length + 1)


def test_early_stop_keeps_the_exact_result():
    """Once the finished set is full and beats every bound, the loop stops early."""
    max_length = 7
    base = ToyModel.random(seed=12, batch=1, max_length=max_length, scale=0.3)
    table = base.table.copy()
    table[:, :, END] += 3.0     # p(END) ~ 0.87 at every step
    model = ToyModel(table, base.emb, base.h0)
    out = run_beam(model, 2, max_length)
    assert model.calls == 2
    expected = reference_beam(model, 0, 2, max_length, 0, "none")
    assert_beam_matches(out, 0, expected, model, max_length, 0, "none")


# 4. Attention is recorded and reordered with the beams.

# Beam 2 takes each row's best 4 of the 5 tokens first (two-stage top-k); 3 and 64 do not.
@pytest.mark.parametrize("beam_width,max_length", [(2, 6), (3, 5), (64, 4)])
def test_attention_follows_the_beams(beam_width, max_length):
    model = ToyModel.random(seed=6, batch=2, max_length=max_length)
    out = run_beam(model, beam_width, max_length, normalization="average")
    assert out["attention"].shape == (2, beam_width, max_length, 2 * VOCAB)
    for b, j in itertools.product(range(2), range(beam_width)):
        if np.isneginf(out["scores"][b, j]):
            continue
        seq = out["ids"][b, j, :out["lengths"][b, j]]
        np.testing.assert_allclose(out["attention"][b, j],
                                   model.np_attention(seq, max_length), atol=ATOL)


def test_no_attention_key_without_attention():
    model = ToyModel.random(seed=7, batch=2, max_length=3)

    def step_fn(input_ids, state):
        log_probs, state, _ = model.step_fn(input_ids, state)
        return log_probs, state, {}

    out = beam_search(step_fn, model.initial_state(), model.start_ids(), END, 2, 3)
    assert set(out) == {"ids", "lengths", "scores", "log_probs"}
    out = greedy_search(step_fn, model.initial_state(), model.start_ids(), END, 3)
    assert set(out) == {"ids", "lengths", "log_prob"}


# 5. In a tf.function, and compiled by XLA.

@pytest.mark.parametrize("jit_compile", [False, True])
def test_compiled_matches_eager(jit_compile):
    max_length, beam_width = 5, 3
    model = ToyModel.random(seed=8, batch=3, max_length=max_length)

    @tf.function(jit_compile=jit_compile, autograph=False)
    def decode(h0):
        state = {"time": tf.constant(0), "rnn": (h0, tf.zeros_like(h0))}
        start = tf.fill(tf.shape(h0)[:1], START)
        beam = beam_search(model.step_fn, state, start, END, beam_width, max_length,
                           min_length=1, length_normalization="gnmt", alpha=ALPHA)
        greedy = greedy_search(model.step_fn, state, start, END, max_length, min_length=1)
        return beam, greedy

    beam, greedy = decode(tf.constant(model.h0))
    eager_beam = run_beam(model, beam_width, max_length, 1, "gnmt")
    eager_greedy = run_greedy(model, max_length, 1)
    assert beam["ids"].shape == (3, beam_width, max_length)
    for key in eager_beam:
        np.testing.assert_allclose(beam[key].numpy(), eager_beam[key], atol=ATOL)
    for key in eager_greedy:
        np.testing.assert_allclose(greedy[key].numpy(), eager_greedy[key], atol=ATOL)


def test_unknown_batch_size_in_graph():
    max_length = 4
    model = ToyModel.random(seed=9, batch=2, max_length=max_length)

    @tf.function(input_signature=[tf.TensorSpec([None, VOCAB], tf.float32)], autograph=False)
    def decode(h0):
        state = {"time": tf.constant(0), "rnn": (h0, tf.zeros_like(h0))}
        start = tf.fill(tf.shape(h0)[:1], START)
        return beam_search(model.step_fn, state, start, END, 2, max_length)

    out = decode(tf.constant(model.h0))
    eager = run_beam(model, 2, max_length)
    for key in eager:
        np.testing.assert_allclose(out[key].numpy(), eager[key], atol=ATOL)


# Helpers.

def test_tile_beam_repeats_rows_batch_major_and_shares_scalars():
    state = {"time": tf.constant(7), "h": (tf.constant([[1, 2], [3, 4]]), tf.constant([5, 6]))}
    tiled = tile_beam(state, 3)
    assert tiled["time"].shape == () and int(tiled["time"]) == 7
    np.testing.assert_array_equal(tiled["h"][0], [[1, 2]] * 3 + [[3, 4]] * 3)
    np.testing.assert_array_equal(tiled["h"][1], [5, 5, 5, 6, 6, 6])


def test_length_penalty():
    lengths = tf.constant([1, 4, 10])
    np.testing.assert_allclose(length_penalty(lengths, "none"), [1, 1, 1])
    np.testing.assert_allclose(length_penalty(lengths, "average"), [1, 4, 10])
    np.testing.assert_allclose(length_penalty(lengths, "gnmt", 0.6),
                               ((5 + np.array([1, 4, 10])) / 6) ** 0.6, rtol=1e-6)
    with pytest.raises(ValueError):
        length_penalty(lengths, "bogus")


def test_bad_arguments_are_rejected():
    model = ToyModel.random(seed=10, batch=1, max_length=3)
    args = (model.step_fn, model.initial_state(), model.start_ids(), END)
    with pytest.raises(ValueError):
        beam_search(*args, 2, 3, num_best=3)
    with pytest.raises(ValueError):
        beam_search(*args, 2, 3, length_normalization="length")
    with pytest.raises(ValueError):
        greedy_search(*args, tf.constant(3))


@pytest.mark.parametrize("banned,min_length,step", [((), 0, 0), ((2, 5), 0, 1),
                                                     ((), 3, 1), ((0, 2), 3, 2),
                                                     ((0, 2), 3, 3)])
@pytest.mark.parametrize("beam_width,vocab", [(1, 7), (3, 50), (4, 9), (3, 1000)])
def test_two_stage_top_k_equals_one_top_k_over_all_extensions_ties_included(
        beam_width, vocab, banned, min_length, step):
    """The search's candidates (each row's best 2K + m, the m forbidden tokens -- banned,
    or the end token before min_length -- set to -inf among them, then the best 2K of
    those) are the ones of a single top_k over the masked [B, K * V], ties broken the
    same way (lower parent, then lower token): scores on a coarse grid make ties common;
    -inf entries included. At vocabulary 1,000 each row's best come from the chunked
    row_top_k (acvi_tf/decoding/top_k.py)."""
    from acvi_tf.decoding.beam import _Search
    from acvi_tf.decoding.top_k import chunk_size
    rng = np.random.default_rng(beam_width * 100 + vocab + 7 * step + len(banned))
    batch = 6
    search = _Search(None, END, beam_width, 5, min_length, "none", ALPHA, banned)
    assert (chunk_size(vocab, search.num_candidates(vocab) + search.num_masked())
            is not None) == (vocab == 1000)
    for _ in range(20):
        log_probs = rng.integers(-4, 1, (batch * beam_width, vocab)).astype(np.float32)
        log_probs[rng.random(log_probs.shape) < 0.2] = -np.inf
        alive = rng.integers(-3, 1, (batch, beam_width)).astype(np.float32)
        alive[:, 1:][rng.random((batch, beam_width - 1)) < 0.3] = -np.inf
        scores, parents, tokens = search.top_candidates(tf.constant(alive),
                                                        tf.constant(log_probs),
                                                        tf.constant(step))
        masked = log_probs.copy()
        masked[:, list(banned)] = -np.inf
        if step < min_length:
            masked[:, END] = -np.inf
        totals = (alive[:, :, None] + masked.reshape(batch, beam_width, vocab)
                  ).reshape(batch, -1)
        want_scores, flat = tf.math.top_k(totals, k=2 * beam_width)
        np.testing.assert_array_equal(scores.numpy(), want_scores.numpy())
        finite = np.isfinite(want_scores.numpy())  # -inf slots may name any candidate
        np.testing.assert_array_equal(parents.numpy()[finite], (flat.numpy() // vocab)[finite])
        np.testing.assert_array_equal(tokens.numpy()[finite], (flat.numpy() % vocab)[finite])


@pytest.mark.parametrize("vocab", [VOCAB, 12])  # 12: the two-stage top-k with masks
@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_banned_ids_equal_never_emit(normalization, vocab):
    """beam_search(banned_ids=...) (the mask among each row's best candidates) gives the
    outputs of the search through never_emit (the mask over the whole vocabulary)."""
    max_length, beam_width, min_length = 5, 3, 2
    model = ToyModel.random(seed=5, batch=3, max_length=max_length, vocab=vocab)
    wrapped = BannedToyModel(model)
    want = run_beam(wrapped, beam_width, max_length, min_length, normalization)
    got = run_beam(model, beam_width, max_length, min_length, normalization,
                   banned_ids=[BannedToyModel.BANNED])
    for key in ("ids", "lengths", "scores", "log_probs"):
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
