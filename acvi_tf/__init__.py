"""acvi_tf: Amortized Context Vector Inference for seq2seq networks, with baselines.

The package is one attentional seq2seq machine with one part swapped per
experiment (see ``../shared/ARCHITECTURE.md``): an encoder, an attentional LSTM
decoder with a single ``step()``, a context-inference variant chosen by name
from :mod:`acvi_tf.attention`, an output head, and one trainer.
"""

import os as _os

# tfp 0.25 imports tf_keras; Keras 3 stays the layer API of this package.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# oneDNN's CPU kernels on unless the user chose: TensorFlow turns them on by default only
# on CPUs with AVX-512 VNNI / bf16 / AMX, and on an AVX2-only AMD EPYC a table4-cpu
# training step ran 1.15x faster with them (2,105-2,226 against 1,843-1,874 tokens/s, two
# single-threaded runs at once on the idle machine, 2026-11-27; README, "The fast path per
# device"). Set before
# TensorFlow is imported, which fixes the choice; results change by float round-off only,
# and a run's provenance records which it had (acvi_tf.utils.provenance.tf_settings).
_os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

__version__ = "0.1.0"


def __getattr__(name):
    """``acvi_tf.ACVIAttention``, the Keras layer (:mod:`acvi_tf.layers`), imported on first
    use: ``import acvi_tf`` stays free of TensorFlow (the CLIs and the benchmark read
    flags before XLA's settings are fixed by TensorFlow's import)."""
    if name == "ACVIAttention":
        from acvi_tf.layers import ACVIAttention
        return ACVIAttention
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
