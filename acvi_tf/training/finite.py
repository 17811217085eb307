"""The stop on a non-finite loss or gradient: the Trainer reads the ``finite`` flags of the
steps since its last check in one transfer, before every log, evaluation and checkpoint
(never once a step: issue 42), so a diverged step never reaches a checkpoint."""

import numpy as np
import tensorflow as tf

from acvi_tf.training.train_log import fmt


class TrainingDiverged(RuntimeError):
    """The loss or the gradients became non-finite; the update was not applied."""


def check_finite(unchecked, strategy, last_checkpoint, model_dir):
    """Raises :class:`TrainingDiverged` for the first of ``unchecked`` (``[(step,
    metrics)]``) whose loss or gradient was not finite, naming the last good checkpoint
    ``last_checkpoint`` of ``model_dir``. With one replica its update was not applied
    (``step.train_step``); later steps may have run since."""
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
        strategy, (tf.distribute.MirroredStrategy, tf.distribute.MultiWorkerMirroredStrategy))
    raise TrainingDiverged(
        f"non-finite loss or gradient at step {step} ({fmt(values)}); "
        f"{'the update was not applied and ' if skipped else ''}nothing was saved"
        f"{f' (found at step {found}, the next check)' if found != step else ''}: the "
        f"last good checkpoint is {last_checkpoint or '(none yet)'} in {model_dir}")
