"""Paired bootstrap resampling (Koehn 2004, "Statistical significance tests for machine
translation evaluation"): is system B better than system A on the same test items?

* BLEU goes through sacrebleu's own implementation (``sacrebleu.significance.PairedTest``,
  ``test_type="bs"``), which recomputes corpus BLEU from resampled sufficient statistics.
* Metrics that average a per-item score (ROUGE-1.5.5 averages per-summary F1) use
  :func:`paired_bootstrap`: resample the items with replacement; one-sided (how often B's
  mean does not exceed A's) or two-sided (the shift method).

Several seeds per system are pooled by concatenation: seed i of A is paired with seed i
of B, item by item, and the references are repeated once per seed.
"""

import numpy as np


ALTERNATIVES = ("greater", "two-sided")


def paired_bootstrap(scores_a, scores_b, n_samples=1000, seed=12345, alternative="greater"):
    """The paired bootstrap of the mean per-item difference B - A.

    ``scores_a``, ``scores_b``: per-item scores of the two systems on the same items.
    Returns ``(p_value, mean difference B - A)``. ``alternative="greater"``: the
    one-sided p of "B's mean is higher than A's", the fraction of the ``n_samples``
    resamples of the items in which B's mean is not above A's. ``"two-sided"``: the
    p of "the means differ" by the shift method (Efron & Tibshirani 1993, sec. 16.4):
    the resampled mean differences centred on the observed one stand for the null, and
    p = (#{|centred| >= |observed|} + 1) / (n_samples + 1), the +1 as in sacrebleu's
    and Moses' paired tests (floor 1 / (n_samples + 1)); a row below its baseline gets a
    small p as one above it does.
    """
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative={alternative!r}: choose one of {', '.join(ALTERNATIVES)}")
    a = np.asarray(scores_a, np.float64)
    b = np.asarray(scores_b, np.float64)
    if a.shape != b.shape or a.ndim != 1 or not len(a):
        raise ValueError(f"paired scores need equal, non-empty 1-D shapes: {a.shape} vs {b.shape}")
    rng = np.random.default_rng(seed)
    diff = b - a
    idx = rng.integers(0, len(diff), size=(n_samples, len(diff)))
    means = diff[idx].mean(axis=1)
    observed = float(diff.mean())
    if alternative == "greater":
        return float(np.mean(means <= 0.0)), observed
    extreme = np.sum(np.abs(means - observed) >= abs(observed))
    return float((extreme + 1) / (n_samples + 1)), observed


def paired_bootstrap_bleu(baseline, candidate, references, n_samples=1000, tokenize="none"):
    """sacrebleu's paired bootstrap of corpus BLEU: candidate against baseline.

    ``baseline``, ``candidate``: hypothesis lists (seeds pooled by concatenation, see the
    module docstring); ``references``: one reference list of the same length.
    ``tokenize="none"`` is the tokenized BLEU of the Multi30k table. Returns a dict with
    both scores, the difference, sacrebleu's p-value and the bootstrap 95% interval of the
    candidate's score.
    """
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest
    if not len(baseline) == len(candidate) == len(references):
        raise ValueError(f"paired BLEU needs equal lengths: {len(baseline)} baseline, "
                         f"{len(candidate)} candidate, {len(references)} references")
    test = PairedTest([("baseline", list(baseline)), ("candidate", list(candidate))],
                      {"BLEU": BLEU(tokenize=tokenize, force=True)}, references=[list(references)],
                      test_type="bs", n_samples=n_samples)
    _, scores = test()
    base, cand = scores["BLEU"]
    return {"baseline": base.score, "candidate": cand.score,
            "difference": cand.score - base.score, "p_value": cand.p_value,
            "candidate_ci95": [cand.mean - cand.ci, cand.mean + cand.ci],
            "n_samples": n_samples}


# ---------------------------------------------------------------------------
# Comparisons that count seeds
# ---------------------------------------------------------------------------
# A row of a table is several training runs (seeds) of one recipe, each scored on the
# same test items. Two sources of noise separate two rows: the seed-to-seed spread of
# training and the sampling of the test items. A sentence-only bootstrap measures the
# second alone; the tests below measure both (seeds, or seeds and then items).

def welch_t(scores_a, scores_b):
    """Welch's unequal-variance t-test of "B's mean differs from A's", over per-seed
    scores: ``{difference, t, dof, p_value}`` (two-sided; dof by Welch-Satterthwaite).
    None when a side has fewer than 2 seeds (no variance to estimate)."""
    from scipy import stats
    a = np.asarray(scores_a, np.float64)
    b = np.asarray(scores_b, np.float64)
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    diff = float(b.mean() - a.mean())
    if va + vb == 0.0:  # identical scores within each side: no spread to test against
        return {"difference": diff, "t": float("inf") if diff else 0.0, "dof": None,
                "p_value": 0.0 if diff else 1.0}
    t = diff / np.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return {"difference": diff, "t": float(t), "dof": float(dof),
            "p_value": float(2.0 * stats.t.sf(abs(t), dof))}


def bleu_statistics(hypotheses, references, tokenize="none"):
    """Per-sentence BLEU sufficient statistics, [n, 10] int64: hypothesis length,
    reference length, matching 1..4-grams, hypothesis 1..4-grams (sacrebleu's own
    extraction, so the n-gram counting is sacrebleu's)."""
    from sacrebleu.metrics import BLEU
    if len(hypotheses) != len(references):
        raise ValueError(f"BLEU statistics need one reference per hypothesis: "
                         f"{len(hypotheses)} hypotheses, {len(references)} references")
    bleu = BLEU(tokenize=tokenize, force=True)
    return np.asarray(bleu._extract_corpus_statistics(list(hypotheses), [list(references)]),
                      np.int64)


def bleu_from_statistics(sums):
    """Corpus BLEU (0-100, no smoothing: 0 when an n-gram order has no match) from summed
    statistics ``sums`` [..., 10] (:func:`bleu_statistics` summed over sentences)."""
    sums = np.asarray(sums, np.float64)
    hyp_len, ref_len = sums[..., 0], sums[..., 1]
    correct, total = sums[..., 2:6], sums[..., 6:10]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = np.where(correct > 0, np.log(np.maximum(correct, 1e-300))
                         - np.log(np.maximum(total, 1e-300)), -np.inf)
        bp = np.where(hyp_len > ref_len, 1.0,
                      np.exp(1.0 - ref_len / np.maximum(hyp_len, 1e-300)))
        score = 100.0 * bp * np.exp(log_p.mean(axis=-1))
    return np.where(np.isfinite(score) & (hyp_len > 0), score, 0.0)


def mean_from_statistics(sums):
    """The mean per-item score from summed ``[score, 1]`` statistics."""
    sums = np.asarray(sums, np.float64)
    return sums[..., 0] / sums[..., 1]


def item_statistics(scores):
    """``[score, 1]`` per item: a per-item metric (ROUGE-1 F1) as summable statistics."""
    scores = np.asarray(scores, np.float64)
    return np.stack([scores, np.ones_like(scores)], axis=-1)


def two_level_bootstrap(stats_a, stats_b, corpus_score, n_samples=10_000, seed=12345,
                        chunk=500):
    """Resample seeds, then items: the 95% interval of B's mean score minus A's.

    ``stats_a``, ``stats_b``: one [n_items, k] array of per-item sufficient statistics
    per seed (the same n items, in the same order, for every seed of both systems);
    ``corpus_score(sums [..., k]) -> score``. Each resample draws each system's seeds
    with replacement, one shared resample of the items (the systems are scored on the
    same test set), scores every drawn seed on those items and averages over the drawn
    seeds. Returns ``{difference, ci95, p_value, n_samples, seeds}``: ``difference``
    between the means of the per-seed scores on all items, the percentile interval, and
    the two-sided bootstrap p (twice the smaller share of resampled differences on
    either side of 0, floor 1 / n_samples)."""
    a = [np.asarray(s, np.float64) for s in stats_a]
    b = [np.asarray(s, np.float64) for s in stats_b]
    if not a or not b:
        raise ValueError(f"two_level_bootstrap needs seeds on both sides: {len(a)} and "
                         f"{len(b)}")
    n = a[0].shape[0]
    if any(s.shape != a[0].shape for s in a + b) or n == 0:
        raise ValueError("two_level_bootstrap: every seed needs statistics of the same "
                         f"non-empty items: shapes {sorted({s.shape for s in a + b})}")
    rng = np.random.default_rng(seed)
    stacked_a, stacked_b = np.stack(a), np.stack(b)  # [seeds, n, k]
    diffs = []
    for start in range(0, n_samples, chunk):
        r = min(chunk, n_samples - start)
        items = rng.integers(0, n, size=(r, n))
        weights = np.zeros((r, n))
        np.add.at(weights, (np.arange(r)[:, None], items), 1.0)  # times each item is drawn
        # every seed scored on every item resample: [seeds, r]
        score_a = corpus_score(np.einsum("rn,snk->srk", weights, stacked_a))
        score_b = corpus_score(np.einsum("rn,snk->srk", weights, stacked_b))
        pick_a = rng.integers(0, len(a), size=(r, len(a)))
        pick_b = rng.integers(0, len(b), size=(r, len(b)))
        mean_a = np.take_along_axis(score_a.T, pick_a, axis=1).mean(axis=1)
        mean_b = np.take_along_axis(score_b.T, pick_b, axis=1).mean(axis=1)
        diffs.append(mean_b - mean_a)
    diffs = np.concatenate(diffs)
    full_a = corpus_score(stacked_a.sum(axis=1)).mean()
    full_b = corpus_score(stacked_b.sum(axis=1)).mean()
    low, high = np.percentile(diffs, [2.5, 97.5])
    p = 2.0 * min(np.mean(diffs <= 0.0), np.mean(diffs >= 0.0))
    return {"difference": float(full_b - full_a), "ci95": [float(low), float(high)],
            "p_value": float(min(1.0, max(p, 1.0 / n_samples))), "n_samples": int(n_samples),
            "seeds": [len(a), len(b)]}
