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
    outputs, h, c = _recurrence(projected, recurrent_kernel, step_mask, reverse)
    return tf.transpose(outputs, [1, 0, 2]), h, c


def bidirectional_sequence(layer, x, mask):
    """A Keras ``Bidirectional(LSTM(...))`` layer's weights run by :func:`lstm_sequence`
    both ways (the layer is built on first use): ``(outputs [B, T, 2u], (h, c) forward,
    (h, c) backward)``, the outputs forward and backward concatenated as Keras does."""
    if not layer.built:
        layer.build(x.shape)
    forward, fh, fc = lstm_sequence(x, mask, layer.forward_layer.cell)
    backward, bh, bc = lstm_sequence(x, mask, layer.backward_layer.cell, reverse=True)
    return tf.concat([forward, backward], -1), (fh, fc), (bh, bc)


def _recurrence(projected, recurrent_kernel, step_mask, reverse):
    """The recurrence over time-major ``projected`` = x_t W + b [T, B, 4u]: ``(outputs
    [T, B, u], h, c)``, with a hand-written backward pass (back-propagation through time)
    that returns U's gradient as one product over all steps, sum_t h_{t-1}^T dz_t,
    instead of the while loop's per-step [u, 4u] product and accumulation."""
    units = recurrent_kernel.shape[0]

    @tf.custom_gradient
    def run(projected, recurrent_kernel):
        zeros = tf.zeros([tf.shape(projected)[1], units], projected.dtype)

        def step(carry, inputs):
            h, c = carry[:2]
            z_x, m = inputs
            z = z_x + tf.matmul(h, recurrent_kernel)
            z_i, z_f, z_c, z_o = tf.split(z, 4, axis=-1)
            i, f, g, o = tf.sigmoid(z_i), tf.sigmoid(z_f), tf.tanh(z_c), tf.sigmoid(z_o)
            c_new = f * c + i * g
            h_new = o * tf.tanh(c_new)
            return (tf.where(m, h_new, h), tf.where(m, c_new, c), tf.where(m, h_new, zeros),
                    tf.concat([i, f, g, o], -1), c_new)

        hs, cs, outputs, gates, c_new = tf.scan(
            step, (projected, step_mask), reverse=reverse,
            initializer=(zeros, zeros, zeros, tf.zeros_like(projected[0]), zeros))
        last = 0 if reverse else -1

        def previous(states):
            """The state each step started from: the carried states shifted one step back
            in processing order, zeros before the first."""
            if reverse:
                return tf.concat([states[1:], zeros[None]], 0)
            return tf.concat([zeros[None], states[:-1]], 0)
        h_prev, c_prev = previous(hs), previous(cs)

        def grad(d_outputs, d_h, d_c):
            d_h = zeros if d_h is None else d_h
            d_c = zeros if d_c is None else d_c
            d_outputs = tf.zeros_like(outputs) if d_outputs is None else d_outputs

            def back(carry, inputs):
                dh, dc = carry[:2]
                d_out, gate, cn, cp, m = inputs
                i, f, g, o = tf.split(gate, 4, axis=-1)
                dh_new = tf.where(m, dh + d_out, tf.zeros_like(dh))
                tanh_c = tf.tanh(cn)
                dc_new = tf.where(m, dc, tf.zeros_like(dc)) + dh_new * o * (1.0 - tf.square(tanh_c))
                dz = tf.concat([dc_new * g * i * (1.0 - i), dc_new * cp * f * (1.0 - f),
                                dc_new * i * (1.0 - tf.square(g)),
                                dh_new * tanh_c * o * (1.0 - o)], -1)
                dh_prev = (tf.matmul(dz, recurrent_kernel, transpose_b=True)
                           + tf.where(m, tf.zeros_like(dh), dh))
                dc_prev = dc_new * f + tf.where(m, tf.zeros_like(dc), dc)
                return dh_prev, dc_prev, dz

            _, _, d_z = tf.scan(back, (d_outputs, gates, c_new, c_prev, step_mask),
                                initializer=(d_h, d_c, tf.zeros_like(projected[0])),
                                reverse=not reverse)
            d_recurrent = tf.matmul(tf.reshape(h_prev, [-1, units]),
                                    tf.reshape(d_z, [-1, 4 * units]), transpose_a=True)
            return d_z, d_recurrent

        return (outputs, hs[last], cs[last]), grad

    return run(projected, recurrent_kernel)


# Keras orders an LSTM's gate columns i, f, c, o; TensorFlow's fused BlockLSTM i, c, f, o.
# (BlockLSTMV2 takes Keras' order, but its registered gradient is wrong in TF 2.21:
# ~100% off against Keras' own, while BlockLSTM's agrees to 1e-6; tests/utils/test_lstm.py.)
def _block_gate_order(tensor):
    i, f, c, o = tf.split(tensor, 4, axis=-1)
    return tf.concat([i, c, f, o], -1)


BLOCK_DTYPES = (tf.float32, tf.float16)  # the dtypes TensorFlow's BlockLSTM kernel takes


def block_lstm_sequence(x, mask, cell, reverse=False):
    """:func:`lstm_sequence` by TensorFlow's fused CPU kernel ``BlockLSTM`` (the whole
    recurrence, forward and backward, in one C++ op), with the same contract and values.

    ``mask`` must be right-padded (True then False in every row, as source masks are): the
    kernel runs every row to the batch's longest length, so the outputs are zeroed at
    padding, the final state is read at each row's last real step (zero for an empty
    row), and ``reverse`` runs the kernel forward over each row's real steps reversed
    (``tf.reverse_sequence``), as Keras' backward layer reads them."""
    dtype = x.dtype
    shape = tf.shape(x)
    batch, steps = shape[0], shape[1]
    lengths = (tf.fill([batch], steps) if mask is None
               else tf.reduce_sum(tf.cast(mask, tf.int32), axis=1))
    if reverse:
        x = tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
    weights = tf.cast(tf.concat([cell.kernel, cell.recurrent_kernel], 0), dtype)
    bias = (tf.cast(cell.bias, dtype) if cell.use_bias
            else tf.zeros([4 * cell.units], dtype))
    zeros = tf.zeros([batch, cell.units], dtype)
    no_peephole = tf.zeros([cell.units], dtype)
    _, cs, _, _, _, _, h = tf.raw_ops.BlockLSTM(
        seq_len_max=tf.cast(tf.reduce_max(lengths), tf.int64),
        x=tf.transpose(x, [1, 0, 2]), cs_prev=zeros, h_prev=zeros,
        w=_block_gate_order(weights), wci=no_peephole, wcf=no_peephole, wco=no_peephole,
        b=_block_gate_order(bias), forget_bias=0.0, cell_clip=-1.0, use_peephole=False)
    outputs = tf.transpose(h, [1, 0, 2])
    if mask is not None:
        outputs = outputs * tf.cast(mask, dtype)[:, :, None]
    last = tf.maximum(lengths - 1, 0)
    nonempty = (lengths > 0)[:, None]

    def final(states):
        state = tf.gather(tf.transpose(states, [1, 0, 2]), last, batch_dims=1)
        return tf.where(nonempty, state, tf.zeros_like(state))
    if reverse:
        outputs = tf.reverse_sequence(outputs, lengths, seq_axis=1, batch_axis=0)
    return outputs, final(h), final(cs)


def block_bidirectional(layer, x, mask):
    """:func:`bidirectional_sequence` by :func:`block_lstm_sequence`."""
    if not layer.built:
        layer.build(x.shape)
    forward, fh, fc = block_lstm_sequence(x, mask, layer.forward_layer.cell)
    backward, bh, bc = block_lstm_sequence(x, mask, layer.backward_layer.cell, reverse=True)
    return tf.concat([forward, backward], -1), (fh, fc), (bh, bc)
