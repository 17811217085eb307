"""The one training loop for every task.

A custom loop under ``tf.function`` (optionally XLA-compiled) with:
SGD (step decay) or Adam, global-norm clipping, KL cost annealing (Bowman et
al. 2016; ``kl_anneal_steps``), checkpoints that resume the
step count, the schedules and the data position, periodic validation,
progress output, deterministic (stateless) seeding, TensorBoard scalars, text
and attention images, a ``tf.distribute`` strategy, and a clean stop on a
non-finite loss that never applies the bad update and keeps the last good
checkpoint, and a stop on SIGTERM or SIGINT that saves the step it was at.

Data protocol: ``train_data(position) -> iterator of (batch, next_position)``
where ``position`` is a JSON-serialisable value (``None`` at the start); the
trainer saves the position with every checkpoint and hands it back on resume.

This module holds the loop (:class:`Trainer`: building, resuming, the step, when to
log, evaluate and save); the jobs it delegates live beside it:

* :mod:`~acvi_tf.training.config` -- :class:`TrainConfig`;
  :mod:`~acvi_tf.training.optimizers` -- :func:`make_optimizer`;
* :mod:`~acvi_tf.training.checkpoints` -- a run directory's checkpoints, the one to
  resume from; :mod:`~acvi_tf.training.checkpoint_checks` -- their integrity;
  :mod:`~acvi_tf.training.run_checkpoints` -- writing them with the data position;
* :mod:`~acvi_tf.training.best_checkpoint` -- ``--select_best``;
* :mod:`~acvi_tf.training.train_log` -- progress lines, TensorBoard, ``history.jsonl``;
* :mod:`~acvi_tf.training.finite` -- the stop on a non-finite loss;
  :mod:`~acvi_tf.training.stop_signal` -- the stop, with a checkpoint, on SIGTERM / SIGINT;
* :mod:`~acvi_tf.training.distribute` -- strategies, the chief, replicas' shares.

The names callers import from here (``Trainer``, ``TrainConfig``, ``make_optimizer``,
``CheckpointError``, ``TrainingDiverged``, ``is_chief``, ...) stay importable from here.
"""

import os
import shutil
import sys
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf

from acvi_tf.errors import ConfigError
from acvi_tf.training import schedules
# (F401: names callers import from this module)
from acvi_tf.training.best_checkpoint import (  # noqa: F401
    BEST_FILE, BestCheckpoint, parse_select_best, read_best)
from acvi_tf.training.checkpoint_checks import (  # noqa: F401
    checkpoint_is_readable, checkpoint_problem)
from acvi_tf.training.checkpoints import (  # noqa: F401
    CheckpointError, check_resume, checkpoint_files, checkpoint_step, clean_temp_checkpoints,
    listed_checkpoints, readable_checkpoints, resume_checkpoint)
from acvi_tf.training.config import TrainConfig  # noqa: F401
from acvi_tf.training.distribute import (  # noqa: F401
    XLA_REPLICAS_MESSAGE, check_shared_model_dir, is_chief, make_strategy, num_workers,
    trim_to_replicas, xla_replicas_supported)
from acvi_tf.training.finite import TrainingDiverged, check_finite  # noqa: F401
from acvi_tf.training.optimizers import apply_new_learning_rate, make_optimizer, model_precision
from acvi_tf.training.run_checkpoints import RunCheckpoints
from acvi_tf.training.step import train_step
from acvi_tf.training.stop_signal import Interrupted, StopRequests
from acvi_tf.training.train_log import TrainLog, progress_bar
from acvi_tf.utils.ops import fold_seed, part_seed
from acvi_tf.utils.shards import describe as describe_shards, resolve as resolve_shards


# The salt of replicas other than the first (acvi_tf.utils.ops.part_seed).
REPLICA_SALT = 0x2E91


def replica_step_seed(seed, step, replica_id):
    """The scalar seed of one replica's training step (dropout, ACVI's noise): the
    one-device run's seed for replica 0, a seed of its own for each other replica
    (:func:`acvi_tf.utils.ops.part_seed`)."""
    # A scalar seed per sequence batch (see utils.ops.fold_seed). The last salt, 0, stands
    # where the replica id once went: the first element never depended on it.
    one_device = fold_seed(tf.stack([tf.constant(seed, tf.int32), tf.constant(0)]),
                           tf.cast(step, tf.int32), 0)[0]
    return part_seed(one_device, replica_id, REPLICA_SALT)


class Trainer:
    """Trains a :class:`Seq2Seq` built by ``model_fn()`` inside the strategy scope.

    Args:
      model_fn: builds the model (called under ``strategy.scope()``).
      config: a :class:`TrainConfig`.
      train_data: the data protocol in the module docstring.
      eval_fn: optional ``eval_fn(model, step, final) -> dict`` with ``scalars`` (dict),
        ``texts`` (dict name -> str) and ``images`` (dict name -> [1, H, W, C]);
        run every ``eval_every`` steps and at the end (``final``: None, the evaluator's
        choice by the step; False / True: the periodic / final protocol,
        :class:`acvi_tf.tasks.base.Evaluator`).
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
        self.checkpoints = RunCheckpoints(self.ckpt, config.model_dir, self.write_dir,
                                          config.keep_checkpoints, self.log)
        self._train_fns = {}
        self._built = False
        self._seconds_before = 0.0  # training seconds of earlier sessions (the checkpoint's)
        self._since = None
        self.reports = TrainLog(config.model_dir, self.write_dir, self.is_chief, self.log)
        # Best-validation selection (--select_best): the best evaluation's checkpoint.
        self.select = parse_select_best(config.select_best)
        if self.select and isinstance(self.strategy,
                                      tf.distribute.MultiWorkerMirroredStrategy):
            # saving is collective there, and only the chief evaluates
            raise ValueError("--select_best needs --strategy=default or mirrored (the "
                             "multi-worker chief evaluates alone)")
        self.selection = BestCheckpoint(self.ckpt, self.select, config.select_best,
                                        config.model_dir, self.write_dir, self.log
                                        ) if self.select else None

    @property
    def manager(self):
        """The ``tf.train.CheckpointManager`` of the run's checkpoints."""
        return self.checkpoints.manager

    @property
    def best(self):
        """``best.json``'s dict: the best evaluation so far (None: none yet, or no
        ``select_best``)."""
        return self.selection.best if self.selection else None

    # -- building and restoring -------------------------------------------------
    def _build(self, batch):
        """Creates every model and optimiser variable before a restore."""
        self._built = True
        with self.strategy.scope():
            self.model.build_for_checkpoint(to_tensors(batch))
            self.optimizer.build(self.model.trainable_variables)

    def restore(self, path=None):
        """Restores ``path`` (default: the checkpoint to resume from,
        :func:`resume_checkpoint`); returns the saved data position (or None). A checkpoint
        that fails to load names its file."""
        latest = path or resume_checkpoint(self.config.model_dir, self.log)
        if not latest:
            return None
        self.checkpoints.restore(latest)
        apply_new_learning_rate(self.optimizer, self.config.learning_rate, self.log)
        position, self._seconds_before = self.checkpoints.saved_position(self.step.numpy())
        self.log(f"resumed from {latest} at step {int(self.step.numpy())}")
        return position

    def train_seconds(self):
        """Wall seconds spent training this model over every session that led to it: a
        resumed run adds the earlier sessions' time up to the checkpoint it resumed from
        (stored beside each checkpoint), so the number does not depend on interruptions
        (beyond the steps redone after them)."""
        return self._seconds_before + (time.time() - self._since if self._since else 0.0)

    def save(self, position):
        """Checkpoints the current step with the data ``position`` (:class:`RunCheckpoints`)."""
        self.checkpoints.save(int(self.step.numpy()), position, self.train_seconds())
        self._saved_at = time.time()

    def _time_to_save(self):
        """``checkpoint_minutes`` have passed since the last checkpoint (or the session's
        start)."""
        minutes = self.config.checkpoint_minutes
        return bool(minutes) and time.time() - self._saved_at >= 60.0 * minutes

    # -- the step --------------------------------------------------------------
    def _replica_step(self, batch, step, num_replicas):
        model = self.model
        ctx = tf.distribute.get_replica_context()
        seed = replica_step_seed(self.config.seed, step, ctx.replica_id_in_sync_group)
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
                          num_replicas, shards=resolve_shards(self.config.cpu_shards))

    def _check_finite(self, unchecked):
        """:func:`~acvi_tf.training.finite.check_finite` of ``unchecked`` (``[(step,
        metrics)]``), run before every log, evaluation and checkpoint."""
        check_finite(unchecked, self.strategy, self.manager.latest_checkpoint,
                     self.config.model_dir)

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
        batch = to_tensors(batch)
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
        if cfg.checkpoint_minutes and num_workers(self.strategy) > 1:
            # each worker's clock would pick its own step, and a checkpoint is collective
            raise ConfigError("checkpoint_minutes", f"{cfg.checkpoint_minutes:g} needs one "
                              f"worker; this run has {num_workers(self.strategy)} (use "
                              "checkpoint_every)")
        if self.is_chief:
            clean_temp_checkpoints(cfg.model_dir, self.log)
        # before anything is written: a train_steps below the checkpoint's is refused
        latest = check_resume(cfg.model_dir, cfg.train_steps, self.log)
        if self.is_chief:
            cfg.save(os.path.join(cfg.model_dir, "train_config.json"))
            self.checkpoints.repair_state(latest)
        saved_position = None
        first = None
        if latest:
            if not self._built:  # (a second train() call, past stop_at, is built)
                self._build(next(iter(self.train_data(None)))[0])
            saved_position = self.restore(latest)
        iterator = iter(self.train_data(saved_position))
        step = int(self.step.numpy())
        shards = describe_shards(cfg.cpu_shards)
        self.log(f"batch shards: {shards['cpu_shards']} ({shards['reason']})")
        if not latest:
            self._seconds_before = 0.0
        self._since = self._saved_at = time.time()
        position = saved_position
        bar = progress_bar(cfg.progress, cfg.train_steps, step)
        # SIGTERM / SIGINT: finish the step, save, stop (stop_signal). Not across workers:
        # they would stop at different steps and wait for each other's collectives.
        with StopRequests(enabled=num_workers(self.strategy) == 1) as stops:
            step, position, first, last = self._loop(step, end, iterator, position, first,
                                                     bar, stops)
        if bar:
            bar.close()
        if self._dropped_rows:
            r = self.strategy.num_replicas_in_sync
            self.log(f"{self._dropped_rows} rows of batches not divisible by the {r} "
                     f"replicas were dropped in this session")
            self.reports.history({"step": step, "dropped_rows": self._dropped_rows})
        if first is None and latest is None:
            raise RuntimeError("train_steps is 0 and no checkpoint exists")
        # (this session's last save, else the one it resumed from: the state file may
        # name a newer checkpoint that could not be read and was resumed past)
        newest = self.checkpoints.saved_step if self.checkpoints.saved_step is not None else (
            checkpoint_step(latest) if latest else None)
        if newest != step:
            self.save(position)
        if not self.is_chief:
            shutil.rmtree(self.write_dir, ignore_errors=True)
        if self.selection and step == cfg.train_steps:
            # The last evaluation competes with the earlier ones, so it is one of them (the
            # periodic protocol: a final-protocol score, beam and full set, would beat them
            # by its decoding alone). The final-protocol evaluation is then the selected
            # model's, kept by the evaluator for the results (not a point of the curves).
            result = self.evaluate(step, final=False)
            self.restore_best()
            if self.eval_fn is not None and self.is_chief:
                self.eval_fn(self.model, step, final=True)
        else:
            result = self.evaluate(step)
        return {**last, **(result or {})}

    def _loop(self, step, end, iterator, position, first, bar, stops):
        """The steps of :meth:`train` from ``step`` to ``end``: ``(step, position, first
        batch, last logged metrics)``. On a stop request (``stops``) after a step, that
        step's checkpoint and then :class:`Interrupted`."""
        cfg = self.config
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
                        self.reports.history({"step": step,
                                              "warm_start": self.warm_start(self.model)})
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
            saves = step < end and (step % cfg.checkpoint_every == 0 or self._time_to_save())
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
            if stops.requested:  # this step's checkpoint, then stop
                self._check_finite(unchecked)
                if not saves:
                    self.save(position)
                if bar:
                    bar.close()
                raise Interrupted(stops.signum, step, cfg.model_dir)
        return step, position, first, last

    def run_info(self, metrics):
        """What every task's results.json records of the training: the steps, the training
        wall time, the last metrics and, with ``select_best``, the evaluated checkpoint
        (``best.json``: its step, metric and value)."""
        info = {"steps": int(self.step.numpy()), "train_wall_time_sec": self.train_seconds(),
                "train_metrics": {k: float(v) for k, v in metrics.items()}}
        if self.selection:
            info["selected_checkpoint"] = self.best
        return info

    def restore_best(self):
        """Loads the best evaluation's weights into the model (:class:`BestCheckpoint`);
        returns ``best.json``'s dict (None without ``select_best`` or an evaluation)."""
        return self.selection.restore(self.step) if self.selection else None

    def _log(self, window, step, seconds, modes, bar):
        # Keras evaluates a schedule at the current iteration in this property.
        lr = float(tf.convert_to_tensor(self.optimizer.learning_rate))
        return self.reports.window(window, step, seconds, lr, self._read_modes(modes), bar)

    def evaluate(self, step, final=None):
        """Runs ``eval_fn`` at ``step`` (the chief only), reports it and, with
        ``select_best``, keeps its checkpoint if it is the best; returns its scalars.
        ``final`` goes to ``eval_fn(model, step, final)`` (None: the evaluator decides by
        the step; False: the periodic protocol at the last step)."""
        if self.eval_fn is None or not self.is_chief:
            return None
        scalars = self.reports.evaluation(step, self.eval_fn(self.model, step, final=final)
                                          or {})
        if self.selection:
            self.selection.keep_if_best(step, scalars)
        return scalars


def to_tensors(batch):
    """The tensor part of a batch; Python-side extras (raw strings, OOV lists) stay out."""
    return {k: tf.convert_to_tensor(v) for k, v in batch.items()
            if isinstance(v, (np.ndarray, tf.Tensor, int, float, np.integer))}
