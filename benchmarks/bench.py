"""``make bench``: training-step and beam-search speed of every registered attention variant.

Usage::

    python -m benchmarks.bench --profile=full    # the paper's sizes, XLA off and on (~20+ min)
    python -m benchmarks.bench --profile=quick   # same widths, batch/lengths cut, XLA off
    python -m benchmarks.bench --profile=smoke   # toy sizes (tests/test_bench.py runs this)
    python -m benchmarks.bench --variants=acvi --sizes=translation --xla=on

Every registered attention variant (``acvi_tf.attention.available()``), and
the entries of ``MODEL_VARIANTS`` (the Transformer; VED and VRNMT on soft attention), is
measured unless ``--variants`` says otherwise; ``soft`` always is, as the
baseline of the ratios. Each (size, XLA) group runs in a worker process of its
own (``--isolate``; not for the toy smoke profile), so that memory is returned
between groups and a crash or an out-of-memory error becomes an ``error``
string in the JSON.

What is measured, for each size, attention variant and XLA setting:

* **Training step**: forward + backward + clipped Adam update of one random
  token batch, the Trainer's own step, :func:`acvi_tf.training.step.train_step` (single replica:
  ``loss_terms`` -> per-token loss -> gradients -> global-norm clip ->
  ``apply_gradients`` under a finiteness ``tf.cond``), one ``tf.function``
  (``jit_compile=True`` for XLA). The first call (tracing + compilation + one
  step) and ``warmup`` further steps are excluded; then the variants of one
  group are timed round-robin, one step each per round, so that the ratios
  compare steps taken under the same background load. Reported: median and
  min ms/step, target tokens/s, tracing and compile seconds, ms/step over
  soft's (``ratio_to_soft`` of the medians, ``ratio_to_soft_min`` of the
  minima), achieved GFLOP/s and its fraction of the matmul peak.
* **Beam search**: ``Seq2Seq.decode`` with the size's beam width and maximum
  length, sentences/s, XLA off and on (an XLA failure is recorded as an error
  string, not raised). ``min_length = max_length`` forbids the end token, so
  every call decodes the full length (with random weights most hypotheses
  would otherwise end at the first step): throughput at the maximum length.
* **Matmul peak**: an n x n float32 ``tf.linalg.matmul`` under ``tf.function``,
  measured before and after every group; the best measurement is the
  denominator of ``fraction_of_peak``.

FLOPs per training step (``flops_method`` in the JSON says which was used):

* ``xla_hlo_dot``: the dot (matmul/einsum) FLOPs of the XLA-optimised HLO of the
  very step function that was timed (dumped with ``--xla_dump_to`` during its
  compilation; ``--flops=hlo`` compiles it for that purpose when XLA is off),
  each while-loop body multiplied by its trip count. XLA annotates forward
  loops with ``known_trip_count``; a TF gradient loop (``..._grad_...``) takes
  the count of the forward loop it differentiates (matched by the
  ``while_body_<id>`` in both names). If a dot sits in a loop whose count cannot
  be resolved, the HLO count is discarded. The XLA-off records of a variant use
  the count of its XLA-compiled step (the same model and batch).
* ``analytic_matmul``: the fallback, :func:`analytic_flops` (LSTM gates,
  attention, output projection and known variant extras; x3 for forward +
  backward). Both counts are in the JSON whenever both are available.

Both count matmul FLOPs only (2 m n k per product); elementwise work
(nonlinearities, random numbers, the Monte-Carlo KL's mixture density, Adam) is
not counted, so ``fraction_of_peak`` says how close the step comes to running
its matmuls at matmul speed.

Timings on a shared machine are noisy: the JSON records the load average
before and after every group and every matmul measurement.

This module is the command line; the work is done by :mod:`benchmarks.profiles` (the
sizes and variants), :mod:`benchmarks.workload` (batches, models, the training step),
:mod:`benchmarks.timing` (one group's training steps and beam search),
:mod:`benchmarks.flops`, :mod:`benchmarks.machine` (machine info, matmul peak),
:mod:`benchmarks.isolation` (the worker processes) and :mod:`benchmarks.output` (JSON and
tables).
"""

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
from time import perf_counter as _now

from acvi_tf.utils.precision import PRECISIONS
from acvi_tf.utils.provenance import code_version
from benchmarks.flops import add_flops, xla_dump_flags
from benchmarks.isolation import spawn, worker
from benchmarks.load import load_average
from benchmarks.machine import machine_info, matmul_peak
from benchmarks.output import format_tables, log_stderr, onoff, write_json
from benchmarks.profiles import BASELINE, PROFILES, planned_variants, select
from benchmarks.timing import add_ratios, run_group


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.bench",
        description=("Training-step time, beam-search throughput and achieved GFLOP/s of every "
                     "registered attention variant, at the paper's translation and "
                     "summarization sizes. Each (size, XLA) group runs in a worker process of "
                     "its own. See the module docstring for what is measured."),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--profile", choices=sorted(PROFILES), default="full",
                   help="full: the paper's sizes (translation: 2x256 BiLSTM / 2x256 LSTM, "
                        "vocab 17191/7709, batch 128, lengths 50; summarization: 1x256 BiLSTM, "
                        "vocab 50K, 400/100 steps, batch 16), XLA off and on; quick: the same "
                        "widths and vocabularies with batch and lengths cut, XLA off; smoke: "
                        "toy sizes, translation only, XLA off")
    p.add_argument("--variants", default=None,
                   help="comma-separated attention variants (default: every registered one; "
                        f"'{BASELINE}' is always added as the ratios' baseline)")
    p.add_argument("--sizes", default=None,
                   help="comma-separated sizes: translation, summarization "
                        "(default: the profile's)")
    p.add_argument("--xla", choices=("on", "off", "both"), default=None,
                   help="XLA for the training step (default: the profile's)")
    p.add_argument("--beam_xla", choices=("on", "off", "both", "none"), default=None,
                   help="XLA for beam search; none skips beam search (default: the profile's)")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed steps after the first (tracing/compiling) call "
                        "(default: the profile's)")
    p.add_argument("--steps", type=int, default=None,
                   help="timed steps per variant (default: the profile's)")
    p.add_argument("--beam_reps", type=int, default=None,
                   help="timed beam-search calls per variant (default: the profile's)")
    p.add_argument("--flops", choices=("auto", "hlo", "analytic"), default="auto",
                   help="FLOPs per step: auto = the XLA HLO dot count when the step was "
                        "XLA-compiled, else the analytic count; hlo = always the HLO count "
                        "(compiles the step with XLA if needed); analytic = by hand only")
    p.add_argument("--precision", choices=PRECISIONS, default="float32",
                   help="the models' Keras dtype policy (ModelConfig.precision): float32, or "
                        "mixed_bfloat16 / mixed_float16 (low-precision layers, float32 "
                        "variables, softmax and losses; mixed_float16 with loss scaling)")
    p.add_argument("--max_pad_fraction", type=float, default=0.0,
                   help="pad each sequence by a random amount up to this fraction of its "
                        "length (0: no padding)")
    p.add_argument("--seed", type=int, default=0, help="parameters, batches and noise")
    p.add_argument("--cpu_shards", type=int, default=0,
                   help="batch shards of each (size, XLA) group, as the task CLIs' "
                        "--cpu_shards: 0 (auto) gives one shard of rows per core with one "
                        "thread per op in a worker process of its own (--isolate=yes), one "
                        "shard otherwise; 1: TensorFlow's default threads")
    p.add_argument("--isolate", choices=("yes", "no"), default=None,
                   help="yes: run each (size, XLA) group in a worker process of its own, so "
                        "memory is returned between groups and a crash or out-of-memory "
                        "error is recorded, not fatal; no: all in this process (starts "
                        "faster). Default: the profile's (full, quick: yes; smoke: no)")
    p.add_argument("--out", default="bench_results/bench.json", help="JSON output path")
    p.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args._worker:
        return worker(args._worker)
    profile = PROFILES[args.profile]
    args.isolate = profile.isolate if args.isolate is None else args.isolate == "yes"
    dump_dir = None
    xla = args.xla or profile.xla
    if (not args.isolate and args.flops != "analytic" and xla != "off"
            and "tensorflow" not in sys.modules):
        # XLA reads XLA_FLAGS once, so only before TensorFlow is imported; otherwise the
        # HLO comes from experimental_get_compiler_ir (--flops=hlo) or the analytic count.
        dump_dir = tempfile.mkdtemp(prefix="bench_hlo_")
        os.environ["XLA_FLAGS"] = xla_dump_flags(os.environ.get("XLA_FLAGS"), dump_dir)
    try:
        return _run(args, argv, profile, dump_dir)
    finally:
        if dump_dir:
            shutil.rmtree(dump_dir, ignore_errors=True)


def _settings(value):
    return {"on": [True], "off": [False], "both": [False, True], "none": []}[value]


def _run(args, argv, profile, dump_dir):
    import tensorflow as tf
    from acvi_tf import attention  # noqa: F401  (registers every attention variant)
    tf.get_logger().setLevel("ERROR")  # not the retracing notes of the many step functions

    start = _now()
    variants = planned_variants(args.variants)
    sizes = select(args.sizes, list(profile.sizes), "size") if args.sizes \
        else list(profile.default_sizes)
    xla_settings = _settings(args.xla or profile.xla)
    beam_settings = _settings(args.beam_xla or profile.beam_xla)
    spec = {"profile": args.profile, "variants": variants, "flops": args.flops,
            "seed": args.seed, "max_pad_fraction": args.max_pad_fraction,
            "precision": args.precision, "cpu_shards": args.cpu_shards,
            "warmup": profile.warmup if args.warmup is None else args.warmup,
            "steps": profile.steps if args.steps is None else args.steps,
            "beam_reps": args.beam_reps or profile.beam_reps}

    machine, code = machine_info(), code_version()
    log_stderr(f"bench --profile={args.profile} --precision={args.precision}: "
               f"variants {variants}, sizes {sizes}, "
               f"xla {[onoff(x) for x in xla_settings]}, beam xla "
               f"{[onoff(x) for x in beam_settings]}, {machine['cpu_count']} CPUs, "
               f"load {machine['load_average_at_start']}")
    # The peak is measured before and after every group (a busy machine lowers it) and
    # the best measurement is used.
    peaks = [dict(matmul_peak(profile.matmul_n, profile.matmul_reps), when="start",
                  load=load_average())]
    log_stderr(f"matmul: {peaks[-1]['gflops_best']:.1f} GFLOP/s")

    train, beam, groups, flops = [], [], [], {}
    for size_name in sizes:
        for xla in [False, True]:
            if xla not in xla_settings and xla not in beam_settings:
                continue
            group = dict(spec, size=size_name, xla=xla, train=xla in xla_settings,
                         beam=xla in beam_settings)
            load_before, t0 = load_average(), _now()
            result = (spawn(group, log_stderr) if args.isolate
                      else run_group(group, dump_dir, log_stderr))
            groups.append({"size": size_name, "xla": xla, "seconds": _now() - t0,
                           "load_before": load_before, "load_after": load_average(),
                           "worker_exit_code": result.get("worker_exit_code")})
            train += result["train"]
            beam += result["beam"]
            for variant, fields in result["flops"].items():
                # Prefer the HLO count (from the XLA group) over the analytic one.
                old = flops.get((size_name, variant))
                if old is None or (old["flops_method"] != "xla_hlo_dot" and
                                   fields["flops_method"] == "xla_hlo_dot"):
                    flops[(size_name, variant)] = fields
            peaks.append(dict(matmul_peak(profile.matmul_n, profile.matmul_reps),
                              when=f"after {size_name} xla={onoff(xla)}", load=load_average()))

    peak = max(p["gflops_best"] for p in peaks)
    for rec in train:
        add_flops(rec, flops.get((rec["size"], rec["variant"]), {}), peak)
    add_ratios(train)
    result = {
        "profile": args.profile,
        "argv": list(sys.argv[1:] if argv is None else argv),
        "machine": {**machine, "load_average_at_end": load_average()},
        "code": code,  # at the start; each worker imports the working tree as it is then
        "note": ("Timings are noisy when other processes share the CPU: see the load "
                 "averages per group and the matmul measurements. FLOPs count matmuls only "
                 "(flops_method); fraction_of_peak is against matmul.gflops_peak."),
        "settings": {"variants": variants, "sizes": sizes,
                     "xla": [bool(x) for x in xla_settings],
                     "beam_xla": [bool(x) for x in beam_settings],
                     "warmup_steps": spec["warmup"], "timed_steps": spec["steps"],
                     "beam_reps": spec["beam_reps"], "flops": args.flops,
                     "max_pad_fraction": args.max_pad_fraction, "seed": args.seed,
                     "isolate": args.isolate, "precision": args.precision,
                     "cpu_shards": args.cpu_shards,
                     "optimizer": "Adam(1e-3), global-norm clip 5 (as the Trainer; dynamic loss "
                                  "scaling with mixed_float16)",
                     "size_definitions": {n: dataclasses.asdict(profile.sizes[n]) for n in sizes}},
        "matmul": {"n": profile.matmul_n, "reps": profile.matmul_reps, "gflops_peak": peak,
                   "measurements": peaks},
        "train": train,
        "beam": beam,
        "groups": groups,
        "wall_seconds": _now() - start,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_json(args.out, result)
    print(format_tables(result))
    print(f"\nwrote {args.out} ({result['wall_seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
