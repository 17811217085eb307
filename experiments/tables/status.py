"""Where a table's runs stand: ``python -m experiments.tables status --runs_root DIR``.

One line per run directory under each ``--runs_root`` (a folder of run directories, or
one run directory): its state, the step it reached of its ``train_steps``, the metric it
selects on (``--select_best``, else the task's own: dev_bleu, val_rouge_1 or val_CIDEr_D)
at its last evaluation and at its best one, the training rate and the time left at that
rate (its evaluations not counted), and how long ago it last wrote its history. Read-only: a running run's files are
only read (its lock is not taken, so a status never makes a starting run fail), and a
history line still being written is skipped (:func:`acvi_tf.run.records.read_history`).

States: ``done`` (results.json written), ``training`` (the pid in its ``.lock`` is alive
and runs this package's CLI), ``stopped`` (trained steps, no live process: resume it
with the same command, which ``flags.txt`` / ``run_config.json`` hold) and ``empty``.
"""

import argparse
import os
import time

from acvi_tf.run.records import load_run_config, read_history

METRICS = ("dev_bleu", "val_rouge_1", "val_CIDEr_D")  # each task's, higher is better
RATE_WINDOW = 8  # the last training logs the rate is measured over


def run_flags(model_dir):
    """The run's resolved flags: run_config.json's, else ``--name=value`` of flags.txt."""
    config = load_run_config(model_dir)
    if config is not None:
        return config.get("flags", {})
    flags = {}
    path = os.path.join(model_dir, "flags.txt")
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                name, sep, value = line.strip().lstrip("-").partition("=")
                if sep:
                    flags[name] = value
    return flags


def live_pid(model_dir):
    """The pid in ``.lock`` when that process is alive and is one of this package's CLIs
    (a pid reused by another program does not count), else None."""
    try:
        with open(os.path.join(model_dir, ".lock"), encoding="utf-8") as f:
            pid = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return None
    if pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return None
    return pid if "experiments." in cmdline else None


def metric_name(flags, evals):
    """The metric a run is judged by: its ``select_best`` (``-name``: lowest wins;
    :func:`acvi_tf.training.best_checkpoint.parse_select_best`), else the first of
    :data:`METRICS` it logs. ``(name, higher_is_better)`` or None."""
    select = (flags.get("select_best") or "").strip()
    if select:
        return select.lstrip("-"), not select.startswith("-")
    logged = {k for rec in evals for k in rec}
    return next(((m, True) for m in METRICS if m in logged), None)


def rate(train):
    """(steps per second, tokens per second) of the last :data:`RATE_WINDOW` training logs
    of the latest start (a resume's gap is not counted); None where unknown."""
    recent = train[-RATE_WINDOW:]
    pairs = [(a, b) for a, b in zip(recent, recent[1:])
             if b["step"] > a["step"] and b.get("time", 0) > a.get("time", 0)]
    if pairs:
        gaps = sorted(b["time"] - a["time"] for a, b in pairs)
        median = gaps[len(gaps) // 2]
        pairs = [(a, b) for a, b in pairs if b["time"] - a["time"] <= 10 * median]
    steps = sum(b["step"] - a["step"] for a, b in pairs)
    seconds = sum(b["time"] - a["time"] for a, b in pairs)
    tokens = recent[-1].get("train", {}).get("tokens_per_sec") if recent else None
    return (steps / seconds if seconds > 0 else None), tokens


def run_status(model_dir, now=None):
    """A dict of what :func:`format_table` prints for one run directory."""
    now = time.time() if now is None else now
    flags = run_flags(model_dir)
    history = read_history(model_dir)
    train = [r for r in history if "train" in r and "step" in r]
    evals = [(r["step"], r["eval"]) for r in history if "eval" in r and "step" in r]
    step = max((r["step"] for r in history if "step" in r), default=0)
    try:
        total = int(flags.get("train_steps")) if flags.get("train_steps") else None
    except (TypeError, ValueError):
        total = None
    done = os.path.exists(os.path.join(model_dir, "results.json"))
    pid = None if done else live_pid(model_dir)
    state = "done" if done else "training" if pid else "stopped" if step else "empty"
    out = {"run": os.path.basename(os.path.normpath(model_dir)), "state": state, "pid": pid,
           "step": step, "train_steps": total, "metric": None, "last": None, "best": None,
           "best_step": None, "steps_per_sec": None, "tokens_per_sec": None,
           "eta_sec": None, "updated_sec_ago": None}
    chosen = metric_name(flags, [e for _, e in evals])
    if chosen:
        name, higher = chosen
        scored = [(s, e[name]) for s, e in evals if isinstance(e.get(name), (int, float))]
        if scored:
            # the earliest of equal bests, as --select_best keeps it
            best_step, best = (max if higher else min)(scored, key=lambda x: x[1])
            out.update(metric=name, last=scored[-1][1], best=best, best_step=best_step)
    if train:
        steps_per_sec, tokens = rate(train)
        out.update(steps_per_sec=steps_per_sec, tokens_per_sec=tokens)
        if history[-1].get("time"):
            out["updated_sec_ago"] = max(0.0, now - history[-1]["time"])
        if state == "training" and steps_per_sec and total and total > step:
            out["eta_sec"] = (total - step) / steps_per_sec
    return out


def find_runs(roots):
    """The run directories under each root (a root that is itself a run directory counts
    as one), sorted by name within a root."""
    marks = ("run_config.json", "flags.txt", "history.jsonl", "results.json")
    runs = []
    for root in roots:
        if any(os.path.exists(os.path.join(root, m)) for m in marks):
            runs.append(root)
            continue
        if not os.path.isdir(root):
            raise FileNotFoundError(f"--runs_root={root}: no such directory")
        runs += [os.path.join(root, d) for d in sorted(os.listdir(root))
                 if any(os.path.exists(os.path.join(root, d, m)) for m in marks)]
    return runs


def _duration(seconds):
    if seconds is None:
        return "–"
    minutes = int(round(seconds / 60))
    return f"{minutes // 60}:{minutes % 60:02d}" if minutes >= 60 else f"{minutes} min"


def format_table(statuses):
    """A plain-text table, one run a line."""
    header = ("run", "state", "step", "metric: last (best @ step)", "tokens/s", "left",
              "updated")
    rows = []
    for s in statuses:
        step = f"{s['step']:,}" + (f"/{s['train_steps']:,}" if s["train_steps"] else "")
        metric = ("–" if s["metric"] is None else
                  f"{s['metric']} {s['last']:.2f} ({s['best']:.2f} @ {s['best_step']:,})")
        tokens = "–" if s["tokens_per_sec"] is None else f"{s['tokens_per_sec']:,.0f}"
        left = _duration(s["eta_sec"]) if s["state"] == "training" else "–"
        updated = ("–" if s["updated_sec_ago"] is None else
                   f"{_duration(s['updated_sec_ago'])} ago")
        state = s["state"] + (f" (pid {s['pid']})" if s["pid"] else "")
        rows.append((s["run"], state, step, metric, tokens, left, updated))
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
             for r in [header] + rows]
    return "\n".join(lines)


def main(roots):
    try:
        runs = find_runs(roots)
    except FileNotFoundError as e:
        print(e)
        return 2
    if not runs:
        print(f"no run directories under {', '.join(roots)}")
        return 0
    print(format_table([run_status(r) for r in runs]))
    return 0


def add_arguments(parser):
    """The status command's flags (the runner's ``status`` subcommand and :func:`cli`)."""
    parser.add_argument("--runs_root", nargs="+", required=True,
                        help="folders of run directories (e.g. runs/table4_cpu), or run "
                             "directories")


HELP = ("where the runs under a runs root stand: state, step, the selection metric (last "
        "and best), tokens/s, time left")


def cli(argv=None):
    """``python -m experiments.tables status --runs_root DIR ...`` without importing the
    table modules (``experiments/tables/__main__.py`` routes here)."""
    parser = argparse.ArgumentParser(prog="python -m experiments.tables status",
                                     description=HELP)
    add_arguments(parser)
    return main(parser.parse_args(argv).runs_root)
