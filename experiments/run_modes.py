"""The one mode dispatch of the task CLIs (``experiments.translate``, ``summarize``,
``caption``): each declares a :class:`Cli` (its module, its task's name in
:data:`acvi_tf.tasks.TASKS`, its profiles and flag checks) and calls :func:`main`.
Everything after the flags is the same in every task, through the one
:class:`~acvi_tf.tasks.base.Task` interface:

- ``--dry_run`` prints the resolved command, the run's data and their status (the
  task's ``data_status``) and exits 3 when any of them is missing or partial;
- ``train_eval`` / ``train``: the data checked (unless ``--allow_partial_data``) and
  loaded, :meth:`~acvi_tf.tasks.base.Task.prepare_training` (the model config checked
  against a resumed run), the run's settings saved here (so a run that crashes in
  training still has them), :meth:`~acvi_tf.tasks.base.Task.train`; ``train`` merges the
  training's fields into results.json and stops, ``train_eval`` evaluates;
- ``eval``, ``decode``, ``export`` and the task's model modes (``Task.EXTRA_MODES``)
  restore the trained model of ``--model_dir`` first; a mode without a model (a
  baseline: ``copy_baseline``, ``lead3``) gives results.json's fields directly;
- results are written by the task's :meth:`~acvi_tf.tasks.base.Task.finish`, a model
  mode's sections merged into results.json.

The task never sees a flag, and nothing in it calls back into this module.
"""

import dataclasses
import os
import sys
from typing import Callable

from absl import app, flags

from acvi_tf.run.results import record_results
from acvi_tf.tasks import TASKS
from acvi_tf.tasks.decode_batches import read_lines, write_output
from acvi_tf.training.trainer import is_chief
from acvi_tf.utils import shards
from acvi_tf.utils.provenance import command_line
from experiments import flags as xflags

FLAGS = flags.FLAGS
TRAIN_MODES = ("train_eval", "train")


@dataclasses.dataclass(frozen=True)
class Cli:
    """A task CLI: its module (``experiments.translate``), its task's registry name, its
    profiles (``{name: {flag: value}}``) and ``check_flags(flag_values)`` (its cross-flag
    checks). ``errors``: more ``(exception types, prefix)`` that end in one line;
    ``adopted``: flags whose value in a trained run becomes the default in every mode
    (summarization's ``train_steps``: its phase schedule is laid over them)."""
    module: str
    task: str
    profiles: dict
    check_flags: Callable
    errors: tuple = ()
    adopted: tuple = ()

    @property
    def task_class(self):
        return TASKS.get(self.task)

    def modes(self, *more):
        """The ``--mode`` choices: the shared ones, the task's, then ``more`` (the CLI's)."""
        return xflags.MODES + tuple(self.task_class.EXTRA_MODES) + more


def make_task(cli, flag_values=FLAGS):
    """The task of the parsed flags: its config, the decoding settings, the run info."""
    fv = flag_values
    return cli.task_class(xflags.config_from_flags(cli.task_class.CONFIG, fv),
                          xflags.decode_config_from_flags(fv), xflags.run_info(cli.module, fv))


def save_settings(cli, model_dir, resolved, flag_values=FLAGS):
    """``run_config.json`` and ``flags.txt`` of the run: the task's flags, every shared
    setting, and ``resolved``, the settings the task resolved (translation's languages:
    ``Task.resolved_settings``)."""
    xflags.save_flags(model_dir, cli.module, xflags.task_flags(cli.task_class.CONFIG),
                      resolved, flag_values)


def dry_run(cli, task, model_dir, flag_values=FLAGS):
    """Prints the resolved command and the data status; returns the exit code."""
    fv = flag_values
    command = command_line(cli.module, [a for a in sys.argv[1:] if a != "--dry_run"])
    print(f"command: {command}")
    print(f"profile: {fv.profile}; {task.describe()}; --attention={fv.attention}; "
          f"model_dir: {model_dir}")
    complete, lines = task.data_status()
    print("\n".join(lines))
    if complete:
        print("data: complete")
        return 0
    print(f"data: INCOMPLETE for {task.describe()}. To get it: {task.how_to_get()}")
    return 3


def train(cli, task, model_dir, flag_values=FLAGS):
    """Trains ``task`` with the model, training and strategy flags; the run's settings are
    saved once the model config is checked, before the first step. Returns the
    :class:`~acvi_tf.tasks.base.Trained` model."""
    fv = flag_values
    if not fv.allow_partial_data:
        complete, lines = task.data_status()
        xflags.check_partial_data(complete, lines, task.DATASET, task.how_to_get(), fv,
                                  " Or pass --allow_partial_data to train on what is there.")
    task.load_data(model_dir)
    plan = task.prepare_training(model_dir, task.model_config(xflags.model_config_from_flags(fv)),
                                 xflags.train_config_from_flags(model_dir, fv))
    save_settings(cli, model_dir, task.resolved_settings(), fv)
    return task.train(plan, xflags.make_strategy(fv))


def run(cli, task, model_dir, flag_values=FLAGS):
    """The mode of ``--mode``; returns the exit code."""
    fv = flag_values
    mode = fv.mode
    extra = task.EXTRA_MODES.get(mode)
    if extra and not extra.needs_model:  # a baseline: results without a model
        os.makedirs(model_dir, exist_ok=True)
        task.finish(model_dir, getattr(task, extra.method)(model_dir))
        return 0
    if mode in TRAIN_MODES:
        trained = train(cli, task, model_dir, fv)
        if mode == "train" or not is_chief():  # the chief alone evaluates and writes results
            record_results(model_dir, **trained.info)
            return 0
    else:
        task.load_data(model_dir, read_only=mode in xflags.READ_ONLY_MODES)
        trained = task.restore(model_dir, task.model_config(xflags.model_config_from_flags(fv)),
                               fv.train_steps)
        if mode == "decode":
            plots = fv["attention_plots"].value if "attention_plots" in fv else None
            count = fv["attention_plots_count"].value if plots else 0
            outputs = task.decode(trained, read_lines(fv.input, sys.stdin), plots, count)
            write_output(fv.output, outputs, task.log, task.OUTPUTS)
            return 0
        if mode == "export":
            task.export(trained, model_dir, fv.export_dir)
            return 0
        if extra:  # a mode of the task's own that adds sections to results.json
            record_results(model_dir, **getattr(task, extra.method)(trained, model_dir))
            return 0
    task.finish(model_dir, task.evaluate(trained, model_dir))
    return 0


def no_arguments(argv):
    """Refuses positional arguments (every setting is a flag)."""
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")


def main(cli, argv, flag_values=FLAGS):
    """A task CLI's ``main``: the profile and a trained run's settings resolved, the flags
    checked, then the dry run or the mode (one line per failure: experiments.guard)."""
    fv = flag_values
    no_arguments(argv)
    extra = cli.task_class.EXTRA_MODES.get(fv.mode)
    model_dir = xflags.require_model_dir(fv) if not fv.dry_run or fv.model_dir else None
    # a mode of the task's own that reads a trained model reads it exactly as eval does
    restore_mode = "eval" if extra and extra.needs_model else fv.mode
    xflags.run_guarded(lambda: xflags.resolve_run_flags(
        model_dir, restore_mode, cli.profiles, cli.task_class.CONFIG, fv, module=cli.module,
        adopted=cli.adopted))
    # Before TensorFlow runs an op (checking the flags builds a model): its threads can be
    # set only until then.
    shards.configure(fv["cpu_shards"].value if "cpu_shards" in fv else 0,
                     xla=bool(fv["xla"].value) if "xla" in fv else False)
    cli.check_flags(fv)
    task = xflags.run_guarded(lambda: make_task(cli, fv))
    if fv.dry_run:
        return xflags.run_guarded(lambda: dry_run(cli, task, model_dir, fv), cli.errors)
    return xflags.run_guarded(lambda: run(cli, task, model_dir, fv), cli.errors,
                              model_dir=model_dir, mode=fv.mode, module=cli.module)
