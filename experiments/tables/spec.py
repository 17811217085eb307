"""What a results table is: its runs, its renderer and the task CLI that makes its runs."""

import dataclasses
import os
from typing import Callable

# experiments/configs: one flagfile per paper setting.
CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "configs")


@dataclasses.dataclass(frozen=True)
class Table:
    """A table: ``runs`` [(run name, flagfile or None, extra args)] run by the CLI of
    ``task`` (``python -m experiments.<task>``), rendered by ``render(results)``."""
    runs: list
    render: Callable
    task: str  # translate, summarize or caption
