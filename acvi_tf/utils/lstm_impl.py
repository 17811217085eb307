"""Which implementation runs the encoder's BiLSTM, chosen in one place and logged.

Three implementations run the same Keras ``Bidirectional(LSTM)`` weights (so a checkpoint
restores under either, and they give the same values and gradients):

- ``scan``: :func:`acvi_tf.utils.lstm.bidirectional_sequence`, the hand-written
  recurrence (input projection before the loop, its own backward pass). Faster on CPU,
  and it compiles under XLA.
- ``keras``: the Keras layer called as it is. With its cuDNN-compatible defaults (tanh,
  sigmoid, no recurrent dropout, bias, not unrolled) Keras runs it as one cuDNN kernel
  (``CudnnRNNV3``) when a GPU is visible, and as its generic while loop otherwise.
- ``block``: :func:`acvi_tf.utils.lstm.block_bidirectional`, TensorFlow's fused CPU kernel
  ``BlockLSTM`` (forward and backward each one C++ op). No XLA kernel; float32 and
  float16 only (another dtype, bfloat16, runs ``scan``, logged).

:func:`choose_lstm_impl` maps ``--lstm_impl`` (``auto``, ``scan``, ``keras``, ``block``)
to one of the three: ``auto`` takes ``keras`` on a GPU, ``scan`` on CPU and under XLA (cuDNN's RNN
ops have no XLA kernel; Keras turns its own ``jit_compile`` off for them for the same
reason). Graphs traced inside :func:`portable` (SavedModel exports) always take ``scan``.
"""

import contextlib
import logging

import tensorflow as tf

from acvi_tf.errors import ConfigError
from acvi_tf.utils.lstm import BLOCK_DTYPES, bidirectional_sequence, block_bidirectional

log = logging.getLogger(__name__)

LSTM_IMPLS = ("auto", "scan", "keras", "block")
_logged = set()  # (impl, reason) pairs already logged: one line per choice, not per trace
_portable = []   # non-empty inside portable(): every choice is scan


@contextlib.contextmanager
def portable():
    """Inside, every choice is ``scan``: for graphs saved to run elsewhere (a SavedModel
    traced on a GPU must still serve on a CPU, and cuDNN's LSTM op has no CPU kernel)."""
    _portable.append(True)
    try:
        yield
    finally:
        _portable.pop()


def gpu_visible():
    """True when TensorFlow sees a GPU (the condition Keras' cuDNN path checks)."""
    return bool(tf.config.list_logical_devices("GPU"))


def in_xla_context():
    """True while tracing inside ``tf.function(jit_compile=True)`` (or a function it
    calls). TensorFlow marks that graph with an XLA control-flow context; the test of it
    is private, so an import failure reads as "not XLA"."""
    try:
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # pragma: no cover - a TensorFlow that moved it
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def choose_lstm_impl(requested="auto", gpu=None, xla=None):
    """``requested`` (one of :data:`LSTM_IMPLS`) -> ``(impl, reason)``, impl ``scan``,
    ``keras`` or ``block``; logs each distinct choice once. ``gpu`` and ``xla`` default to what this
    process sees (:func:`gpu_visible`, :func:`in_xla_context`)."""
    if requested not in LSTM_IMPLS:
        raise ConfigError("lstm_impl", f"{requested!r}: choose one of {', '.join(LSTM_IMPLS)}")
    gpu = gpu_visible() if gpu is None else gpu
    xla = in_xla_context() if xla is None else xla
    if _portable:
        impl, reason = "scan", "a portable graph (a SavedModel runs on any device)"
    elif requested == "keras" and gpu and xla:
        raise ConfigError("lstm_impl", "keras runs cuDNN's LSTM on a GPU, which XLA cannot "
                          "compile; drop --xla or use --lstm_impl=auto (scan under XLA)")
    elif requested == "block" and xla:
        raise ConfigError("lstm_impl", "block runs TensorFlow's BlockLSTM kernel, which XLA "
                          "cannot compile; drop --xla or use --lstm_impl=auto")
    elif requested != "auto":
        impl, reason = requested, f"--lstm_impl={requested}"
    elif xla:
        impl, reason = "scan", "auto under XLA (cuDNN's LSTM has no XLA kernel)"
    elif gpu:
        impl, reason = "keras", "auto on a GPU (Keras' LSTM runs cuDNN)"
    else:
        impl, reason = "scan", "auto without a GPU"
    if (impl, reason) not in _logged:
        _logged.add((impl, reason))
        log.info("encoder LSTM: %s (%s)", impl, reason)
    return impl, reason


def run_bidirectional(layer, x, mask, impl):
    """``layer`` (a Keras ``Bidirectional(LSTM(return_sequences=True,
    return_state=True))``) over ``x`` [B, T, in] with ``mask`` [B, T], by ``impl``:
    ``(outputs [B, T, 2u], (h, c) forward, (h, c) backward)``, outputs zero at padding."""
    if impl == "block" and x.dtype not in BLOCK_DTYPES:
        impl = "scan"
        if ("scan", f"block in {x.dtype.name}") not in _logged:
            _logged.add(("scan", f"block in {x.dtype.name}"))
            log.info("encoder LSTM: scan (BlockLSTM has no %s kernel)", x.dtype.name)
    if impl == "scan":
        return bidirectional_sequence(layer, x, mask)
    if impl == "block":
        return block_bidirectional(layer, x, mask)
    if impl != "keras":
        raise ValueError(f"impl must be scan, keras or block, got {impl!r}")
    return keras_bidirectional(layer, x, mask)


def keras_bidirectional(layer, x, mask):
    """The Keras layer itself (cuDNN on a GPU), with the same results as ``scan``.

    cuDNN asserts that every row has at least one real step (and that padding is on the
    right, as :meth:`Seq2Seq.source_mask` makes it). A row with no real step (an empty
    source, or a batch's filler row) gets its first step unmasked, and its final states
    set to the zero state ``scan`` ends on; its outputs are zeroed by the mask, so the
    forced step changes no value and receives no gradient."""
    empty = tf.logical_not(tf.reduce_any(mask, axis=1))  # [B]
    first = tf.one_hot(tf.zeros_like(empty, tf.int32), tf.shape(mask)[1], on_value=True,
                       off_value=False, dtype=tf.bool)
    run_mask = tf.logical_or(mask, tf.logical_and(first, empty[:, None]))
    outputs, fh, fc, bh, bc = layer(x, mask=run_mask)
    outputs = outputs * tf.cast(mask, outputs.dtype)[:, :, None]

    def zero_if_empty(s):
        return tf.where(empty[:, None], tf.zeros_like(s), s)
    return outputs, (zero_if_empty(fh), zero_if_empty(fc)), (zero_if_empty(bh),
                                                              zero_if_empty(bc))
