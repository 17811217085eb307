"""Mixed precision: the ``ModelConfig.precision`` policies and where float32 is kept.

``precision`` names a Keras dtype policy: ``"float32"`` (the default), ``"mixed_bfloat16"``
or ``"mixed_float16"``. Under a mixed policy every Keras layer of the model (embeddings,
LSTM/GRU cells, Dense and multi-head projections, layer norms) keeps float32 variables
and computes in bfloat16 / float16; everything written by hand stays float32: the
attention softmax and the attention probabilities (which the pointer-generator and
coverage read), the context variants' and latents' distributions and KL terms, the
heads' softmax / log-softmax and copy mixture, every loss and loss sum, and beam scores.
Layer outputs are cast to float32 where they enter that math (:func:`to_float32`).

The policy is given to the model's layers while the model is built
(:func:`policy_scope`), never set for the process, so two models built in one process
(tests build many) never share it.

This module imports TensorFlow and Keras only when a function needs them: the benchmark
reads :data:`PRECISIONS` for its command line before it may import TensorFlow (XLA reads
its flags at TensorFlow's import).
"""

import contextlib

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


def check_precision(precision):
    """``precision`` if it is one of :data:`PRECISIONS`, else a ValueError naming them."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r}: choose one of {', '.join(PRECISIONS)}")
    return precision


@contextlib.contextmanager
def policy_scope(precision):
    """Layers created inside get ``precision``'s dtype policy (``keras.DTypePolicy``).

    Keras gives a layer built without ``dtype`` the process-wide default policy, and the
    layers of this package build their sub-layers in ``__init__``; so the model is
    constructed inside this scope, which sets the default for the time of the
    construction only (per thread, as Keras keeps it) and puts the previous one back.
    Variables created later (at the first call) take the layer's policy, not the
    default, so nothing depends on the scope after it closes.
    """
    import keras
    policy = keras.DTypePolicy(check_precision(precision))
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield policy
    finally:
        keras.config.set_dtype_policy(previous)


def to_float32(x):
    """``x`` as float32 (a no-op on float32 tensors: the float32 graph is unchanged)."""
    import tensorflow as tf
    return tf.cast(x, tf.float32)


def concat_as(tensors, dtype, axis=-1):
    """``tf.concat`` of tensors of mixed float dtypes (float32 contexts and latents beside
    a layer's low-precision output), each cast to ``dtype`` first."""
    import tensorflow as tf
    return tf.concat([tf.cast(t, dtype) for t in tensors], axis=axis)


def is_loss_scaled(precision):
    """Whether training needs loss scaling: float16's range underflows small gradients."""
    return precision == "mixed_float16"
