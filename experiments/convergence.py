r"""How runs converge: their validation curves side by side (issue 33).

The tables compare rows at one step budget; this report shows whether that budget is
past every row's plateau, and when each run's attention "takes off". It reads the
``history.jsonl`` that every run writes (the evaluations during training), archives
each run's small files under ``results/convergence/runs/<name>/`` (so the report can be
rendered again once the run directories are gone) and writes a markdown report with a
figure (``<out>_curves.png``)::

    python -m experiments.convergence --runs soft_s0=/work/runs/m30k_soft_12k_s0 \
        no_attention=runs/table4_cpu/multi30k_no_attention --out results/convergence.md

Per run: the evaluated steps, the best score and its step, the *plateau step* (the
first evaluation within ``--plateau_tolerance`` of the best) and the *take-off step* (the
first evaluation at or above ``--takeoff``), and a table of the score / dev NLL /
attention entropy at every evaluation. A run still training is marked so, with its last
step. The score is ``--metric``, any evaluation key of the runs' history: ``dev_bleu``
(translation, the default), ``val_rouge_1`` (summarization), a captioning run's ``val_``
keys...

``--target=T`` adds where each run's least-squares line over its last ``--fit_steps``
evaluated steps reaches T: a linear extrapolation, a lower bound on the budget a run
still learning would need, e.g. for ROUGE-1 20::

    python -m experiments.convergence --metric=val_rouge_1 --target=20 \
        --runs s2s20k=/work/runs_sum/s2s20k_cont10000 --out results/s2s_curves.md
"""

import argparse
import math
import os
import shutil
import sys

import numpy as np

from acvi_tf.run.records import curve, read_history
from acvi_tf.utils.files import load_json, write_report
from acvi_tf.utils.provenance import command_line
from experiments.tables.curves import plot_rows
from experiments.tables.render import markdown_table

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCHIVE = os.path.join(REPO_ROOT, "results", "convergence", "runs")
ARCHIVED = ("history.jsonl", "run_config.json", "results.json", "flags.txt")
# The names the report gives the evaluation keys it knows; any other key is named as it is.
LABELS = {"dev_bleu": "dev BLEU", "val_rouge_1": "val ROUGE-1", "val_rouge_2": "val ROUGE-2",
          "val_rouge_l": "val ROUGE-L"}
OTHER_PANELS = (("eval", "dev_nll", "dev NLL per token", False),
                ("eval", "attention_entropy", "attention entropy (nats)", False))


def label(metric):
    return LABELS.get(metric, metric)


def panels(metric="dev_bleu"):
    """The figure's panels: ``metric`` (as evaluated during training), dev NLL, attention
    entropy."""
    return (("eval", metric, f"{label(metric)} (greedy, eval subset)", False),) + OTHER_PANELS


def summarize(history, plateau_tolerance=0.5, takeoff=10.0, metric="dev_bleu"):
    """``{steps, best, best_step, plateau_step, takeoff_step, last_step}`` of one run's
    evaluations of ``metric`` (higher is better; None where it has none)."""
    steps, scores = curve(history, "eval", metric)
    train_steps, _ = curve(history, "train", "nll")
    last = max(steps + train_steps) if steps or train_steps else None
    if not steps:
        return {"steps": 0, "best": None, "best_step": None, "plateau_step": None,
                "takeoff_step": None, "last_step": last}
    best = max(scores)
    return {"steps": len(steps), "best": best, "best_step": steps[scores.index(best)],
            "plateau_step": next(s for s, b in zip(steps, scores) if b >= best - plateau_tolerance),
            "takeoff_step": next((s for s, b in zip(steps, scores) if b >= takeoff), None),
            "last_step": last}


def extrapolate(history, target, fit_steps=4000, metric="dev_bleu", min_points=3):
    """Where a straight line through a run's last evaluations reaches ``target``.

    The least-squares line of ``metric`` against the step over the evaluations in the
    last ``fit_steps`` steps (at least ``min_points`` of them, else None). Returns
    ``{points, first, last, slope, fitted, reach_step, reached_at}``: ``slope`` per
    step, ``fitted`` the line's value at the last evaluation, ``reach_step`` the step
    where the line reaches ``target`` (None if it never rises to it), ``reached_at`` the
    first evaluation already at or above ``target`` (None if none). A curve that
    flattens reaches ``target`` later than its line: ``reach_step`` is a lower bound.
    """
    steps, scores = curve(history, "eval", metric)
    reached_at = next((s for s, v in zip(steps, scores) if v >= target), None)
    fit = [(s, v) for s, v in zip(steps, scores) if steps and s >= steps[-1] - fit_steps]
    if len(fit) < min_points:
        return None
    xs, ys = np.array(fit, dtype=float).T
    slope, intercept = np.polyfit(xs, ys, 1)
    fitted = slope * xs[-1] + intercept
    reach = None
    if fitted >= target:
        reach = int(xs[-1])
    elif slope > 0:
        reach = int(math.ceil((target - intercept) / slope))
    return {"points": len(fit), "first": int(xs[0]), "last": int(xs[-1]),
            "slope": float(slope), "fitted": float(fitted), "reach_step": reach,
            "reached_at": reached_at}


def archive_run(name, model_dir, root=ARCHIVE):
    """Copies the run's small files to ``root/name`` (what the report reads); returns the
    archived directory."""
    dest = os.path.join(root, name)
    if os.path.realpath(dest) == os.path.realpath(model_dir):
        return dest
    os.makedirs(dest, exist_ok=True)
    for f in ARCHIVED:
        src = os.path.join(model_dir, f)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(dest, f))
    return dest


def command_of(run_dir):
    """The command that made the run: results.json's, else run_config.json's."""
    for f in ("results.json", "run_config.json"):
        path = os.path.join(run_dir, f)
        if os.path.exists(path):
            command = load_json(path).get("command")
            if command:
                return command
    return "(unknown)"


def unscored(runs, metric):
    """The runs [(name, run_dir)] that have evaluations but none of ``metric``, each with the
    evaluation keys it has: [(name, [keys])]."""
    out = []
    for name, d in runs:
        keys = sorted({k for rec in read_history(d) for k in rec.get("eval", {})})
        if keys and metric not in keys:
            out.append((name, keys))
    return out


def report(runs, out, plateau_tolerance=0.5, takeoff=10.0,
           command="python -m experiments.convergence", metric="dev_bleu", target=None,
           fit_steps=4000):
    """Writes ``out`` (and ``<out>_curves.png``) for ``runs`` [(name, run_dir)]; returns
    the markdown. ``command`` is the command line the header names; ``metric`` the
    evaluation key that the plateau and take-off steps read; with a ``target`` score, a
    table of where each run's line over its last ``fit_steps`` steps reaches it
    (:func:`extrapolate`)."""
    name_ = label(metric)
    unit = "BLEU" if metric == "dev_bleu" else name_
    histories = [(name, d, read_history(d)) for name, d in runs]
    rows = []
    for name, d, history in histories:
        s = summarize(history, plateau_tolerance, takeoff, metric)
        done = os.path.exists(os.path.join(d, "results.json"))
        rows.append([name, s["steps"], s["best"], s["best_step"], s["plateau_step"],
                     s["takeoff_step"] if s["takeoff_step"] is not None else "not yet",
                     "finished" if done else "no results.json: training or stopped, "
                     f"last logged step {s['last_step']}"])
    folders = ", ".join(f"`{f}/`" for f in sorted({os.path.dirname(os.path.relpath(d))
                                                   for _, d in runs}))
    text = [f"# Convergence: {name_} and dev NLL against steps", "",
            f"Generated by `{command}` from each run's history.jsonl (read from {folders}). "
            f"Plateau step: the first evaluation within "
            f"{plateau_tolerance} {unit} of the run's best; take-off step: the first "
            f"evaluation at or above {takeoff} {name_}. {name_[0].upper() + name_[1:]} here "
            f"is the evaluation during training (greedy, the run's eval subset), not a "
            f"table's final score.", "",
            markdown_table(["run", "evaluations", f"best {name_}", "at step", "plateau step",
                            "take-off step", "state"], rows, "lrrrrrl")]
    if target is not None:
        text += ["", *budget_table(histories, target, fit_steps, metric, name_)]
    png = os.path.splitext(out)[0] + "_curves.png"
    if plot_rows([(name, [h]) for name, _, h in histories], panels(metric),
                 "dev metrics against steps", png):
        text += ["", f"![{name_}, dev NLL and attention entropy against steps]"
                     f"({os.path.basename(png)})"]
    for name, d, history in histories:
        steps, bleu = curve(history, "eval", metric)
        cols = {key: dict(zip(*curve(history, "eval", key)))
                for key in ("dev_nll", "attention_entropy")}
        text += ["", f"## {name}", "", f"`{command_of(d)}`", ""]
        text.append(markdown_table(["step", name_, "dev NLL", "attention entropy"],
                                   [[s, b, cols["dev_nll"].get(s),
                                     cols["attention_entropy"].get(s)]
                                    for s, b in zip(steps, bleu)], "rrrr")
                    if steps else "(no evaluation yet)")
    markdown = "\n".join(text)
    write_report(out, markdown)
    return markdown


def budget_table(histories, target, fit_steps, metric, name_):
    """Markdown lines: per run, the straight line of its last evaluations and the step
    where it reaches ``target`` (:func:`extrapolate`)."""
    rows = []
    for name, _, history in histories:
        e = extrapolate(history, target, fit_steps, metric)
        if e is None:
            rows.append([name, "fewer than 3 evaluations in the window", "–", "–", "–"])
            continue
        reach = ("reached at step {:,}".format(e["reached_at"]) if e["reached_at"] is not None
                 else "{:,}".format(e["reach_step"]) if e["reach_step"] is not None
                 else "never (the line does not rise)")
        rows.append([name, f"{e['points']} evaluations, steps {e['first']:,}-{e['last']:,}",
                     f"{1000 * e['slope']:+.2f}", e["fitted"], reach])
    return [f"## Where a straight line reaches {target:g} {name_}", "",
            f"The least-squares line of {name_} against the step over each run's evaluations "
            f"in its last {fit_steps:,} steps, carried on to {target:g}: a linear "
            f"extrapolation, not a run. A curve that keeps flattening gets there later than "
            f"its line, so for such a curve the step is a lower bound on the budget.", "",
            markdown_table(["run", "fitted", "slope per 1,000 steps", "line at the last step",
                            f"step where the line reaches {target:g}"], rows, "llrrr")]


def add_target_flags(parser):
    """``--target`` and ``--fit_steps`` (:func:`budget_table`), for this CLI and
    :mod:`experiments.checkpoint_curve`."""
    parser.add_argument("--target", type=float, default=None,
                        help="also tabulate the step where each run's straight line over "
                             "its last --fit_steps steps reaches this score (e.g. 20 for "
                             "ROUGE-1 20); a lower bound on the budget, not a run")
    parser.add_argument("--fit_steps", type=int, default=4000,
                        help="the window of --target's line, in steps (default: %(default)s)")


def check_target_flags(parser, args):
    if args.fit_steps < 1:
        parser.error(f"--fit_steps: {args.fit_steps} must be at least 1")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m experiments.convergence",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", required=True,
                        help="name=run_dir pairs (a run dir holds history.jsonl)")
    parser.add_argument("--out", default="results/convergence.md",
                        help="the markdown report; its figure is <out>_curves.png "
                             "(default: %(default)s)")
    parser.add_argument("--plateau_tolerance", type=float, default=0.5,
                        help="the plateau step is the first evaluation within this much of "
                             "the run's best score (default: %(default)s)")
    parser.add_argument("--metric", default="dev_bleu",
                        help="the evaluation key the report reads (higher is better): "
                             "dev_bleu (translation), val_rouge_1 (summarization), "
                             "... (default: %(default)s)")
    parser.add_argument("--takeoff", "--takeoff_bleu", dest="takeoff", type=float,
                        default=10.0, help="the take-off step is the first evaluation at "
                                           "or above this score (default: %(default)s)")
    add_target_flags(parser)
    parser.add_argument("--archive", default=ARCHIVE,
                        help="where the runs' small files are copied (default: %(default)s)")
    parser.add_argument("--no_archive", action="store_true",
                        help="read the run dirs as they are; copy nothing")
    args = parser.parse_args(argv)
    check_target_flags(parser, args)
    runs = []
    for item in args.runs:
        name, sep, d = item.partition("=")
        if not sep or not name or not d:
            parser.error(f"--runs: {item!r} is not name=run_dir")
        if not os.path.exists(os.path.join(d, "history.jsonl")):
            parser.error(f"--runs: {d} holds no history.jsonl")
        runs.append((name, d))
    for name, keys in unscored(runs, args.metric):
        parser.error(f"--metric: run {name} has no evaluation of {args.metric!r}; its "
                     f"evaluations have {', '.join(keys)}")
    runs = [(name, d if args.no_archive else archive_run(name, d, args.archive))
            for name, d in runs]
    print(report(runs, args.out, args.plateau_tolerance, args.takeoff,
                 command_line("experiments.convergence", argv), args.metric, args.target,
                 args.fit_steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
