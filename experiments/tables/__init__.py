r"""Results JSON -> markdown tables, with the paper's numbers quoted beside ours.

One module per paper table holds its paper numbers, its runs and its renderer
(:mod:`~experiments.tables.table4_translation`, ``table3_captioning``, ``table1_summarization``
(and Table 2), ``table5_duc2004``); :mod:`~experiments.tables.registry`
names them all, :mod:`~experiments.tables.runner` runs and renders any of them
(``python -m experiments.tables run table4-cpu --runs_root runs/table4_cpu --out
results/table4_cpu.md``), :mod:`~experiments.tables.preflight` checks data first.
Tables run the task CLIs as subprocesses; no CLI imports this package.

The paper's numbers are never mixed into our columns: they sit in their own column
group headed "paper (Table 4)", and our columns are headed with the profile that
produced them ("ours, paper profile", "ours, CPU scale").
"""

import importlib
import importlib.util

# The package's names, imported on first use: ``python -m experiments.tables status``
# (``make status``) reads run directories and needs none of the table modules, which
# import TensorFlow (seconds and a screen of log lines).
_EXPORTS = {
    "registry": ("CAPTION_TABLES", "RENDER", "SPECS", "SUMMARY_TABLES", "TABLES", "TASK_OF"),
    "render": ("SYSTEM_NAMES", "find_results", "markdown_table", "not_run"),
    "runner": ("main", "plan", "run_table"),
    "spec": ("CONFIG_DIR",),
    "table1_summarization": ("PAPER_TABLE1", "PAPER_TABLE2", "SUMMARY_SCORES", "table1"),
    "table3_captioning": ("PAPER_TABLE3", "table3"),
    "table4_translation": ("DATASET_OF", "PAPER_TABLE4", "TABLE4_SYSTEMS", "table4",
                           "table4_cpu"),
    "table5_duc2004": ("PAPER_TABLE5", "table5"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name):
    """A name of :data:`_EXPORTS`, or a submodule (``tables.runner``), on first use."""
    if name in _MODULE_OF:
        return getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
