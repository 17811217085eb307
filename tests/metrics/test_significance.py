"""Paired bootstrap against exact enumeration and against sacrebleu's own numbers."""

import itertools

import numpy as np
import pytest

from acvi_tf.metrics.significance import paired_bootstrap, paired_bootstrap_bleu


def test_paired_bootstrap_converges_to_exact_enumeration():
    a = np.array([0.2, 0.5, 0.4, 0.1])
    b = np.array([0.3, 0.4, 0.6, 0.1])
    diff = b - a
    # every one of the 4^4 equally likely resamples
    exact = np.mean([np.mean(diff[list(i)]) <= 0 for i in itertools.product(range(4), repeat=4)])
    p, mean = paired_bootstrap(a, b, n_samples=200_000, seed=0)
    assert p == pytest.approx(exact, abs=0.005)
    assert mean == pytest.approx(diff.mean())


def test_paired_bootstrap_clear_winner_and_bad_input():
    rng = np.random.default_rng(1)
    a = rng.uniform(size=300)
    p, _ = paired_bootstrap(a, a + 0.05, n_samples=1000)
    assert p == 0.0
    p, _ = paired_bootstrap(a + 0.05, a, n_samples=1000)
    assert p == 1.0
    with pytest.raises(ValueError, match="equal"):
        paired_bootstrap(a, a[:-1])


def test_paired_bootstrap_bleu_scores_are_sacrebleus():
    from sacrebleu.metrics import BLEU
    refs = ["a small cat sits on the mat", "the dog runs in the park", "two men ride bikes",
            "a girl reads a book", "the sun is shining today"] * 4
    base = ["a cat sits on a mat", "a dog runs in park", "two men ride", "girl reads book",
            "sun is shining"] * 4
    cand = refs[:10] + base[10:]
    out = paired_bootstrap_bleu(base, cand, refs, n_samples=200)
    bleu = BLEU(tokenize="none")
    assert out["baseline"] == pytest.approx(bleu.corpus_score(base, [refs]).score)
    assert out["candidate"] == pytest.approx(bleu.corpus_score(cand, [refs]).score)
    assert out["difference"] > 0 and out["p_value"] < 0.05
    with pytest.raises(ValueError, match="equal lengths"):
        paired_bootstrap_bleu(base, cand[:-1], refs)
