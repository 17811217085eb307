"""What a results table is: its runs, its renderer and the task CLI that makes its runs."""

import dataclasses
import os
from typing import Callable

# experiments/configs: one flagfile per paper setting.
CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "configs")
REPO_ROOT = os.path.dirname(os.path.dirname(CONFIG_DIR))


@dataclasses.dataclass(frozen=True)
class Table:
    """A table: ``runs`` [(run name, flagfile or None, extra args)] run by the CLI of
    ``task`` (``python -m experiments.<task>``), rendered by ``render(results)``.
    ``archives``: folders of archived runs (relative to the repository) rendered beside
    ``--runs_root``'s, e.g. the ACVI study's seeds of the same rows. ``curves``: the
    dev-metric panels of the table's figure, ``(kind, key, ylabel, log scale)`` of the
    runs' history.jsonl records (:mod:`experiments.tables.curves`); none: no figure."""
    runs: list
    render: Callable
    task: str  # translate, summarize or caption
    archives: tuple = ()
    curves: tuple = ()

    def result_paths(self, runs_root):
        return [runs_root] + [os.path.join(REPO_ROOT, a) for a in self.archives]
