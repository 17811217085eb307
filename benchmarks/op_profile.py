"""Where a training step's time goes, by TensorFlow op type: a ``tf.profiler`` trace.

``python -m benchmarks.op_profile --size=translation --rows=soft,acvi`` builds each row's
step exactly as :mod:`benchmarks.acvi_ablation` does (the same model, sizes and random
batch; XLA off, where the trace sees every op), runs it ``--steps`` times under
``tf.profiler`` and sums the ops' self time by op type (TensorFlow's
``framework_op_stats``, the table TensorBoard's profile plugin shows). Op types are
grouped into classes (:data:`CLASSES`: matrix products, elementwise, data movement,
reductions, loop bookkeeping, random, other) so that the question "why is the step at X%
of the matmul peak?" has an answer in milliseconds: the time outside matrix products.

Against the float32 matmul peak measured in the same run (``machine.matmul_peak``) the step's
fraction of peak splits into two factors: the share of op time spent in matrix products,
and the rate those products run at (the analytic matmul FLOPs of
``benchmarks.flops.analytic_flops`` over the step's wall time times that share).

Each row also keeps its ops by name (the graph's op names with TensorFlow's numeric
suffixes taken off, so a batch shard's copy of an op and its original add up: see
:func:`op_name`), and for every row after the first the table lists the op names whose time
grew most against the first row: where an added part (ACVI's variance product, its sigma
network) spends its time. The rows' steps run in the process's batch shards
(``--cpu_shards``, auto as the task CLIs: one shard of rows per core).

Self times are summed over TensorFlow's threads (an op that runs on two threads counts
twice), so the per-step sum can exceed the step's wall time; the shares are what to read.
The load and the CPU other processes used are recorded (``benchmarks.load``): trace on an
idle machine only. Writes JSON and a markdown table beside it.
"""

import argparse
import collections
import glob
import json
import os
import re
import sys
import tempfile
import time

from benchmarks import record
from benchmarks.acvi_ablation import (ROWS, SIZES, add_cpu_shards_argument, build_steps,
                                      configure_shards, row_config)
from benchmarks.load import OtherLoad, load_average

# Op type -> class. oneDNN renames kernels (_MklMatMul, _MklNativeFusedMatMul, ...): the
# class goes by the name with the _Mkl / _MklNative / _Fused prefixes taken off.
CLASSES = {
    "matmul": ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum",
               "FusedMatMul", "Conv2D"),
    "elementwise": ("Add", "AddV2", "AddN", "Sub", "Mul", "RealDiv", "Div", "DivNoNan",
                    "Neg", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Log1p", "Tanh", "Sigmoid",
                    "Relu", "Softplus", "Maximum", "Minimum", "SelectV2", "Select", "Cast",
                    "TanhGrad", "SigmoidGrad", "ReluGrad", "SoftplusGrad", "SqrtGrad",
                    "RsqrtGrad", "Reciprocal", "ReciprocalGrad", "Abs", "Sign", "Pow",
                    "SquaredDifference", "OnesLike", "ZerosLike", "Fill", "Equal", "NotEqual",
                    "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr",
                    "LogicalNot", "ClipByValue", "BiasAdd", "BiasAddGrad", "Softmax",
                    "LogSoftmax", "SoftmaxCrossEntropyWithLogits",
                    "SparseSoftmaxCrossEntropyWithLogits", "ResourceApplyAdam", "IsFinite"),
    "reduction": ("Sum", "Mean", "Max", "Min", "Prod", "ArgMax", "ArgMin", "All", "Any",
                  "Cumsum", "L2Loss"),
    "data movement": ("Transpose", "ConcatV2", "Concat", "Split", "SplitV", "Slice",
                      "StridedSlice", "StridedSliceGrad", "Pack", "Unpack", "Tile", "Reshape",
                      "ExpandDims", "Squeeze", "GatherV2", "ResourceGather", "GatherNd",
                      "ScatterNd", "TensorScatterUpdate", "UnsortedSegmentSum", "Pad",
                      "PadV2", "Identity", "OneHot", "BroadcastTo", "Reverse", "ReverseV2",
                      "MirrorPad", "Range", "Shape", "ShapeN", "Size", "Rank",
                      "BroadcastGradientArgs", "ReadVariableOp", "AssignVariableOp",
                      "AssignAddVariableOp", "AssignSubVariableOp", "DynamicStitch"),
    "loop bookkeeping": ("While", "StatelessWhile", "TensorListPushBack", "TensorListPopBack",
                         "TensorListSetItem", "TensorListGetItem", "TensorListFromTensor",
                         "TensorListStack", "TensorListReserve", "TensorListElementShape",
                         "TensorListLength", "TensorArrayV3", "TensorArrayWriteV3",
                         "TensorArrayReadV3", "TensorArrayGatherV3", "TensorArrayScatterV3",
                         "TensorArraySizeV3", "TensorArrayGradV3", "StackPushV2", "StackPopV2",
                         "StackV2", "Enter", "Exit", "Merge", "Switch", "NextIteration",
                         "LoopCond", "PartitionedCall", "StatefulPartitionedCall", "If",
                         "StatelessIf", "NoOp"),
    "random": ("StatelessRandomUniformV2", "StatelessRandomNormalV2",
               "StatelessRandomUniformFullIntV2", "StatelessRandomGetKeyCounter",
               "StatelessRandomGetKeyCounterAlg", "StatelessMultinomial",
               "StatelessRandomUniformIntV2", "RandomUniform", "RandomStandardNormal"),
}
# Op names kept per row (the costliest): enough to cover all but a sliver of a step's time.
NAMES_KEPT = 400
_CLASS_OF = {op: name for name, ops in CLASSES.items() for op in ops}


def op_class(op_type):
    """The class of ``op_type`` (:data:`CLASSES`), "other" where none lists it."""
    base = op_type
    for prefix in ("_MklNative", "_Mkl", "_Fused"):
        if base.startswith(prefix):
            base = base[len(prefix):]
            break
    return _CLASS_OF.get(base, _CLASS_OF.get(op_type, "other"))


def op_name(name, op_type):
    """``"<name> (<type>)"`` with the numeric suffixes TensorFlow gives repeated names
    (``einsum_1``, ``MatMul_2``, a batch shard's copies) taken off, so copies add up."""
    return f"{re.sub(r'_[0-9]+(?=/|$)', '', name)} ({op_type})"


def op_stats(xplane_path):
    """{(:func:`op_name`, op type): total self time in microseconds} of one trace, idle
    time left out."""
    from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as plugin
    data, ok = plugin.xspace_to_tools_data([xplane_path], "framework_op_stats", {})
    if not ok:
        raise RuntimeError(f"{xplane_path}: TensorFlow's profiler could not read the trace: "
                           f"{data[:500]!r}")
    table = json.loads(data)[0]
    cols = [c["id"] for c in table["cols"]]
    totals = collections.Counter()
    for row in table["rows"]:
        r = dict(zip(cols, [c.get("v") if c else None for c in row["c"]]))
        if r["type"] != "IDLE":
            key = (op_name(r["operation"], r["type"]), r["type"])
            totals[key] += float(r["total_self_time"])
    return totals


def profile_row(fn, batch, steps, log_dir):
    """Self time by op type and by :func:`op_name`, in ms per step, of ``steps`` calls of
    ``fn(batch)``, and the wall seconds per step while tracing."""
    import tensorflow as tf
    tf.profiler.experimental.start(log_dir)
    start = time.perf_counter()
    for _ in range(steps):
        fn(batch)
    wall = (time.perf_counter() - start) / steps
    tf.profiler.experimental.stop()
    paths = sorted(glob.glob(os.path.join(log_dir, "**", "*.xplane.pb"), recursive=True))
    if not paths:
        raise RuntimeError(f"{log_dir}: the profiler wrote no trace")
    types, names = collections.Counter(), {}
    for (name, op_type), us in op_stats(paths[-1]).items():
        types[op_type] += us / 1000.0 / steps
        names[name] = us / 1000.0 / steps
    return dict(types), names, wall


def by_class(ops):
    out = collections.Counter()
    for op, ms in ops.items():
        out[op_class(op)] += ms
    return dict(out)


def peak_fields(flops, complete, wall_s, classes_ms, total_ms, peak_gflops):
    """The step against the matmul peak: analytic matmul FLOPs, the step's GFLOP/s and
    fraction of peak, the matrix products' share of op time, and the GFLOP/s the products
    run at (the FLOPs over the wall time times that share)."""
    share = classes_ms.get("matmul", 0.0) / total_ms if total_ms else 0.0
    step = flops / wall_s / 1e9
    inside = step / share if share else None
    return {"matmul_flops": int(flops), "flops_complete": complete,
            "gflops_step": round(step, 2), "fraction_of_peak": round(step / peak_gflops, 4),
            "matmul_share": round(share, 4),
            "gflops_in_matmul": None if inside is None else round(inside, 2),
            "matmul_fraction_of_peak": None if inside is None else round(inside / peak_gflops, 4)}


def markdown(result, top=15):
    rows = list(result["rows"])
    lines = record.preamble(result, f"Op-type profile of the training step ({result['size']}, "
                                    "XLA off)", while_="tracing")
    shard_count = result.get("batch_shards", {}).get("cpu_shards", 1)
    lines += [f"Command: `{result['command']}`. {result['steps']} traced steps per row"
              + (f", each in {shard_count} batch shards" if shard_count > 1 else "") + "; "
              "self time per step summed over TensorFlow's threads (ms), so a column can "
              "exceed the step's wall time.", ""]
    head = "| class | " + " | ".join(f"{r} ms" for r in rows) + " | " + " | ".join(
        f"{r} share" for r in rows) + " |"
    lines += ["## By class", "", head, "|---|" + "---:|" * (2 * len(rows))]
    classes = sorted({c for r in rows for c in result["rows"][r]["classes_ms"]},
                     key=lambda c: -result["rows"][rows[0]]["classes_ms"].get(c, 0.0))
    for c in classes:
        ms = [result["rows"][r]["classes_ms"].get(c, 0.0) for r in rows]
        shares = [m / result["rows"][r]["total_ms"] for m, r in zip(ms, rows)]
        lines.append(f"| {c} | " + " | ".join(f"{m:.0f}" for m in ms) + " | "
                     + " | ".join(f"{s:.1%}" for s in shares) + " |")
    lines.append("| **all ops** | " + " | ".join(
        f"{result['rows'][r]['total_ms']:.0f}" for r in rows) + " |" + " |" * len(rows))
    lines.append("| wall s/step while tracing | " + " | ".join(
        f"{result['rows'][r]['wall_s']:.3f}" for r in rows) + " |" + " |" * len(rows))
    peak = result.get("matmul_peak")
    if peak:
        lines += ["", "## Against the matmul peak", "",
                  f"float32 matmul {peak['n']}x{peak['n']}: {peak['gflops_best']:.1f} GFLOP/s "
                  "(best of the run's measurements). The step's fraction of peak is the "
                  "matmul share of op time times the fraction the products themselves run at.",
                  "", "| row | matmul GFLOP/step | step GFLOP/s | step % of peak | "
                  "matmul share of op time | GFLOP/s inside matmul ops | their % of peak |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            f = result["rows"][r]
            inside = f["gflops_in_matmul"]
            lines.append(
                f"| {r} | {f['matmul_flops'] / 1e9:.1f}{'' if f['flops_complete'] else ' (partial)'} "
                f"| {f['gflops_step']:.1f} | {f['fraction_of_peak']:.0%} | "
                f"{f['matmul_share']:.0%} | "
                + ("– | – |" if inside is None else
                   f"{inside:.1f} | {f['matmul_fraction_of_peak']:.0%} |"))
    ops = collections.Counter()
    for r in rows:
        for op, ms in result["rows"][r]["ops_ms"].items():
            ops[op] = max(ops[op], ms)
    lines += ["", f"## The {top} costliest op types", "",
              "| op type | class | " + " | ".join(f"{r} ms" for r in rows) + " |",
              "|---|---|" + "---:|" * len(rows)]
    for op, _ in ops.most_common(top):
        lines.append(f"| {op} | {op_class(op)} | " + " | ".join(
            f"{result['rows'][r]['ops_ms'].get(op, 0.0):.0f}" for r in rows) + " |")
    first = rows[0]
    for r in rows[1:]:
        grown = grown_names(result["rows"][first], result["rows"][r], top)
        if not grown:
            continue
        lines += ["", f"## The {top} op names that grew most from {first} to {r}", "",
                  f"| op name (type) | {first} ms | {r} ms | grew by ms |", "|---|---:|---:|---:|"]
        for name, was, ms in grown:
            lines.append(f"| `{name}` | {was:.1f} | {ms:.1f} | {ms - was:+.1f} |")
    return "\n".join(lines) + "\n"


def grown_names(before, after, top):
    """``[(op name, ms in before, ms in after)]``: the ``top`` names of ``after``'s
    ``names_ms`` whose time grew most against ``before``'s (a name it lacks counts 0)."""
    was = before.get("names_ms", {})
    rows = [(name, was.get(name, 0.0), ms) for name, ms in after.get("names_ms", {}).items()]
    return sorted(rows, key=lambda row: row[1] - row[2])[:top]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=sorted(SIZES), default="translation")
    p.add_argument("--rows", default="soft,acvi",
                   help=f"comma-separated rows of benchmarks.acvi_ablation ({', '.join(ROWS)})")
    p.add_argument("--steps", type=int, default=3, help="traced steps per row")
    add_cpu_shards_argument(p)
    p.add_argument("--out", default="bench_results/op_profile.json")
    args = p.parse_args(argv)
    rows = [r for r in args.rows.split(",") if r]
    bad = [r for r in rows if r not in ROWS]
    if bad or not rows:
        p.error(f"--rows: {', '.join(bad) or 'none given'}: not rows of "
                f"benchmarks.acvi_ablation ({', '.join(ROWS)})")
    if args.steps < 1:
        p.error(f"--steps: {args.steps} must be at least 1")
    shards = configure_shards(p, args)
    from benchmarks.machine import matmul_peak
    from benchmarks.flops import analytic_flops
    load_start = load_average()
    steps, batch = build_steps(args.size, rows)
    for fn in steps.values():  # one untimed step each after the tracing call
        fn(batch)
    others = OtherLoad().start()
    n = 128 if args.size == "toy" else 2048
    peaks = [matmul_peak(n, 5)]
    results = {}
    with tempfile.TemporaryDirectory(prefix="op_profile_") as tmp:
        for row, fn in steps.items():
            ops, names, wall = profile_row(fn, batch, args.steps, os.path.join(tmp, row))
            results[row] = {"wall_s": round(wall, 4), "total_ms": round(sum(ops.values()), 2),
                            "classes_ms": {c: round(v, 2) for c, v in by_class(ops).items()},
                            "ops_ms": {op: round(v, 3) for op, v in
                                       sorted(ops.items(), key=lambda kv: -kv[1])},
                            # the costliest names only: a step has thousands of tiny ops
                            "names_ms": {n: round(v, 3) for n, v in sorted(
                                names.items(), key=lambda kv: -kv[1])[:NAMES_KEPT]}}
            print(f"{row}: {wall:.3f} s/step, ops {sum(ops.values()):.0f} ms/step",
                  file=sys.stderr, flush=True)
    peaks.append(matmul_peak(n, 5))
    others_cores = others.stop()
    peak = dict(peaks[-1], gflops_best=max(p["gflops_best"] for p in peaks),
                measurements=peaks)
    _, batch_size, src_len, tgt_len = SIZES[args.size]
    for row, r in results.items():
        flops, complete = analytic_flops(row_config(args.size, row), batch_size, src_len,
                                         tgt_len)
        r.update(peak_fields(flops, complete, r["wall_s"], r["classes_ms"], r["total_ms"],
                             peak["gflops_best"]))
    result = {"size": args.size, "steps": args.steps, "xla": False, "matmul_peak": peak,
              "batch_shards": shards.describe(),
              **record.header("benchmarks.op_profile", argv, load_start, others_cores),
              "rows": results}
    record.write(args.out, result, markdown(result))

if __name__ == "__main__":
    main()
