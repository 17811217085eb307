"""Run diagnostics on dev data, for every variant of every task.

One teacher-forced pass gives the per-token dev NLL, every aux term per token (ACVI's
``kl_mc`` and ``kl_bound``, the coverage loss, ...), the attention entropy H(a_t), the
mean norm of the encoder states ||h_i|| and the variant's own per-position values
(ACVI's mean sigma). A second pass with c_t replaced by zeros gives **context use**:

    context_use = dev NLL(c_t = 0) - dev NLL,

in nats per target token. It says whether the decoder reads the context at all: a
decoder that ignores c_t scores 0, and ACVI whose posterior has collapsed onto the
prior (a context of pure noise) scores near 0 too. The Transformer has no single c_t;
its ``context_use`` is None.
"""

import math

import tensorflow as tf

from acvi_tf.utils import shards

COUNTS = ("num_tokens", "source_positions")
# Per-source-position sums (divided by source_positions); the rest go per target token.
PER_POSITION = ("memory_norm", "sigma_mean")


def supports_zero_context(model):
    return getattr(getattr(model, "config", None), "model", "seq2seq") == "seq2seq"


class DevDiagnostics:
    """``diagnostics(model, batches) -> dict`` with tf.functions cached per model.

    ``batches`` is an iterable of model batches (dicts of arrays; extra keys are
    dropped by the caller's ``keys``).
    """

    def __init__(self, keys=("src", "src_len", "tgt_in", "tgt_out", "src_ext", "max_oovs")):
        self.keys = keys
        self._fns = {}

    def _fn(self, model, mode_key, batch, probe):
        key = (id(model), mode_key, tuple(sorted(batch)))
        if key not in self._fns:
            # Every dimension unknown: one trace serves every dev batch (with
            # reduce_retracing alone the second batch shape retraces). The context-use
            # probe is an argument, not a constant: one trace serves both passes (a
            # trace and its first run cost more than a tiny model's whole dev pass).
            signature = ({k: tf.TensorSpec([None] * v.shape.rank, v.dtype)
                          for k, v in batch.items()}, tf.TensorSpec([], tf.float32))

            def terms(b, zero_context):
                # every term a sum over rows: the process's batch shards add up
                return shards.summed(lambda part, _: model.loss_terms(
                    part, training=False, diagnostics=True,
                    **({"zero_context": zero_context} if probe else {})), b)
            self._fns[key] = tf.function(terms, input_signature=signature, autograph=False)
        return self._fns[key]

    def __call__(self, model, batches, mode_key=None):
        """``mode_key`` names the model's schedule mode (e.g. coverage on/off), which the
        decoder reads when a step is traced: one traced function per mode."""
        sums, zero_nll = {}, 0.0
        probe = supports_zero_context(model)
        for batch in batches:
            batch = {k: tf.convert_to_tensor(v) for k, v in batch.items() if k in self.keys}
            fn = self._fn(model, mode_key, batch, probe)
            terms = fn(batch, tf.constant(0.0))
            for name, value in terms.items():
                if name != "objective":
                    sums[name] = sums.get(name, 0.0) + float(value)
            if probe:
                zero_nll += float(fn(batch, tf.constant(1.0))["nll"])
        return summarise(sums, zero_nll if probe else None)


def summarise(sums, zero_nll=None):
    """Sums over the dev batches -> the diagnostics (see the module docstring)."""
    tokens = max(sums.get("num_tokens", 0.0), 1.0)
    positions = max(sums.get("source_positions", 0.0), 1.0)
    out = {}
    for name, value in sums.items():
        if name in COUNTS:
            continue
        key = "dev_nll" if name == "nll" else name
        out[key] = value / (positions if name in PER_POSITION else tokens)
    out["dev_ppl"] = math.exp(min(out.get("dev_nll", 0.0), 50.0))
    out["context_use"] = None if zero_nll is None else zero_nll / tokens - out.get("dev_nll", 0.0)
    return out
