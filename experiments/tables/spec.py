"""What a results table is: its runs, its renderer and the task CLI that makes its runs."""

import dataclasses
import os
from typing import Callable, Optional

# experiments/configs: one flagfile per paper setting.
CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "configs")
REPO_ROOT = os.path.dirname(os.path.dirname(CONFIG_DIR))


def read_flagfile(path):
    """The ``--key=value`` lines of a flagfile, as {key: value}."""
    values = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("--") and "=" in line:
                key, _, value = line[2:].partition("=")
                values[key] = value
    return values


@dataclasses.dataclass(frozen=True)
class Table:
    """A table: ``runs`` [(run name, flagfile or None, extra args)] run by the CLI of
    ``task`` (``python -m experiments.<task>``), rendered by ``render(results)``.
    ``archive``: the folder (relative to the repository) where the runner archives the
    table's finished runs (:mod:`experiments.archive`), "" for none; ``archives``: other
    folders of archived runs rendered beside, e.g. the ACVI study's seeds of the same
    rows. ``--runs_root`` comes first, then ``archive``, then ``archives``: of two runs of
    a row with the same seed the first found is shown. ``curves``: the
    dev-metric panels of the table's figure, ``(kind, key, ylabel, log scale)`` of the
    runs' history.jsonl records (:mod:`experiments.tables.curves`); none: no figure."""
    runs: list
    render: Callable
    task: str  # translate, summarize or caption
    archive: str = ""
    archives: tuple = ()
    curves: tuple = ()
    # epilogue(runs_root, out, stream) -> markdown lines written below the table once
    # its runs exist (the demo's example translations and heat map); None: nothing.
    epilogue: Optional[Callable] = None
    # data(results) -> a JSON-able dict written beside the markdown (<out>.json): the
    # table's numbers for scripts; None: no JSON.
    data: Optional[Callable] = None
    # (score, baseline, axis label): the figure of every seed of every row against the
    # baseline's spread, drawn from ``data``'s per-seed ``score`` lists
    # (:mod:`experiments.tables.seeds_plot`); (): no figure.
    seeds: tuple = ()
    # The profiles whose runs the table shows (results.json "profile"), () for every one:
    # one table per recipe, e.g. table4-cpu (cpu_converged) beside table4-cpu-2500 (cpu),
    # whose archived runs share row names.
    profiles: tuple = ()
    # {run name: how many seeds the row is planned to have} (``--seeds planned`` runs
    # seeds 0..n-1 of each row; a row not named has 1): e.g. issue 33's 5 seeds for soft
    # attention and ACVI, 3 for most baselines, 1 for a floor.
    planned_seeds: dict = dataclasses.field(default_factory=dict)

    def select(self, results):
        """The ``results`` this table shows (its ``profiles``)."""
        return [r for r in results if not self.profiles or r.get("profile") in self.profiles]

    def result_paths(self, runs_root, archive_root=REPO_ROOT):
        """Where the table's results are read: ``runs_root`` and the table's archives under
        ``archive_root`` (the checkout whose results/ the runs were archived into, which
        for runs trained from a worktree is not the worktree's own)."""
        return [runs_root] + [os.path.join(archive_root, a)
                              for a in ((self.archive,) if self.archive else ()) + self.archives]
