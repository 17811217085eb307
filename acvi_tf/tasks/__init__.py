"""Tasks: data, output head settings and evaluation of each paper task, registered by
name in :data:`TASKS` (``translate``, ``summarize``, ``caption``). See
:mod:`acvi_tf.tasks.base`."""

from acvi_tf.tasks.base import (TASKS, DecodeConfig, Evaluator, RunInfo, get_task,  # noqa: F401
                                register_task, system_name, system_names)
from acvi_tf.tasks import captioning, summarization, translation  # noqa: F401,E402  (registers)
