"""TensorFlow's fused CPU LSTM cell against Keras' for the decoder step (issue 35).

The decoder runs its LSTM one step at a time (each step's input holds the previous
step's context), so the whole-sequence kernel cannot serve it: the candidate is
``tf.raw_ops.LSTMBlockCell``, one op per step, whose gradient ``LSTMBlockCellGrad``
TensorFlow 2 no longer registers (:func:`block_cell` registers it by
``tf.custom_gradient``). It runs Keras' ``LSTMCell``'s own weights, its gates reordered
(the op's layout is i, c, f, o; Keras' i, f, c, o), ``forget_bias`` and ``cell_clip``
off, and is checked equal in values and gradients before anything is timed (also
``tests/benchmarks/test_fused_lstm.py``). The encoder's fused kernel is
``--lstm_impl=block`` (``acvi_tf/utils/lstm_impl.py``), priced in the whole training step
by ``benchmarks.acvi_ablation`` (results/acvi_ablation_block_lstm.md).

Forward and backward of sum(h^2) over T steps (a ``tf.scan``, as teacher forcing runs
the decoder), each side one ``tf.function`` (XLA off: the kernel has no XLA lowering),
timed alternately in one process on one thread, as a table run trains.
``python -m benchmarks.fused_lstm --out bench_results/fused_lstm.json`` writes JSON and
markdown with the load beside it.
"""

import argparse
import statistics
import time

from benchmarks import record
from benchmarks.load import OtherLoad, load_average

# (name, batch, steps, input size, units): the decoder at table4-cpu's size (input =
# embedding + context) and at the paper MT size's (batch 128, 512 units, 50 steps).
CASES = [("table4-cpu", 64, 16, 512, 256), ("paper MT", 128, 50, 1024, 512)]


def block_cell(x, h, c, w, b):
    """One LSTM step with ``LSTMBlockCell``: (h', c'), differentiable through
    ``LSTMBlockCellGrad`` (what TF 1's contrib registered). ``w`` = [W; U] [in + u, 4u]
    and ``b`` in the op's gate layout i, c, f, o."""
    import tensorflow as tf

    @tf.custom_gradient
    def run(x, h, c, w, b):
        units = tf.shape(h)[-1]
        no_peephole = tf.zeros([units], x.dtype)
        i, cs, f, o, ci, co, h_new = tf.raw_ops.LSTMBlockCell(
            x=x, cs_prev=c, h_prev=h, w=w, wci=no_peephole, wcf=no_peephole, wco=no_peephole,
            b=b, forget_bias=0.0, cell_clip=0.0, use_peephole=False)

        def grad(dh, dc):
            dc_prev, dgates, _, _, _ = tf.raw_ops.LSTMBlockCellGrad(
                x=x, cs_prev=c, h_prev=h, w=w, wci=no_peephole, wcf=no_peephole,
                wco=no_peephole, b=b, i=i, cs=cs, f=f, o=o, ci=ci, co=co, cs_grad=dc,
                h_grad=dh, use_peephole=False)
            dxh = tf.matmul(dgates, w, transpose_b=True)
            dx, dh_prev = dxh[:, :x.shape[-1]], dxh[:, x.shape[-1]:]
            return (dx, dh_prev, dc_prev, tf.matmul(tf.concat([x, h], -1), dgates,
                                                    transpose_a=True),
                    tf.reduce_sum(dgates, 0))
        return (h_new, cs), grad
    return run(x, h, c, w, b)


def decoder_pair(batch, steps, inputs, units, seed=0):
    """(ours, fused, x, variables): a Keras ``LSTMCell`` run over ``steps`` inputs one step
    at a time, as the decoder runs it, and the same weights through :func:`block_cell`."""
    import keras
    import tensorflow as tf
    keras.utils.set_random_seed(seed)
    cell = keras.layers.LSTMCell(units)
    cell.build((batch, inputs))
    x = tf.random.normal([batch, steps, inputs])

    def loop(x, step):
        xt = tf.transpose(x, [1, 0, 2])
        zeros = tf.zeros([tf.shape(x)[0], units], x.dtype)
        hs, _ = tf.scan(lambda carry, x_t: step(x_t, *carry), xt, initializer=(zeros, zeros))
        return tf.transpose(hs, [1, 0, 2])

    def keras_step(x_t, h, c):
        out, (h, c) = cell(x_t, [h, c])
        return h, c

    def icfo(t):  # LSTMBlockCell's gate layout (BlockLSTMV2 reads Keras' i, f, c, o)
        i, f, c, o = tf.split(t, 4, axis=-1)
        return tf.concat([i, c, f, o], -1)

    def fused_step(x_t, h, c):
        w = icfo(tf.concat([cell.kernel, cell.recurrent_kernel], 0))
        return block_cell(x_t, h, c, w, icfo(tf.convert_to_tensor(cell.bias)))

    def ours(x):
        return loop(x, keras_step)

    def fused(x):
        return loop(x, fused_step)
    return ours, fused, x, cell.trainable_variables


def forward_backward(fn, variables):
    """A compiled forward + backward of sum(fn(x)^2): (loss, [dx] + d variables)."""
    import tensorflow as tf

    @tf.function
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.square(fn(x)))
        return loss, tape.gradient(loss, [x] + list(variables))
    return run


def max_difference(x, ours, fused, variables):
    """The largest absolute difference of the two sides' outputs and gradients, relative to
    the largest magnitude of ours (float32 round-off, not a tolerance chosen to pass)."""
    import tensorflow as tf
    a = [ours(x)] + list(forward_backward(ours, variables)(x)[1])
    b = [fused(x)] + list(forward_backward(fused, variables)(x)[1])
    return max(float(tf.reduce_max(tf.abs(p - q)) / (tf.reduce_max(tf.abs(p)) + 1e-30))
               for p, q in zip(a, b))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7, help="alternating rounds, the median kept")
    p.add_argument("--calls", type=int, default=10, help="calls timed per round")
    p.add_argument("--tiny", action="store_true", help="tiny sizes (tests)")
    p.add_argument("--out", default="bench_results/fused_lstm.json")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.calls < 1:
        p.error(f"--rounds ({args.rounds}) and --calls ({args.calls}) must be at least 1")
    import tensorflow as tf
    try:  # one thread, as a table run trains (too late once TensorFlow has started)
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        pass
    cases = [("tiny", 3, 5, 4, 6)] if args.tiny else CASES
    load_start = load_average()
    built = []
    for name, batch, steps, inputs, units in cases:
        ours, fused, x, variables = decoder_pair(batch, steps, inputs, units)
        diff = max_difference(x, ours, fused, variables)
        fns = {side: forward_backward(fn, variables) for side, fn in
               (("ours", ours), ("fused", fused))}
        for fn in fns.values():
            fn(x)  # trace
        built.append(({"size": name, "batch": batch, "steps": steps, "inputs": inputs,
                       "units": units, "max_relative_difference": diff}, fns, x))
    others = OtherLoad().start()
    times = [{"ours": [], "fused": []} for _ in built]
    for _ in range(args.rounds):
        for (row, fns, x), row_times in zip(built, times):
            for side, fn in fns.items():
                start = time.perf_counter()
                for _ in range(args.calls):
                    fn(x)[0].numpy()
                row_times[side].append(1000 * (time.perf_counter() - start) / args.calls)
    others_cores = others.stop()
    rows = []
    for (row, _, _), row_times in zip(built, times):
        ours_ms, fused_ms = (statistics.median(row_times[s]) for s in ("ours", "fused"))
        rows.append({**row, "ours_ms": ours_ms, "fused_ms": fused_ms,
                     "fused_over_ours": fused_ms / ours_ms})
    result = {"rounds": args.rounds, "calls": args.calls,
              "threads": tf.config.threading.get_intra_op_parallelism_threads(),
              "onednn": _onednn(),
              **record.header("benchmarks.fused_lstm", argv, load_start, others_cores),
              "rows": rows}
    lines = record.preamble(result, "The decoder's LSTM step: TensorFlow's fused cell against "
                            "Keras', forward + backward")
    lines += [f"Command: `{result['command']}`; {result['threads']} thread(s) (0: TF's default); oneDNN {result['onednn']}; "
              f"median of {args.rounds} rounds of {args.calls} calls, the two sides "
              "alternating, T steps of a `tf.scan` forward and backward. Ours: Keras' "
              "`LSTMCell`, what the decoder runs; fused: `LSTMBlockCell` (+ "
              "`LSTMBlockCellGrad`) on the same weights.", "",
              "| size | B × T × in → units | ours ms | fused ms | fused / ours | "
              "max relative difference |", "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {r['size']} | {r['batch']} × {r['steps']} × {r['inputs']} → "
              f"{r['units']} | {r['ours_ms']:.1f} | {r['fused_ms']:.1f} | "
              f"{r['fused_over_ours']:.2f} | {r['max_relative_difference']:.1e} |" for r in rows]
    record.write(args.out, result, "\n".join(lines) + "\n")
    return result


def _onednn():
    from acvi_tf.utils.provenance import tf_settings
    return tf_settings().get("onednn")


if __name__ == "__main__":
    main()
