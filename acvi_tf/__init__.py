"""acvi_tf: Amortized Context Vector Inference for seq2seq networks, with baselines.

The package is one attentional seq2seq machine with one part swapped per
experiment (see ``../shared/ARCHITECTURE.md``): an encoder, an attentional LSTM
decoder with a single ``step()``, a context-inference variant chosen by name
from :mod:`acvi_tf.attention`, an output head, and one trainer.
"""

import os as _os

# tfp 0.25 imports tf_keras; Keras 3 stays the layer API of this package.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"


def __getattr__(name):
    """``acvi_tf.ACVIAttention``, the Keras layer (:mod:`acvi_tf.layers`), imported on first
    use: ``import acvi_tf`` stays free of TensorFlow (the CLIs and the benchmark read
    flags before XLA's settings are fixed by TensorFlow's import)."""
    if name == "ACVIAttention":
        from acvi_tf.layers import ACVIAttention
        return ACVIAttention
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
