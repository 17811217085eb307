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
"""

import argparse
import dataclasses
import datetime
import functools
import gc
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from acvi_tf.utils.provenance import code_version  # noqa: F401  (peers/run.py too)
from acvi_tf.utils.precision import PRECISIONS
from benchmarks.load import load_average
from benchmarks.flops import _dumped_hlo, analytic_flops, hlo_dot_flops  # noqa: F401

# Token ids 0-3 are pad/unk/bos/eos (ModelConfig defaults); random words start here.
FIRST_WORD = 4
BASELINE = "soft"
DUMP_MODULE_PREFIX = "bench_train_step"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- what to run -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Size:
    """One benchmark size: the model, the training batch and the beam-search setting."""
    model: dict            # ModelConfig fields except ``attention``
    batch: int             # training batch (sequences)
    src_len: int           # source tokens per sequence
    tgt_len: int           # target tokens per sequence (end token included)
    beam_width: int
    beam_batch: int        # source sequences per beam-search call
    beam_max_length: int


TRANSLATION_MODEL = dict(  # IWSLT'15 En-Vi, Luong-style (Section 4.1)
    src_vocab_size=17191, tgt_vocab_size=7709, embed_dim=256,
    encoder_units=256, encoder_layers=2, decoder_units=256, decoder_layers=2,
    score="multiplicative", head_units=256)
SUMMARIZATION_MODEL = dict(  # CNN/Daily Mail, See et al.-style (Section 4.2)
    src_vocab_size=50000, tgt_vocab_size=50000, embed_dim=128,
    encoder_units=256, encoder_layers=1, decoder_units=256, decoder_layers=1,
    score="additive", attention_units=256, head_units=256)
TOY_MODEL = dict(src_vocab_size=40, tgt_vocab_size=50, embed_dim=8, encoder_units=8,
                 decoder_units=8, attention_units=8, head_units=8)


@dataclasses.dataclass(frozen=True)
class Profile:
    sizes: dict            # name -> Size
    default_sizes: tuple   # what runs without --sizes
    warmup: int            # untimed steps after the first (tracing/compiling) call
    steps: int             # timed steps per variant
    beam_reps: int         # timed beam-search calls per variant
    xla: str               # default --xla
    beam_xla: str          # default --beam_xla
    isolate: bool          # default --isolate: a worker process per (size, XLA) group
    matmul_n: int
    matmul_reps: int


PROFILES = {
    "full": Profile(
        sizes={
            "translation": Size(TRANSLATION_MODEL, batch=128, src_len=50, tgt_len=50,
                                beam_width=10, beam_batch=32, beam_max_length=50),
            "summarization": Size(SUMMARIZATION_MODEL, batch=16, src_len=400, tgt_len=100,
                                  beam_width=5, beam_batch=4, beam_max_length=100),
        },
        default_sizes=("translation", "summarization"),
        # The first call already runs one step: it is the warm-up.
        warmup=0, steps=3, beam_reps=2, xla="both", beam_xla="both", isolate=True,
        matmul_n=2048, matmul_reps=5),
    # The paper's widths and vocabularies; batch and lengths cut. XLA off by default:
    # its compiles (20-70 s per variant on 2 cores) would dominate.
    "quick": Profile(
        sizes={
            "translation": Size(TRANSLATION_MODEL, batch=16, src_len=12, tgt_len=12,
                                beam_width=10, beam_batch=2, beam_max_length=8),
            "summarization": Size(SUMMARIZATION_MODEL, batch=2, src_len=60, tgt_len=12,
                                  beam_width=5, beam_batch=1, beam_max_length=8),
        },
        default_sizes=("translation", "summarization"),
        warmup=1, steps=3, beam_reps=2, xla="off", beam_xla="off", isolate=True,
        matmul_n=1024, matmul_reps=3),
    "smoke": Profile(
        sizes={
            "translation": Size(dict(TOY_MODEL, score="multiplicative"), batch=4, src_len=6,
                                tgt_len=5, beam_width=2, beam_batch=2, beam_max_length=4),
            "summarization": Size(dict(TOY_MODEL, score="additive"), batch=2, src_len=9,
                                  tgt_len=4, beam_width=2, beam_batch=1, beam_max_length=4),
        },
        default_sizes=("translation",),
        warmup=0, steps=2, beam_reps=1, xla="off", beam_xla="off", isolate=False,
        matmul_n=256, matmul_reps=3),
}


# Benchmarked beside the attention variants, by ModelConfig fields: other architectures
# and the latents outside attention (on soft attention, so the ratio is the latent's cost).
MODEL_VARIANTS = {"transformer": {"model": "transformer", "attention": BASELINE},
                  "ved": {"latent": "ved", "attention": BASELINE},
                  "vrnmt": {"latent": "vrnmt", "attention": BASELINE}}


def variant_config(size, variant, precision="float32"):
    """The ModelConfig of one benchmarked variant at one size and precision."""
    from acvi_tf.models.seq2seq import ModelConfig
    fields = MODEL_VARIANTS.get(variant, {"attention": variant})
    return ModelConfig(**{**size.model, **fields, "precision": precision})

# -- measuring ----------------------------------------------------------------------------

def _now():
    return time.perf_counter()


def machine_info():
    import keras
    import tensorflow as tf
    cpu_model = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu_model = next((line.split(":", 1)[1].strip() for line in f
                              if line.startswith("model name")), None)
    except OSError:
        pass
    mem_gb = None
    try:
        with open("/proc/meminfo") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal"))
        mem_gb = round(kb / 2 ** 20, 1)
    except (OSError, StopIteration):
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "cpu_model": cpu_model,
        "memory_gb": mem_gb,
        "gpus": len(tf.config.list_physical_devices("GPU")),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_average_at_start": load_average(),
    }


def matmul_peak(n, reps):
    """GFLOP/s of an n x n float32 matmul under tf.function (best and median of reps)."""
    import tensorflow as tf
    a = tf.random.stateless_normal([n, n], seed=[1, 2])
    b = tf.random.stateless_normal([n, n], seed=[3, 4])
    fn = tf.function(lambda a, b: tf.reduce_sum(tf.linalg.matmul(a, b)))
    fn(a, b).numpy()
    times = []
    for _ in range(reps):
        t0 = _now()
        fn(a, b).numpy()
        times.append(_now() - t0)
    flops = 2 * n ** 3
    return {"n": n, "reps": reps, "ms_median": 1e3 * statistics.median(times),
            "gflops_best": flops / min(times) / 1e9,
            "gflops_median": flops / statistics.median(times) / 1e9}


def random_batch(config, batch, src_len, tgt_len, rng, max_pad_fraction=0.0):
    """Random token batch; each row padded by up to ``max_pad_fraction`` of its length."""
    def lengths(full):
        most = int(max_pad_fraction * full)
        return full - rng.integers(0, most + 1, batch) if most else np.full(batch, full)

    src = rng.integers(FIRST_WORD, config.src_vocab_size, (batch, src_len)).astype(np.int32)
    src[np.arange(src_len)[None] >= lengths(src_len)[:, None]] = config.pad_id
    tgt_lengths = lengths(tgt_len)
    out = rng.integers(FIRST_WORD, config.tgt_vocab_size, (batch, tgt_len)).astype(np.int32)
    out[np.arange(batch), tgt_lengths - 1] = config.eos_id
    out[np.arange(tgt_len)[None] >= tgt_lengths[:, None]] = config.pad_id
    tgt_in = np.concatenate([np.full((batch, 1), config.bos_id, np.int32), out[:, :-1]], 1)
    tgt_in[out == config.pad_id] = config.pad_id
    return {"src": src, "tgt_in": tgt_in, "tgt_out": out}


def make_train_step(model, optimizer, clip_norm=5.0):
    """The Trainer's step (:func:`acvi_tf.training.step.train_step`), single replica,
    returning the loss."""
    from acvi_tf.training.step import train_step

    def step(batch, seed):
        return train_step(model, optimizer, batch, seed, clip_norm)["loss"]
    return step


def _err(e):
    text = f"{type(e).__name__}: {e}".strip()
    return text if len(text) <= 2000 else text[:2000] + " [...]"


def build_model(config, seed):
    """A Seq2Seq with every variable created (they do not depend on B, N, T)."""
    import keras
    import tensorflow as tf
    from acvi_tf.models import build_model as build
    keras.utils.set_random_seed(seed)
    model = build(config)
    tiny = random_batch(config, 2, 3, 3, np.random.default_rng(seed))
    model.build_for_checkpoint({k: tf.constant(v) for k, v in tiny.items()})
    return model


class TrainRun:
    """One (size, variant, XLA) training-step measurement."""

    def __init__(self, size_name, size, variant, xla, seed, max_pad_fraction,
                 precision="float32"):
        self.size_name, self.variant, self.xla = size_name, variant, xla
        self.times, self.error = [], None
        self.trace_s = self.first_call_s = None
        self.config = self.model = None
        try:
            self._build(size, seed, max_pad_fraction, precision)
        except Exception as e:  # a variant that cannot be built is reported, not fatal
            self.error = _err(e)

    def _build(self, size, seed, max_pad_fraction, precision):
        import tensorflow as tf
        from acvi_tf.training.trainer import TrainConfig, make_optimizer
        self.config = variant_config(size, self.variant, precision)
        batch = random_batch(self.config, size.batch, size.src_len, size.tgt_len,
                             np.random.default_rng(seed), max_pad_fraction)
        self.tokens = int((batch["tgt_out"] != self.config.pad_id).sum())
        self.batch = {k: tf.constant(v) for k, v in batch.items()}
        self.seed = seed
        self.model = build_model(self.config, seed)
        # Adam(1e-3), as the Trainer makes it (loss scaling for mixed_float16).
        self.optimizer = make_optimizer(TrainConfig(model_dir="", optimizer="adam",
                                                    learning_rate=1e-3), precision)
        self.optimizer.build(self.model.trainable_variables)
        self.python_step = make_train_step(self.model, self.optimizer)
        self.module_name = _module_name(self.size_name, self.variant)
        self.python_step.__name__ = self.module_name  # names the XLA module (HLO dump)
        # autograph off, as in the Trainer: the step has no tensor-dependent Python control
        # flow, and converting it costs seconds of tracing per variant.
        self.fn = tf.function(self.python_step, jit_compile=self.xla, autograph=False)
        self._calls = 0

    def _call(self):
        import tensorflow as tf
        loss = self.fn(self.batch, tf.constant(self.seed + self._calls, tf.int32))
        self._calls += 1
        value = float(loss)  # waits for the step
        if not math.isfinite(value):
            raise FloatingPointError(f"non-finite loss {value}")

    def first_call(self, warmup):
        import tensorflow as tf
        t0 = _now()
        self.fn.get_concrete_function(self.batch, tf.constant(0, tf.int32))
        self.trace_s = _now() - t0
        t0 = _now()
        self._call()
        self.first_call_s = _now() - t0
        for _ in range(warmup):
            self._call()

    def timed_step(self):
        t0 = _now()
        self._call()
        self.times.append(_now() - t0)

    def hlo_text(self, dump_dir):
        """Optimised HLO of this step: from the XLA dump, or compiled for the purpose."""
        import tensorflow as tf
        text = _dumped_hlo(dump_dir, self.module_name) if self.xla else None
        if text is None:
            fn = tf.function(self.python_step, jit_compile=True, autograph=False)
            text = fn.experimental_get_compiler_ir(
                self.batch, tf.constant(0, tf.int32))(stage="optimized_hlo")
        return text


def _module_name(size_name, variant):
    return re.sub(r"\W", "_", f"{DUMP_MODULE_PREFIX}_{size_name}_{variant}")


def time_train_steps(size_name, size, variants, xla, spec, log):
    """Times every variant at one (size, XLA) setting, round-robin; returns the runs."""
    runs = [TrainRun(size_name, size, v, xla, spec["seed"], spec["max_pad_fraction"],
                     spec["precision"]) for v in variants]
    for run in runs:
        if run.error:
            log(f"  {size_name} {run.variant} xla={_onoff(xla)}: FAILED {run.error[:300]}")
            continue
        try:
            run.first_call(spec["warmup"])
            log(f"  {size_name} {run.variant} xla={_onoff(xla)}: first call "
                f"{run.first_call_s:.1f}s (trace {run.trace_s:.1f}s)")
        except Exception as e:
            run.error = _err(e)
            log(f"  {size_name} {run.variant} xla={_onoff(xla)}: FAILED {run.error[:300]}")
    for _ in range(spec["steps"]):
        for run in runs:
            if not run.error:
                try:
                    run.timed_step()
                except Exception as e:
                    run.error = _err(e)
    return runs


def train_record(run, size):
    rec = {"size": run.size_name, "variant": run.variant, "xla": bool(run.xla),
           "batch": size.batch, "src_len": size.src_len, "tgt_len": size.tgt_len,
           "error": run.error}
    if run.error or not run.times:
        return rec
    median, best = statistics.median(run.times), min(run.times)
    rec.update({
        "steps_timed": len(run.times),
        "ms_per_step_median": 1e3 * median,
        "ms_per_step_min": 1e3 * best,
        "ms_per_step_all": [round(1e3 * t, 3) for t in run.times],
        "tokens_per_step": run.tokens,
        "tokens_per_s": run.tokens / median,
        "trace_s": run.trace_s,
        "first_call_s": run.first_call_s,
        # The first call traces (already timed in trace_s), compiles and runs one step.
        "compile_s": max(0.0, run.first_call_s - median),
    })
    return rec


def add_flops(rec, flops, peak_gflops):
    """Adds a variant's FLOP fields, achieved GFLOP/s and the fraction of the matmul peak."""
    rec.update(flops)
    if rec.get("flops_per_step") and "ms_per_step_median" in rec:
        gflops = rec["flops_per_step"] / (rec["ms_per_step_median"] / 1e3) / 1e9
        rec["gflops_per_s"] = gflops
        rec["fraction_of_peak"] = gflops / peak_gflops if peak_gflops else None


def add_ratios(records):
    """ratio_to_soft: ms/step over soft's at the same size and XLA setting (medians, minima)."""
    base = {(r["size"], r["xla"]): r for r in records
            if r["variant"] == BASELINE and "ms_per_step_median" in r}
    for r in records:
        b = base.get((r["size"], r["xla"]))
        if b is None or "ms_per_step_median" not in r:
            r["ratio_to_soft"] = r["ratio_to_soft_min"] = None
            continue
        r["ratio_to_soft"] = r["ms_per_step_median"] / b["ms_per_step_median"]
        r["ratio_to_soft_min"] = r["ms_per_step_min"] / b["ms_per_step_min"]


def analytic_fields(config, size):
    analytic, complete = analytic_flops(config, size.batch, size.src_len, size.tgt_len)
    return {"flops_analytic": analytic, "flops_analytic_complete": complete,
            "flops_hlo": None, "flops_hlo_loops": None,
            "flops_per_step": analytic, "flops_method": "analytic_matmul"}


def count_flops(run, size, mode, dump_dir, log):
    """The FLOP fields of a record (see the module docstring)."""
    out = analytic_fields(run.config, size)
    want_hlo = mode == "hlo" or (mode == "auto" and run.xla)
    if not want_hlo:
        return out
    note = None
    try:
        counted = hlo_dot_flops(run.hlo_text(dump_dir))
        out["flops_hlo"], out["flops_hlo_loops"] = counted["flops"], counted["loops"]
        if counted["flops"] is None:
            note = "a loop with dots had no resolvable trip count"
    except Exception as e:
        note = _err(e)[:300]
    if out["flops_hlo"]:
        out.update(flops_per_step=out["flops_hlo"], flops_method="xla_hlo_dot")
    else:
        out["flops_hlo_error"] = note or "no HLO dump found"
        log(f"  {run.size_name} {run.variant}: no HLO FLOP count "
            f"({out['flops_hlo_error']}); using the analytic count")
    return out


def run_beam(size_name, size, variant, model, xla, reps, seed, precision="float32"):
    """Sentences/s of beam search (XLA compile failures become the ``error``)."""
    import tensorflow as tf
    rec = {"size": size_name, "variant": variant, "xla": bool(xla),
           "beam_width": size.beam_width, "batch": size.beam_batch,
           "src_len": size.src_len, "max_length": size.beam_max_length,
           "min_length": size.beam_max_length, "error": None}
    try:
        if model is None:
            model = build_model(variant_config(size, variant, precision), seed)
        rng = np.random.default_rng(seed + 1)
        src = tf.constant(rng.integers(FIRST_WORD, model.config.src_vocab_size,
                                       (size.beam_batch, size.src_len)).astype(np.int32))
        # min_length = max_length forbids the end token: every call decodes max_length
        # steps (random weights would end most hypotheses at once), a fixed workload.
        fn = tf.function(functools.partial(model.decode, beam_width=size.beam_width,
                                           max_length=size.beam_max_length,
                                           min_length=size.beam_max_length), jit_compile=xla,
                         autograph=False)
        t0 = _now()
        lengths = fn({"src": src})["lengths"].numpy()
        rec["first_call_s"] = _now() - t0
        times = []
        for _ in range(reps):
            t0 = _now()
            lengths = fn({"src": src})["lengths"].numpy()
            times.append(_now() - t0)
    except Exception as e:
        rec["error"] = _err(e)
        return rec
    median = statistics.median(times)
    rec.update({"calls_timed": len(times), "ms_per_call_median": 1e3 * median,
                "ms_per_call_min": 1e3 * min(times),
                "sentences_per_s": size.beam_batch / median,
                "mean_best_length": float(np.mean(lengths[:, 0]))})
    return rec


GROUP_KEYS = ("profile", "size", "xla", "train", "beam", "variants", "flops", "seed",
              "max_pad_fraction", "warmup", "steps", "beam_reps", "precision")


def run_group(spec, dump_dir, log):
    """One (size, XLA) group: every variant's training steps, then its beam search.

    Returns ``train`` records (without FLOPs), ``flops`` per variant and ``beam``
    records. Runs in a worker process of its own with ``--isolate=yes``.
    """
    missing = [key for key in GROUP_KEYS if key not in spec]
    if missing:
        raise ValueError(f"the group spec lacks {', '.join(missing)}")
    profile = PROFILES[spec["profile"]]
    size_name, xla, variants = spec["size"], spec["xla"], spec["variants"]
    size = profile.sizes[size_name]
    train, flops, models, beam = [], {}, {}, []
    if spec["train"] or spec["beam"]:
        import tensorflow as tf
        tf.get_logger().setLevel("ERROR")  # not the retracing notes of many step functions
    if spec["train"]:
        log(f"training step: {size_name}, xla={_onoff(xla)}")
        runs = time_train_steps(size_name, size, variants, xla, spec, log)
        for run in runs:
            train.append(train_record(run, size))
            if run.config is not None:
                flops[run.variant] = (analytic_fields(run.config, size) if run.error else
                                      count_flops(run, size, spec["flops"], dump_dir, log))
            if not run.error:
                models[run.variant] = run.model
        del runs  # the step functions, optimisers and XLA executables
        gc.collect()
    if spec["beam"]:
        for variant in variants:
            log(f"beam search: {size_name} {variant} xla={_onoff(xla)}")
            rec = run_beam(size_name, size, variant, models.get(variant), xla,
                           spec["beam_reps"], spec["seed"], spec["precision"])
            if rec["error"]:
                log(f"  error: {rec['error'][:300]}")
            beam.append(rec)
    return {"train": train, "flops": flops, "beam": beam}


def _worker(spec_path):
    """``--_worker SPEC``: runs one group and writes its result (the parent reads it)."""
    with open(spec_path) as f:
        spec = json.load(f)
    result = run_group(spec, spec.get("dump_dir"), _log)
    _write_json(spec["result"], result)


def _spawn(spec, log):
    """Runs a group in a fresh process: its memory (XLA can ask for many GB) and any
    crash stay there. A failed worker becomes error records."""
    with tempfile.TemporaryDirectory(prefix="bench_") as tmp:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        dump_dir = None
        if spec["train"] and spec["xla"] and spec["flops"] != "analytic":
            dump_dir = os.path.join(tmp, "hlo")
            env["XLA_FLAGS"] = _xla_dump_flags(env.get("XLA_FLAGS"), dump_dir)
        spec = dict(spec, result=os.path.join(tmp, "result.json"), dump_dir=dump_dir)
        spec_path = os.path.join(tmp, "spec.json")
        _write_json(spec_path, spec)
        code = subprocess.run([sys.executable, "-m", "benchmarks.bench", "--_worker", spec_path],
                              cwd=REPO_ROOT, env=env, check=False).returncode
        if os.path.exists(spec["result"]):
            with open(spec["result"]) as f:
                result = json.load(f)
            result["worker_exit_code"] = code
            return result
    why = f"the worker process failed ({_exit_reason(code)})"
    log(f"  {why}")
    size = PROFILES[spec["profile"]].sizes[spec["size"]]
    common = {"size": spec["size"], "xla": spec["xla"], "error": why}
    shape = {"batch": size.batch, "src_len": size.src_len, "tgt_len": size.tgt_len}
    variants = spec["variants"]
    return {"worker_exit_code": code, "flops": {},
            "train": [dict(common, variant=v, **shape) for v in variants] if spec["train"] else [],
            "beam": [dict(common, variant=v) for v in variants] if spec["beam"] else []}


def _exit_reason(code):
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _xla_dump_flags(existing, dump_dir):
    return " ".join(filter(None, [
        existing, f"--xla_dump_to={dump_dir}", "--xla_dump_hlo_as_text",
        f"--xla_dump_hlo_module_re=.*{DUMP_MODULE_PREFIX}.*"]))


def _onoff(flag):
    return "on" if flag else "off"


def _settings(value):
    return {"on": [True], "off": [False], "both": [False, True], "none": []}[value]


def _log(msg):
    print(msg, file=sys.stderr, flush=True)


def _write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2, default=_json_default)
    os.replace(tmp, path)


def _json_default(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


# -- output ------------------------------------------------------------------------------

def _fmt(value, spec):
    return "-" if value is None else format(value, spec)


def format_tables(result):
    m = result["matmul"]
    lines = [f"matmul {m['n']}x{m['n']} float32: {m['gflops_peak']:.1f} GFLOP/s peak "
             f"(best of {len(m['measurements'])} measurements between groups)", ""]
    head = (f"{'size':<14}{'variant':<13}{'xla':<4}{'ms/step':>10}{'min':>10}{'tok/s':>8}"
            f"{'trace s':>8}{'compile s':>10}{'x soft':>7}{'(min)':>7}{'GFLOP/s':>8}"
            f"{'% peak':>7}  flops")
    precision = result.get("settings", {}).get("precision", "float32")
    lines += [f"training step (forward + backward + Adam), precision {precision}", head,
              "-" * len(head)]
    for r in result["train"]:
        prefix = f"{r['size']:<14}{r['variant']:<13}{_onoff(r['xla']):<4}"
        if r.get("error") or "ms_per_step_median" not in r:
            lines.append(prefix + f"  ERROR {str(r.get('error'))[:110]}")
            continue
        frac = r.get("fraction_of_peak")
        lines.append(
            prefix + f"{r['ms_per_step_median']:>10.1f}{r['ms_per_step_min']:>10.1f}"
            f"{r['tokens_per_s']:>8.0f}{r['trace_s']:>8.1f}{r['compile_s']:>10.1f}"
            f"{_fmt(r['ratio_to_soft'], '.3f'):>7}{_fmt(r['ratio_to_soft_min'], '.3f'):>7}"
            f"{_fmt(r.get('gflops_per_s'), '.1f'):>8}"
            f"{_fmt(None if frac is None else 100 * frac, '.1f'):>7}  {r.get('flops_method')}")
    if result["beam"]:
        head = (f"{'size':<14}{'variant':<13}{'xla':<4}{'beam':>5}{'batch':>6}{'max len':>8}"
                f"{'ms/call':>10}{'sent/s':>9}{'first s':>9}")
        lines += ["", "beam search", head, "-" * len(head)]
        for r in result["beam"]:
            prefix = f"{r['size']:<14}{r['variant']:<13}{_onoff(r['xla']):<4}"
            if r.get("error"):
                lines.append(prefix + f"  ERROR {r['error'][:110]}")
            else:
                lines.append(prefix + f"{r['beam_width']:>5}{r['batch']:>6}{r['max_length']:>8}"
                             f"{r['ms_per_call_median']:>10.1f}{r['sentences_per_s']:>9.2f}"
                             f"{r['first_call_s']:>9.1f}")
    over = [r for r in result["train"] if r.get("ratio_to_soft") and r["ratio_to_soft"] > 1.10]
    if over:
        lines += ["", "over the 1.10 target (ms/step / soft's, median): " + ", ".join(
            f"{r['variant']}@{r['size']}/xla={_onoff(r['xla'])} {r['ratio_to_soft']:.2f}"
            for r in over)]
    return "\n".join(lines)


# -- the command line ------------------------------------------------------------------------

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


def _select(text, choices, what):
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in choices]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)}; choose from {', '.join(choices)}")
    return names


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args._worker:
        return _worker(args._worker)
    profile = PROFILES[args.profile]
    args.isolate = profile.isolate if args.isolate is None else args.isolate == "yes"
    dump_dir = None
    xla = args.xla or profile.xla
    if (not args.isolate and args.flops != "analytic" and xla != "off"
            and "tensorflow" not in sys.modules):
        # XLA reads XLA_FLAGS once, so only before TensorFlow is imported; otherwise the
        # HLO comes from experimental_get_compiler_ir (--flops=hlo) or the analytic count.
        dump_dir = tempfile.mkdtemp(prefix="bench_hlo_")
        os.environ["XLA_FLAGS"] = _xla_dump_flags(os.environ.get("XLA_FLAGS"), dump_dir)
    try:
        return _run(args, argv, profile, dump_dir)
    finally:
        if dump_dir:
            shutil.rmtree(dump_dir, ignore_errors=True)


def planned_variants(names=None):
    """The variants a run times: ``names`` (comma-separated) or every registered attention
    variant and :data:`MODEL_VARIANTS`; the baseline first, always."""
    from acvi_tf import attention
    registered = list(attention.available()) + list(MODEL_VARIANTS)
    variants = _select(names, registered, "variant") if names else registered
    return [BASELINE] + [v for v in variants if v != BASELINE]


def _run(args, argv, profile, dump_dir):
    import tensorflow as tf
    from acvi_tf import attention  # noqa: F401  (registers every attention variant)
    tf.get_logger().setLevel("ERROR")  # not the retracing notes of the many step functions

    start = _now()
    variants = planned_variants(args.variants)
    sizes = _select(args.sizes, list(profile.sizes), "size") if args.sizes \
        else list(profile.default_sizes)
    xla_settings = _settings(args.xla or profile.xla)
    beam_settings = _settings(args.beam_xla or profile.beam_xla)
    spec = {"profile": args.profile, "variants": variants, "flops": args.flops,
            "seed": args.seed, "max_pad_fraction": args.max_pad_fraction,
            "precision": args.precision,
            "warmup": profile.warmup if args.warmup is None else args.warmup,
            "steps": profile.steps if args.steps is None else args.steps,
            "beam_reps": args.beam_reps or profile.beam_reps}

    machine, code = machine_info(), code_version()
    _log(f"bench --profile={args.profile} --precision={args.precision}: variants {variants}, "
         f"sizes {sizes}, "
         f"xla {[_onoff(x) for x in xla_settings]}, beam xla "
         f"{[_onoff(x) for x in beam_settings]}, {machine['cpu_count']} CPUs, "
         f"load {machine['load_average_at_start']}")
    # The peak is measured before and after every group (a busy machine lowers it) and
    # the best measurement is used.
    peaks = [dict(matmul_peak(profile.matmul_n, profile.matmul_reps), when="start",
                  load=load_average())]
    _log(f"matmul: {peaks[-1]['gflops_best']:.1f} GFLOP/s")

    train, beam, groups, flops = [], [], [], {}
    for size_name in sizes:
        for xla in [False, True]:
            if xla not in xla_settings and xla not in beam_settings:
                continue
            group = dict(spec, size=size_name, xla=xla, train=xla in xla_settings,
                         beam=xla in beam_settings)
            load_before, t0 = load_average(), _now()
            result = (_spawn(group, _log) if args.isolate
                      else run_group(group, dump_dir, _log))
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
                              when=f"after {size_name} xla={_onoff(xla)}", load=load_average()))

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
    _write_json(args.out, result)
    print(format_tables(result))
    print(f"\nwrote {args.out} ({result['wall_seconds']:.0f} s)")
    return result


if __name__ == "__main__":
    main()
