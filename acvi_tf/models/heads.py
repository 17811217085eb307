"""Output heads: the predictive distribution over the next word."""

import keras
import tensorflow as tf

from acvi_tf.registry import Registry
from acvi_tf.utils.layers import CompositeLayer
from acvi_tf.utils.precision import concat_as, to_float32

HEADS = Registry("output head")


@HEADS.register("softmax")
class SoftmaxHead(CompositeLayer):
    """Eq. (4): P_t^vocab = softmax(V' tanh(V [s_t; c_t] + b) + b').

    ``call(s, c, x, probs, memory_state)`` returns ``(log_probs [B, V], extras)``;
    the pointer-generator head has the same signature and also uses the
    attention ``probs`` and the decoder input ``x``.

    Under a mixed precision policy (:mod:`acvi_tf.utils.precision`) the Dense layers
    compute in low precision and the softmax, the copy mixture and the log-probabilities
    in float32. The head does not cast its inputs (``autocast=False``), so the float32
    attention ``probs`` reach the copy distribution unrounded.
    """

    def __init__(self, vocab_size, units, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.units = units
        self.V = keras.layers.Dense(units, activation="tanh", name="V")
        self.V_prime = keras.layers.Dense(vocab_size, name="V_prime")

    @property
    def output_size(self):
        return self.vocab_size

    def logits(self, s, c):
        """V' tanh(V [s_t; c_t] + b) + b', float32."""
        return to_float32(self.V_prime(self.V(concat_as([s, c], self.compute_dtype))))

    def call(self, s, c, x=None, probs=None, memory_state=None):
        return tf.nn.log_softmax(self.logits(s, c)), {}

    def target_log_prob(self, targets, s, c, x=None, probs=None, memory_state=None):
        """log P_t(y_t) [B] of ``targets`` [B]: what teacher forcing needs of ``call``,
        from the fused softmax cross-entropy (no [B, V] log-probabilities kept for the
        backward pass)."""
        return -tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(targets, tf.int32), logits=self.logits(s, c))

    def tile_memory(self, memory_state, times):
        """What ``call`` reads of ``memory_state``, for inputs that stack ``times`` steps
        time-major ([times * B, ...], row t * B + b): nothing here."""
        return {}

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "units": self.units}


EPSILON = 1e-12  # log(p + eps): See et al. mix in probability space, then take the log


@HEADS.register("pointer")
class PointerGeneratorHead(SoftmaxHead):
    """The pointer-generator output of See et al. (2017), Eqs. (5)-(6).

    p_gen = sigma(w_c^T c_t + w_s^T s_t + w_x^T x_t + b_ptr)                (Eq. 5)
    P_t(w) = p_gen P_vocab(w) + (1 - p_gen) sum_{i: w_i = w} a_t^i           (Eq. 6)

    over the extended vocabulary V + max_oovs, where source OOVs have ids
    V, V+1, ... (``memory_state["src_ext"]``, ``memory_state["max_oovs"]``).
    The copy distribution is added with a scatter-add, in probability space.
    """

    def __init__(self, vocab_size, units, **kwargs):
        super().__init__(vocab_size, units, **kwargs)
        # One Dense over [c; s; x] is w_c^T c + w_s^T s + w_x^T x + b_ptr.
        self.p_gen_layer = keras.layers.Dense(1, name="p_gen")

    def tile_memory(self, memory_state, times):
        return {"src_ext": tf.tile(memory_state["src_ext"], [times, 1]),
                "max_oovs": memory_state["max_oovs"]}

    def p_gen(self, s, c, x):
        """Eq. (5), float32 [B, 1]."""
        return tf.sigmoid(to_float32(self.p_gen_layer(concat_as([c, s, x], self.compute_dtype))))

    def call(self, s, c, x=None, probs=None, memory_state=None):
        p_vocab = tf.nn.softmax(self.logits(s, c))
        p_gen = self.p_gen(s, c, x)  # [B, 1]
        probs = to_float32(probs)
        src_ext = tf.cast(memory_state["src_ext"], tf.int32)
        max_oovs = tf.cast(memory_state["max_oovs"], tf.int32)
        batch = tf.shape(p_vocab)[0]
        vocab_part = tf.pad(p_gen * p_vocab, [[0, 0], [0, max_oovs]])
        n = tf.shape(src_ext)[1]
        rows = tf.tile(tf.range(batch)[:, None], [1, n])
        indices = tf.stack([rows, src_ext], axis=-1)  # [B, N, 2]
        final = tf.tensor_scatter_nd_add(vocab_part, indices, (1.0 - p_gen) * probs)
        return tf.math.log(final + EPSILON), {"p_gen": p_gen[:, 0]}

    def target_log_prob(self, targets, s, c, x=None, probs=None, memory_state=None):
        """log P_t(y_t) [B] of ``targets`` [B] (extended ids), Eq. (6) at y_t only:
        p_gen P_vocab(y_t) (0 for a source OOV) + (1 - p_gen) sum_{i: w_i = y_t} a_t^i.
        The same number as ``call`` then a gather, without the scatter over the extended
        vocabulary, which is slow on CPU (XLA runs it as a serial loop)."""
        targets = tf.cast(targets, tf.int32)
        in_vocab = targets < self.vocab_size
        log_p_vocab = super().target_log_prob(tf.where(in_vocab, targets, 0), s, c)
        p_vocab = tf.where(in_vocab, tf.exp(log_p_vocab), 0.0)
        p_gen = self.p_gen(s, c, x)[:, 0]
        same = tf.cast(tf.equal(tf.cast(memory_state["src_ext"], tf.int32), targets[:, None]),
                       tf.float32)
        copy = tf.reduce_sum(to_float32(probs) * same, axis=-1)
        return tf.math.log(p_gen * p_vocab + (1.0 - p_gen) * copy + EPSILON)
