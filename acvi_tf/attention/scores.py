"""Attention scores e_t^i: additive (Eqs. 1, 8), multiplicative (Eq. 10) and Eq. 10
scaled by 1 / sqrt(d).

A score layer splits its work in two so that the source-side projection is
computed once per source sequence, not once per decoder step:
``precompute(memory) -> keys`` and ``call(keys, query, coverage) -> scores``. The
decoder calls ``step(memory_state, query, coverage)``, which is ``call`` on
``memory_state["keys"]``; a score linear in the keys declares them in
``loop_invariants`` and computes through :func:`acvi_tf.utils.loop_gradients.contract`,
so that teacher forcing sums their gradient after the loop.
"""

import keras
import tensorflow as tf

from acvi_tf.registry import Registry
from acvi_tf.utils.layers import CompositeLayer
from acvi_tf.utils.loop_gradients import contract

SCORES = Registry("attention score")


class Score(CompositeLayer):
    """The decoder's interface of a score layer (module docstring)."""

    def step(self, memory_state, query, coverage=None):
        return self(memory_state["keys"], query, coverage=coverage)

    def loop_invariants(self, memory_state):
        """``{name: (equation, tensor)}`` read by every step linearly (none by default)."""
        return {}


@SCORES.register("additive")
class AdditiveScore(Score):
    """Bahdanau's additive score, Eq. (1), with the coverage term of Eq. (8).

    e_t^i = v^T tanh(W_h h_i + W_s s_t + w_k k_t^i + b_attn)

    ``w_k`` starts at zero, so a model trained without coverage has exactly
    Eq. (1) and can switch coverage on later (See et al.'s last phase).
    """

    def __init__(self, units, use_coverage=False, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.use_coverage = use_coverage
        self.W_h = keras.layers.Dense(units, use_bias=False, name="W_h")
        self.W_s = keras.layers.Dense(units, use_bias=True, name="W_s")  # its bias is b_attn
        self.v = self.add_weight(name="v", shape=(units,), initializer="glorot_uniform")
        if use_coverage:
            self.w_k = self.add_weight(name="w_k", shape=(units,), initializer="zeros")

    def precompute(self, memory):
        """W_h h_i for every source position: [B, N, units]."""
        return self.W_h(memory)

    def call(self, keys, query, coverage=None):
        feats = keys + self.W_s(query)[:, None, :]
        if self.use_coverage and coverage is not None:
            feats = feats + coverage[:, :, None] * self.w_k
        return tf.reduce_sum(tf.tanh(feats) * self.v, axis=-1)

    def get_config(self):
        return {**super().get_config(), "units": self.units, "use_coverage": self.use_coverage}


@SCORES.register("multiplicative")
class MultiplicativeScore(Score):
    """Luong's general score, Eq. (10): e_t^i = h_i^T W s_t.

    Precomputing W^T h_i (keys) makes each decoder step one batched dot product.
    ``units`` is the query (decoder state) size.
    """

    def __init__(self, units, use_coverage=False, **kwargs):
        super().__init__(**kwargs)
        if use_coverage:
            raise ValueError("coverage (Eq. 8) is defined for the additive score only; "
                             "use --score=additive with coverage")
        self.units = units
        self.use_coverage = False
        self.W = keras.layers.Dense(units, use_bias=False, name="W")

    def precompute(self, memory):
        return self.W(memory)

    EQUATION = "bd,bnd->bn"  # e_t = einsum(s_t, W^T h): linear in the keys

    def call(self, keys, query, coverage=None):
        return self.step({"keys": keys}, query)

    def step(self, memory_state, query, coverage=None):
        return contract(memory_state, "keys", self.EQUATION, query, memory_state["keys"])

    def loop_invariants(self, memory_state):
        return {"keys": (self.EQUATION, memory_state["keys"])}

    def get_config(self):
        return {**super().get_config(), "units": self.units}


@SCORES.register("scaled_multiplicative")
class ScaledMultiplicativeScore(MultiplicativeScore):
    """Eq. (10) divided by sqrt(d), d the query size: e_t^i = h_i^T W s_t / sqrt(d), the
    scaling of Vaswani et al. (2017).

    Why: with Glorot-initialised W, Eq. (10)'s scores start with a standard deviation of
    about |h_i| |s_t| / sqrt(d) (2-3 at the cpu profile), so a_t starts peaked on
    arbitrary positions, and its gradient to the other positions is small until the
    alignment is found. The scale starts a_t near uniform. The keys carry the factor,
    so a decoder step costs the same as Eq. (10)'s.
    """

    def precompute(self, memory):
        return self.W(memory) * (1.0 / float(self.units) ** 0.5)
