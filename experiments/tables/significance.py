"""A table row against soft attention: tests that count seeds, and the paired bootstrap
on the runs' test decodes.

The primary comparison (:func:`bleu_seeds_vs`, :func:`rouge1_seeds_vs`) counts seeds: the
difference of the rows' mean test scores, its 95% interval from a two-level bootstrap
(resample each row's seeds, then the test sentences; 10,000 resamples) and Welch's t-test
over the seed scores (:mod:`acvi_tf.metrics.significance`). The sentence-only paired
bootstrap below it measures the test set's sampling noise alone, for one pairing of seeds.

Seeds are paired, seed i of the row with seed i of the baseline (a one-seed row with the
baseline's seed 0), and pooled by concatenation (:mod:`acvi_tf.metrics.significance`).
BLEU goes through sacrebleu's paired bootstrap on the archived ``decode_test.txt`` and
the dataset's references (read through the data registry: None when the data is not
here); ROUGE-1 through a bootstrap of the per-summary ROUGE-1.5.5 F1 the archive keeps
(:data:`experiments.archive.ROUGE_ITEMS`). sacrebleu's p-value is two-sided (Moses'
bootstrap-hypothesis-difference-significance: how often a resampled |difference| exceeds
the real one); so is the ROUGE one (the shift method: how often a resampled mean
difference, centred on the observed one, lies as far from it as the observed difference
lies from 0; :func:`acvi_tf.metrics.significance.paired_bootstrap`). Both floor at
1 / (10,000 + 1), written "< 1e-4".
"""

import json
import os

from experiments.archive import ROUGE_ITEMS, read_hypotheses
from experiments.tables.render import seed_of

N_SAMPLES = 10_000  # the sentence-only paired bootstrap; p's floor is 1 / (N + 1)
SEED_SAMPLES = 10_000  # the two-level bootstrap (seeds, then sentences)


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


def cached_paired_bleu(baseline, candidate, references, n_samples):
    """:func:`acvi_tf.metrics.significance.paired_bootstrap_bleu` through the disk cache
    (:mod:`acvi_tf.utils.disk_cache`): keyed by the three line lists, ``n_samples``, the
    function's source, sacrebleu's and numpy's versions and ``SACREBLEU_SEED`` (the
    resampling's seed), so a re-render reads the rows whose decodes did not change."""
    import numpy as np
    import sacrebleu
    from acvi_tf.metrics.significance import paired_bootstrap_bleu
    from acvi_tf.utils.disk_cache import cached
    parts = [paired_bootstrap_bleu, sacrebleu.__version__, np.__version__,
             os.environ.get("SACREBLEU_SEED", ""), baseline, candidate, references, n_samples]
    return cached("paired_bleu", parts, lambda: paired_bootstrap_bleu(
        baseline, candidate, references, n_samples=n_samples))


def cached_two_level(stats_a, stats_b, corpus_score, n_samples):
    """:func:`acvi_tf.metrics.significance.two_level_bootstrap` through the disk cache,
    keyed by the statistics arrays, ``n_samples``, the source of both functions and
    numpy's version (its generators' streams may change between versions)."""
    import numpy as np
    from acvi_tf.metrics.significance import two_level_bootstrap
    from acvi_tf.utils.disk_cache import cached
    a = [np.asarray(s) for s in stats_a]
    b = [np.asarray(s) for s in stats_b]
    return cached("two_level", [two_level_bootstrap, corpus_score, np.__version__, a, b,
                                n_samples],
                  lambda: two_level_bootstrap(a, b, corpus_score, n_samples))


def bleu_vs(baseline, row, references=None):
    """sacrebleu's paired bootstrap of ``row``'s test BLEU against ``baseline``'s (lists
    of results.json dicts, with ``_path``): a dict (:func:`paired_bootstrap_bleu`) plus
    ``seeds``, ``sentences`` (how many were compared) and ``subset`` (fewer than the test
    set: runs decoded with ``--max_eval_lines``), or None when no seed pair has decodes
    or the references are not here; ``{"skipped": reason}`` when a decode file does not
    match its run (the table shows the reason instead of failing).
    ``references(run)``: the reference lines (default :func:`translation_references`)."""
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
    res = cached_paired_bleu(base, cand, list(refs[:count]) * len(pairs), N_SAMPLES)
    return dict(res, seeds=len(pairs), sentences=count, subset=count < len(refs))


def rouge1_vs(baseline, row):
    """The paired bootstrap (two-sided) of the per-summary ROUGE-1 F1 of ``row`` against
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
    p_value, diff = paired_bootstrap(base, cand, n_samples=N_SAMPLES, alternative="two-sided")
    return {"baseline": float(np.mean(base)), "candidate": float(np.mean(cand)),
            "difference": diff, "p_value": p_value, "n_samples": N_SAMPLES,
            "seeds": len(pairs)}


def _decoded_runs(runs, count_of):
    """The runs with a ``decode_test.txt`` and their decodes' line counts."""
    out = []
    for r in runs:
        if run_dir(r) and os.path.exists(os.path.join(run_dir(r), "decode_test.txt")):
            out.append((r, count_of(r)))
    return out


_SEEDS_VS = {}  # (runs' paths, n_samples) -> result: a table and its JSON share one bootstrap


def bleu_seeds_vs(baseline, row, references=None, n_samples=SEED_SAMPLES):
    """``row`` (results.json dicts, one per seed) against ``baseline``, counting seeds:
    ``{difference, ci95, p_value, welch_p, seeds: [baseline, row], sentences, subset}``
    with ``difference`` the difference of the rows' mean test BLEU, ``ci95`` and
    ``p_value`` from :func:`acvi_tf.metrics.significance.two_level_bootstrap` on the test
    decodes (the first sentences every run decoded), ``welch_p`` Welch's t over the
    runs' test BLEU (None with fewer than 2 seeds a side). None without decodes or
    references; ``{"skipped": reason}`` when a decode does not match its run."""
    key = (tuple(r.get("_path") for r in baseline), tuple(r.get("_path") for r in row),
           n_samples, references)
    if references is None and all(key[0] + key[1]) and key in _SEEDS_VS:
        return _SEEDS_VS[key]
    res = _bleu_seeds_vs(baseline, row, references or translation_references, n_samples)
    if references is None and all(key[0] + key[1]):
        _SEEDS_VS[key] = res
    return res


def _bleu_seeds_vs(baseline, row, references, n_samples):
    from acvi_tf.metrics import significance as sig
    base = [r for r in baseline if run_dir(r)]
    refs = references(base[0]) if base else None
    if refs is None:
        return None
    count = lambda r: decoded_sentences(r, len(refs))  # noqa: E731
    base, cand = _decoded_runs(baseline, count), _decoded_runs(row, count)
    if not base or not cand:
        return None
    n = min(c for _, c in base + cand)
    try:
        stats = [[sig.bleu_statistics(read_hypotheses(
            os.path.join(run_dir(r), "decode_test.txt"), c)[:n], refs[:n]) for r, c in side]
            for side in (base, cand)]
    except ValueError as e:
        return {"skipped": str(e)}
    res = cached_two_level(stats[0], stats[1], sig.bleu_from_statistics, n_samples)
    welch = sig.welch_t([r["bleu"]["test"] for r, _ in base], [r["bleu"]["test"] for r, _ in cand])
    return dict(res, welch_p=None if welch is None else welch["p_value"], sentences=n,
                subset=n < len(refs))


def _cnndm_rouge1(r):
    return (r.get("rouge") or {}).get("rouge_1")


def rouge1_seeds_vs(baseline, row, n_samples=SEED_SAMPLES, items_file=ROUGE_ITEMS,
                    score=_cnndm_rouge1):
    """As :func:`bleu_seeds_vs` for ROUGE-1: the two-level bootstrap of the per-summary
    scores in each run's ``items_file`` (CNN/DM test F1 by default; Table 5 passes the
    DUC2004 recall file) and Welch's t over the runs' ``score``; None without them."""
    import json as json_lib
    from acvi_tf.metrics import significance as sig

    def items(runs):
        out = []
        for r in runs:
            path = os.path.join(run_dir(r) or "", items_file)
            if run_dir(r) and os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    out.append((r, json_lib.load(f)))
        return out
    base, cand = items(baseline), items(row)
    if not base or not cand:
        return None
    n = min(len(v) for _, v in base + cand)
    res = cached_two_level([sig.item_statistics(v[:n]) for _, v in base],
                           [sig.item_statistics(v[:n]) for _, v in cand],
                           sig.mean_from_statistics, n_samples)
    welch = sig.welch_t([score(r) for r, _ in base if score(r) is not None],
                        [score(r) for r, _ in cand if score(r) is not None])
    return dict(res, welch_p=None if welch is None else welch["p_value"], sentences=n,
                subset=False)


def p_text(p, n_samples):
    """A p-value, or ``< 1/N`` written out at a bootstrap's floor (it says no more)."""
    if p is None:
        return "–"
    floor = 1.0 / (n_samples + 1)
    if p <= floor * 1.0001 or p <= 1.0 / n_samples:
        return f"< {1.0 / n_samples:.0e}".replace("e-0", "e-")
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def welch_text(p):
    """Welch's p as the tables print it: 3 decimals, 1 significant digit below 0.001."""
    return "–" if p is None else (f"{p:.3f}" if p >= 0.001 else f"{p:.1e}")


def seeds_cell(res):
    """``+1.25 [-0.01, +2.49], Welch p = 0.150 (3 vs 3 seeds)``, ``skipped (reason)`` or
    None."""
    if res is None:
        return None
    if "skipped" in res:
        return f"skipped ({res['skipped']})"
    na, nb = res["seeds"]
    low, high = res["ci95"]
    welch = welch_text(res.get("welch_p"))
    subset = f", first {res['sentences']} sentences" if res.get("subset") else ""
    return (f"{res['difference']:+.2f} [{low:+.2f}, {high:+.2f}], Welch p = {welch} "
            f"({nb} vs {na} seed{'s' if na > 1 else ''}{subset})")


def cell(res):
    """``+0.40 (p = 0.043, 3 seed pairs)`` (``, first 500 sentences`` for a subset),
    ``skipped (reason)``, or None."""
    if res is None:
        return None
    if "skipped" in res:
        return f"skipped ({res['skipped']})"
    n = res["seeds"]
    subset = f", first {res['sentences']} sentences" if res.get("subset") else ""
    p = p_text(res["p_value"], res.get("n_samples", N_SAMPLES))
    return (f"{res['difference']:+.2f} (p {p if p.startswith('<') else '= ' + p}, {n} seed "
            f"pair{'s' if n > 1 else ''}{subset})")
