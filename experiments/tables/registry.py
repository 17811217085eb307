"""Every table by name: the runs it needs, its renderer and the task CLI of its runs."""

from experiments.tables import (demo, table1_summarization, table3_captioning,
                                table4_translation, table5_duc2004)

SPECS = {**table4_translation.TABLES, **demo.TABLES, **table3_captioning.TABLES, **table1_summarization.TABLES,
         **table5_duc2004.TABLES}
# name -> [(run name, flagfile, extra args)], name -> render(results), name -> task
TABLES = {name: spec.runs for name, spec in SPECS.items()}
RENDER = {name: spec.render for name, spec in SPECS.items()}
TASK_OF = {name: spec.task for name, spec in SPECS.items()}
SUMMARY_TABLES = tuple(n for n, t in TASK_OF.items() if t == "summarize")
CAPTION_TABLES = tuple(n for n, t in TASK_OF.items() if t == "caption")
