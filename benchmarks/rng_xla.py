"""Stateless random ops under XLA on this CPU: TensorFlow's default algorithm
("auto_select") against the package's helpers (``acvi_tf.utils.ops``), which draw with
the algorithm it names (``RNG_ALG``).

Both draw the same numbers (``tests/utils/test_ops.py``); this times them, compiled with
and without XLA, alternately in one process, at the size of ACVI's Monte-Carlo draws at the
paper MT size ([128, 50, 512]). ``python -m benchmarks.rng_xla --out
bench_results/rng_xla.json`` writes JSON and a markdown table beside it, with the load
and the CPU other processes used (``benchmarks.load``).
"""

import argparse
import statistics
import time

from benchmarks import record
from benchmarks.load import OtherLoad, load_average

OPS = ("normal", "uniform", "dropout")


def build(shape, xla):
    """{(op, alg): compiled function} of the three ops with each algorithm."""
    import tensorflow as tf

    from acvi_tf.utils import ops as package
    seed = tf.constant([1, 2])
    x = tf.ones(shape)
    default = {"normal": lambda: tf.random.stateless_normal(shape, seed=seed),
               "uniform": lambda: tf.random.stateless_uniform(shape, seed=seed),
               "dropout": lambda: tf.nn.experimental.stateless_dropout(x, 0.2, seed)}
    # RNG_ALG's column is what the package draws with: its own helpers.
    ours = {"normal": lambda: package.stateless_normal(shape, seed),
            "uniform": lambda: package.stateless_uniform(shape, seed),
            "dropout": lambda: package.dropout(x, 0.2, seed, True)}
    out = {}
    for op in OPS:
        for alg, draws in (("auto_select", default), (package.RNG_ALG, ours)):
            fn = tf.function(lambda draw=draws[op]: tf.reduce_sum(draw()), jit_compile=xla)
            fn()  # trace and compile
            out[(op, alg)] = fn
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="128,50,512", help="comma-separated shape drawn")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default="bench_results/rng_xla.json")
    args = p.parse_args(argv)
    try:
        shape = [int(s) for s in args.shape.split(",")]
    except ValueError:
        p.error(f"--shape: {args.shape!r} is not comma-separated integers")
    if args.rounds < 1:
        p.error(f"--rounds: {args.rounds} must be at least 1")
    load_start = load_average()
    fns = {xla: build(shape, xla) for xla in (False, True)}
    others = OtherLoad().start()
    times = {(xla, op, alg): [] for xla, group in fns.items() for op, alg in group}
    for _ in range(args.rounds):
        for xla, group in fns.items():
            for (op, alg), fn in group.items():
                start = time.perf_counter()
                fn().numpy()
                times[(xla, op, alg)].append(time.perf_counter() - start)
    others_cores = others.stop()
    rows = [{"xla": xla, "op": op, "alg": alg, "ms_median": 1000 * statistics.median(ts)}
            for (xla, op, alg), ts in times.items()]
    result = {"shape": shape, "rounds": args.rounds,
              **record.header("benchmarks.rng_xla", argv, load_start, others_cores),
              "rows": rows}
    lines = record.preamble(result, f"Stateless random ops, {shape}, with and without XLA")
    lines += [f"Command: `{result['command']}`; median of {args.rounds} calls.", "",
              "| XLA | op | algorithm | ms |", "|---|---|---|---:|"]
    lines += [f"| {'on' if r['xla'] else 'off'} | {r['op']} | {r['alg']} | "
              f"{r['ms_median']:.1f} |" for r in rows]
    record.write(args.out, result, "\n".join(lines) + "\n")

if __name__ == "__main__":
    main()
