"""The one training loop for every task.

A custom loop under ``tf.function`` (optionally XLA-compiled) with:
SGD (step decay) or Adam, global-norm clipping, KL cost annealing (Bowman et
al. 2016; ``kl_anneal_steps``), checkpoints that resume the
step count, the schedules and the data position, periodic validation,
progress output, deterministic (stateless) seeding, TensorBoard scalars, text
and attention images, a ``tf.distribute`` strategy, and a clean stop on a
non-finite loss that never applies the bad update and keeps the last good
checkpoint.

Data protocol: ``train_data(position) -> iterator of (batch, next_position)``
where ``position`` is a JSON-serialisable value (``None`` at the start); the
trainer saves the position with every checkpoint and hands it back on resume.
"""

import dataclasses
import errno
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time
import zlib

import keras
import numpy as np
import tensorflow as tf

from acvi_tf.training import schedules, summaries
from acvi_tf.training.adam import Adam
from acvi_tf.training.distribute import (  # noqa: F401 - make_strategy: this module's API
    check_shared_model_dir, is_chief, make_strategy, trim_to_replicas)
from acvi_tf.training.step import train_step
from acvi_tf.utils import manifest
from acvi_tf.utils.ops import fold_seed
from acvi_tf.utils.precision import check_precision, is_loss_scaled
from acvi_tf.utils.settings import setting


class TrainingDiverged(RuntimeError):
    """The loss or the gradients became non-finite; the update was not applied."""


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read or written, or does not fit the run (a ``train_steps``
    below its step); the message names the file or the step and what to do."""


OPTIMIZERS = ("adam", "sgd")  # TrainConfig.optimizer: make_optimizer builds these


@dataclasses.dataclass
class TrainConfig:
    """Every hyper-parameter of the loop, one declaration each (a field with help is a
    flag of the task CLIs: :mod:`acvi_tf.utils.settings`)."""
    model_dir: str                     # checkpoints, TensorBoard logs, decodes go here
    train_steps: int = setting(1000, "Optimiser steps.", lower_bound=0)
    optimizer: str = setting("adam", "Optimiser.", choices=OPTIMIZERS)  # Adam: its defaults
    learning_rate: float = setting(1e-3, "Initial learning rate.", lower_bound=0.0)
    lr_decay: str = setting(
        "none", "luong: halve the SGD rate 4 times in the last third; cosine (any "
        "optimizer): linear warm-up over --warmup_steps, then cosine decay to 10% of "
        "--learning_rate at --train_steps.", choices=schedules.LR_DECAYS)
    warmup_steps: int = setting(0, "--lr_decay=cosine: steps of linear warm-up from 0.",
                                lower_bound=0)
    clip_norm: float = setting(5.0, "Global-norm gradient clipping (0: off).", lower_bound=0.0)
    seed: int = setting(0, "Run seed: parameters, data order, dropout, ACVI noise.",
                        lower_bound=0)
    deterministic: bool = setting(
        False, "tf.config.experimental.enable_op_determinism: bit-exact reruns and resumes "
        "(tested on CPU: two runs give the same weights); slower on GPU.")
    jit_compile: bool = setting(False, "XLA-compile the training step (batches are padded "
                                "to --pad_multiple so few shapes are compiled).", flag="xla")
    log_every: int = setting(50, "Progress line / scalars every N steps.", lower_bound=1)
    eval_every: int = setting(500, "Validation every N steps (0: at the end only).",
                              lower_bound=0)
    checkpoint_every: int = setting(500, "Checkpoint every N steps.", lower_bound=1)  # + end
    keep_checkpoints: int = setting(3, "Checkpoints kept.", lower_bound=1)
    gumbel_fraction: float = setting(0.1, "ACVI: Gumbel-Softmax mixing (Eq. 23) for this "
                                     "last fraction of training.", lower_bound=0.0,
                                     upper_bound=1.0)
    kl_anneal_steps: int = setting(
        0, "KL cost annealing (Bowman et al. 2016): every KL term's weight is scaled by a "
        "factor rising from 0 to 1 over these first steps (0: off).", lower_bound=0)
    kl_anneal: str = setting("linear", "The KL annealing curve.",
                             choices=schedules.KL_ANNEALING)
    noise_warmup_steps: int = setting(
        0, "ACVI: the noise sigma * eps of the sampled context (Eq. 24) is scaled by a factor "
        "rising linearly from 0 to 1 over these first steps, so the decoder learns to read "
        "c_t before the noise arrives (0: off). The KL terms are those of the unscaled "
        "posterior.", lower_bound=0)
    progress: bool = setting(True, "A progress bar on stderr.")  # tqdm's
    init_from: str = setting(
        "", "Warm start: before the first step of a new run, copy every variable whose name "
        "and shape match from the latest checkpoint of this run directory (e.g. ACVI from a "
        "soft-attention run; ACVI's sigma-network stays freshly initialised). The "
        "vocabularies must be the same files.", flag_default=None)  # recorded in the run
    select_best: str = setting(
        "", "Best-validation checkpoint selection: keep the checkpoint whose evaluation "
        "during training scored best on this eval scalar (dev_bleu, val_rouge_1, ...; a "
        "leading '-' keeps the lowest, e.g. -dev_nll), and evaluate it on dev/test at the "
        "end instead of the last one (best.json names its step; results.json records it). "
        "Empty: the last checkpoint.", flag_default=None)

    def save(self, path):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(dataclasses.asdict(self), f, indent=2, sort_keys=True)
        os.replace(tmp, path)
        manifest.record(os.path.dirname(path) or ".", os.path.basename(path))


def make_optimizer(config, precision="float32"):
    """The optimiser of ``config``; wrapped in ``keras.optimizers.LossScaleOptimizer`` (dynamic
    loss scaling, :mod:`acvi_tf.training.step`) for a ``mixed_float16`` model."""
    lr = config.learning_rate
    if config.lr_decay == "cosine":
        lr = schedules.warmup_cosine_schedule(config.learning_rate, config.train_steps,
                                              config.warmup_steps)
    elif config.lr_decay == "luong":
        if config.optimizer != "sgd":
            raise ValueError(f"--lr_decay=luong is the SGD step decay; use it with "
                             f"--optimizer=sgd (got --optimizer={config.optimizer})")
        lr = schedules.luong_sgd_schedule(config.learning_rate, config.train_steps)
    elif config.lr_decay != "none":
        raise ValueError(f"--lr_decay={config.lr_decay!r}: choose none, luong or cosine")
    if config.optimizer == "adam":
        optimizer = Adam(lr)  # keras' Adam, cheaper to trace
    elif config.optimizer == "sgd":
        optimizer = keras.optimizers.SGD(lr)
    else:
        raise ValueError(f"--optimizer={config.optimizer!r}: choose adam or sgd")
    if is_loss_scaled(check_precision(precision)):
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def model_precision(model):
    """The ``precision`` of a model's config ("float32" for a model without one)."""
    return getattr(getattr(model, "config", None), "precision", "float32")


XLA_REPLICAS_MESSAGE = (
    "XLA cannot compile the cross-replica training step of --strategy={strategy} on CPU "
    "devices (TensorFlow reads replica_1's variables from CPU:0 and fails); drop --xla, or "
    "use --strategy=default")


def xla_replicas_supported():
    """Whether an XLA-compiled step can run on several replicas here (GPUs only)."""
    return bool(tf.config.list_physical_devices("GPU"))


def _stderr(message):
    print(message, file=sys.stderr, flush=True)


TEMP_SUFFIX = "_temp"  # TensorFlow writes ckpt-N_temp/, then merges it into ckpt-N.*
_PROBED = {}  # (prefix, files' sizes and times) -> readable: each checkpoint is read once


def _checkpoint_dir(model_dir):
    return os.path.join(model_dir, "ckpt")


def checkpoint_files(model_dir):
    """The ``ckpt/ckpt-N.index`` and ``.data-*`` files of ``model_dir`` (never the
    ``ckpt-N_temp`` directory of a write that did not finish)."""
    return sorted(p for p in glob.glob(os.path.join(_checkpoint_dir(model_dir), "ckpt-*"))
                  if not p.endswith(TEMP_SUFFIX) and not os.path.isdir(p))


def clean_temp_checkpoints(model_dir, log=_stderr):
    """Removes what an unfinished checkpoint write leaves in ``model_dir/ckpt`` (its
    ``ckpt-N_temp`` directory, a ``position-N.json.tmp`` or ``checksums-N.json.tmp``); says
    what it removed."""
    for path in sorted(glob.glob(os.path.join(_checkpoint_dir(model_dir), "*" + TEMP_SUFFIX))
                       + glob.glob(os.path.join(_checkpoint_dir(model_dir), "*.json.tmp"))):
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with _ignored(OSError):
                os.remove(path)
        log(f"removed {path}, left by a checkpoint write that did not finish")


class _ignored:
    def __init__(self, *types):
        self.types = types

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is not None and issubclass(kind, self.types)


CHECKSUMS = "checksums-{step}.json"  # beside ckpt-N: each file's size and crc32


def _checksums_path(prefix):
    return os.path.join(os.path.dirname(prefix),
                        CHECKSUMS.format(step=os.path.basename(prefix).rsplit("-", 1)[-1]))


def _checkpoint_file_paths(prefix):
    return sorted(glob.glob(prefix + ".index") + glob.glob(prefix + ".data-*"))


def _file_sums(path):
    crc = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            crc = zlib.crc32(chunk, crc)
    return {"size": os.path.getsize(path), "crc32": crc}


def seal_checkpoint(prefix):
    """Verifies a checkpoint just written, before the state file ``ckpt/checkpoint`` may
    point at it (the Trainer runs this as the write's callback, ahead of the
    ``CheckpointManager``'s): every tensor reads back with the checksum its index records,
    then each file's size and crc32 go into ``checksums-N.json`` beside it, which
    :func:`checkpoint_problem` checks on every later resume, eval and decode. A checkpoint
    that does not read back is an ``OSError`` (the write failed)."""
    prefix = prefix.decode() if isinstance(prefix, bytes) else str(prefix)
    problem = _tensors_problem(prefix)
    if problem:
        raise OSError(errno.EIO, f"the written checkpoint does not read back: {problem}",
                      prefix)
    sums = {os.path.basename(path): _file_sums(path)
            for path in _checkpoint_file_paths(prefix)}
    path = _checksums_path(prefix)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"checkpoint": os.path.basename(prefix), "files": sums}, f, indent=1,
                  sort_keys=True)
    os.replace(path + ".tmp", path)


def _tensors_problem(prefix):
    """None when every tensor of ``prefix`` reads back (the index parses, and the
    ``.data`` files hold every byte it points to with the checksum it records), else why
    not."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except Exception as e:  # noqa: BLE001 - any failure to read makes it unreadable
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"truncated or garbled: {first[:160]}"
    return None


def _sums_problem(prefix, recorded):
    """Why the files of ``prefix`` differ from ``checksums-N.json`` (None if they do not)."""
    where = os.path.basename(_checksums_path(prefix))
    for name, want in sorted(recorded.items()):
        path = os.path.join(os.path.dirname(prefix), name)
        try:
            size = os.path.getsize(path)
            if size != want["size"]:
                return f"{name} has {size} bytes, {where} records {want['size']}"
            if _file_sums(path)["crc32"] != want["crc32"]:
                return f"{name} does not match its crc32 in {where} (garbled)"
        except OSError:
            return f"{name} is missing; {where} records it"
    return None


def checkpoint_problem(prefix):
    """None when checkpoint ``prefix`` can be restored, else a short reason. A checkpoint
    with ``checksums-N.json`` (:func:`seal_checkpoint`) must match each recorded file's
    size and crc32 (those bytes read back when written); one without it (written before
    the checksums, or by another tool) must read back tensor by tensor. Each version of
    the files is checked once per process."""
    files = _checkpoint_file_paths(prefix)
    sums_path = _checksums_path(prefix)
    try:
        key = (prefix, tuple((f, os.path.getsize(f), os.path.getmtime(f))
                             for f in files + [p for p in [sums_path] if os.path.exists(p)]))
    except OSError:  # removed while listed (a training run rotating its checkpoints)
        return "its files were removed while it was read"
    if key not in _PROBED:
        recorded = None
        with _ignored(OSError, ValueError, KeyError, TypeError):
            with open(sums_path, encoding="utf-8") as f:
                recorded = dict(json.load(f)["files"])
        if not files or not any(f.endswith(".index") for f in files):
            _PROBED[key] = "its .index file is missing"
        elif recorded:
            _PROBED[key] = _sums_problem(prefix, recorded)
        else:
            _PROBED[key] = _tensors_problem(prefix)
    return _PROBED[key]


def checkpoint_is_readable(prefix):
    """Whether checkpoint ``prefix`` can be restored (:func:`checkpoint_problem`): a
    truncated or garbled ``.data`` file fails here, not in the restore."""
    return checkpoint_problem(prefix) is None


def checkpoint_step(prefix):
    """The step of ``.../ckpt-N`` (the Trainer numbers its checkpoints by step)."""
    return int(prefix.rsplit("-", 1)[1])


def listed_checkpoints(model_dir):
    """``[(step, prefix)]`` of every ``ckpt/ckpt-N.index`` of ``model_dir``, newest first,
    readable or not. Found by listing the directory, so a garbled or missing
    ``ckpt/checkpoint`` state file hides none of them."""
    found = []
    for index in glob.glob(os.path.join(_checkpoint_dir(model_dir), "ckpt-*.index")):
        prefix = index[:-len(".index")]
        with _ignored(ValueError):
            found.append((checkpoint_step(prefix), prefix))
    return sorted(found, reverse=True)


def _skipped(prefix, problem):
    return f"WARNING: {prefix} cannot be read ({problem}); skipped"


def readable_checkpoints(model_dir, log=_stderr):
    """``[(step, prefix)]`` of every ``ckpt/ckpt-N`` of ``model_dir`` that can be restored
    (:func:`checkpoint_problem`), newest first; each one skipped is said in one line."""
    found = []
    for step, prefix in listed_checkpoints(model_dir):
        problem = checkpoint_problem(prefix)
        if problem:
            log(_skipped(prefix, problem))
            continue
        found.append((step, prefix))
    return found


def resume_checkpoint(model_dir, log=_stderr):
    """The checkpoint a run in ``model_dir`` resumes from, and the one eval, decode and
    export read (:func:`acvi_tf.run.restore.restore_model`): the state file's, when it can
    be restored, else the newest one that can (said loudly, in one line: a truncated or
    garbled ``.data`` or ``.index``, a file that does not match its ``checksums-N.json``).
    None when no checkpoint file exists; checkpoint files none of which can be read are a
    :class:`CheckpointError`. Checkpoints are checked newest first, up to the one used."""
    ckpt_dir = _checkpoint_dir(model_dir)
    try:
        stated = tf.train.latest_checkpoint(ckpt_dir)
    except Exception:  # noqa: BLE001 - a garbled state file: found by listing instead
        stated = None
    stated_problem = checkpoint_problem(stated) if stated else None
    if stated and not stated_problem:
        return stated
    state = os.path.join(ckpt_dir, "checkpoint")
    for _, prefix in listed_checkpoints(model_dir):
        if prefix == stated:
            continue
        problem = checkpoint_problem(prefix)
        if problem:
            log(_skipped(prefix, problem))
            continue
        why = (f"{stated} cannot be read ({stated_problem})" if stated else
               f"{state} is missing or unreadable")
        log(f"WARNING: {why}; using the newest readable checkpoint {prefix} instead")
        return prefix
    if checkpoint_files(model_dir):
        if stated:
            log(_skipped(stated, stated_problem))
        raise CheckpointError(
            f"{ckpt_dir} holds checkpoint files but none can be read; refusing to start "
            f"again from step 0 over them (move them away to start a new run)")
    return None


def check_resume(model_dir, train_steps, log=_stderr):
    """The checkpoint a run of ``train_steps`` steps resumes from in ``model_dir`` (None
    for a new run), checked before anything of the run is written: a ``train_steps``
    below the checkpoint's step is a :class:`CheckpointError` naming both steps."""
    latest = resume_checkpoint(model_dir, log)
    if latest and checkpoint_step(latest) > train_steps:
        step = checkpoint_step(latest)
        raise CheckpointError(
            f"--train_steps={train_steps} is below step {step} of the checkpoint {latest} "
            f"this run would resume from; nothing was changed. Train on with "
            f"--train_steps={step} or more, evaluate it with --mode=eval, or use a new "
            f"--model_dir")
    return latest


class Trainer:
    """Trains a :class:`Seq2Seq` built by ``model_fn()`` inside the strategy scope.

    Args:
      model_fn: builds the model (called under ``strategy.scope()``).
      config: a :class:`TrainConfig`.
      train_data: the data protocol in the module docstring.
      eval_fn: optional ``eval_fn(model, step) -> dict`` with ``scalars`` (dict),
        ``texts`` (dict name -> str) and ``images`` (dict name -> [1, H, W, C]);
        run every ``eval_every`` steps and at the end.
      mode_schedule: a :class:`schedules.ModeSchedule` (default: ACVI's Gumbel tail).
      strategy: a ``tf.distribute`` strategy.
      warm_start: optional ``warm_start(model) -> dict`` called once, after the
        variables exist and before the first step of a run that has no checkpoint
        yet (``--init_from``); what it returns is logged to ``history.jsonl``.
    """

    def __init__(self, model_fn, config, train_data, eval_fn=None, mode_schedule=None,
                 strategy=None, log=None, warm_start=None):
        self.warm_start = warm_start
        self.config = config
        self.train_data = train_data
        self.eval_fn = eval_fn
        self.strategy = strategy or tf.distribute.get_strategy()
        self.mode_schedule = mode_schedule or schedules.ModeSchedule(
            config.train_steps, config.gumbel_fraction)
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        if config.kl_anneal not in schedules.KL_ANNEALING:
            raise ValueError(f"--kl_anneal={config.kl_anneal!r}: choose one of "
                             f"{', '.join(schedules.KL_ANNEALING)}")
        if (config.jit_compile and self.strategy.num_replicas_in_sync > 1
                and not xla_replicas_supported()):
            raise ValueError(XLA_REPLICAS_MESSAGE.format(
                strategy=type(self.strategy).__name__))
        os.makedirs(config.model_dir, exist_ok=True)
        # Every worker of a multi-worker run saves its checkpoints (saving is collective),
        # but only the chief into model_dir: the others into a scratch directory that
        # goes at the end. All of them resume from the chief's checkpoints.
        self.is_chief = is_chief(self.strategy)
        self.write_dir = config.model_dir if self.is_chief else tempfile.mkdtemp(
            prefix="acvi-worker-")
        keras.utils.set_random_seed(config.seed)
        if config.deterministic:  # process-wide: GPU kernels without atomics, one order
            tf.config.experimental.enable_op_determinism()
        # a worker that does not see the chief's model_dir would resume from other states
        check_shared_model_dir(self.strategy, config.model_dir, self.is_chief)
        self._dropped_rows = 0  # rows of batches the replicas did not divide (trimmed)
        with self.strategy.scope():
            self.model = model_fn()
            self.optimizer = make_optimizer(config, model_precision(self.model))
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        self.ckpt = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, step=self.step)
        self.manager = tf.train.CheckpointManager(
            self.ckpt, os.path.join(self.write_dir, "ckpt"), max_to_keep=config.keep_checkpoints)
        self._train_fns = {}
        self._built = False
        self._saved_step = None  # the step of this session's last checkpoint
        self._seconds_before = 0.0  # training seconds of earlier sessions (the checkpoint's)
        self._since = None
        self._writer = tf.summary.create_file_writer(os.path.join(self.write_dir, "train"))
        self._eval_writer = tf.summary.create_file_writer(os.path.join(self.write_dir, "eval"))
        # Best-validation selection: the whole checkpoint (a Keras 3 model is reached
        # through the optimizer's variables) of the best evaluation so far, one kept.
        self.select = parse_select_best(config.select_best)
        if self.select and isinstance(self.strategy,
                                      tf.distribute.MultiWorkerMirroredStrategy):
            # saving is collective there, and only the chief evaluates
            raise ValueError("--select_best needs --strategy=default or mirrored (the "
                             "multi-worker chief evaluates alone)")
        self.best_manager = tf.train.CheckpointManager(
            self.ckpt, os.path.join(self.write_dir, BEST_DIR), max_to_keep=1,
            checkpoint_name="best") if self.select else None
        self.best = read_best(config.model_dir) if self.select else None

    # -- building and restoring -------------------------------------------------
    def _build(self, batch):
        """Creates every model and optimiser variable before a restore."""
        self._built = True
        with self.strategy.scope():
            self.model.build_for_checkpoint(_to_tensors(batch))
            self.optimizer.build(self.model.trainable_variables)

    def _position_path(self, step, write=False):
        root = self.write_dir if write else self.config.model_dir
        return os.path.join(root, "ckpt", f"position-{int(step)}.json")

    def readable_checkpoints(self):
        """``[(step, prefix)]`` of the readable checkpoints, newest first
        (:func:`readable_checkpoints`)."""
        return readable_checkpoints(self.config.model_dir, self.log)

    def latest_checkpoint(self):
        """The checkpoint to resume from (:func:`resume_checkpoint`)."""
        return resume_checkpoint(self.config.model_dir, self.log)

    def restore(self, path=None):
        """Restores ``path`` (default: :meth:`latest_checkpoint`); returns the saved data
        position (or None). A checkpoint that fails to load names its file."""
        latest = path or self.latest_checkpoint()
        if not latest:
            return None
        try:
            self.ckpt.restore(latest).assert_existing_objects_matched()
        except Exception as e:  # noqa: BLE001 - re-raised with the file named
            raise RuntimeError(f"cannot restore checkpoint {latest}: {type(e).__name__}: "
                               f"{str(e).splitlines()[0] if str(e) else ''}") from e
        self._apply_new_learning_rate()
        path = self._position_path(self.step.numpy())
        position = None
        self._seconds_before = 0.0
        if os.path.exists(path):
            with open(path) as f:
                saved = json.load(f)
            position = saved["position"]
            self._seconds_before = float(saved.get("train_seconds", 0.0))
        self.log(f"resumed from {latest} at step {int(self.step.numpy())}")
        return position

    def _apply_new_learning_rate(self):
        """Adam's constant learning rate is a variable of the checkpoint: a resumed run
        given another ``learning_rate`` uses the new one, and says so."""
        inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)  # loss scaling's
        lr = getattr(inner, "_learning_rate", None)
        if not isinstance(lr, (tf.Variable, keras.Variable)):
            return  # a schedule: built from the config, so the new value already applies
        old = float(np.asarray(lr.numpy() if hasattr(lr, "numpy") else lr))
        new = float(self.config.learning_rate)
        if not np.isclose(old, new, rtol=1e-6, atol=0.0):
            lr.assign(new)
            self.log(f"learning rate: the checkpoint had {old:g}; --learning_rate={new:g} "
                     f"applies from now on")

    def train_seconds(self):
        """Wall seconds spent training this model over every session that led to it: a
        resumed run adds the earlier sessions' time up to the checkpoint it resumed from
        (stored beside each checkpoint), so the number does not depend on interruptions
        (beyond the steps redone after them)."""
        return self._seconds_before + (time.time() - self._since if self._since else 0.0)

    def save(self, position):
        step = int(self.step.numpy())
        # The position file first: a checkpoint never exists without its position.
        tmp = self._position_path(step, write=True) + ".tmp"
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        with open(tmp, "w") as f:
            json.dump({"step": step, "position": position,
                       "train_seconds": self.train_seconds()}, f)
        try:
            os.replace(tmp, self._position_path(step, write=True))
            # verified and its checksums recorded before the state file names it
            self.manager.save(checkpoint_number=step, options=tf.train.CheckpointOptions(
                experimental_write_callbacks=[seal_checkpoint]))
            self._saved_step = step
            self._prune_positions(step)
        except (OSError, tf.errors.OpError) as e:
            # A full disk: nothing of this checkpoint stays (its temp directory would
            # block the rerun), and the state file still names the last good one.
            self._remove_checkpoint_files(step)
            reason = (e.strerror if isinstance(e, OSError) and e.strerror
                      else re.sub(r"\s*\[Op:\w+\]", "", str(getattr(e, "message", e))
                                  ).rsplit(";", 1)[-1].strip())
            raise CheckpointError(
                f"cannot write the checkpoint of step {step} in "
                f"{os.path.join(self.write_dir, 'ckpt')} ({reason}); its partial files were "
                f"removed, the last good checkpoint is "
                f"{self.manager.latest_checkpoint or '(none yet)'}. Free space, then run the "
                f"same command again to resume") from None

    def _prune_positions(self, step):
        """Removes the ``position-N.json`` and ``checksums-N.json`` of every older
        checkpoint the rotation removed (``--keep_checkpoints``): they are kept as long as
        their checkpoint is."""
        ckpt_dir = os.path.join(self.write_dir, "ckpt")
        kept = {os.path.basename(p)[len("ckpt-"):-len(".index")]
                for p in glob.glob(os.path.join(ckpt_dir, "ckpt-*.index"))}
        for kind in ("position", "checksums"):
            for path in glob.glob(os.path.join(ckpt_dir, f"{kind}-*.json")):
                number = os.path.basename(path)[len(kind) + 1:-len(".json")]
                if number.isdigit() and int(number) < step and number not in kept:
                    with _ignored(OSError):
                        os.remove(path)

    def _repair_checkpoint_state(self, latest):
        """A state file ``ckpt/checkpoint`` that does not name the checkpoint this run
        resumes from (garbled, missing, or naming an unreadable one) is rewritten from the
        directory listing, so every checkpoint stays in the ``--keep_checkpoints``
        rotation (with the garbled file the manager knew none, and kept them forever)."""
        ckpt_dir = os.path.join(self.config.model_dir, "ckpt")
        try:
            stated = tf.train.latest_checkpoint(ckpt_dir)
        except Exception:  # noqa: BLE001 - a garbled state file
            stated = None
        if not latest or stated == latest:
            return
        prefixes = []
        for index in glob.glob(os.path.join(ckpt_dir, "ckpt-*.index")):
            with _ignored(ValueError):
                prefixes.append((checkpoint_step(index[:-len(".index")]),
                                 index[:-len(".index")]))
        # oldest first, the one resumed from last (the state file's order: an unreadable
        # newer one rotates out first)
        paths = [p for _, p in sorted(prefixes) if p != latest] + [latest]
        # (the manager rotates only checkpoints younger than the last preserved time)
        times = [os.path.getmtime(p + ".index") for p in paths]
        tf.compat.v1.train.update_checkpoint_state(
            ckpt_dir, latest, all_model_checkpoint_paths=paths,
            all_model_checkpoint_timestamps=times,
            last_preserved_timestamp=min(times, default=time.time()) - 1.0)
        self.manager = tf.train.CheckpointManager(self.ckpt, ckpt_dir,
                                                  max_to_keep=self.config.keep_checkpoints)
        self.log(f"{os.path.join(ckpt_dir, 'checkpoint')} rewritten from the checkpoints in "
                 f"{ckpt_dir} (it names {latest})")

    def _remove_checkpoint_files(self, step):
        ckpt_dir = os.path.join(self.write_dir, "ckpt")
        prefix = os.path.join(ckpt_dir, f"ckpt-{int(step)}")
        shutil.rmtree(prefix + TEMP_SUFFIX, ignore_errors=True)
        position = self._position_path(step, write=True)
        sums = _checksums_path(prefix)
        for path in (glob.glob(prefix + ".index") + glob.glob(prefix + ".data-*")
                     + [position, position + ".tmp", sums, sums + ".tmp"]):
            with _ignored(OSError):
                os.remove(path)

    # -- the step --------------------------------------------------------------
    def _replica_step(self, batch, step, num_replicas):
        model = self.model
        ctx = tf.distribute.get_replica_context()
        seed = fold_seed(tf.stack([tf.constant(self.config.seed, tf.int32), tf.constant(0)]),
                         tf.cast(step, tf.int32), ctx.replica_id_in_sync_group)
        seed = seed[0]  # a scalar seed per sequence batch (see utils.ops.fold_seed)
        anneal = {}
        if self.config.kl_anneal_steps > 0:
            # A tensor of the step: one trace for every step, XLA and replicas alike.
            anneal["kl_scale"] = schedules.kl_anneal_scale(
                step, self.config.kl_anneal_steps, self.config.kl_anneal)
        if self.config.noise_warmup_steps > 0:
            # The same linear ramp, on the reparameterised noise of ACVI's context.
            anneal["noise_scale"] = schedules.kl_anneal_scale(
                step, self.config.noise_warmup_steps, "linear")
        return train_step(model, self.optimizer, batch, seed, self.config.clip_norm, anneal,
                          num_replicas)

    def _check_finite(self, unchecked):
        """Raises :class:`TrainingDiverged` for the first of ``unchecked`` (``[(step,
        metrics)]``) whose loss or gradient was not finite, reading all their ``finite``
        flags in one transfer. The Trainer calls it before every log, evaluation and
        checkpoint, so a diverged step never reaches a checkpoint. With one replica its
        update was not applied (``step.train_step``); later steps may have run since."""
        if not unchecked:
            return
        finite = tf.stack([m["finite"] for _, m in unchecked]).numpy()
        bad = np.flatnonzero(finite < 1.0)
        if not bad.size:
            return
        step, metrics = unchecked[int(bad[0])]
        values = {k: float(v) for k, v in metrics.items() if k != "finite"}
        found = unchecked[-1][0]
        # (under a tf.distribute strategy the update cannot be skipped: step.train_step)
        skipped = not tf.distribute.has_strategy() and not isinstance(
            self.strategy, (tf.distribute.MirroredStrategy,
                            tf.distribute.MultiWorkerMirroredStrategy))
        raise TrainingDiverged(
            f"non-finite loss or gradient at step {step} ({_fmt(values)}); "
            f"{'the update was not applied and ' if skipped else ''}nothing was saved"
            f"{f' (found at step {found}, the next check)' if found != step else ''}: the "
            f"last good checkpoint is {self.manager.latest_checkpoint or '(none yet)'} in "
            f"{self.config.model_dir}")

    def _read_modes(self, modes):
        """The schedule modes the model reads (all of them when it does not say)."""
        read = getattr(self.model, "read_modes", lambda: None)()
        return {k: v for k, v in modes.items() if read is None or k in read}

    def _train_fn(self, modes, batch):
        # One trace per combination of the modes the model reads: soft attention is not
        # retraced at the Gumbel switch.
        key = tuple(sorted(self._read_modes(modes).items()))
        if key not in self._train_fns:
            num_replicas = self.strategy.num_replicas_in_sync

            def train_step(batch, step):
                self.model.set_mode(**modes)
                per_replica = self.strategy.run(self._replica_step,
                                                args=(batch, step, num_replicas))
                return {k: self.strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
                        for k, v in per_replica.items()}

            signature = None
            if num_replicas == 1:
                # One trace with every dimension unknown, from the first step on: a resumed
                # run then runs the very graph the uninterrupted run runs at that step, so
                # it resumes bit for bit (a trace specialised to the first batch's shapes
                # may round a float64 product differently), and no shape retraces.
                signature = ({k: tf.TensorSpec([None] * v.shape.rank, v.dtype)
                              for k, v in batch.items()}, tf.TensorSpec([], tf.int64))
            self._train_fns[key] = tf.function(train_step, jit_compile=self.config.jit_compile,
                                               reduce_retracing=True, input_signature=signature,
                                               autograph=False)
        return self._train_fns[key]

    def _distribute(self, batch):
        """The batch as the replicas' inputs; None for a batch of fewer rows than
        replicas. Rows the replicas do not divide are dropped (said the first time, and
        counted in the history), so each replica gets an equal share of the rest."""
        r = self.strategy.num_replicas_in_sync
        batch = _to_tensors(batch)
        if r == 1:
            return batch
        size = int(next(v for v in batch.values() if v.shape.rank).shape[0])
        batch, dropped = trim_to_replicas(batch, r)
        if dropped:
            if not self._dropped_rows:
                self.log(f"a batch of {size} rows is not divisible by the {r} replicas: "
                         f"its last {dropped} rows are dropped (the same for every such "
                         f"batch; the total is logged at the end)")
            self._dropped_rows += dropped
        if batch is None:
            return None
        per = (size - dropped) // r

        def value_fn(ctx):
            i = ctx.replica_id_in_sync_group
            return {k: (v[i * per:(i + 1) * per] if v.shape.rank else v) for k, v in batch.items()}
        return self.strategy.experimental_distribute_values_from_function(value_fn)

    # -- the loop ------------------------------------------------------------------
    def train(self, stop_at=None):
        """Trains to ``train_steps`` (resuming if a checkpoint exists); returns the last metrics.

        ``stop_at`` ends this run early at that step (with a checkpoint) without
        changing the schedules, which are laid out for ``train_steps``; a later
        run resumes from there.
        """
        cfg = self.config
        end = min(cfg.train_steps, stop_at) if stop_at else cfg.train_steps
        if self.is_chief:
            clean_temp_checkpoints(cfg.model_dir, self.log)
        # before anything is written: a train_steps below the checkpoint's is refused
        latest = check_resume(cfg.model_dir, cfg.train_steps, self.log)
        if self.is_chief:
            cfg.save(os.path.join(cfg.model_dir, "train_config.json"))
            self._repair_checkpoint_state(latest)
        saved_position = None
        first = None
        if latest:
            probe = iter(self.train_data(None))
            self._build(next(probe)[0])
            saved_position = self.restore(latest)
        iterator = iter(self.train_data(saved_position))
        step = int(self.step.numpy())
        if not latest:
            self._seconds_before = 0.0
        self._since = time.time()
        position = saved_position
        bar = _progress(cfg.progress, cfg.train_steps, step)
        window, t0, last = [], time.time(), {}
        unchecked = []  # [(step, metrics)] whose finiteness the host has not read yet
        while step < end:
            try:
                batch, next_position = next(iterator)
            except StopIteration:
                raise RuntimeError("the training data ran out before train_steps; "
                                   "make train_data repeat") from None
            if first is None:
                first = batch
                if not self._built:
                    self._build(batch)
                    if self.warm_start is not None:
                        self._history({"step": step, "warm_start": self.warm_start(self.model)})
            modes = self.mode_schedule.modes(step)
            inputs = self._distribute(batch)
            position = next_position
            if inputs is None:  # fewer rows than replicas: dropped whole, no step
                continue
            metrics = self._train_fn(modes, inputs)(inputs, tf.constant(step, tf.int64))
            step += 1
            self.step.assign(step)
            window.append(metrics)
            unchecked.append((step, metrics))
            if bar:
                bar.update(1)
            logs = step % cfg.log_every == 0 or step == end
            evals = bool(cfg.eval_every) and step % cfg.eval_every == 0 and step < end
            saves = step % cfg.checkpoint_every == 0 and step < end
            if logs or evals or saves:
                # The one wait for the device: before anything is logged, evaluated or
                # saved, never every step (issue 42: a host sync per step).
                self._check_finite(unchecked)
                unchecked = []
            if logs:
                last = self._log(window, step, time.time() - t0, modes, bar)
                window, t0 = [], time.time()
            if evals:
                self.evaluate(step)
            if saves:
                self.save(position)
        if bar:
            bar.close()
        if self._dropped_rows:
            r = self.strategy.num_replicas_in_sync
            self.log(f"{self._dropped_rows} rows of batches not divisible by the {r} "
                     f"replicas were dropped in this session")
            self._history({"step": step, "dropped_rows": self._dropped_rows})
        if first is None and latest is None:
            raise RuntimeError("train_steps is 0 and no checkpoint exists")
        # (this session's last save, else the one it resumed from: the state file may
        # name a newer checkpoint that could not be read and was resumed past)
        newest = self._saved_step if self._saved_step is not None else (
            checkpoint_step(latest) if latest else None)
        if newest != step:
            self.save(position)
        if not self.is_chief:
            shutil.rmtree(self.write_dir, ignore_errors=True)
        result = self.evaluate(step)
        if self.select and step == cfg.train_steps:
            self.restore_best()
        return {**last, **(result or {})}

    def run_info(self, metrics):
        """What every task's results.json records of the training: the steps, the training
        wall time, the last metrics and, with ``select_best``, the evaluated checkpoint
        (``best.json``: its step, metric and value)."""
        info = {"steps": int(self.step.numpy()), "train_wall_time_sec": self.train_seconds(),
                "train_metrics": {k: float(v) for k, v in metrics.items()}}
        if self.select:
            info["selected_checkpoint"] = self.best
        return info

    # -- best-validation selection ------------------------------------------------------
    def _keep_if_best(self, step, scalars):
        """Saves the checkpoint of this evaluation when its ``select_best`` value beats
        every earlier one (``best.json`` names it: step, metric, value)."""
        name, sign = self.select
        if name not in scalars:
            raise ValueError(f"--select_best={self.config.select_best}: the evaluation gives "
                             f"no {name!r}; it gives {', '.join(sorted(scalars)) or 'nothing'}")
        value = float(scalars[name])
        if not np.isfinite(value):
            return
        if self.best is not None and sign * value <= sign * self.best["value"]:
            return
        if self.best is not None and self.best["step"] == step:
            return  # a resumed run evaluating a step it already kept
        path = self.best_manager.save(checkpoint_number=step)
        self.best = {"step": int(step), "metric": name, "value": value,
                     "mode": "max" if sign > 0 else "min", "checkpoint": os.path.relpath(
                         path, self.config.model_dir)}
        write_best(self.config.model_dir, self.best)

    def restore_best(self):
        """Loads the best evaluation's weights into the model (the final evaluation then
        scores them); the step counter keeps the last step. Returns ``best.json``'s dict."""
        if self.best is None:
            return None
        path = os.path.join(self.config.model_dir, self.best["checkpoint"])
        step = int(self.step.numpy())
        try:
            self.ckpt.restore(path).assert_existing_objects_matched()
        except Exception as e:  # noqa: BLE001 - re-raised with the file named
            raise RuntimeError(f"cannot restore the best checkpoint {path} (best.json): "
                               f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                               ) from e
        self.step.assign(step)
        self.log(f"final evaluation: the best checkpoint by {self.config.select_best}, step "
                 f"{self.best['step']} ({self.best['metric']}={self.best['value']:.4g})")
        return self.best

    def _log(self, window, step, seconds, modes, bar):
        means = {k: float(np.mean([float(m[k]) for m in window])) for k in window[0]}
        tokens = sum(float(m["tokens"]) for m in window)
        means.pop("finite", None)
        means.pop("tokens", None)
        if "kl_scale" in window[-1]:  # the factor of the window's last step, not the mean
            means["kl_scale"] = float(window[-1]["kl_scale"])
        # Keras evaluates a schedule at the current iteration in this property.
        means["learning_rate"] = float(tf.convert_to_tensor(self.optimizer.learning_rate))
        means["tokens_per_sec"] = tokens / max(seconds, 1e-9)
        summaries.write_scalars(self._writer, step, means)
        self._history({"step": step, "train": means})
        # Only the modes this model reads: soft attention has no ACVI mixing to report.
        read = self._read_modes(modes)
        msg = f"step {step}: " + _fmt(means) + (
            f" [{','.join(f'{k}={v}' for k, v in read.items())}]" if read else "")
        if bar:
            bar.set_postfix_str(_fmt({k: means[k] for k in ("loss", "nll") if k in means}))
            bar.write(msg, file=sys.stderr)
        else:
            self.log(msg)
        return means

    def evaluate(self, step):
        if self.eval_fn is None or not self.is_chief:
            return None
        out = self.eval_fn(self.model, step) or {}
        scalars = {k: v for k, v in out.get("scalars", {}).items() if v is not None}
        self._history({"step": step, "eval": scalars})
        with self._eval_writer.as_default(step=step):
            for k, v in scalars.items():
                tf.summary.scalar(k, float(v))
            for k, v in out.get("texts", {}).items():
                tf.summary.text(k, v)
            for k, v in out.get("images", {}).items():
                tf.summary.image(k, v)
        self._eval_writer.flush()
        if scalars:
            self.log(f"eval @ step {step}: {_fmt(scalars)}")
        if self.select:
            self._keep_if_best(step, scalars)
        return scalars


    def _history(self, record):
        """Appends one JSON line to ``history.jsonl`` (train windows, evaluations): the
        curves the results scripts plot. A resumed run may repeat a step; the last
        line of a step wins."""
        if not self.is_chief:
            return
        path = os.path.join(self.config.model_dir, "history.jsonl")
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"time": time.time(), **record}) + "\n")


BEST_DIR = "ckpt_best"  # the best evaluation's checkpoint (select_best)
BEST_FILE = "best.json"  # which step it is, by which metric


def parse_select_best(spec):
    """``"dev_bleu"`` -> ("dev_bleu", +1) (highest wins), ``"-dev_nll"`` -> ("dev_nll", -1)
    (lowest wins), ``""`` -> None (no selection: the last checkpoint is evaluated)."""
    spec = (spec or "").strip()
    if not spec:
        return None
    name, sign = (spec[1:], -1) if spec.startswith("-") else (spec, 1)
    if not name.replace("_", "").isalnum():
        raise ValueError(f"--select_best={spec!r}: give an eval scalar such as dev_bleu, or "
                         f"-dev_nll for the lowest")
    return name, sign


def read_best(model_dir):
    """``best.json`` of ``model_dir`` (None when absent): the selected checkpoint."""
    path = os.path.join(model_dir, BEST_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_best(model_dir, best):
    tmp = os.path.join(model_dir, BEST_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(best, f, indent=2, sort_keys=True)
    os.replace(tmp, os.path.join(model_dir, BEST_FILE))


def _to_tensors(batch):
    """The tensor part of a batch; Python-side extras (raw strings, OOV lists) stay out."""
    return {k: tf.convert_to_tensor(v) for k, v in batch.items()
            if isinstance(v, (np.ndarray, tf.Tensor, int, float, np.integer))}


def _fmt(d):
    return " ".join(f"{k}={v:.4g}" for k, v in d.items())


def _progress(enabled, total, initial):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, file=sys.stderr, dynamic_ncols=True, leave=False)
