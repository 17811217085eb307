"""A trained run back in memory: the checkpoint to evaluate (the best evaluation's, else
the one a resume would use), restoring it into a rebuilt model (re-reading the newest
when a run training in the same directory rotates it away), and the Trainer's warm
start from another run's weights (``--init_from``)."""

import dataclasses
import os

import numpy as np
import tensorflow as tf

from acvi_tf.errors import ConfigError, RunError
from acvi_tf.models import build_model
from acvi_tf.run.directory import load_model_config
from acvi_tf.training.trainer import TrainConfig, make_optimizer
from acvi_tf.training.warm_start import copy_matching
from acvi_tf.utils import manifest
from acvi_tf.utils.files import load_json
from acvi_tf.utils.progress import log


def checkpoint_to_evaluate(model_dir):
    """The checkpoint a trained run is evaluated with: the best evaluation's (``best.json``,
    written when it trained with ``--select_best``), else the one a resume would use
    (:func:`acvi_tf.training.checkpoints.resume_checkpoint`: the latest, or, when it cannot be
    read, the newest one that can, said in one line). When none can be read, the newest
    (whose restore then fails naming it)."""
    from acvi_tf.training.trainer import (CheckpointError, listed_checkpoints, read_best,
                                          resume_checkpoint)
    best = read_best(model_dir)
    if best is not None:
        return os.path.join(model_dir, best["checkpoint"])
    try:
        return resume_checkpoint(model_dir, log)
    except CheckpointError:
        listed = listed_checkpoints(model_dir)
        return listed[0][1] if listed else None


def restore_model(model, model_dir, build_batch, path=None):
    """Builds ``model`` on ``build_batch`` and restores the Trainer's latest checkpoint (the
    best evaluation's, for a run trained with ``--select_best``), or checkpoint ``path``.

    The Trainer saves ``tf.train.Checkpoint(model=..., optimizer=..., step=...)``;
    Keras 3 models are reached through the optimizer's variable list in that
    object graph (a ``Checkpoint(model=model)`` alone restores nothing), so the
    optimizer is rebuilt as in training (``train_config.json``) over the model's
    trainable variables, and every restored weight is checked against the file.
    Returns the step stored with the checkpoint. Raises ``FileNotFoundError``
    naming the directory when there is no checkpoint.
    """
    explicit = path is not None  # (read as given: no newer checkpoint in its place)
    path = path or checkpoint_to_evaluate(model_dir)
    if path is None:
        raise FileNotFoundError(f"no checkpoint in {os.path.join(model_dir, 'ckpt')}; train "
                                f"first (--mode=train or the default --mode=train_eval)")
    model.build_for_checkpoint({k: tf.convert_to_tensor(v) for k, v in build_batch.items()})
    config_path = os.path.join(model_dir, "train_config.json")
    saved = load_json(config_path) if os.path.exists(config_path) else {}
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    train_config = TrainConfig(**{k: v for k, v in saved.items() if k in known
                                  and k != "model_dir"}, model_dir=model_dir)
    optimizer = make_optimizer(train_config, model.config.precision)
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    for attempt in range(RESTORE_ATTEMPTS):
        try:
            _restore_and_verify(model, optimizer, step, path)
            return int(step.numpy())
        except Exception as e:  # noqa: BLE001 - re-raised with the file named
            newest = checkpoint_to_evaluate(model_dir)
            if not explicit and attempt + 1 < RESTORE_ATTEMPTS and newest and (
                    newest != path or not os.path.exists(path + ".index")):
                # a run training in model_dir rotated the checkpoint away while it was
                # read (--keep_checkpoints): read the newest one instead
                log(f"{path} was replaced while it was read (a run is training in "
                    f"{model_dir}); reading the newest checkpoint {newest}")
                path = newest
                continue
            first = str(e).splitlines()[0] if str(e) else ""
            if isinstance(e, RunError):
                raise
            raise RunError(f"cannot restore checkpoint {path} ({type(e).__name__}: {first}); "
                           f"the file may be truncated. Move ckpt/ aside or use an older "
                           f"checkpoint (edit {os.path.join(model_dir, 'ckpt', 'checkpoint')})"
                           ) from None


RESTORE_ATTEMPTS = 5  # a checkpoint rotated away while read: read the newest, this often


def _restore_and_verify(model, optimizer, step, path):
    """Restores checkpoint ``path`` into ``model``, ``optimizer`` and ``step``, and checks
    that every trainable weight holds the file's value."""
    status = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step).restore(path)
    status.expect_partial()
    status.assert_existing_objects_matched()
    reader = tf.train.load_checkpoint(path)
    keys = set(reader.get_variable_to_shape_map())
    for i, v in enumerate(model.trainable_variables):
        key = f"optimizer/_trainable_variables/{i}/.ATTRIBUTES/VARIABLE_VALUE"
        if key in keys and not np.array_equal(reader.get_tensor(key), v.numpy()):
            raise RunError(f"{path}: weight {v.path} was not restored; the checkpoint "
                           f"does not match this model")


def load_model(model_dir, build_batch):
    """Rebuilds the model saved in ``model_dir`` and restores its latest checkpoint;
    returns ``(model, step)``."""
    model = build_model(load_model_config(model_dir))
    step = restore_model(model, model_dir, build_batch)
    return model, step


def warm_start_fn(init_from, model_dir, build_batch, log=log):
    """The Trainer's ``warm_start`` for ``init_from`` (None without it): loads the run
    in ``init_from`` and copies every variable whose name and shape match
    (:mod:`acvi_tf.training.warm_start`). Vocabulary files present in both run
    directories must be identical, so that the copied embeddings mean the same words."""
    if not init_from:
        return None
    for name in sorted(os.listdir(model_dir)):
        theirs = os.path.join(init_from, name)
        if name.startswith("vocab") and os.path.isfile(theirs):
            with open(os.path.join(model_dir, name), "rb") as a, open(theirs, "rb") as b:
                if a.read() != b.read():
                    raise ConfigError("init_from", f"{theirs} differs from {model_dir}/{name}: "
                                      f"the runs do not share a vocabulary")

    def warm_start(model):
        try:
            source, step = load_model(init_from, build_batch)
        except (RunError, FileNotFoundError, manifest.StoredFileError):
            raise  # (their messages name the file)
        except Exception as e:  # noqa: BLE001 - a run this task's batch cannot rebuild
            first = str(e).splitlines()[0] if str(e) else ""
            raise ConfigError("init_from", f"cannot rebuild the run in {init_from} for this "
                              f"task ({type(e).__name__}: {first}); warm-start from a run "
                              f"of the same task") from None
        loaded, skipped = copy_matching(source, model)
        log(f"warm start from {init_from} (step {step}): {len(loaded)} variables loaded, "
            f"{len(skipped)} kept fresh" + (f" ({', '.join(sorted(skipped))})" if skipped
                                             else ""))
        return {"init_from": init_from, "init_from_step": step, "loaded": len(loaded),
                "kept_fresh": sorted(skipped)}
    return warm_start
