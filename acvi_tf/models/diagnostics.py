"""The per-example sums behind a run's diagnostics (attention entropy, memory norm, a
variant's per-position values), shared by the LSTM seq2seq and the Transformer."""

import tensorflow as tf


def diagnostic_sums(attention, tmask, memory_state, variant_values=None):
    """Per-example sums behind the run diagnostics (divide by the counts they come with).

    ``attention_entropy``: sum over real target steps of H(a_t) = -sum_i a_t^i log a_t^i
    (nats), counted by ``num_tokens``; ``memory_norm``: sum over real source positions of
    ||h_i||, counted by ``source_positions``; each of the variant's per-position
    ``variant_values`` ([B, N], e.g. ACVI's ``sigma_mean``), summed over real positions.
    """
    entropy = -tf.reduce_sum(attention * tf.math.log(tf.maximum(attention, 1e-30)), axis=-1)
    smask = tf.cast(memory_state["mask"], tf.float32)
    out = {"attention_entropy": tf.reduce_sum(entropy * tmask, axis=1),
           "memory_norm": tf.reduce_sum(tf.norm(memory_state["memory"], axis=-1) * smask, axis=1),
           "source_positions": tf.reduce_sum(smask, axis=1)}
    for name, value in (variant_values or {}).items():
        out[name] = tf.reduce_sum(value * smask, axis=1)
    return out
