"""TensorBoard helpers: attention heat-maps as images, sample decodes as text."""

import numpy as np
import tensorflow as tf


def attention_image(attention, scale=4):
    """An attention matrix [T, N] (rows: target steps) as a [1, H, W, 1] image in [0, 1].

    Each row is normalised by its maximum so that diffuse rows stay visible;
    every cell is ``scale`` x ``scale`` pixels.
    """
    a = np.asarray(attention, np.float32)
    a = a / np.maximum(a.max(axis=1, keepdims=True), 1e-9)
    a = np.repeat(np.repeat(a, scale, axis=0), scale, axis=1)
    return a[None, :, :, None]


def write_scalars(writer, step, scalars, prefix=""):
    with writer.as_default(step=step):
        for name, value in scalars.items():
            tf.summary.scalar(prefix + name, float(value))
    writer.flush()
