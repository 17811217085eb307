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

from experiments.tables.registry import (CAPTION_TABLES, RENDER, SPECS,  # noqa: F401
                                         SUMMARY_TABLES, TABLES, TASK_OF)
from experiments.tables.render import (SYSTEM_NAMES, find_results, markdown_table,  # noqa: F401
                                       not_run)
from experiments.tables.runner import main, plan, run_table  # noqa: F401
from experiments.tables.spec import CONFIG_DIR  # noqa: F401
from experiments.tables.table1_summarization import (  # noqa: F401
    PAPER_TABLE1, PAPER_TABLE2, SUMMARY_SCORES, table1)
from experiments.tables.table3_captioning import PAPER_TABLE3, table3  # noqa: F401
from experiments.tables.table4_translation import (  # noqa: F401
    DATASET_OF, PAPER_TABLE4, TABLE4_SYSTEMS, table4, table4_cpu)
from experiments.tables.table5_duc2004 import PAPER_TABLE5, table5  # noqa: F401
