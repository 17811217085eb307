"""Best-validation checkpoint selection (``--select_best``): the checkpoint whose
evaluation during training scored best on one eval scalar is kept in ``ckpt_best/`` (one),
``best.json`` names its step, metric and value, and the final evaluation scores it
instead of the last one."""

import json
import os

import numpy as np
import tensorflow as tf

from acvi_tf.training.checkpoints import restore_checkpoint
from acvi_tf.utils.files import save_json

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
    save_json(os.path.join(model_dir, BEST_FILE), best)


class BestCheckpoint:
    """The best evaluation so far of a run (``select``: :func:`parse_select_best`'s
    ``(name, sign)``) and its checkpoint: the whole ``ckpt`` (a Keras 3 model is reached
    through the optimizer's variables), saved under ``write_dir/ckpt_best``."""

    def __init__(self, ckpt, select, spec, model_dir, write_dir, log):
        self.ckpt, self.select, self.spec = ckpt, select, spec
        self.model_dir, self.log = model_dir, log
        self.manager = tf.train.CheckpointManager(
            ckpt, os.path.join(write_dir, BEST_DIR), max_to_keep=1, checkpoint_name="best")
        self.best = read_best(model_dir)

    def keep_if_best(self, step, scalars):
        """Saves the checkpoint of this evaluation when its value beats every earlier one
        (``best.json`` names it: step, metric, value)."""
        name, sign = self.select
        if name not in scalars:
            raise ValueError(f"--select_best={self.spec}: the evaluation gives no {name!r}; "
                             f"it gives {', '.join(sorted(scalars)) or 'nothing'}")
        value = float(scalars[name])
        if not np.isfinite(value):
            return
        if self.best is not None and sign * value <= sign * self.best["value"]:
            return
        if self.best is not None and self.best["step"] == step:
            return  # a resumed run evaluating a step it already kept
        path = self.manager.save(checkpoint_number=step)
        self.best = {"step": int(step), "metric": name, "value": value,
                     "mode": "max" if sign > 0 else "min",
                     "checkpoint": os.path.relpath(path, self.model_dir)}
        write_best(self.model_dir, self.best)

    def restore(self, step_variable):
        """Loads the best evaluation's weights (the final evaluation then scores them); the
        step counter keeps the last step. Returns ``best.json``'s dict."""
        if self.best is None:
            return None
        path = os.path.join(self.model_dir, self.best["checkpoint"])
        step = int(step_variable.numpy())
        restore_checkpoint(self.ckpt, path, what="the best checkpoint (best.json)")
        step_variable.assign(step)
        self.log(f"final evaluation: the best checkpoint by {self.spec}, step "
                 f"{self.best['step']} ({self.best['metric']}={self.best['value']:.4g})")
        return self.best
