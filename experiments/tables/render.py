"""The shared pieces of every table: reading results, markdown, footnotes, labels."""

import glob
import os

from acvi_tf.tasks.base import system_names
from acvi_tf.utils.files import load_json

SYSTEM_NAMES = {"soft": "Baseline (soft attention)", "structured": "Structured attention",
           "variational": "Variational attention (Deng et al. 2018)",
           "ved": "VED (Bahuleyan et al. 2018)", "acvi": "ACVI",
           "acvi_paper_elbo": "ACVI, the paper's ELBO (Eq. 22 taken literally)",
           "acvi_noise_only": "ACVI, KL weight 0 (a learned noise; no ELBO)",
           "transformer": "Transformer (Vaswani et al. 2017)",
           "gaussian": "Gaussian attention, N(0, I) prior (Bahuleyan et al. 2018)",
           "gaussian_mean_prior": "Gaussian attention, N(h̄, I) prior (Bahuleyan et al. 2018)",
           "vrnmt": "VRNMT, GRU decoder (Su et al. 2018)",
           "no_attention": "No attention (c_t = 0, the bridge state only; floor)",
           "soft_context_noise": "Soft attention + Gaussian noise on c_t (control)",
           "soft_context_dropout": "Soft attention + dropout on c_t (control)",
           "copy-source": "Copy the source (floor)"}
PROFILE_LABELS = {"paper": "ours, paper profile", "cpu": "ours, CPU scale",
                  "cpu_converged": "ours, CPU scale converged (8,000 steps, buckets of width 2, best val)",
                  "smoke": "ours, smoke test"}

# Where each task's results.json keeps its scores: (results task, key of the scores).
RESULT_KEYS = {"translate": ("translate", "bleu"), "summarize": ("summarize", "rouge"),
               "caption": ("caption", "scores")}


def find_results(paths, task="translate", key="bleu"):
    """results.json of every ``task`` run (holding ``key``) under ``paths`` (a model_dir
    or a folder of them)."""
    found = []
    for path in paths:
        if os.path.isfile(path):
            candidates = [path]
        elif os.path.exists(os.path.join(path, "results.json")):
            candidates = [os.path.join(path, "results.json")]
        else:
            candidates = sorted(glob.glob(os.path.join(path, "*", "results.json")))
        for c in candidates:
            r = load_json(c)
            if key in r and r.get("task") == task:
                r["_path"] = c
                found.append(r)
    return found


def flag_of(r, name, default=None, cast=str):
    """The value of ``--name`` the run was trained with: its last occurrence in the command
    that trained the model (``train_command``; a later ``--mode=eval`` records its own
    ``command`` and ``argv``, which need not repeat it), else in the recorded argv or
    command, as ``--name=V`` or ``--name V``; ``default`` when absent."""
    argv = (r.get("train_command") or "").split() or r.get("argv") or \
        r.get("command", "").split()
    value = default
    for i, a in enumerate(argv):
        if a.startswith(f"--{name}="):
            value = cast(a.split("=", 1)[1])
        elif a == f"--{name}" and i + 1 < len(argv):
            value = cast(argv[i + 1])
    return value


def seed_of(r):
    """The run's ``--seed`` (:func:`flag_of`); 0, the flag's default, when absent."""
    return flag_of(r, "seed", 0, int)


def first_per_seed(items, run=lambda item: item):
    """The first of ``items`` of each seed (``seed_of(run(item))``), by seed. Runs of the
    same row, profile and seed ran the same flagfile, so a second copy (e.g. the study's
    archive beside ``--runs_root``) adds nothing."""
    by_seed = {}
    for item in items:
        by_seed.setdefault(seed_of(run(item)), item)
    return [by_seed[s] for s in sorted(by_seed)]


def seed_runs(results, system, profile=None):
    """The runs of one table row, one per seed (:func:`first_per_seed`)."""
    return first_per_seed(r for r in results
                          if r["system"] == system and (profile is None or r["profile"] == profile))


def mean_std(values):
    """(mean, sample std or None for one value) of a list of numbers."""
    import statistics
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def seeds_cell(values, planned=None):
    """One number, or "mean ± std (n seeds)" for several; "(n of m seeds)" while a row
    has fewer seeds than its ``planned`` m (a single seed then says so too)."""
    mean, std = mean_std(values)
    if mean is None:
        return None
    n = len([v for v in values if v is not None])
    short = planned is not None and n < planned
    if std is None:
        return f"{mean:.2f} (1 of {planned} seeds)" if short else mean
    return f"{mean:.2f} ± {std:.2f} ({n}{f' of {planned}' if short else ''} seeds)"


def profile_label(profile):
    return PROFILE_LABELS.get(profile, f"ours, {profile} profile")


def hours(seconds):
    if seconds is None:
        return None
    return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def _notes(r):
    notes = []
    if r.get("train_data_partial"):
        notes.append("partial training data")
    if r.get("partial_eval"):
        notes.append(f"first {r['splits']['dev']['sentences']} eval sentences only")
    return notes


def commit_label(r):
    """The code a run ran, from its ``provenance`` entry: ``commit abc1234`` (the first 7
    hex digits), ``commits abc1234, def5678`` when a resumed run crossed a code change,
    ``+dirty`` when a start had uncommitted changes; None when the run recorded none
    (a run older than the entry, or one outside git)."""
    entry = r.get("provenance") or {}
    commits = entry.get("commits") or [c for c in [entry.get("commit")] if c]
    if not commits:
        return None
    dirty = "+dirty" if entry.get("clean") is False else ""
    return (f"commit{'s' if len(commits) > 1 else ''} "
            + ", ".join(c[:7] for c in commits) + dirty)


def machine_label(r):
    """The machine a run trained on, from its ``provenance`` entry: the CPU model(s) with
    their vector extensions and whether TensorFlow ran oneDNN's kernels, e.g. ``AMD EPYC
    [avx2 fma], oneDNN on`` (both change speed and float round-off); None when the run
    recorded neither (runs before commit c20585c)."""
    entry = r.get("provenance") or {}
    parts = [" + ".join(entry.get("cpu_models") or [])]
    onednn = entry.get("onednn") or []
    if onednn:
        parts.append("oneDNN " + ", ".join("on" if v else "off" for v in onednn))
    parts = [p for p in parts if p]
    return ", ".join(parts) or None


class Footnotes:
    def __init__(self):
        self.items = []
        self._refs = {}

    def add(self, r):
        key = r.get("_path") or id(r)
        if key not in self._refs:
            self._refs[key] = self._add(r)
        return self._refs[key]

    def _add(self, r):
        notes = _notes(r)
        steps = r.get("steps")
        beam = (r.get("decode") or {}).get("beam_width")
        desc = [f"`{r['command']}`"]
        if r.get("train_command") and r["train_command"] != r["command"]:
            desc.append(f"trained by `{r['train_command']}`")
        meta = []
        if steps:
            meta.append(f"{steps:,} steps")
        if r.get("train_wall_time_sec"):
            meta.append(f"train {hours(r['train_wall_time_sec'])}")
        if r.get("eval_wall_time_sec") is not None:
            meta.append(f"eval {hours(r['eval_wall_time_sec'])}")
        if beam:
            meta.append("greedy" if beam == 1 else f"beam {beam}")
        # a run from before runs recorded their code says so, rather than nothing
        meta.append(commit_label(r) or "commit not recorded")
        machine = machine_label(r)
        if machine:
            meta.append(machine)
        meta.extend(notes)
        self.items.append(" — ".join(desc) + (f" ({'; '.join(meta)})" if meta else ""))
        return f"[{len(self.items)}]" + (" †" if notes else "")

    def render(self):
        return "\n".join(f"{i}. {item}" for i, item in enumerate(self.items, 1))


def sampled_diversity_cell(scores):
    """Bahuleyan et al.'s sampled diversity of a row's runs (``scores``: the
    ``sampled_diversity`` record of each run, None where it was not measured):
    distinct-1 / distinct-2 per source, each the mean over the runs measured."""
    found = [s for s in scores if s]
    if not found:
        return None
    d1, _ = mean_std([s["distinct_1"] for s in found])
    d2, _ = mean_std([s["distinct_2"] for s in found])
    return (f"{d1:.3f} / {d2:.3f} (K={found[0]['samples']}, {found[0]['groups']} sources"
            + (f", {len(found)} runs)" if len(found) > 1 else ")"))


def not_run(system):
    """The "our run" cell of a row without a result: "not run" when the row's system is
    registered here (a flagfile runs it), else "not implemented here"."""
    if system in ("copy-source", "lead-3"):
        return "not run"
    return "not run" if system in system_names() | set(SYSTEM_NAMES) else "not implemented here"



def markdown_table(headers, rows, align=None):
    """A GitHub markdown table; ``align`` is a string of 'l'/'r'/'c' per column."""
    headers = [str(h) for h in headers]
    align = align or "l" * len(headers)
    marks = {"l": ":---", "r": "---:", "c": ":---:"}
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join(marks[a] for a in align) + "|"]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row {row} has {len(row)} cells, the table {len(headers)} columns")
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines)


def _cell(value):
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value).replace("|", "\\|").replace("\n", " ")
