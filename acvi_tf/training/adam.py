"""Adam (Kingma & Ba 2015) as ``keras.optimizers.Adam`` computes it, cheaper to trace.

Keras' ``Adam.update_step`` builds, for every variable, the step's scalars again (the
learning rate's cast, the step count, beta_1^t and beta_2^t, the bias correction alpha:
about 20 graph nodes) and writes every operation through ``keras.ops``, whose Python
dispatch costs several times the op it creates. Tracing the update of a model's 27
variables took a sixth of the CPU time of the tests that trace a training step.

:class:`Adam` computes those scalars once per ``apply`` (per graph and dtype) and writes
the update with TensorFlow ops, in Keras' order and with Keras' constants, so every
value is bit-for-bit Keras' (``tests/training/test_adam.py``). Its variables, their
names and its config are Keras' Adam's: checkpoints load either way. AMSGrad falls back
to Keras' own step.
"""

import keras
import tensorflow as tf


class Adam(keras.optimizers.Adam):
    """``keras.optimizers.Adam`` (same arguments, same results) with the bias-corrected
    step size alpha_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t) shared by the variables."""

    def apply(self, grads, trainable_variables=None):
        self._alphas = {}
        try:
            return super().apply(grads, trainable_variables)
        finally:
            self._alphas = None

    def _alpha(self, learning_rate, dtype):
        """alpha_t in ``dtype``, built once per graph (or eagerly, once per apply)."""
        graph = None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()
        key = (id(graph), dtype)
        if key not in self._alphas:
            lr = tf.cast(learning_rate, dtype)
            local_step = tf.cast(self.iterations + 1, dtype)
            beta_1_power = tf.pow(tf.cast(self.beta_1, dtype), local_step)
            beta_2_power = tf.pow(tf.cast(self.beta_2, dtype), local_step)
            self._alphas[key] = (graph, lr * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power))
        return self._alphas[key][1]

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad or getattr(self, "_alphas", None) is None:
            return super().update_step(gradient, variable, learning_rate)
        dtype = tf.as_dtype(variable.dtype)
        gradient = tf.cast(gradient, dtype)
        alpha = self._alpha(learning_rate, dtype)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        self.assign_add(m, tf.multiply(tf.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, tf.multiply(tf.subtract(tf.square(gradient), v), 1 - self.beta_2))
        self.assign_sub(variable, tf.divide(tf.multiply(m, alpha),
                                            tf.add(tf.sqrt(v), self.epsilon)))
