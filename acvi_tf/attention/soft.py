"""Conventional soft attention, Eqs. (2)-(3), and its two noise controls.

The controls answer "does ACVI help because its context is a latent variable, or only
because training perturbs the context?" (issue 33): soft attention whose training-time
context gets isotropic Gaussian noise of a fixed sigma (``context_noise``: set it to the
mean sigma(h_i) that ACVI learns), or dropout (``context_dropout``). Neither has a KL
term or learns its noise; decoding uses the plain context c_t, as ACVI decodes with its
posterior mean.
"""


import tensorflow as tf

from acvi_tf.attention.base import ContextVariant, register_attention, weighted_sum
from acvi_tf.utils import ops
from acvi_tf.utils.ops import fold_seed, masked_softmax


@register_attention("soft")
class SoftAttention(ContextVariant):
    """a_t = softmax(e_t) (Eq. 2); c_t = sum_i a_t^i h_i (Eq. 3).

    Args:
      context_noise: training only, c_t + context_noise * eps, eps ~ N(0, I) (a fixed-sigma
        stand-in for ACVI's reparameterised sample, Eq. 24). 0: off.
      context_dropout: training only, inverted dropout on c_t at this rate. 0: off.
    """

    def __init__(self, memory_dim, context_noise=0.0, context_dropout=0.0, **kwargs):
        super().__init__(memory_dim, **kwargs)
        self.context_noise = float(context_noise)
        self.context_dropout = float(context_dropout)
        if self.context_noise < 0 or not 0 <= self.context_dropout < 1:
            raise ValueError(f"soft attention: context_noise={context_noise} must be >= 0 "
                             f"and context_dropout={context_dropout} in [0, 1)")

    def step(self, scores, memory_state, state, training=False):
        probs = masked_softmax(scores, memory_state["mask"])
        context = weighted_sum(probs, memory_state["memory"], memory_state, "memory")
        if training and (self.context_noise or self.context_dropout):
            seed = fold_seed(memory_state["seed"], state["time"], 6007)
            if self.context_noise:
                context = context + self.context_noise * ops.stateless_normal(
                    tf.shape(context), fold_seed(seed, 1), context.dtype)
            context = ops.dropout(context, self.context_dropout, seed, training, salts=(2,))
        return context, probs, {}, state.get("variant", {})

    def get_config(self):
        return {**super().get_config(), "context_noise": self.context_noise,
                "context_dropout": self.context_dropout}
