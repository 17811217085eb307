"""Where ACVI's training step spends its time beyond soft attention's: an ablation.

Each row is the same model at the paper's sizes (``profiles.TRANSLATION_MODEL`` or
``SUMMARIZATION_MODEL``), or at the size ``make table4-cpu`` trains (``--size=table4_cpu``,
``profiles.TABLE4_CPU_MODEL``, batch 64; with ``--threads=1`` as each of its runs), with
one part of ACVI removed, so the difference between two
rows is that part's cost. The rows' steps are timed alternately in one process (A B C
A B C ...), so a load that changes during the run affects every row alike:

* ``soft``: soft attention, the reference;
* ``acvi``: ACVI with its defaults (the paper's ELBO: Monte-Carlo KL, weight 1);
* ``acvi_kl0``: ACVI (ours), KL weight 0: the KL is logged, not differentiated;
* ``acvi_bound``: the paper's ELBO with the closed-form upper bound of the KL in the
  loss (``kl_estimator="bound"``): the Monte-Carlo KL is logged under stop_gradient;
* ``acvi_kl0_no_variance``: as ``acvi_kl0`` with the noise's standard deviation
  sqrt(sum_i a_i^2 sigma_i^2) (Eq. 25) replaced by a constant: the per-step
  [B, N] x [B, N, D] product and its [B, N, D] gradient are gone;
* ``acvi_kl0_no_noise``: the context is the posterior mean: what is left is the
  sigma network and the log-softmax;
* ``acvi_bf16_variance`` and ``acvi_kl0_bf16_variance``: ``acvi`` and ``acvi_kl0`` with
  sigma^2 kept in bfloat16 (cast once per source) and the variance product of Eq. 25 run
  in bfloat16: the price of the bytes that product reads (half of float32's);
* ``soft_plain_loop`` and ``acvi_kl0_plain_loop``: ``soft`` and ``acvi_kl0`` with the
  straightforward teacher-forced loop (``Seq2Seq.defer_loop_gradients = False``: the
  target lookup and the gradients of h_i, the keys and sigma^2 per step), the price of
  what :mod:`acvi_tf.utils.loop_gradients` moves out of the loop;
* ``soft_block_lstm`` and ``acvi_kl0_block_lstm``: ``soft`` and ``acvi_kl0`` with the
  encoder's BiLSTMs run by TensorFlow's fused ``BlockLSTM`` kernel
  (``--lstm_impl=block``) instead of the scan recurrence (not under ``--xla``: the kernel
  has no XLA version);
* ``soft_no_grad_norm``: ``soft`` without the gradient's global norm and its clipping
  (the norm traced as a constant, no clip): the price of the ``L2Loss`` ops that the op
  profile (:mod:`benchmarks.op_profile`) books per step, which overlap other ops there.

``--rows`` times a subset (e.g. ``--rows=soft,soft_block_lstm``).

The ablated rows are not models anyone should train; they only price the parts.
``python -m benchmarks.acvi_ablation --out bench_results/acvi_ablation.json`` writes
JSON and a markdown table beside it; the load average and the CPU other processes
used while timing (``benchmarks.load``) are recorded, and the table says when the
machine was not idle.
"""

import argparse
import functools
import statistics
import sys
import time

import numpy as np

from benchmarks import record
from benchmarks.load import OtherLoad, load_average
from benchmarks.profiles import (SUMMARIZATION_MODEL, TABLE4_CPU_MODEL, TOY_MODEL,
                                 TRANSLATION_MODEL)
from benchmarks.workload import make_train_step, random_batch

SIZES = {"translation": (TRANSLATION_MODEL, 128, 50, 50),
         "summarization": (dict(SUMMARIZATION_MODEL, dropout=0.0), 16, 400, 100),
         # the size the CPU tables train at: batch 64, Multi30k's typical 14 / 15 tokens
         "table4_cpu": (TABLE4_CPU_MODEL, 64, 14, 15),
         "toy": (TOY_MODEL, 2, 5, 4)}  # checks the harness; times nothing of interest
PAPER_SIZES = ("translation", "summarization")
ROWS = ("soft", "acvi", "acvi_kl0", "acvi_bound", "acvi_kl0_no_variance", "acvi_kl0_no_noise",
        "soft_plain_loop", "acvi_kl0_plain_loop", "soft_block_lstm", "acvi_kl0_block_lstm",
        "soft_no_grad_norm", "acvi_bf16_variance", "acvi_kl0_bf16_variance")
PLAIN_LOOP = "_plain_loop"
BLOCK_LSTM = "_block_lstm"
NO_GRAD_NORM = "_no_grad_norm"
BF16_VARIANCE = "_bf16_variance"


def _unit_norm(tensors, name=None):
    """tf.linalg.global_norm's stand-in in the ``_no_grad_norm`` rows: no arithmetic."""
    import tensorflow as tf
    return tf.constant(1.0)


def _contexts():
    """The sample_mixed_context replacements of the ablated rows."""
    import tensorflow as tf
    from acvi_tf.attention.base import weighted_sum
    from acvi_tf.utils import ops

    def no_variance(weights, memory, sigma_sq, seed, noise_scale=None, memory_state=None):
        mean = weighted_sum(weights, memory, memory_state, "memory")
        return mean + 1e-3 * ops.stateless_normal(tf.shape(mean), seed, mean.dtype)

    def no_noise(weights, memory, sigma_sq, seed, noise_scale=None, memory_state=None):
        return weighted_sum(weights, memory, memory_state, "memory")

    return {"acvi_kl0_no_variance": no_variance, "acvi_kl0_no_noise": no_noise}


def _bf16_variance(acvi_module):
    """The replacements of ``acvi_module.mixture_terms`` and ``_mix`` in the
    ``_bf16_variance`` rows: sigma^2 cast to bfloat16 once per source, and each weighted
    sum run in its values' dtype with a float32 result, so the model's own
    sample_mixed_context (Eq. 25) runs its variance product in bfloat16."""
    import tensorflow as tf
    mixture_terms, mix = acvi_module.mixture_terms, acvi_module._mix

    def terms(memory, log_sigma_sq, prior_mean=None):
        out = mixture_terms(memory, log_sigma_sq, prior_mean)
        return {**out, "sigma_sq": tf.cast(out["sigma_sq"], tf.bfloat16)}

    def mixed(weights, value, memory_state, name):
        return tf.cast(mix(tf.cast(weights, value.dtype), value, memory_state, name),
                       weights.dtype)
    return {"mixture_terms": terms, "_mix": mixed}


def row_config(size, row):
    """The ``ModelConfig`` of ``row`` at ``size``."""
    from acvi_tf.models.seq2seq import ModelConfig
    extra = {} if row.startswith("soft") else {"attention": "acvi"}
    if row.startswith("acvi_kl0"):
        extra["attention_options"] = {"kl_weight": 0.0}
    if row == "acvi_bound":
        extra["attention_options"] = {"kl_estimator": "bound"}
    if row.endswith(BLOCK_LSTM):
        extra["lstm_impl"] = "block"
    return ModelConfig(**SIZES[size][0], **extra)


def build_steps(size, rows, seed=0, xla=False):
    """{row: traced step function} and the batch, every row at ``size`` (XLA-compiled
    with ``xla``), each step in the process's batch shards (:mod:`acvi_tf.utils.shards`)."""
    import tensorflow as tf
    from acvi_tf.attention import acvi as acvi_module
    from acvi_tf.utils import shards
    from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
    from acvi_tf.training.adam import Adam
    model_fields, batch_size, src_len, tgt_len = SIZES[size]
    batch = random_batch(ModelConfig(**model_fields), batch_size, src_len, tgt_len,
                         np.random.default_rng(seed))
    batch = {k: tf.constant(v) for k, v in batch.items()}
    original, replaced = acvi_module.sample_mixed_context, _contexts()
    bf16 = _bf16_variance(acvi_module)
    unpatched = {name: getattr(acvi_module, name) for name in bf16}
    global_norm = tf.linalg.global_norm
    steps = {}
    try:
        for row in rows:
            model = Seq2Seq(row_config(size, row))
            model.defer_loop_gradients = not row.endswith(PLAIN_LOOP)
            optimizer = Adam(1e-3)  # the Trainer's
            model.build_for_checkpoint(batch)
            optimizer.build(model.trainable_variables)
            no_norm = row.endswith(NO_GRAD_NORM)
            step = tf.function(make_train_step(model, optimizer, 0.0 if no_norm else 5.0,
                                               shards=shards.shards()),
                               autograph=False, jit_compile=xla)
            fn = functools.partial(step, seed=tf.constant(1))
            # ACVI looks the sampler up, and the step the norm, when the step is traced:
            # trace under the row's.
            acvi_module.sample_mixed_context = replaced.get(row, original)
            for name, fn_ in (bf16 if row.endswith(BF16_VARIANCE) else {}).items():
                setattr(acvi_module, name, fn_)
            if no_norm:
                tf.linalg.global_norm = _unit_norm
            fn(batch)
            acvi_module.sample_mixed_context = original
            for name, fn_ in unpatched.items():
                setattr(acvi_module, name, fn_)
            tf.linalg.global_norm = global_norm
            steps[row] = fn
    finally:
        acvi_module.sample_mixed_context = original
        for name, fn_ in unpatched.items():
            setattr(acvi_module, name, fn_)
        tf.linalg.global_norm = global_norm
    return steps, batch


def time_rows(steps, batch, rounds, log=print):
    times = {row: [] for row in steps}
    for i in range(rounds):
        for row, fn in steps.items():
            start = time.perf_counter()
            fn(batch)
            times[row].append(time.perf_counter() - start)
        log(f"round {i + 1}/{rounds}: " + ", ".join(f"{r} {t[-1]:.2f} s"
                                                    for r, t in times.items()))
    return times


def summarize(times):
    soft = statistics.median(times["soft"])
    return {row: {"seconds_all": [round(t, 4) for t in ts],
                  "seconds_median": statistics.median(ts),
                  "over_soft": statistics.median(ts) / soft}
            for row, ts in times.items()}


def markdown(result):
    where = "paper sizes" if result["size"] in PAPER_SIZES else "not a paper size"
    threads = result.get("intra_op_threads")
    shard_count = result.get("batch_shards", {}).get("cpu_shards", 1)
    lines = record.preamble(result, f"ACVI's step time by part ({result['size']}, {where})")
    lines += [f"Command: `{result['command']}`. {result['rounds']} rounds, the rows "
              f"alternating; median seconds per training step (Adam, fp32, XLA "
              f"{'on' if result.get('xla') else 'off'}"
              + (f", {threads} intra-op thread(s)" if threads else "")
              + (f", {shard_count} batch shards" if shard_count > 1 else "") + ").", "",
              "| row | s/step (median) | / soft |", "|---|---:|---:|"]
    for row, r in result["rows"].items():
        lines.append(f"| {row} | {r['seconds_median']:.3f} | {r['over_soft']:.2f} |")
    return "\n".join(lines) + "\n"


def add_cpu_shards_argument(p):
    """``--cpu_shards``, as the task CLIs' (this module's and :mod:`benchmarks.op_profile`'s)."""
    p.add_argument("--cpu_shards", type=int, default=0,
                   help="batch shards, as the task CLIs' --cpu_shards: 0 (auto) gives one "
                        "shard of rows per core unless --threads or --xla is given; 1 "
                        "runs the whole batch as one")


def configure_shards(p, args, threads=0, xla=False):
    """This process's batch shards from ``--cpu_shards`` (one where ``threads`` were set
    by hand and no count was asked for); a flag error for a negative count. Returns
    :mod:`acvi_tf.utils.shards`, configured."""
    if args.cpu_shards < 0:
        p.error(f"--cpu_shards: {args.cpu_shards} must be 0 (auto) or more")
    from acvi_tf.utils import shards
    shards.configure(args.cpu_shards or (1 if threads else 0), xla=xla)
    return shards


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=sorted(SIZES), default="translation")
    p.add_argument("--rounds", type=int, default=5, help="timed steps per row")
    p.add_argument("--xla", action="store_true", help="XLA-compile every row's step")
    p.add_argument("--rows", default=",".join(ROWS),
                   help=f"comma-separated rows to time (default all: {', '.join(ROWS)})")
    p.add_argument("--threads", type=int, default=0,
                   help="TensorFlow's intra- and inter-op threads (0: its default, every "
                        "core); 1 times a step as each table run trains it, one per core")
    add_cpu_shards_argument(p)
    p.add_argument("--out", default="bench_results/acvi_ablation.json")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds: {args.rounds} must be at least 1")
    if args.threads < 0:
        p.error(f"--threads: {args.threads} must be 0 (TensorFlow's default) or more")
    rows = [r for r in args.rows.split(",") if r]
    unknown = [r for r in rows if r not in ROWS]
    if unknown or not rows:
        p.error(f"--rows: unknown {', '.join(unknown) or '(none given)'}; choose from "
                f"{', '.join(ROWS)}")
    if args.xla:
        rows = [r for r in rows if not r.endswith(BLOCK_LSTM)]
    if args.threads:
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    shards = configure_shards(p, args, args.threads, args.xla)
    load_start = load_average()
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    steps, batch = build_steps(args.size, rows, xla=args.xla)
    others = OtherLoad().start()
    times = time_rows(steps, batch, args.rounds, log)
    others_cores = others.stop()
    result = {"size": args.size, "rounds": args.rounds, "xla": args.xla,
              "intra_op_threads": args.threads or None, "batch_shards": shards.describe(),
              **record.header("benchmarks.acvi_ablation", argv, load_start, others_cores),
              "rows": summarize(times)}
    record.write(args.out, result, markdown(result))

if __name__ == "__main__":
    main()
