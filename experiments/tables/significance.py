"""A table row against soft attention: paired bootstrap on the runs' test decodes.

Seeds are paired, seed i of the row with seed i of the baseline (a one-seed row with the
baseline's seed 0), and pooled by concatenation (:mod:`acvi_tf.metrics.significance`).
BLEU goes through sacrebleu's paired bootstrap on the archived ``decode_test.txt`` and
the dataset's references (read through the data registry: None when the data is not
here); ROUGE-1 through a bootstrap of the per-summary ROUGE-1.5.5 F1 the archive keeps
(:data:`experiments.archive.ROUGE_ITEMS`). sacrebleu's p-value is two-sided (Moses'
bootstrap-hypothesis-difference-significance: how often a resampled |difference| exceeds
the real one); the ROUGE one is one-sided (the fraction of resamples in which the row's
mean is not above the baseline's).
"""

import json
import os

from experiments.archive import ROUGE_ITEMS, read_hypotheses
from experiments.tables.render import seed_of

N_SAMPLES = 1000


def run_dir(r):
    return os.path.dirname(r["_path"]) if r.get("_path") else None


def seed_pairs(baseline, row, needs):
    """``[(baseline run, row run)]`` of the seeds both have (seed i with seed i), each
    run's directory holding the file ``needs``."""
    def ok(r):
        return run_dir(r) is not None and os.path.exists(os.path.join(run_dir(r), needs))
    base = {seed_of(r): r for r in baseline if ok(r)}
    return [(base[seed_of(r)], r) for r in row if ok(r) and seed_of(r) in base]


def translation_references(r, split="test"):
    """The reference lines of a translation run's ``split``, or None without the data."""
    try:
        from acvi_tf.data.translation import references
        return references(r["dataset"], split, r["tgt"], r.get("variant") or "tok")
    except Exception:  # noqa: BLE001 - no data here: no test, said as such
        return None


def decoded_sentences(r, references):
    """How many test sentences run ``r`` decoded: its results.json's count (a
    ``--max_eval_lines`` run decodes the first N), else all ``references``."""
    n = ((r.get("splits") or {}).get("test") or {}).get("sentences")
    return min(int(n), references) if n else references


def bleu_vs(baseline, row, references=None):
    """sacrebleu's paired bootstrap of ``row``'s test BLEU against ``baseline``'s (lists
    of results.json dicts, with ``_path``): a dict (:func:`paired_bootstrap_bleu`) plus
    ``seeds``, ``sentences`` (how many were compared) and ``subset`` (fewer than the test
    set: runs decoded with ``--max_eval_lines``), or None when no seed pair has decodes
    or the references are not here; ``{"skipped": reason}`` when a decode file does not
    match its run (the table shows the reason instead of failing).
    ``references(run)``: the reference lines (default :func:`translation_references`)."""
    from acvi_tf.metrics.significance import paired_bootstrap_bleu
    references = references or translation_references
    pairs = seed_pairs(baseline, row, "decode_test.txt")
    refs = references(pairs[0][0]) if pairs else None
    if not pairs or refs is None:
        return None
    # A run decoded with --max_eval_lines=N scored the first N test sentences: every pair
    # is compared on the first sentences all of them decoded, against those references.
    count = min(decoded_sentences(r, len(refs)) for pair in pairs for r in pair)
    base, cand = [], []
    try:
        for a, b in pairs:
            base += read_hypotheses(os.path.join(run_dir(a), "decode_test.txt"),
                                    decoded_sentences(a, len(refs)))[:count]
            cand += read_hypotheses(os.path.join(run_dir(b), "decode_test.txt"),
                                    decoded_sentences(b, len(refs)))[:count]
    except ValueError as e:  # a decode that does not match its run: the table says so
        return {"skipped": str(e)}
    res = paired_bootstrap_bleu(base, cand, list(refs[:count]) * len(pairs),
                                n_samples=N_SAMPLES)
    return dict(res, seeds=len(pairs), sentences=count, subset=count < len(refs))


def rouge1_vs(baseline, row):
    """The paired bootstrap of the per-summary ROUGE-1 F1 of ``row`` against
    ``baseline``: ``{baseline, candidate, difference, p_value, n_samples, seeds}``, or
    None when no seed pair has the archived per-summary scores."""
    import numpy as np
    from acvi_tf.metrics.significance import paired_bootstrap
    pairs = seed_pairs(baseline, row, ROUGE_ITEMS)
    if not pairs:
        return None
    base, cand = [], []
    for a, b in pairs:
        for r, out in ((a, base), (b, cand)):
            with open(os.path.join(run_dir(r), ROUGE_ITEMS), encoding="utf-8") as f:
                out += json.load(f)
    p_value, diff = paired_bootstrap(base, cand, n_samples=N_SAMPLES)
    return {"baseline": float(np.mean(base)), "candidate": float(np.mean(cand)),
            "difference": diff, "p_value": p_value, "n_samples": N_SAMPLES,
            "seeds": len(pairs)}


def cell(res):
    """``+0.40 (p = 0.043, 3 seed pairs)`` (``, first 500 sentences`` for a subset),
    ``skipped (reason)``, or None."""
    if res is None:
        return None
    if "skipped" in res:
        return f"skipped ({res['skipped']})"
    n = res["seeds"]
    subset = f", first {res['sentences']} sentences" if res.get("subset") else ""
    return (f"{res['difference']:+.2f} (p = {res['p_value']:.3f}, {n} seed "
            f"pair{'s' if n > 1 else ''}{subset})")
