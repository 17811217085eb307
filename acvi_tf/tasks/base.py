"""What every task shares: the registry, the decoding settings, the one :class:`Task`
interface (train, evaluate, decode, export, finish; the training sequence itself), the
one :class:`Evaluator` interface and the Trainer's resumable data protocol. Batched
decoding is :mod:`acvi_tf.tasks.decode_batches`'s.

A task (:mod:`acvi_tf.tasks.translation`, ``summarization``, ``captioning``) takes
dataclass configs -- never flags -- and owns its data, its output head settings, its
evaluation and ``data_status``. The CLIs under ``experiments/`` turn flags into
those configs, and one dispatch (:mod:`experiments.run_modes`) runs the mode through
the interface; nothing here calls back into them.
"""

import dataclasses
import os
import sys
from typing import Any, Callable, Optional

import tensorflow as tf

from acvi_tf import attention, latent
from acvi_tf.data import sources
from acvi_tf.decoding.beam import NORMALIZATIONS
from acvi_tf.errors import RunError
from acvi_tf.models import build_model, model_names
from acvi_tf.registry import Registry
from acvi_tf.run.directory import check_model_config
from acvi_tf.run.restore import load_model, warm_start_fn
from acvi_tf.run.results import finish_results
from acvi_tf.training.trainer import Trainer
from acvi_tf.utils.settings import setting

TASKS = Registry("task")


def register_task(name):
    """``@register_task("translate")`` on a task class."""
    return TASKS.register(name)


def get_task(name):
    return TASKS.get(name)


@dataclasses.dataclass
class DecodeConfig:
    """Search settings of the final decode and of the validation during training, one
    declaration each (every field is a flag of the task CLIs: :mod:`acvi_tf.utils.settings`)."""
    beam_width: int = setting(10, "Beam width of the final dev/test decode and of "
                              "--mode=decode (1: greedy).", lower_bound=1)
    decode_max_length: int = setting(50, "Most output tokens per hypothesis.", lower_bound=1)
    min_length: int = setting(0, "Fewest output tokens before the end token.", lower_bound=0)
    length_normalization: str = setting("none", "Beam score length normalization.",
                                        choices=NORMALIZATIONS)
    alpha: float = setting(0.6, "GNMT length penalty exponent.", lower_bound=0.0)
    eval_beam_width: int = setting(1, "Beam width of the validation during training (1: "
                                   "greedy).", lower_bound=1)
    eval_subset: int = setting(0, "Validation during training decodes the first N dev "
                               "examples (0: all); the end of training always uses all.",
                               lower_bound=0)
    decode_batch_size: int = setting(64, "Sentences per decoding batch.", lower_bound=1)
    diversity_samples: int = setting(
        0, "Translation and summarization evaluation: also decode the first "
        "--diversity_sources test sources this many times each, greedy, with the latent "
        "sampled (Bahuleyan et al.'s diversity protocol: entropy and distinct-1/2 per "
        "source, averaged; 10 in their paper). For ACVI, the Gaussian attention, VED and "
        "VRNMT. 0: off.", lower_bound=0)
    diversity_sources: int = setting(100, "How many test sources --diversity_samples "
                                     "decodes.", lower_bound=1)
    ban_unk: bool = setting(False, "Never emit <unk> (greedy and beam, validation, final "
                            "decode and export): a diagnostic of what a model with a softmax "
                            "head learned beside its unknown-word class. The paper's and See "
                            "et al.'s decodes keep <unk>; so do the tables.")
    no_repeat_ngram: int = setting(
        0, "Never repeat an n-gram within an output (greedy and beam, validation, final "
        "decode and export): n = 3 is Paulus et al.'s trigram blocking for summaries; the "
        "blocked tokens get -inf, the other scores stay the model's. 0 (default): off, as "
        "in the paper's decodes and the tables.", lower_bound=0)

    def options(self, final=True):
        """Keyword arguments of ``model.decode`` (final decode, or validation)."""
        options = {"beam_width": self.beam_width if final else self.eval_beam_width,
                   "max_length": self.decode_max_length, "min_length": self.min_length,
                   "length_normalization": self.length_normalization, "alpha": self.alpha}
        if self.ban_unk:  # only when set: results.json's "decode" of every other run is as before
            options["ban_unk"] = True
        if self.no_repeat_ngram:
            options["no_repeat_ngram"] = self.no_repeat_ngram
        return options


@dataclasses.dataclass
class RunInfo:
    """What the results of a run record about how it was made."""
    profile: str = ""        # the settings profile (paper, cpu, smoke)
    command: str = ""        # the shell command that ran
    argv: list = dataclasses.field(default_factory=list)
    system: str = setting(   # the table row it fills ("": named after the model)
        "", "The table row this run fills (results.json's `system`), e.g. acvi_paper_elbo "
        "for ACVI with the paper's ELBO; empty (default): named after --model/--attention/"
        "--latent.")


def system_name(config):
    """The table row (``system``) of a model config: the attention variant, the latent,
    or the architecture."""
    if config.model != "seq2seq":
        return config.model
    if config.latent:  # VED's row is its latent over soft attention
        if config.attention == "soft":
            return config.latent
        return f"{config.latent}+{config.attention}"
    return config.attention


def system_names():
    """Every row name :func:`system_name` can give for a single component."""
    return (set(attention.available()) | set(latent.available())
            | set(model_names()) - {"seq2seq"})


@dataclasses.dataclass
class Mode:
    """A mode of one task beyond the shared ones (``Task.EXTRA_MODES``): the task's method
    that runs it, and whether it needs the trained model of the run directory. Without a
    model, ``method(model_dir)`` gives the fields of results.json (the dispatch finishes
    them: :meth:`Task.finish`); with one, ``method(trained, model_dir)`` gives the
    sections it adds to results.json (``{"duc2004": {...}}``)."""
    method: str
    needs_model: bool


@dataclasses.dataclass
class TrainingData:
    """What a task's :meth:`Task.training_data` gives the Trainer: its data protocol
    (:func:`resumable_train_data`), what results.json records of the data (``info``) and
    the mode schedule (None: the Trainer's default, ACVI's Gumbel tail)."""
    batches: Callable
    info: dict
    mode_schedule: Any = None


@dataclasses.dataclass
class TrainingPlan:
    """A run ready for its first step (:meth:`Task.prepare_training`): the data read and
    batched, the model config checked against the run directory, the evaluator made."""
    model_dir: str
    model_config: Any
    train_config: Any
    data: TrainingData
    evaluator: "Evaluator"


@dataclasses.dataclass
class Trained:
    """A trained model of a run, as :meth:`Task.train` leaves it or :meth:`Task.restore`
    rebuilds it from the run directory: what evaluate, decode and export read.
    ``train_steps``: the run's (a summarization run's phase schedule says from it when
    coverage is on); ``info``: the training's fields of results.json (None when restored);
    ``evaluator``: the training's (it keeps the end-of-training dev decode)."""
    model: Any
    step: int
    config: Any
    train_steps: int = 0
    info: Optional[dict] = None
    evaluator: Optional["Evaluator"] = None


class Task:
    """A task: its data config (a dataclass of the task module), the decoding settings
    and what the results record of the run; ``log`` takes progress lines.

    The one interface the CLIs call (:mod:`experiments.run_modes`), the same in every
    task: :meth:`prepare_training` then :meth:`train`, :meth:`restore`, :meth:`evaluate`,
    :meth:`decode`, :meth:`export` and :meth:`finish`, after :meth:`load_data`. A task
    implements the hooks: :meth:`training_data`, :meth:`evaluator`, :meth:`results`,
    :meth:`model_config`, :meth:`build_batch`, :meth:`decode`, :meth:`export`,
    ``data_status`` and ``how_to_get``."""

    CONFIG = None          # the task's config class (its fields are the task CLI's flags)
    DATASET = ""           # what data_status checks, in messages
    OUTPUTS = "lines"      # what --mode=decode writes, in its log line
    EXTRA_MODES = {}       # {mode: Mode} beyond train_eval, train, eval, decode, export

    def __init__(self, config, decode=None, run=None, log=None):
        self.config = config
        self.decode_config = decode or DecodeConfig()
        self.run = run or RunInfo()
        self.log = log or _stderr

    # -- data and model (task hooks) -------------------------------------------------
    def describe(self):
        """The data of the run in a few words (the dry run's line)."""
        return self.DATASET

    def data_status(self):
        """``(complete, lines)``: every data file of the run, missing, partial or complete."""
        raise NotImplementedError

    def how_to_get(self):
        """Where the missing data come from (the message of a missing-data stop): the
        data source of ``DATASET``."""
        return how_to_get(self.DATASET)

    def resolved_settings(self):
        """Settings of the config the task resolved (defaults filled in), saved with the
        run's flags: ``{}`` unless the task resolves any."""
        return {}

    def load_data(self, model_dir, read_only=False):
        """The run's vocabulary and data, from ``model_dir`` if saved there (else built and
        saved there). ``read_only``: decode or export, which check only what they read."""
        raise NotImplementedError

    def model_config(self, arch):
        """``arch`` (a ModelConfig of the architecture) completed with the task's
        vocabulary sizes and ids (and feature size)."""
        raise NotImplementedError

    def build_batch(self, model_dir=None, model_config=None):
        """A one-example batch that builds the model saved in ``model_dir`` (of
        ``model_config``), to restore it."""
        raise NotImplementedError

    def evaluator(self, model_config=None, train_steps=0):
        """The task's :class:`Evaluator` of a model of ``model_config`` trained for
        ``train_steps``."""
        raise NotImplementedError

    def results(self, evaluation, model_config=None, step=0, extra=None, system=None):
        """The fields of results.json of ``evaluation`` (what the task's evaluator's
        ``evaluate`` gave) of a model of ``model_config`` at ``step``; ``extra``: the
        training's fields; ``system``: a baseline's row name (no model)."""
        raise NotImplementedError

    def training_data(self, model_dir, model_config, train_config):
        """The :class:`TrainingData` of a run (its progress lines logged)."""
        raise NotImplementedError

    def run_trainer(self, trainer, plan):
        """Runs ``trainer`` to the end; returns ``(fields of results.json, metrics)``. A
        task that evaluates on the way (summarization, before coverage) overrides it."""
        return {}, trainer.train()

    # -- the modes -------------------------------------------------------------------
    def prepare_training(self, model_dir, model_config, train_config):
        """Everything before the first training step: the data read and batched, the model
        config checked against a resumed run's, the evaluator made. The CLI saves its
        settings into ``model_dir`` after this and before :meth:`train`."""
        os.makedirs(model_dir, exist_ok=True)
        data = self.training_data(model_dir, model_config, train_config)
        check_model_config(model_dir, model_config)
        return TrainingPlan(model_dir, model_config, train_config, data,
                            self.evaluator(model_config, train_config.train_steps))

    def train(self, plan, strategy=None):
        """Trains the :class:`TrainingPlan` (resuming from its run directory); returns the
        :class:`Trained` model, its ``info`` the training's fields of results.json."""
        config, init_from = plan.train_config, plan.train_config.init_from
        batch = self.build_batch(init_from, plan.model_config) if init_from else None
        trainer = Trainer(lambda: build_model(plan.model_config), config, plan.data.batches,
                          eval_fn=plan.evaluator.eval_fn,
                          mode_schedule=plan.data.mode_schedule, strategy=strategy,
                          log=self.log,
                          warm_start=warm_start_fn(init_from, plan.model_dir, batch, self.log))
        info, metrics = self.run_trainer(trainer, plan)
        info.update({**trainer.run_info(metrics), **plan.data.info,
                     "train_command": self.run.command,
                     "diagnostics": plan.evaluator.final_diagnostics})
        return Trained(trainer.model, info["steps"], plan.model_config, config.train_steps,
                       info, plan.evaluator)

    def restore(self, model_dir, model_config, train_steps=0):
        """The :class:`Trained` model of ``model_dir`` (its checkpoint to evaluate)."""
        model, step = load_model(model_dir, self.build_batch(model_dir, model_config))
        return Trained(model, step, model_config, train_steps)

    def evaluate(self, trained, model_dir):
        """The final evaluation of ``trained`` (decodes written into ``model_dir``); returns
        the fields of results.json (:meth:`finish` writes them)."""
        evaluator = trained.evaluator or self.evaluator(trained.config, trained.train_steps)
        evaluation = evaluator.evaluate(trained.model, trained.step, model_dir)
        return self.results(evaluation, trained.config, trained.step, extra=trained.info)

    def reselect(self, trained, model_dir):
        """``--mode=reselect``: redoes ``--select_best`` for a run trained before commit
        10c5ffa, whose last step entered the comparison with the final protocol's score
        (beam, whole dev set), not the periodic one the other steps had. The last
        checkpoint is scored with the periodic protocol (``eval_fn(final=False)``, as the
        Trainer now does); the best of that and the periodic evaluations in history.jsonl
        is selected (the earliest of equals, as the Trainer keeps it). Its checkpoint, if
        still on disk (``ckpt_best/`` or the last ``--keep_checkpoints`` of ``ckpt/``), is
        restored, scored with the final protocol and written as the run's results, and
        ``best.json`` names it; otherwise a :class:`RunError` names the step whose
        checkpoint is gone (train the run again). Returns the fields of results.json it
        changes (the run's ``command`` stays the training's; ``reselected`` says what
        this did)."""
        from acvi_tf.run.restore import restore_model
        from acvi_tf.training.best_checkpoint import parse_select_best, read_best, write_best
        from acvi_tf.training.checkpoints import listed_checkpoints
        from acvi_tf.run.records import curve, read_history
        from acvi_tf.utils.files import load_json
        before = read_best(model_dir)
        saved = load_json(os.path.join(model_dir, "train_config.json"))
        select = parse_select_best(saved.get("select_best", ""))
        if before is None or select is None:
            raise RunError(f"--mode=reselect: {model_dir} did not train with --select_best "
                           f"(no best.json): nothing to select")
        name, sign = select
        last = int(saved["train_steps"])
        steps, values = curve(read_history(model_dir), "eval", name)
        periodic = {int(s): float(v) for s, v in zip(steps, values) if s < last}
        kept = {step: prefix for step, prefix in listed_checkpoints(model_dir)}
        kept[int(before["step"])] = os.path.join(model_dir, before["checkpoint"])
        if last not in kept:
            raise RunError(f"--mode=reselect: {model_dir} has no checkpoint of its last step "
                           f"{last} to score with the periodic protocol")
        batch = self.build_batch(model_dir, trained.config)
        evaluator = self.evaluator(trained.config, last)
        restore_model(trained.model, model_dir, batch, path=kept[last])
        scalars = evaluator.eval_fn(trained.model, last, final=False)["scalars"]
        periodic[last] = float(scalars[name])
        chosen = max(sorted(periodic), key=lambda step: sign * periodic[step])
        if chosen not in kept:
            raise RunError(
                f"--mode=reselect: in {model_dir} the periodic evaluations select step "
                f"{chosen} ({name}={periodic[chosen]:.4g}; step {last}: "
                f"{periodic[last]:.4g}), whose checkpoint is no longer on disk (kept: steps "
                f"{', '.join(map(str, sorted(kept)))}); train the run again")
        restore_model(trained.model, model_dir, batch, path=kept[chosen])
        evaluator.eval_fn(trained.model, last, final=True)  # the selected model's dev decode
        best = {"step": chosen, "metric": name, "value": periodic[chosen],
                "mode": "max" if sign > 0 else "min",
                "checkpoint": os.path.relpath(kept[chosen], model_dir)}
        fields = self.results(evaluator.evaluate(trained.model, last, model_dir),
                              trained.config, last)
        for key in ("command", "argv"):
            fields.pop(key, None)
        write_best(model_dir, best)
        self.log(f"reselected: step {chosen} ({name}={periodic[chosen]:.4g}), was step "
                 f"{before['step']} (step {last} scored with the periodic protocol: "
                 f"{periodic[last]:.4g})")
        return {**fields, "selected_checkpoint": best,
                "diagnostics": evaluator.final_diagnostics,
                "reselected": {"command": self.run.command, "before": before,
                               "periodic": {str(k): v for k, v in sorted(periodic.items())}}}

    def decode(self, trained, lines, attention_plots=None, plot_count=0):
        """Input lines in the task's form -> output lines, with the final decoding settings.
        With ``attention_plots`` (a directory), the attention of the first ``plot_count``
        inputs is drawn there."""
        raise NotImplementedError

    def export(self, trained, model_dir, export_dir):
        """A SavedModel of ``trained`` in ``export_dir`` that decodes as :meth:`decode`."""
        raise NotImplementedError

    def finish(self, model_dir, results):
        """Writes ``results`` (the fields of :meth:`evaluate` or of a baseline) into
        ``model_dir/results.json`` with the run's wall time and provenance."""
        return finish_results(model_dir, results, self.log)


def how_to_get(dataset):
    """Where the data of ``dataset`` comes from, for a missing-data message."""
    s = sources.get(dataset)
    return f"{s.how_to_get} (homepage: {s.homepage}; local mirror: $ACVI_DATA_MIRROR/{dataset}/)"


def _stderr(message):
    print(message, file=sys.stderr, flush=True)


class Evaluator:
    """The one evaluation interface of every task.

    ``eval_fn(model, step, final=None)`` is the Trainer's validation hook (TensorBoard
    scalars, texts, images). ``final`` (None: ``step >= train_steps``) asks for the final
    protocol (the final decoding settings on the whole dev set), which also keeps
    ``final_diagnostics`` (the dev diagnostics that go into results.json) and the dev
    decode that :meth:`evaluate` reuses at that step; the periodic protocol
    (``eval_subset``, ``eval_beam_width``) is what every evaluation of a run compared by
    ``--select_best`` uses, the last one included (the Trainer passes ``final=False``
    there, then ``final=True`` for the selected model). ``evaluate(model, step,
    model_dir)`` is the final evaluation of a trained model; what it returns, the task's
    :meth:`Task.results` turns into the fields of results.json.
    """

    final_diagnostics = None

    def eval_fn(self, model, step, final=None):
        raise NotImplementedError

    def evaluate(self, model, step, model_dir):
        raise NotImplementedError


def resumable_train_data(make_iterator, transform=None):
    """The Trainer's data protocol over an iterator with ``state_dict``/``load_state_dict``.

    ``make_iterator()`` gives a fresh iterator; the Trainer hands back the
    position saved with a checkpoint, and the run continues from there.
    """
    def train_data(position):
        it = make_iterator()
        if position:
            try:
                it.load_state_dict(position)
            except ValueError as e:  # data that differ from the checkpoint's (a partial copy)
                raise RunError(f"cannot resume the training data: {e}. Resume with the data "
                               f"and data flags it was trained with, or use a new "
                               f"--model_dir") from None
        for batch in it:
            yield (transform(batch) if transform else batch), it.state_dict()
    return train_data


def pad_to_multiple(batch, multiple, keys=("src", "tgt_in", "tgt_out")):
    """``batch`` with the [B, L] id tensors of ``keys`` padded with 0 (``<pad>``, masked)
    up to a length that is a multiple of ``multiple`` (0: unchanged), so that an
    XLA-compiled step sees a bounded number of shapes."""
    if not multiple:
        return batch
    out = dict(batch)
    for key in keys:
        x = batch[key]
        length = tf.shape(x)[1]
        target = (length + multiple - 1) // multiple * multiple
        out[key] = tf.pad(x, [[0, 0], [0, target - length]])
    return out


