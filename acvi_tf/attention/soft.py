"""Conventional soft attention, Eqs. (2)-(3)."""


from acvi_tf.attention.base import ContextVariant, register_attention, weighted_sum
from acvi_tf.utils.ops import masked_softmax


@register_attention("soft")
class SoftAttention(ContextVariant):
    """a_t = softmax(e_t) (Eq. 2); c_t = sum_i a_t^i h_i (Eq. 3)."""

    def step(self, scores, memory_state, state, training=False):
        probs = masked_softmax(scores, memory_state["mask"])
        context = weighted_sum(probs, memory_state["memory"], memory_state, "memory")
        return context, probs, {}, state.get("variant", {})
