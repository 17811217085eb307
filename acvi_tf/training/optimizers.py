"""The optimiser of a :class:`~acvi_tf.training.config.TrainConfig` (Adam or SGD, its
learning-rate schedule, loss scaling for ``mixed_float16``), and a resumed run's new
constant learning rate."""

import keras
import numpy as np
import tensorflow as tf

from acvi_tf.training import schedules
from acvi_tf.training.adam import Adam
from acvi_tf.utils.precision import check_precision, is_loss_scaled


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


def apply_new_learning_rate(optimizer, learning_rate, log):
    """Adam's constant learning rate is a variable of the checkpoint: a resumed run
    given another ``learning_rate`` uses the new one, and says so."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)  # loss scaling's
    lr = getattr(inner, "_learning_rate", None)
    if not isinstance(lr, (tf.Variable, keras.Variable)):
        return  # a schedule: built from the config, so the new value already applies
    old = float(np.asarray(lr.numpy() if hasattr(lr, "numpy") else lr))
    new = float(learning_rate)
    if not np.isclose(old, new, rtol=1e-6, atol=0.0):
        lr.assign(new)
        log(f"learning rate: the checkpoint had {old:g}; --learning_rate={new:g} "
            f"applies from now on")
