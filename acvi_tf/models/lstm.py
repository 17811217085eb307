"""A masked LSTM over a whole sequence with the input projection taken out of the loop.

Keras' ``LSTMCell`` computes ``x_t W + h_{t-1} U + b`` inside the recurrence, so a layer
of T steps runs T small [B, in] x [in, 4u] products forward and, backward, adds an
[in, 4u] gradient of W into an accumulator at every step. ``x W + b`` does not depend on
the recurrence: :func:`lstm_sequence` computes it for all steps in one [B*T, in] x
[in, 4u] product before the loop (and its gradient in one product after it), and the
loop keeps only ``h_{t-1} U``. The arithmetic is the cell's (Hochreiter & Schmidhuber
1997, with Keras' gate order i, f, c, o and its sigmoid / tanh), read from the Keras
layer's own weights, so checkpoints are unchanged; values equal Keras' to float
round-off (tested in graph, XLA and bfloat16, with padding, in both directions).

Masking is Keras': at a padded step the state is carried over unchanged and the output
is zero, so a forward pass ends on the last real step's state and a backward pass
(``reverse``) starts from the last real step with a zero state.
"""

import tensorflow as tf


def lstm_sequence(x, mask, cell, reverse=False):
    """Runs the Keras ``LSTMCell`` ``cell``'s weights over ``x`` [B, T, in].

    ``mask`` [B, T] (True at real steps) or None. Returns ``(outputs [B, T, u], h, c)``:
    the per-step outputs in ``x``'s time order (zero at padding) and the final state
    (after the last step processed: t = T-1 forward, t = 0 with ``reverse``). Computes
    in ``x``'s dtype (bfloat16 under a mixed policy, as Keras' autocast does)."""
    dtype = x.dtype
    kernel = tf.cast(cell.kernel, dtype)
    recurrent_kernel = tf.cast(cell.recurrent_kernel, dtype)
    shape = tf.shape(x)
    batch, steps = shape[0], shape[1]
    projected = tf.matmul(tf.reshape(x, [-1, kernel.shape[0]]), kernel)
    if cell.use_bias:
        projected = projected + tf.cast(cell.bias, dtype)
    # time-major [T, B, 4u] for the scan
    projected = tf.transpose(tf.reshape(projected, [batch, steps, 4 * cell.units]), [1, 0, 2])
    if mask is None:
        mask = tf.ones([batch, steps], tf.bool)
    step_mask = tf.transpose(mask)[:, :, None]  # [T, B, 1]
    zeros = tf.zeros([batch, cell.units], dtype)

    def step(carry, inputs):
        h, c, _ = carry
        z_x, m = inputs
        z = z_x + tf.matmul(h, recurrent_kernel)
        z_i, z_f, z_c, z_o = tf.split(z, 4, axis=-1)
        c_new = tf.sigmoid(z_f) * c + tf.sigmoid(z_i) * tf.tanh(z_c)
        h_new = tf.sigmoid(z_o) * tf.tanh(c_new)
        return (tf.where(m, h_new, h), tf.where(m, c_new, c), tf.where(m, h_new, zeros))

    hs, cs, outputs = tf.scan(step, (projected, step_mask), initializer=(zeros, zeros, zeros),
                              reverse=reverse)
    last = 0 if reverse else -1
    return tf.transpose(outputs, [1, 0, 2]), hs[last], cs[last]
