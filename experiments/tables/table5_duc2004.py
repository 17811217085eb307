"""Table 5: DUC2004 decoded with the CNN/DailyMail-trained models of Table 1."""

import os

from acvi_tf.metrics.rouge import DUC2004_ITEMS
from experiments.tables import significance
from experiments.tables.render import (SYSTEM_NAMES, Footnotes, markdown_table, not_run,
                                       profile_label, seed_of, seed_runs, seeds_cell)
from experiments.tables.spec import Table
from experiments.tables.table1_summarization import SUMMARY_SCORES

# Table 5 of the ICLR version (DUC2004, ROUGE-1/2/L recall at 75 bytes).
PAPER_TABLE5 = {"soft": ("SA", (27.02, 7.44, 22.69)),
                "variational": ("Variational attention", (27.65, 7.58, 23.50)),
                "ved": ("VED", (30.68, 9.97, 27.02)), "acvi": ("ACVI", (32.09, 10.88, 28.14))}
BASELINE = "soft"


def _row_system(r):
    """A run's row: its system, and for a softmax-head run ("seq2seq-" systems; Table 1's
    two plain rows differ only in it) the vocabulary size too."""
    system = r["system"]
    if system.startswith("seq2seq-") and r.get("vocab_size"):
        return f"{system} ({r['vocab_size'] // 1000}K vocabulary)"
    return system


def compare_seeds(baseline, row):
    """ROUGE-1 of ``row`` against ``baseline`` counting seeds: ``{"difference", "ci95",
    "welch_p", "seeds": (n baseline, n row)}``. The two-level bootstrap interval of Table
    1's test where every run of both kept its per-summary scores
    (:data:`acvi_tf.metrics.rouge.DUC2004_ITEMS`), else ``ci95`` None and Welch's t over
    the seeds alone. None for a row not run."""
    from acvi_tf.metrics.significance import welch_t
    if not baseline or not row:
        return None

    def kept_items(r):
        return bool(significance.run_dir(r)) and os.path.exists(
            os.path.join(significance.run_dir(r), DUC2004_ITEMS))
    if all(map(kept_items, baseline + row)):
        res = significance.rouge1_seeds_vs(baseline, row, items_file=DUC2004_ITEMS,
                                           score=lambda r: r["duc2004"]["rouge_1"])
        if res and "skipped" not in res:
            return res
    a = [r["duc2004"]["rouge_1"] for r in baseline]
    b = [r["duc2004"]["rouge_1"] for r in row]
    welch = welch_t(a, b)
    return {"difference": sum(b) / len(b) - sum(a) / len(a), "ci95": None,
            "welch_p": None if welch is None else welch["p_value"], "seeds": (len(a), len(b))}


def seeds_vs_baseline(baseline, row):
    """The table's cell of :func:`compare_seeds`: with the interval, as Table 1's
    (``+0.17 [-0.40, +0.71], Welch p = 0.563 (3 vs 3 seeds)``), else the difference of
    the means and Welch's t alone (``+0.17, Welch p = 0.563 (3 vs 3 seeds)``; – with
    fewer than 2 seeds a side). None for a row not run."""
    res = compare_seeds(baseline, row)
    if res is None:
        return None
    if res["ci95"] is not None:
        return significance.seeds_cell(res)
    na, nb = res["seeds"]
    return (f"{res['difference']:+.2f}, Welch p = {significance.welch_text(res['welch_p'])} "
            f"({nb} vs {na} seed{'s' if na > 1 else ''})")


def _rows(results):
    return [dict(r, system=_row_system(r)) for r in results if r.get("duc2004")]


def table5_data(results):
    """results/table5.json: one entry per row that ran (its system), per profile when
    several (``"<system>@<profile>"`` beyond the first): every seed's DUC2004 ROUGE-1/2/L
    recall and commit and, against SA, :func:`compare_seeds`' difference, interval (None
    where the runs kept no per-summary scores) and Welch's p."""
    results = _rows(results)
    out = {}
    for i, p in enumerate(sorted({r["profile"] for r in results})):
        base = seed_runs(results, BASELINE, p)
        for system in list(PAPER_TABLE5) + sorted({r["system"] for r in results}
                                                  - set(PAPER_TABLE5)):
            mine = seed_runs(results, system, p)
            if not mine:
                continue
            entry = {"name": PAPER_TABLE5.get(system, (SYSTEM_NAMES.get(system, system),))[0],
                     "profile": p, "seeds": [seed_of(r) for r in mine],
                     **{k: [r["duc2004"][k] for r in mine] for k in SUMMARY_SCORES},
                     "commit": [(r.get("provenance") or {}).get("commit") for r in mine],
                     "diff_to_soft": None, "ci95": None, "welch_p": None}
            res = None if system == BASELINE else compare_seeds(base, mine)
            if res:
                entry.update(diff_to_soft=res["difference"], ci95=res["ci95"],
                             welch_p=res["welch_p"])
            out[system if i == 0 else f"{system}@{p}"] = entry
    return out


def table5(results, title="Table 5: DUC2004 with CNN/DailyMail-trained models"):
    """DUC2004 transfer: ROUGE-1/2/L recall at 75 bytes, ours beside the paper's."""
    results = _rows(results)
    profiles = sorted({r["profile"] for r in results}) or ["paper"]
    headers = ["Model"]
    for p in profiles:
        headers += [f"{profile_label(p)}: R-{m}" for m in ("1", "2", "L")]
        headers.append(f"{profile_label(p)}: R-1 vs SA, counting seeds: Δ, Welch p")
    headers += ["paper (Table 5): R-1", "paper (Table 5): R-2", "paper (Table 5): R-L",
                "our run"]
    rows, notes = [], Footnotes()
    systems = list(PAPER_TABLE5) + sorted({r["system"] for r in results} - set(PAPER_TABLE5))
    for system in systems:
        name, paper = PAPER_TABLE5.get(system, (SYSTEM_NAMES.get(system, system), (None,) * 3))
        row, refs = [name], []
        for p in profiles:
            mine = seed_runs(results, system, p)
            if not mine:
                row += [None] * 4
                continue
            row += [seeds_cell([r["duc2004"][k] for r in mine]) for k in SUMMARY_SCORES]
            row.append(None if system == BASELINE else
                       seeds_vs_baseline(seed_runs(results, BASELINE, p), mine))
            refs += [notes.add(dict(r, command=r["duc2004"]["command"],
                                    train_command=r.get("train_command"),
                                    partial_eval=False, splits={})) for r in mine]
        rows.append(row + list(paper) + [" ".join(refs) or not_run(system)])
    return "\n".join([
        f"# {title}",
        "",
        markdown_table(headers, rows, "l" + "r" * (len(headers) - 2) + "l"),
        "",
        "ROUGE-1/2/L recall against the 4 references, Rush et al.'s options `-c 95 -r 1000 "
        "-n 2 -w 1.2 -a -m -b 75` (first 75 bytes of each summary). The models are the "
        "pointer-generator + coverage runs of Table 1 (profile in the header), decoding the "
        "500 first sentences of DUC2004. *paper (Table 5)* quotes the ICLR version. A row "
        "decoded with the models of several seeds shows mean ± sample std over them. "
        "Counting seeds: the difference of the mean ROUGE-1 recall against SA and Welch's "
        "t-test over the seeds' scores (two-sided; – with fewer than 2 seeds a side), and "
        "where every run of both rows kept its per-summary scores (`--mode=duc2004` writes "
        "them from 2026-11-28), the 95% interval of Tables 1 and 4's two-level bootstrap "
        "(10,000 resamples of the seeds, then of the 500 summaries). Rows without an "
        "interval were decoded before that; their models are not archived.",
        "",
        "Runs (the command that produced each number):",
        "",
        notes.render() or "(none yet)",
    ])


# make table5 decodes DUC2004 with the summarization runs under --runs_root (Table 1's
# run names): Table 5's rows (ICLR version) SA, variational attention, VED and ACVI first,
# then every other row of Table 1.
TABLE5_RUNS = [(n, "table5_duc2004.flags", [])
               for n in ("pg_soft", "pg_variational", "pg_ved", "pg_acvi", "pg_acvi_paper_elbo",
                         "pg_acvi_noise_only", "pg_structured", "seq2seq_20k", "seq2seq_60k",
                         "transformer")]
# The ACVI study's CNN/DM seeds (soft, ACVI and the paper's ELBO), once decoded on DUC2004.
TABLES = {"table5": Table(TABLE5_RUNS, table5, "summarize",
                          archive="results/table5/runs",
                          archives=("results/acvi_study/runs",), data=table5_data,
                          seeds=("rouge_1", BASELINE, "DUC2004 ROUGE-1 recall (75 bytes)"))}
