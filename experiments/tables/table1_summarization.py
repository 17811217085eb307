"""Tables 1 and 2: abstractive summarization on CNN/DailyMail (experiments/summarize.py),
and the lead-3 baseline."""

from experiments.tables import significance
from experiments.tables.render import (SYSTEM_NAMES, Footnotes, markdown_table, not_run,
                                       first_per_seed, profile_label, sampled_diversity_cell,
                                       seed_of, seeds_cell)
from experiments.tables.spec import Table

# Table 1 (ROUGE-1, -2, -L F1; METEOR exact, full), the rows we can produce, keyed
# (system, head, coverage, vocab size); the lead-3 row is See et al.'s.
PAPER_TABLE1 = [
    (("soft", "softmax", False, 150_000), "seq2seq with SA (150K vocabulary)",
     (30.49, 11.17, 28.08, 11.65, 12.86)),
    (("soft", "softmax", False, 50_000), "seq2seq with SA (50K vocabulary)",
     (31.33, 11.81, 28.83, 12.03, 13.20)),
    (("soft", "pointer", False, None), "pointer-generator (SA)", (36.44, 15.66, 33.42, 15.35, 16.65)),
    (("soft", "pointer", True, None), "pointer-generator + coverage (SA)",
     (39.53, 17.28, 36.38, 17.32, 18.72)),
    (("structured", "pointer", False, None), "pointer-generator + structured attention",
     (36.72, 15.84, 33.64, 15.43, 16.87)),
    (("structured", "pointer", True, None), "pointer-generator + structured attention + coverage",
     (40.12, 17.61, 36.74, 17.38, 18.93)),
    (("acvi", "pointer", False, None), "pointer-generator + ACVI", (39.96, 17.41, 36.40, 16.68, 17.84)),
    (("acvi", "pointer", True, None), "pointer-generator + ACVI + coverage",
     (42.71, 19.24, 39.05, 18.47, 20.09)),
    (("lead-3", None, False, None), "lead-3 baseline", (40.34, 17.70, 36.57, 20.48, 22.21)),
    # Rows of the ICLR version's Table 1 only (papers/000_*; the same in papers/003_*
    # but the Transformer's); its other rows have the journal version's numbers.
    (("transformer", "softmax", False, None), "Transformer (ICLR version)",
     (24.40, 5.89, 17.60, 10.38, 10.72)),
    (("variational", "pointer", True, None),
     "pointer-generator + coverage: variational attention (ICLR version)",
     (40.04, 17.37, 36.45, 17.14, 18.66)),
    (("ved", "pointer", True, None), "pointer-generator + coverage: VED (ICLR version)",
     (41.28, 18.05, 38.12, 17.63, 18.87)),
]


def _acvi_rows(system, what):
    """The paper's two ACVI rows (without and with coverage) for another ACVI ``system``,
    quoting the paper's ACVI numbers."""
    return [((system,) + key[1:], f"{name}, {what}", paper)
            for key, name, paper in PAPER_TABLE1 if key[0] == "acvi"]


# The CPU table's ACVI rows come more than once: "ACVI" as the ACVI study chose it (ours),
# the paper's ELBO taken literally (results/acvi_study.md), and KL weight 0 (no Gumbel
# tail), which the study's CNN/DM grid chose by val ROUGE-1 (2026-11-25; its seeds are the
# study's noise-only row).
PAPER_ELBO_TABLE1 = _acvi_rows("acvi_paper_elbo", "the paper's ELBO (Eq. 22 taken literally)")
NOISE_ONLY_TABLE1 = _acvi_rows("acvi_noise_only", "KL weight 0 (the CNN/DM grid's choice)")
# Table 2 (pointer-generator + coverage): rates as printed (read as percentages);
# variational attention and VED from the ICLR version.
PAPER_TABLE2 = {"soft": (0.05, 1.16), "structured": (0.05, 1.18), "variational": (0.05, 1.18),
                "ved": (0.12, 1.21), "acvi": (0.38, 1.25)}
SUMMARY_SCORES = ("rouge_1", "rouge_2", "rouge_l")


def _summary_rows(results):
    """(row key, scores dict, run) for every Table 1 row our runs give: each coverage
    run gives a row without coverage (``no_coverage``) and one with it."""
    rows = []
    for r in results:
        if r["system"] == "lead-3":
            rows.append((("lead-3", None, False, None), r, r))
            continue
        system = _summary_system(r)
        vocab = r.get("vocab_size") if r.get("head") == "softmax" else None
        if r.get("no_coverage"):
            rows.append(((system, r["head"], False, vocab), r["no_coverage"], r))
        rows.append(((system, r["head"], bool(r.get("coverage")), vocab), r, r))
    return rows


def _vs_soft_coverage(key, runs, rows_ours, profile):
    """A pointer-generator + coverage row's ROUGE-1 against soft attention's, two cells:
    counting seeds (two-level bootstrap and Welch's t) and the paired bootstrap of the
    per-summary scores (:mod:`experiments.tables.significance`); None for other rows (the
    scores before coverage have no decode of their own)."""
    system, head, coverage, _ = key
    if head != "pointer" or not coverage or system == "soft" or not runs:
        return [None, None]
    soft = first_per_seed([r for k, s, r in rows_ours if _match(k, ("soft", "pointer", True, None))
                           and s is r and r["profile"] == profile])
    return [significance.seeds_cell(significance.rouge1_seeds_vs(soft, runs)),
            significance.cell(significance.rouge1_vs(soft, runs))]


def _summary_system(r):
    """The row system of a summarization run: ``system`` as experiments.summarize writes
    it (the variant, latent or architecture; softmax-head runs carry a "seq2seq-"
    prefix), not ``attention`` (soft for VED and the Transformer too)."""
    system = r.get("system") or r.get("attention")
    return system[len("seq2seq-"):] if system.startswith("seq2seq-") else system


def _summary_notes(r):
    notes = []
    if r.get("partial_eval") and r.get("test_articles"):
        notes.append(f"first {r['test_articles']:,} test articles")
    if r.get("train_data_partial"):
        notes.append("partial training data")
    return notes


def _match(key, want):
    return key[:3] == want[:3] and (want[3] is None or key[3] == want[3])


def table1(results, title="Table 1: abstractive summarization on CNN/DailyMail",
           paper_rows=PAPER_TABLE1, table2_systems=tuple(PAPER_TABLE2)):
    """Table 1's rows; ROUGE F1 and METEOR of our runs by profile (mean ± std where a row
    ran with several seeds); Table 2 below it."""
    rows_ours = _summary_rows(results)
    profiles = sorted({r["profile"] for _, _, r in rows_ours if r["system"] != "lead-3"}) \
        or ["paper"]
    metrics = ("R-1", "R-2", "R-L", "METEOR exact", "METEOR full")
    headers = ["Method"]
    for p in profiles:
        headers += [f"{profile_label(p)}: {m}" for m in metrics]
        headers.append(f"{profile_label(p)}: R-1 vs pointer-generator + coverage (SA), "
                       f"counting seeds: Δ [95% interval], Welch p")
        headers.append(f"{profile_label(p)}: R-1 vs pointer-generator + coverage (SA), "
                       f"summaries only (seed i vs seed i): Δ (p)")
    headers += [f"paper (Table 1): {m}" for m in metrics] + ["our run"]
    rows, notes = [], Footnotes()
    for key, name, paper in paper_rows:
        row, refs = [name], []
        for p in profiles:
            # (scores, run) per seed; a coverage run's scores before coverage are its own
            hits = first_per_seed([(s, r) for k, s, r in rows_ours if _match(k, key)
                                   and (r["profile"] == p or r["system"] == "lead-3")],
                                  run=lambda hit: hit[1])
            if not hits:
                row += [None] * (len(metrics) + 2)
                continue
            row += [seeds_cell([s["rouge"][k] for s, _ in hits]) for k in SUMMARY_SCORES]
            row += [seeds_cell([(s.get("meteor") or {}).get(m) for s, _ in hits])
                    for m in ("exact", "full")]
            row += _vs_soft_coverage(key, [r for s, r in hits if s is r], rows_ours, p)
            for s, r in hits:
                ref = notes.add(dict(r, partial_eval=False, splits={}))
                extra = _summary_notes(r)
                if s is not r:
                    extra.append(f"at step {s.get('steps'):,}, before coverage")
                refs.append(ref + (f" ({'; '.join(extra)})" if extra else ""))
        row += list(paper) + [" ".join(dict.fromkeys(refs)) or not_run(key[0])]
        rows.append(row)
    table2_rows = []
    for system in table2_systems:
        nw, oov = PAPER_TABLE2["acvi" if system.startswith("acvi") else system]
        mine = first_per_seed(x for x in results if x["system"] != "lead-3"
                              and _summary_system(x) == system
                              and x.get("head") == "pointer" and x.get("novelty"))
        ours = [seeds_cell([r["novelty"][k] for r in mine])
                for k in ("novel_word_percent", "oov_adoption_percent")]
        ours.append(sampled_diversity_cell([r.get("sampled_diversity") for r in mine]))
        table2_rows.append([SYSTEM_NAMES.get(system, system)] + ours + [nw, oov, " ".join(
            notes.add(dict(r, partial_eval=False, splits={})) for r in mine)
            or not_run(system)])
    # Table 1's other rows (no pointer: it cannot adopt an OOV; lead-3 copies article
    # sentences), measured alike; the paper's Table 2 has no such rows.
    for key, name, _ in paper_rows:
        if key[1] == "pointer":
            continue
        mine = first_per_seed([r for k, s, r in rows_ours if _match(k, key) and s is r
                               and r.get("novelty")])
        if not mine:
            continue
        table2_rows.append([name] + [seeds_cell([r["novelty"][k] for r in mine])
                                     for k in ("novel_word_percent", "oov_adoption_percent")]
                           + [None, "–", "–", " ".join(notes.add(dict(r, partial_eval=False,
                                                                      splits={})) for r in mine)])
    text = [
        f"# {title}",
        "",
        markdown_table(headers, rows, "l" + "r" * (len(headers) - 2) + "l"),
        "",
        "ROUGE-1/2/L F1 from the official ROUGE-1.5.5 (See et al.'s options `-c 95 -2 -1 -U "
        "-r 1000 -n 4 -w 1.2 -a -m`, one sentence per line); METEOR 1.5 in exact mode and "
        "in full mode (exact, stem, synonym, paraphrase). Columns headed *ours* are our "
        "runs; *paper (Table 1)* quotes the paper and is never our result. A coverage run "
        "gives two rows: the model at the end of the last phase (before coverage) and the "
        "final one. A row run with several seeds shows mean ± sample std over them; the "
        "spread of the soft-attention rows is the noise level. Counting seeds: the "
        "difference of the mean ROUGE-1, its 95% interval from a two-level bootstrap "
        "(10,000 resamples of each row's seeds, then of the test summaries' ROUGE-1.5.5 "
        "F1) and Welch's t-test over the seeds' ROUGE-1 (– with fewer than 2 seeds a "
        "side): the comparison to read. Summaries only: the paired bootstrap of the "
        "per-summary F1 (10,000 resamples), seed i against seed i of soft attention, "
        "seeds pooled; p is two-sided (the shift method, as the tables' other tests; its "
        "floor written < 1e-4). CPU-scale runs train on a 39,227-pair partial copy with reduced sizes "
        "and are not comparable with the paper's numbers; the local test chunks are the "
        "first 4,000 of 11,490 test articles (mostly CNN).",
        "",
        "## Table 2: novel words and OOV adoption (pointer-generator + coverage; then "
        "Table 1's other rows, where run)",
        "",
        markdown_table(
            ["Method", "ours: novel words %", "ours: OOV adoption %",
             "ours: sampled distinct-1 / distinct-2 per article",
             "paper (Table 2): novel words", "paper (Table 2): OOV adoption", "our run"],
            table2_rows, "lrrrrrl"),
        "",
        "Novel words: generated tokens absent from the full article; OOV adoption: generated "
        "tokens that are article words outside the vocabulary (copied by the pointer); both "
        "pooled over the test summaries, in percent (`acvi_tf/metrics/novelty.py`). The "
        "paper does not define them; its numbers are read as percentages. Sampled distinct-1 "
        "/ distinct-2: Bahuleyan et al.'s diversity protocol (`--diversity_samples=K`), K "
        "greedy summaries of each of the first test articles with the latent sampled, "
        "distinct n-grams per article averaged; only for rows whose decoder can sample a "
        "latent (ACVI and VED here: `sampling_components` in `acvi_tf/tasks/base.py`), – "
        "for the others and where not measured.",
        "",
        "Runs (the command that produced each number):",
        "",
        notes.render() or "(none yet)",
    ]
    return "\n".join(text)


def row_key(key):
    """The JSON key of a Table 1 row: the system, then ``softmax_<vocab>k`` for the plain
    seq2seq rows and ``coverage`` for a coverage run's final scores (``soft``,
    ``soft_coverage``, ``soft_softmax_20k``, ``transformer_softmax``, ``lead-3``)."""
    system, head, coverage, vocab = key
    parts = [system]
    if head == "softmax":
        parts.append("softmax" + (f"_{vocab // 1000}k" if vocab else ""))
    if coverage:
        parts.append("coverage")
    return "_".join(parts)


def table1_data(results, paper_rows=PAPER_TABLE1):
    """The table's numbers for scripts (``<out>.json``), one entry per row our runs give
    (:func:`row_key`), per profile when several (``"<key>@<profile>"`` beyond the first):
    the row's name, every seed's ROUGE-1/2/L F1 and commit and, for a pointer-generator +
    coverage row, ROUGE-1 against soft attention's counting seeds (difference of the means,
    two-level bootstrap 95% interval, Welch's p; :func:`significance.rouge1_seeds_vs`)."""
    rows_ours = _summary_rows(results)
    profiles = sorted({r["profile"] for _, _, r in rows_ours if r["system"] != "lead-3"})
    out = {}
    for i, p in enumerate(profiles):
        for key, name, _ in paper_rows:
            hits = first_per_seed([(s, r) for k, s, r in rows_ours if _match(k, key)
                                   and (r["profile"] == p or r["system"] == "lead-3")],
                                  run=lambda hit: hit[1])
            if not hits:
                continue
            entry = {"name": name, "profile": p, "seeds": [seed_of(r) for _, r in hits],
                     **{k: [s["rouge"][k] for s, _ in hits] for k in SUMMARY_SCORES},
                     "commit": [(r.get("provenance") or {}).get("commit") for _, r in hits],
                     "diff_to_soft": None, "ci95": None, "welch_p": None}
            system, head, coverage, _ = key
            if head == "pointer" and coverage and system != "soft":
                soft = first_per_seed([r for k, s, r in rows_ours
                                       if _match(k, ("soft", "pointer", True, None))
                                       and s is r and r["profile"] == p])
                res = significance.rouge1_seeds_vs(soft, [r for s, r in hits if s is r])
                if res and "skipped" not in res:
                    entry.update(diff_to_soft=res["difference"], ci95=res["ci95"],
                                 welch_p=res["welch_p"])
            out[row_key(key) if i == 0 else f"{row_key(key)}@{p}"] = entry
    return out


# The baselines' runs (experiments/configs/table1_<name>.flags, table1_cpu_<name>.flags).
TABLE1_BASELINES = ("pg_structured", "pg_variational", "pg_ved", "transformer")
TABLE1_RUNS = [("lead3", None, ["--mode=lead3", "--profile=paper"])] + [
    (n, f"table1_{n}.flags", ["--noprogress"])
    for n in ("pg_soft", "pg_acvi", "pg_acvi_paper_elbo", "seq2seq_50k", "seq2seq_150k")
    + TABLE1_BASELINES]
TABLE1_CPU_RUNS = [("lead3", None, ["--mode=lead3", "--profile=cpu"])] + [
    (n, f"table1_cpu_{n}.flags", ["--noprogress"])
    for n in ("pg_soft", "pg_acvi", "seq2seq_20k", "seq2seq_60k") + TABLE1_BASELINES] + [
    ("pg_acvi_paper_elbo", "study/table1_cpu_pg_acvi_paper_elbo.flags", ["--noprogress"]),
    ("pg_acvi_noise_only", "study/table1_cpu_pg_acvi_noise_only.flags", ["--noprogress"])]
# Where the paper's ACVI rows sit, the CPU table adds the paper-ELBO and KL-weight-0 rows
# right after them.
_ACVI_COVERAGE = next(i for i, (k, _, _) in enumerate(PAPER_TABLE1) if k[:3] == ("acvi", "pointer",
                                                                                    True))
# The plain seq2seq rows at CPU scale: the vocabularies scaled as the cpu profile scales
# the pointer-generator's (50K -> 20K), each quoting the paper's row it stands for.
_SEQ2SEQ_CPU = {150_000: 60_000, 50_000: 20_000}


def _at_cpu_scale(row):
    (system, head, coverage, vocab), name, paper = row
    if vocab not in _SEQ2SEQ_CPU:
        return row
    cpu = _SEQ2SEQ_CPU[vocab]
    return ((system, head, coverage, cpu), f"{name.split(' (')[0]} ({cpu // 1000}K vocabulary; "
            f"the paper's {vocab // 1000}K row at CPU scale)", paper)


TABLE1_CPU_ROWS = [_at_cpu_scale(row) for row in (PAPER_TABLE1[:_ACVI_COVERAGE + 1]
                                                  + PAPER_ELBO_TABLE1 + NOISE_ONLY_TABLE1
                                                  + PAPER_TABLE1[_ACVI_COVERAGE + 1:])]
TABLE2_CPU_SYSTEMS = tuple(PAPER_TABLE2) + ("acvi_paper_elbo", "acvi_noise_only")
# The paper-scale table: ACVI (ours) and, after it, the paper's ELBO taken literally.
TABLE1_PAPER_ROWS = (PAPER_TABLE1[:_ACVI_COVERAGE + 1] + PAPER_ELBO_TABLE1
                     + PAPER_TABLE1[_ACVI_COVERAGE + 1:])
TABLE2_PAPER_SYSTEMS = tuple(PAPER_TABLE2) + ("acvi_paper_elbo",)
LEAD3_RUNS = [("lead3", None, ["--mode=lead3", "--profile=paper"])]
def seeds_baseline(key):
    """The row every-seed figure reads a Table 1 row against: the pointer-generator with
    soft attention, with coverage where the row has it."""
    return "soft_coverage" if key.endswith("_coverage") else "soft"


# The figure beside the tables (experiments.tables.curves).
CURVES = (("eval", "val_rouge_1", "val ROUGE-1 F1 (eval subset)", False),
          ("eval", "dev_nll", "dev NLL per token", False))
TABLES = {
    "table1": Table(TABLE1_RUNS, lambda rs: table1(rs, paper_rows=TABLE1_PAPER_ROWS,
                                                   table2_systems=TABLE2_PAPER_SYSTEMS),
                    "summarize", curves=CURVES),
    # The ACVI study's seeds of the soft, ACVI and paper-ELBO rows (results/acvi_study.md).
    "table1-cpu": Table(TABLE1_CPU_RUNS,
                        lambda rs: table1(rs, "Table 1 at CPU scale: abstractive summarization "
                                              "on CNN/DailyMail", TABLE1_CPU_ROWS,
                                          TABLE2_CPU_SYSTEMS), "summarize",
                        archive="results/table1_cpu/runs",
                        archives=("results/acvi_study/runs",), curves=CURVES,
                        data=lambda rs: table1_data(rs, TABLE1_CPU_ROWS),
                        seeds=("rouge_1", seeds_baseline, "test ROUGE-1 F1")),
    "lead3": Table(LEAD3_RUNS, lambda rs: table1(rs, "The lead-3 baseline on the local "
                                                     "CNN/DailyMail test chunks"), "summarize"),
}
