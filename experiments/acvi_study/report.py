"""results/acvi_study.{md,json} and its plots, from the study's runs (:mod:`.grid`).

Every finished run's small files (``results.json``, ``history.jsonl`` and the dev/test
decodes) are archived under ``results/acvi_study/runs/<cell>/``; the report is built from
that archive, so it regenerates from the repository alone:

    python -m experiments.acvi_study report --runs_root runs/acvi_study

Text below the line ``NOTES_MARKER`` in the existing markdown is kept (notes by hand).
"""

import json
import math
import os

import numpy as np

from acvi_tf.utils.files import NOTES_MARKER, load_json, write_report  # noqa: F401 (NOTES_MARKER: tests)
from experiments.acvi_study import grid as _study
from experiments.archive import archive
from experiments.tables import significance
from acvi_tf.run.records import read_history
from experiments.tables.curves import plot_rows

ROWS = (("soft", "Soft attention"), ("acvi_paper_elbo", "ACVI, the paper's ELBO (Eq. 22)"),
        ("acvi", "ACVI (ours)")) + tuple(_study.EARLIER.values())


def relabel(cells, archive_root):
    """Gives every archived results.json the ``system`` of its cell's command today
    (:func:`experiments.acvi_study.grid.cell_system`), so the tables that read the archive put
    each run on its row. Runs made before ``--system`` existed say "acvi" for every ACVI
    cell; the label at run time is kept as ``system_at_run``. Only the label changes.
    Returns the number relabelled."""
    changed, seen = 0, set()
    for name, _, _, argv, model_dir in cells:
        path = os.path.join(archive_root, name, "results.json")
        if model_dir in seen or not os.path.exists(path):
            continue
        seen.add(model_dir)
        system = _study.cell_system(argv)
        with open(path, encoding="utf-8") as f:
            results = json.load(f)
        if not system or results.get("system") == system:
            continue
        results.setdefault("system_at_run", results.get("system"))
        results["system"] = system
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2, sort_keys=True)
        os.replace(path + ".tmp", path)
        changed += 1
    return changed


def load_run(archive_root, name):
    path = os.path.join(archive_root, name, "results.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        run = json.load(f)
    run["_history"] = read_history(os.path.dirname(path))
    run["_dir"] = os.path.join(archive_root, name)
    run["_path"] = path
    return run


def summary(run):
    """The numbers of one run the tables show."""
    diag = run.get("diagnostics") or {}
    out = {"val_bleu": run.get("bleu", {}).get("dev"), "test_bleu": run.get("bleu", {}).get("test"),
           "dev_nll": diag.get("dev_nll"), "kl_mc": diag.get("kl_mc"),
           "kl_bound": diag.get("kl_bound"), "context_use": diag.get("context_use"),
           "sigma_mean": diag.get("sigma_mean"), "attention_entropy": diag.get("attention_entropy"),
           "train_min": (run.get("train_wall_time_sec") or 0) / 60.0,
           "command": run.get("train_command") or run.get("command")}
    if "rouge" in run:  # summarization: ROUGE-1.5.5 F1 in percent (tasks.summarization)
        out["rouge1"] = run["rouge"]["rouge_1"]
    if "val" in run:  # summarize --mode=val: the same decode and ROUGE on val articles
        out.update({f"val_{k.replace('_', '')}": run["val"]["rouge"][k]
                    for k in ("rouge_1", "rouge_2", "rouge_l")},
                   val_articles=run["val"].get("val_articles"))
    return out


def _fmt(v, digits=2):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float) and abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def _p(p_value):
    """"= 0.0123", or "< 1e-4" at the bootstrap's floor (:func:`significance.p_text`)."""
    text = significance.p_text(p_value, significance.N_SAMPLES)
    return text if text.startswith("<") else f"= {text}"


def mean_std(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def _ms(values):
    m, s = mean_std(values)
    return "–" if m is None else f"{m:.2f} ± {s:.2f} (n={len([v for v in values if v is not None])})"


def plot_curves(rows, out_png):
    """Dev BLEU (greedy, the eval subset) and dev KL per token against steps, a line per
    run of the rows (:func:`experiments.tables.curves.plot_rows`)."""
    plot_rows([(label, [run["_history"] for run in rows.get(row, [])]) for row, label in ROWS],
              (("eval", "dev_bleu", "dev BLEU (greedy on 200 sentences;\nlast point: beam 5, "
                "full dev)", False),
               ("eval", "kl_mc", "dev KL[p(c_t; D) || prior] per token (nats, MC)", True)),
              "Multi30k En→De, CPU scale", out_png)


def plot_rate_distortion(grid, out_png):
    """Grid cells: dev KL per token (rate) against dev NLL (distortion)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 5))
    for name, s in grid:
        if s["kl_mc"] is None or s["dev_nll"] is None:
            continue
        ax.scatter(max(s["kl_mc"], 1e-3), s["dev_nll"], color="tab:green")
        ax.annotate(name, (max(s["kl_mc"], 1e-3), s["dev_nll"]), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    ax.set(xscale="log", xlabel="dev KL per token (nats, MC; floored at 1e-3)",
           ylabel="dev NLL per token (nats)", title="ACVI grid: rate against distortion")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)


def references(split):
    """Multi30k En->De tokenized references (None when the data is not here)."""
    try:
        from acvi_tf.data.translation import references as refs
        return refs("multi30k", split, "de", "tok")
    except Exception:  # noqa: BLE001 - no data here: the report says the test was not run
        return None


def converged_choice(scores):
    """The converged grid's choice: the cell with the highest mean val BLEU over its seeds,
    among the cells whose every seed finished (``scores``: cell -> [val BLEU or None per
    seed]); None while no cell is complete."""
    complete = {c: float(np.mean(v)) for c, v in scores.items()
                if v and all(x is not None for x in v)}
    return max(complete, key=complete.get) if complete else None


def converged_grid(runs):
    """The KL-weight grid at the converged recipe (:data:`grid.CONVERGED_GRID`): markdown
    lines and the JSON entry (per cell every seed's val BLEU, best-val step, σ, KL, and
    the choice)."""
    seeds = _study.CONVERGED_SEEDS
    lines = ["", f"## The KL-weight grid at the converged recipe (issue 33; seeds "
             f"{', '.join(map(str, seeds))}; chosen by mean val BLEU only)", "",
             f"Multi30k En→De at `--profile={_study.CONVERGED_PROFILE}` (8,000 Adam steps, "
             "length buckets of width 2, the checkpoint with the best greedy val BLEU of the "
             "evaluations every 500 steps; val BLEU here: that checkpoint, beam 5, the full "
             "val set). No Gumbel tail. The seeds are none of the table's: ACVI (ours)'s table "
             "seeds are fresh. Diagnostics (σ, KL, context use) as in the first grid.", "",
             "| cell | setting | " + " | ".join(f"val BLEU seed {s}" for s in seeds) +
             " | mean val BLEU | best-val step | mean σ | KL/token MC | context use | "
             "train min |", "|:--|:--|" + "--:|" * (len(seeds) + 6)]
    payload, scores, commands = {}, {}, []
    for name, desc, _ in _study.CONVERGED_GRID:
        found = [runs.get(f"conv_{name}_s{seed}") for seed in seeds]
        summ = [summary(r) if r else None for r in found]
        vals = [s["val_bleu"] if s else None for s in summ]
        scores[name] = vals
        steps = [(r.get("selected_checkpoint") or {}).get("step") if r else None for r in found]
        done = [s for s in summ if s]
        mean = lambda k: (float(np.mean([s[k] for s in done if s[k] is not None]))  # noqa: E731
                          if any(s[k] is not None for s in done) else None)
        payload[name] = {"seeds": list(seeds), "val_bleu": vals, "best_step": steps,
                         "test_bleu": [s["test_bleu"] if s else None for s in summ],
                         "sigma_mean": mean("sigma_mean"), "kl_mc": mean("kl_mc"),
                         "context_use": mean("context_use")}
        lines.append(f"| {name} | {desc} | " + " | ".join(
            _fmt(v) if v is not None else "not run yet" for v in vals) +
            f" | {_fmt(float(np.mean(vals))) if all(v is not None for v in vals) else '–'} | "
            f"{' / '.join(str(x) if x is not None else '–' for x in steps)} | "
            f"{_fmt(mean('sigma_mean'), 3)} | {_fmt(mean('kl_mc'))} | "
            f"{_fmt(mean('context_use'), 3)} | {_fmt(mean('train_min'), 0)} |")
        commands += [f"- `conv_{name}_s{seed}`: `{s['command']}`"
                     for seed, s in zip(seeds, summ) if s]
    choice = converged_choice(scores)
    complete = sum(all(x is not None for x in v) for v in scores.values())
    final = complete == len(scores)
    payload = {"cells": payload, "choice": choice, "final": final,
               "profile": _study.CONVERGED_PROFILE}
    # A choice among the first finished cells is only the current leader: the flagfile of
    # ACVI (ours) changes when every cell is in.
    lead = ("Chosen" if final else
            f"Provisional, {complete} of {len(scores)} cells complete: leading")
    lines += ["", f"{lead} by mean val BLEU among the complete cells: **{choice}**." if choice
              else "No cell has all its seeds yet: nothing is chosen."]
    if commands:
        lines += ["", "Commands:", ""] + commands
    return lines, payload


# The converged table's rows that answer "does ACVI (ours) help, and why": its two controls
# add to soft attention what ACVI adds to it, without the inference: noise at the σ that
# ACVI (ours) learns, and dropout (issue 33, item 4).
CONVERGED_ROWS = ("soft", "acvi", "soft_context_noise", "soft_context_dropout",
                  "acvi_paper_elbo")


def _verdict(ci95, against):
    """"ahead of / level with / behind" ``against`` from a 95% interval of the difference."""
    if not ci95 or ci95[0] is None or ci95[1] is None:
        return None
    if ci95[0] > 0:
        return f"ahead of {against}"
    if ci95[1] < 0:
        return f"behind {against}"
    return f"level with {against}"


def converged_comparison(table4):
    """Markdown lines and the JSON entry of ACVI (ours) and its controls at the converged
    recipe, read from results/table4_cpu.json (``table4``: its rows by key; the table is
    their one source). Each row against soft attention with the table's two-level 95%
    interval and Welch p; each control against ACVI (ours) by Welch's t over the seeds'
    test BLEU (:func:`acvi_tf.metrics.significance.welch_t`)."""
    from acvi_tf.metrics.significance import welch_t
    from experiments.tables.render import SYSTEM_NAMES
    lines = ["", "## ACVI (ours) and its controls at the converged recipe (issue 33)", "",
             "From `results/table4_cpu.json` (generated with results/table4_cpu.md, whose "
             "recipe this is: `--profile=cpu_converged`, 8,000 steps, the best-val "
             "checkpoint). ACVI (ours) is the converged grid's choice above. The controls "
             "are soft attention with Gaussian noise added to c_t at the mean σ ACVI (ours) "
             "learns (`table4cpu_converged_multi30k_soft_context_noise.flags`) and with "
             "dropout on c_t (`table4cpu_multi30k_soft_context_dropout.flags`). Against soft "
             "attention: the table's difference of means, its two-level bootstrap interval "
             "(seeds, then sentences) and Welch's p over the seeds; a control against ACVI "
             "(ours): Welch's t over the seeds' test BLEU.", "",
             "| row | seeds | test BLEU mean ± std | val BLEU mean ± std | Δ vs soft [95%] | "
             "Welch p vs soft | reading | vs ACVI (ours): Δ, Welch p |",
             "|:--|--:|--:|--:|--:|--:|:--|--:|"]
    payload = {}
    ours = (table4.get("acvi") or {}).get("test_bleu") or []
    for key in CONVERGED_ROWS:
        row = table4.get(key)
        label = SYSTEM_NAMES.get(key, key) + (" (ours)" if key == "acvi" else "")
        if not row or not row.get("test_bleu"):
            lines.append(f"| {label} | 0 | not run yet | | | | | |")
            continue
        test = row["test_bleu"]
        ci = row.get("ci95")
        verdict = None if key == "soft" else _verdict(ci, "soft attention")
        vs_ours = (welch_t(ours, test) if key.startswith("soft_context") else None)
        payload[key] = {"test_bleu": test, "val_bleu": row.get("val_bleu"),
                        "diff_to_soft": row.get("diff_to_soft"), "ci95": ci,
                        "welch_p": row.get("welch_p"), "reading": verdict,
                        "vs_acvi": vs_ours}
        delta = ("–" if key == "soft" or row.get("diff_to_soft") is None else
                 f"{row['diff_to_soft']:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else ""))
        lines.append(
            f"| {label} | {len(test)} | {_ms(test)} | {_ms(row.get('val_bleu') or [])} | "
            f"{delta} | {significance.welch_text(row.get('welch_p'))} | "
            f"{verdict or '–'} | " + (f"{vs_ours['difference']:+.2f}, "
                                       f"p = {significance.welch_text(vs_ours['p_value'])}"
                                       if vs_ours else "–") + " |")
    lines.append("")
    return lines, payload


def write(runs_root, cells, out):
    results_dir = os.path.dirname(out) or "."
    archive_root = os.path.join(results_dir, "acvi_study", "runs")
    copied = archive([(c[0], c[4]) for c in cells], archive_root)
    relabel(cells, archive_root)
    first = {}  # a run shared by two cells is archived under the first one's name
    for name, *_, model_dir in cells:
        first.setdefault(model_dir, name)
    runs = {name: load_run(archive_root, first[model_dir]) for name, *_, model_dir in cells}

    lines = ["# The ACVI study (issue 10), CPU scale", "",
             "Generated by `python -m experiments.acvi_study report` from the runs archived "
             "under `results/acvi_study/runs/` (each cell's `results.json`, `history.jsonl` "
             "and decodes). **CPU scale**: Multi30k En→De at the table4-cpu profile (2,500 "
             "Adam steps, 1×128 BiLSTM encoder, 256-d decoder, beam 5), tokenized BLEU on val "
             "and test2016. These are not the paper's settings and not its numbers.", ""]

    # -- the grid ----------------------------------------------------------------------
    grid_rows, grid_summ = [], []
    lines += ["## The ablation grid (one seed per cell; chosen by val BLEU only)", "",
              "KL per token, context use, dev NLL and mean σ are measured by teacher forcing "
              "on the 200-sentence dev subset at the end of training "
              "(`acvi_tf/training/diagnostics.py`). Context use = dev NLL with c_t = 0 minus "
              "dev NLL (nats per token): 0 means the decoder ignores the context.", "",
              "| cell | setting | val BLEU | KL/token MC | KL/token bound | context use | "
              "dev NLL | mean σ | train min |", "|:--|:--|--:|--:|--:|--:|--:|--:|--:|"]
    soft0 = runs.get("multi30k_soft_s0")
    if soft0:
        s = summary(soft0)
        lines.append(f"| (soft attention, seed 0) | reference | {_fmt(s['val_bleu'])} | – | – | "
                     f"{_fmt(s['context_use'], 3)} | {_fmt(s['dev_nll'], 3)} | – | "
                     f"{_fmt(s['train_min'], 0)} |")
    for name, desc, _ in _study.GRID:
        run = runs.get(f"grid_{name}")
        if run is None:
            lines.append(f"| {name} | {desc} | not run yet | | | | | | |")
            continue
        s = summary(run)
        grid_summ.append((name, s))
        grid_rows.append((name, s, run))
        lines.append(f"| {name} | {desc} | {_fmt(s['val_bleu'])} | {_fmt(s['kl_mc'])} | "
                     f"{_fmt(s['kl_bound'])} | {_fmt(s['context_use'], 3)} | "
                     f"{_fmt(s['dev_nll'], 3)} | {_fmt(s['sigma_mean'], 3)} | "
                     f"{_fmt(s['train_min'], 0)} |")
    if grid_summ:
        best = max(grid_summ, key=lambda x: x[1]["val_bleu"] if x[1]["val_bleu"] is not None
                   else -1)
        lines += ["", f"Best cell by val BLEU so far: **{best[0]}** ({_fmt(best[1]['val_bleu'])})."]
    lines += ["", "Commands (each cell's run; `results/acvi_study/runs/<cell>/flags.txt` holds "
              "every resolved flag):", ""]
    for name, s, run in grid_rows:
        lines.append(f"- `{name}`: `{s['command']}`")

    # -- the CNN/DM grid -------------------------------------------------------------------
    cnndm_summ = []
    scored = [r["val"] for r in (runs.get(f"cnndm_grid_{n}") for n, _, _ in _study.CNNDM_GRID)
              if r and "val" in r]
    how = (f"the first {scored[0]['val_articles']} val articles decoded as the test set is "
           f"(beam {scored[0]['decode']['beam_width']}, minimum length "
           f"{scored[0]['decode']['min_length']})" if scored else "the val articles")
    lines += ["", "## The CNN/DM grid (seed 0; chosen by val ROUGE-1 only)", "",
              "Added 2026-11-25, after the comparison below missed the CNN/DM target by 0.01 "
              "ROUGE-1: the KL weight around Multi30k's choice at the table1-cpu profile. "
              "Val ROUGE-1/2/L F1: `python -m experiments.summarize --mode=val` on each run, "
              f"{how}. Diagnostics as above, on the val subset of the run's evaluations.", "",
              "| cell | setting | val ROUGE-1 | val ROUGE-2 | val ROUGE-L | KL/token MC | "
              "context use | dev NLL | train min |", "|:--|:--|--:|--:|--:|--:|--:|--:|--:|"]
    for name, desc, _ in _study.CNNDM_GRID:
        run = runs.get(f"cnndm_grid_{name}")
        s = summary(run) if run else None
        if s is None or s.get("val_rouge1") is None:
            lines.append(f"| {name} | {desc} | {'not run yet' if s is None else 'no val score yet'}"
                         " | | | | | | |")
            continue
        cnndm_summ.append((name, s))
        lines.append(f"| {name} | {desc} | {_fmt(s['val_rouge1'])} | {_fmt(s['val_rouge2'])} | "
                     f"{_fmt(s['val_rougel'])} | {_fmt(s['kl_mc'])} | "
                     f"{_fmt(s['context_use'], 3)} | {_fmt(s['dev_nll'], 3)} | "
                     f"{_fmt(s['train_min'], 0)} |")
    if cnndm_summ:
        best = max(cnndm_summ, key=lambda x: x[1]["val_rouge1"])
        lines += ["", f"Best cell by val ROUGE-1 so far: **{best[0]}** "
                  f"({_fmt(best[1]['val_rouge1'])})."]
        row = _study.cnndm_row(best[0])
        label = dict(ROWS).get(row.removeprefix("cnndm_")) if row else None
        if label:
            lines[-1] += f" Its three seeds are the row \"{label}\" below."
    lines += ["", "Commands (training; each then `python -m experiments.summarize --mode=val "
              "--model_dir=<its model_dir>`):", ""]
    for name, s in cnndm_summ:
        lines.append(f"- `{name}`: `{s['command']}`")

    conv_lines, conv_payload = converged_grid(runs)
    lines += conv_lines
    table4_path = os.path.join(results_dir, "table4_cpu.json")
    table4 = load_json(table4_path) if os.path.exists(table4_path) else {}
    compare_lines, compare_payload = converged_comparison(table4)
    lines += compare_lines

    # -- the seeds comparison -------------------------------------------------------------
    table = {"multi30k": {}, "cnndm": {}}
    by_row = {"multi30k": {}, "cnndm": {}}
    lines += ["", "## The comparison that decides (3 seeds each)", ""]
    for task, metric_keys in (("multi30k", ("val_bleu", "test_bleu")), ("cnndm", ("rouge1",))):
        lines += [f"### {'Multi30k En→De (BLEU)' if task == 'multi30k' else 'CNN/DM (ROUGE-1 F1)'}",
                  "", "| row | " + " | ".join(f"seed {s}" for s in _study.SEEDS) + " | " +
                  " | ".join(f"{k} mean ± std" for k in metric_keys) + " |",
                  "|:--|" + "--:|" * (len(_study.SEEDS) + len(metric_keys))]
        for row, label in ROWS:
            found = [runs.get(f"{task}_{row}_s{seed}") for seed in _study.SEEDS]
            summaries = [summary(r) if r else None for r in found]
            by_row[task][row] = [r for r in found if r]
            main_key = metric_keys[-1]
            cells_txt = [_fmt(s[main_key]) if s else ("not chosen yet" if row == "acvi" and
                                                       _study.OURS[task] is None else "not run")
                         for s in summaries]
            stats = [_ms([s[k] if s else None for s in summaries]) for k in metric_keys]
            lines.append(f"| {label} | " + " | ".join(cells_txt) + " | " + " | ".join(stats) + " |")
            key = {"test_bleu": "test_bleu", "rouge1": "rouge1"}[main_key]
            table[task][row] = {key: [s[main_key] for s in summaries if s]}
        lines.append("")

    # paired bootstrap on the pooled seeds (seed i against seed i), Multi30k test2016 and
    # CNN/DM test (per-summary ROUGE-1 F1)
    refs = references("test")
    for task, title in (
            ("multi30k", f"### Paired bootstrap (sacrebleu, {significance.N_SAMPLES:,} "
                         "resamples, seeds pooled: seed i against seed i; sentences only, "
                         "the seeds' spread is not counted)"),
            ("cnndm", f"### Paired bootstrap, CNN/DM ({significance.N_SAMPLES:,} resamples of "
                      "the summaries, "
                      "per-summary ROUGE-1 F1 from ROUGE-1.5.5, seeds pooled: seed i against "
                      "seed i; two-sided p, the shift method; sentences only)")):
        lines += [title, ""]
        for row, label in ROWS[1:]:
            if task == "multi30k" and refs is None:
                lines.append(f"- {label} vs soft attention: the Multi30k references are not "
                             f"here")
                continue
            res = (significance.bleu_vs(by_row[task]["soft"], by_row[task][row],
                                        lambda r: refs) if task == "multi30k" else
                   significance.rouge1_vs(by_row[task]["soft"], by_row[task][row]))
            if res is None:
                lines.append(f"- {label} vs soft attention: not run yet")
                continue
            table[task][row]["paired_bootstrap_vs_soft"] = res
            n = res["seeds"]
            metric, p_name = (("BLEU", "sacrebleu p") if task == "multi30k" else
                              ("ROUGE-1", "p"))
            lines.append(f"- {label} vs soft attention ({n} seed pair{'s' if n > 1 else ''}): "
                         f"{res['candidate']:.2f} vs {res['baseline']:.2f} {metric}, difference "
                         f"{res['difference']:+.2f}, {p_name} "
                         f"{_p(res['p_value'])}")
        lines.append("")

    # -- plots ----------------------------------------------------------------------------
    os.makedirs(os.path.join(results_dir, "acvi_study"), exist_ok=True)
    curve_png = os.path.join(results_dir, "acvi_study", "curves_multi30k.png")
    rd_png = os.path.join(results_dir, "acvi_study", "rate_distortion.png")
    plot_curves(by_row["multi30k"], curve_png)
    plot_rate_distortion(grid_summ, rd_png)
    lines += ["## Plots", "",
              f"![dev BLEU and KL per token against steps]({os.path.relpath(curve_png, results_dir)})",
              "", f"![rate against distortion of the grid]({os.path.relpath(rd_png, results_dir)})",
              ""]

    # -- json, notes --------------------------------------------------------------------------
    payload = {"multi30k": table["multi30k"], "cnndm": table["cnndm"],
               "grid": dict(grid_summ), "grid_cnndm": dict(cnndm_summ),
               "grid_converged": conv_payload, "converged_comparison": compare_payload,
               "ours": _study.OURS, "profile": "cpu (table4-cpu / table1-cpu)"}
    with open(os.path.splitext(out)[0] + ".json", "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=2, sort_keys=True)
    write_report(out, "\n".join(lines))
    print(f"{out}: {len(grid_summ)} grid cells, {copied} runs archived")
    return 0
