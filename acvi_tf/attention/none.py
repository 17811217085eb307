"""No attention: c_t = 0 at every step, the floor of the attention rows.

The decoder then sees the source only through the bridge (its initial state, computed
from the encoder's final states) — a plain seq2seq of Sutskever et al. (2014) with the
same encoder, decoder, head and training as every other row. Issue 34's floor: a
variant whose decoder learns to ignore its context should score at least this.
``a_t`` is the uniform distribution over the real source positions (the pointer, the
coverage vector and the heat maps need one), and nothing reads the scores.
"""

import tensorflow as tf

from acvi_tf.attention.base import ContextVariant, register_attention


@register_attention("none")
class NoAttention(ContextVariant):
    """c_t = 0; a_t^i = 1 / N over the real source positions."""

    def step(self, scores, memory_state, state, training=False):
        mask = tf.cast(memory_state["mask"], scores.dtype)
        probs = mask / tf.maximum(tf.reduce_sum(mask, axis=-1, keepdims=True), 1.0)
        memory = memory_state["memory"]
        context = tf.zeros(tf.stack([tf.shape(memory)[0], tf.shape(memory)[2]]), memory.dtype)
        return context, probs, {}, state.get("variant", {})

    def loop_invariants(self, memory_state):
        return {}  # the step reads no source tensor
