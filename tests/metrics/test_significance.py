"""Paired bootstrap against exact enumeration and against sacrebleu's own numbers."""

import itertools

import numpy as np
import pytest
from scipy import stats

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


def test_two_sided_bootstrap_against_enumeration_and_the_normal_approximation():
    a = np.array([0.2, 0.5, 0.4, 0.1])
    b = np.array([0.3, 0.4, 0.6, 0.1])
    diff = b - a
    # the shift method over every one of the 4^4 resamples: |mean* - mean| >= |mean|
    exact = np.mean([abs(np.mean(diff[list(i)]) - diff.mean()) >= abs(diff.mean()) - 1e-12
                     for i in itertools.product(range(4), repeat=4)])
    p, _ = paired_bootstrap(a, b, n_samples=200_000, seed=0, alternative="two-sided")
    assert p == pytest.approx(exact, abs=0.005)
    # many items: the bootstrap p is the normal-theory two-sided p of the mean difference
    rng = np.random.default_rng(7)
    a = rng.normal(size=3000)
    b = a + rng.normal(0.03, 1.0, size=3000)
    d = b - a
    normal_p = 2 * stats.norm.sf(abs(d.mean()) / (d.std(ddof=0) / np.sqrt(len(d))))
    p, _ = paired_bootstrap(a, b, n_samples=20_000, seed=1, alternative="two-sided")
    assert 0.01 < normal_p < 0.9 and p == pytest.approx(normal_p, abs=0.02)


def test_two_sided_bootstrap_is_symmetric_calibrated_and_floored():
    rng = np.random.default_rng(2)
    a = rng.uniform(size=300)
    # a row clearly below its baseline is as significant as one clearly above it (the
    # one-sided test gave it p = 1), both at the floor 1 / (n + 1)
    for b in (a + 0.05, a - 0.05):
        p, _ = paired_bootstrap(a, b, n_samples=1000, alternative="two-sided")
        assert p == pytest.approx(1 / 1001)
    b = a + rng.normal(0.02, 0.3, size=300)
    assert (paired_bootstrap(a, b, alternative="two-sided")[0]
            == pytest.approx(paired_bootstrap(b, a, alternative="two-sided")[0]))
    assert paired_bootstrap(a, a, alternative="two-sided")[0] == 1.0  # no difference
    # under the null (per-item differences centred at 0) p <= 0.05 about 5% of the time
    rejected = [paired_bootstrap(x, x + rng.normal(0.0, 0.5, size=100), n_samples=1000,
                                 seed=i, alternative="two-sided")[0] <= 0.05
                for i, x in enumerate(rng.normal(size=(300, 100)))]
    assert 0.015 <= np.mean(rejected) <= 0.10
    with pytest.raises(ValueError, match="alternative='less'"):
        paired_bootstrap(a, a, alternative="less")


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


# --- comparisons that count seeds ---------------------------------------------------

from acvi_tf.metrics import significance as sig  # noqa: E402


def test_welch_t_is_scipys_unequal_variance_test():
    from scipy import stats
    rng = np.random.default_rng(3)
    for na, nb in ((3, 3), (5, 3), (2, 7)):
        a, b = rng.normal(28, 1.0, na), rng.normal(29, 0.6, nb)
        got = sig.welch_t(a, b)
        want = stats.ttest_ind(b, a, equal_var=False)
        assert got["t"] == pytest.approx(want.statistic, rel=1e-10)
        assert got["p_value"] == pytest.approx(want.pvalue, rel=1e-10)
        assert got["difference"] == pytest.approx(b.mean() - a.mean())
    # the issue's own numbers: ACVI (ours) against soft attention, 3 seeds each: p = 0.15
    res = sig.welch_t([27.44, 27.91, 29.36], [30.00, 28.83, 29.65])
    assert res["p_value"] == pytest.approx(0.15, abs=0.01)
    assert sig.welch_t([28.0], [29.0, 30.0]) is None  # one seed: no variance


def _sentences(rng, n, vocab=30, length=(3, 12)):
    words = [f"w{i}" for i in range(vocab)]
    return [" ".join(rng.choice(words, size=rng.integers(*length))) for _ in range(n)]


def test_bleu_from_statistics_is_sacrebleus_corpus_bleu():
    from sacrebleu.metrics import BLEU
    rng = np.random.default_rng(4)
    refs = _sentences(rng, 60)
    # hypotheses that share some words with their references
    hyps = [" ".join(w for w in r.split() if rng.uniform() < 0.7) + " w1" for r in refs]
    stats = sig.bleu_statistics(hyps, refs)
    bleu = BLEU(tokenize="none", smooth_method="none", force=True)
    for idx in (np.arange(60), rng.integers(0, 60, 60), np.arange(10)):
        want = bleu.corpus_score([hyps[i] for i in idx], [[refs[i] for i in idx]]).score
        assert float(sig.bleu_from_statistics(stats[idx].sum(0))) == pytest.approx(want, abs=1e-9)
    # an order without a match scores 0 (no smoothing), as sacrebleu does
    zero = sig.bleu_statistics(["x y z"], ["a b c"]).sum(0)
    assert float(sig.bleu_from_statistics(zero)) == 0.0


def _simulated_item_scores(rng, n_seeds, n_items, shift, seed_sd, item_sd=0.3):
    """Per-item scores of one system: a shared difficulty per item, a per-seed offset of
    spread ``seed_sd`` and per-item noise, plus the system's ``shift``."""
    difficulty = np.linspace(-1, 1, n_items)
    return [difficulty + shift + rng.normal(0, seed_sd) + rng.normal(0, item_sd, n_items)
            for _ in range(n_seeds)]


def test_two_level_bootstrap_covers_a_known_difference_and_widens_with_the_seed_spread():
    """Simulated rows with a true difference of 0.5 and a seed spread of 0.4: the 95%
    interval covers 0.5 in most simulations, and is several times wider than the interval
    from the items alone (the seeds' spread counts); with no seed spread they agree."""
    rng = np.random.default_rng(5)
    covered, widths = 0, []
    for _ in range(40):
        a = _simulated_item_scores(rng, 5, 100, 0.0, 0.4)
        b = _simulated_item_scores(rng, 5, 100, 0.5, 0.4)
        res = sig.two_level_bootstrap([sig.item_statistics(s) for s in a],
                                      [sig.item_statistics(s) for s in b],
                                      sig.mean_from_statistics, n_samples=1000,
                                      seed=int(rng.integers(1 << 30)))
        covered += res["ci95"][0] <= 0.5 <= res["ci95"][1]
        widths.append(res["ci95"][1] - res["ci95"][0])
    # the percentile bootstrap of 5 seeds runs a little narrow; far from 40/40 it is broken
    assert covered >= 30, covered
    # theory: sd of the difference of two 5-seed means ~ 0.4 * sqrt(2/5) = 0.25 -> width ~1
    assert 0.6 < np.median(widths) < 1.3, np.median(widths)
    # no seed spread: the width is the items' alone (a sentence bootstrap's, ~0.15)
    a = _simulated_item_scores(rng, 5, 100, 0.0, 0.0)
    b = _simulated_item_scores(rng, 5, 100, 0.5, 0.0)
    res = sig.two_level_bootstrap([sig.item_statistics(s) for s in a],
                                  [sig.item_statistics(s) for s in b],
                                  sig.mean_from_statistics, n_samples=2000)
    assert res["ci95"][1] - res["ci95"][0] < 0.25
    assert res["p_value"] == pytest.approx(1 / 2000)  # far from 0: at the floor
    assert res["difference"] == pytest.approx(np.mean(b) - np.mean(a))


def test_two_level_bootstrap_of_bleu_uses_corpus_bleu_per_seed():
    rng = np.random.default_rng(6)
    refs = _sentences(rng, 40)
    seeds_a = [[" ".join(w for w in r.split() if rng.uniform() < 0.5) for r in refs]
               for _ in range(2)]
    seeds_b = [[" ".join(w for w in r.split() if rng.uniform() < 0.8) for r in refs]
               for _ in range(3)]
    res = sig.two_level_bootstrap([sig.bleu_statistics(h, refs) for h in seeds_a],
                                  [sig.bleu_statistics(h, refs) for h in seeds_b],
                                  sig.bleu_from_statistics, n_samples=500)
    from sacrebleu.metrics import BLEU
    bleu = BLEU(tokenize="none", smooth_method="none", force=True)
    want = (np.mean([bleu.corpus_score(h, [refs]).score for h in seeds_b])
            - np.mean([bleu.corpus_score(h, [refs]).score for h in seeds_a]))
    assert res["difference"] == pytest.approx(want, abs=1e-9)
    assert res["seeds"] == [2, 3] and res["ci95"][0] > 0  # B keeps more words: clearly ahead
    with pytest.raises(ValueError, match="same"):
        sig.two_level_bootstrap([sig.bleu_statistics(seeds_a[0], refs)],
                                [sig.bleu_statistics(seeds_b[0][:-1], refs[:-1])],
                                sig.bleu_from_statistics)
