"""Paired bootstrap resampling (Koehn 2004, "Statistical significance tests for machine
translation evaluation"): is system B better than system A on the same test items?

* BLEU goes through sacrebleu's own implementation (``sacrebleu.significance.PairedTest``,
  ``test_type="bs"``), which recomputes corpus BLEU from resampled sufficient statistics.
* Metrics that average a per-item score (ROUGE-1.5.5 averages per-summary F1) use
  :func:`paired_bootstrap`: resample the items with replacement and count how often B's
  mean does not exceed A's.

Several seeds per system are pooled by concatenation: seed i of A is paired with seed i
of B, item by item, and the references are repeated once per seed.
"""

import numpy as np


def paired_bootstrap(scores_a, scores_b, n_samples=1000, seed=12345):
    """One-sided p-value of "B's mean per-item score is higher than A's".

    ``scores_a``, ``scores_b``: per-item scores of the two systems on the same items.
    Returns ``(p_value, mean difference B - A)``; p is the fraction of the
    ``n_samples`` resamples of the items in which B's mean is not above A's.
    """
    a = np.asarray(scores_a, np.float64)
    b = np.asarray(scores_b, np.float64)
    if a.shape != b.shape or a.ndim != 1 or not len(a):
        raise ValueError(f"paired scores need equal, non-empty 1-D shapes: {a.shape} vs {b.shape}")
    rng = np.random.default_rng(seed)
    diff = b - a
    idx = rng.integers(0, len(diff), size=(n_samples, len(diff)))
    means = diff[idx].mean(axis=1)
    return float(np.mean(means <= 0.0)), float(diff.mean())


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
