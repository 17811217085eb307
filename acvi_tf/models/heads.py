"""Output heads: the predictive distribution over the next word."""

import keras
import tensorflow as tf

from acvi_tf.registry import Registry

HEADS = Registry("output head")


@HEADS.register("softmax")
class SoftmaxHead(keras.layers.Layer):
    """Eq. (4): P_t^vocab = softmax(V' tanh(V [s_t; c_t] + b) + b').

    ``call(s, c, x, probs, memory_state)`` returns ``(log_probs [B, V], extras)``;
    the pointer-generator head has the same signature and also uses the
    attention ``probs`` and the decoder input ``x``.
    """

    def __init__(self, vocab_size, units, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.units = units
        self.V = keras.layers.Dense(units, activation="tanh", name="V")
        self.V_prime = keras.layers.Dense(vocab_size, name="V_prime")

    @property
    def output_size(self):
        return self.vocab_size

    def call(self, s, c, x=None, probs=None, memory_state=None):
        logits = self.V_prime(self.V(tf.concat([s, c], axis=-1)))
        return tf.nn.log_softmax(logits), {}

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "units": self.units}
