"""The timing of ``make bench``: one (size, XLA) group's training steps, every variant
round-robin, and its beam search; each becomes a record (see :mod:`benchmarks.bench`
for what is measured)."""

import functools
import gc
import math
import statistics
from time import perf_counter as _now

import numpy as np

from benchmarks.flops import analytic_fields, count_flops, dumped_hlo, module_name
from benchmarks.output import error_text, onoff
from benchmarks.profiles import BASELINE, PROFILES, variant_config
from benchmarks.workload import FIRST_WORD, build_model, make_train_step, random_batch


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
            self.error = error_text(e)

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
        from acvi_tf.utils import shards  # the group's (configured by run_group)
        self.python_step = make_train_step(self.model, self.optimizer, shards=shards.shards())
        self.module_name = module_name(self.size_name, self.variant)
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
        text = dumped_hlo(dump_dir, self.module_name) if self.xla else None
        if text is None:
            fn = tf.function(self.python_step, jit_compile=True, autograph=False)
            text = fn.experimental_get_compiler_ir(
                self.batch, tf.constant(0, tf.int32))(stage="optimized_hlo")
        return text


def time_train_steps(size_name, size, variants, xla, spec, log):
    """Times every variant at one (size, XLA) setting, round-robin; returns the runs."""
    runs = [TrainRun(size_name, size, v, xla, spec["seed"], spec["max_pad_fraction"],
                     spec["precision"]) for v in variants]
    for run in runs:
        if run.error:
            log(f"  {size_name} {run.variant} xla={onoff(xla)}: FAILED {run.error[:300]}")
            continue
        try:
            run.first_call(spec["warmup"])
            log(f"  {size_name} {run.variant} xla={onoff(xla)}: first call "
                f"{run.first_call_s:.1f}s (trace {run.trace_s:.1f}s)")
        except Exception as e:
            run.error = error_text(e)
            log(f"  {size_name} {run.variant} xla={onoff(xla)}: FAILED {run.error[:300]}")
    for _ in range(spec["steps"]):
        for run in runs:
            if not run.error:
                try:
                    run.timed_step()
                except Exception as e:
                    run.error = error_text(e)
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
        from acvi_tf.utils import shards
        decode = functools.partial(model.decode, beam_width=size.beam_width,
                                   max_length=size.beam_max_length,
                                   min_length=size.beam_max_length)
        # in the group's batch shards, as the task CLIs decode (acvi_tf.utils.shards)
        fn = tf.function(lambda batch: shards.sharded(lambda part, _: decode(part), batch),
                         jit_compile=xla, autograph=False)
        t0 = _now()
        lengths = fn({"src": src})["lengths"].numpy()
        rec["first_call_s"] = _now() - t0
        times = []
        for _ in range(reps):
            t0 = _now()
            lengths = fn({"src": src})["lengths"].numpy()
            times.append(_now() - t0)
    except Exception as e:
        rec["error"] = error_text(e)
        return rec
    median = statistics.median(times)
    rec.update({"calls_timed": len(times), "ms_per_call_median": 1e3 * median,
                "ms_per_call_min": 1e3 * min(times),
                "sentences_per_s": size.beam_batch / median,
                "mean_best_length": float(np.mean(lengths[:, 0]))})
    return rec


GROUP_KEYS = ("profile", "size", "xla", "train", "beam", "variants", "flops", "seed",
              "max_pad_fraction", "warmup", "steps", "beam_reps", "precision")
# optional group keys: "cpu_shards" (0, auto, when absent)


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
    # Before TensorFlow runs an op in a worker of its own (--isolate=yes); in a process
    # where it already has, auto gives one shard (acvi_tf.utils.shards).
    from acvi_tf.utils import shards
    shards.configure(spec.get("cpu_shards", 0), xla=bool(spec["xla"]))
    if spec["train"] or spec["beam"]:
        import tensorflow as tf
        tf.get_logger().setLevel("ERROR")  # not the retracing notes of many step functions
    if spec["train"]:
        log(f"training step: {size_name}, xla={onoff(xla)}")
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
            log(f"beam search: {size_name} {variant} xla={onoff(xla)}")
            rec = run_beam(size_name, size, variant, models.get(variant), xla,
                           spec["beam_reps"], spec["seed"], spec["precision"])
            if rec["error"]:
                log(f"  error: {rec['error'][:300]}")
            beam.append(rec)
    for rec in train + beam:
        rec["batch_shards"] = shards.describe()
    return {"train": train, "flops": flops, "beam": beam}

