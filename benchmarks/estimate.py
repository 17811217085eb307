r"""GPU hours of the paper-scale tables, estimated from FLOPs: for every run of a table its
flagfile's model, batch and steps (the task CLI's own parsing), FLOPs per training step
from :func:`benchmarks.flops.analytic_flops` at the data's typical lengths (for
summarization per phase of Table 5, at its truncation lengths), times its steps, divided
by an achieved FLOP rate. ``python -m benchmarks.estimate`` prints the markdown
table of README "Paper scale"; ``--bench bench_results/bench.json`` (``make bench`` on the
GPU) replaces the assumed rates by the measured ones.

Two assumed rates, since no GPU was measured here:

* **fast**: the fraction of the FP32 peak that tensorflow/nmt's LSTM reached on a K40m
  (its README: 0.37 s per step of the IWSLT'15 En-Vi model, 2x512 units, batch 128,
  which is 265 GFLOP per step by our count at 21/22 tokens: 0.71 TFLOP/s, 17% of the
  K40m's 4.29 TFLOP/s), applied to the H100's FP32 peak (67 TFLOP/s): 11.2 TFLOP/s. The
  LSTM step is a chain of small matmuls bounded by kernel launches and memory, not by
  tensor cores, so the TF32 peak (495) is not the scale; even so this is optimistic, as
  launch latency does not shrink with the peak.
* **slow**: no faster per FLOP than that K40m (0.71 TFLOP/s): the H100 gains nothing on
  a launch-bound step. Summarization's batch of 16 (8x smaller matmuls than nmt's 128)
  may run below even this rate, so Table 1 is the least certain row.

Training only: the dev evaluations during training and the final beam search are not
counted, nor the input pipeline.
"""

import dataclasses
import json

from benchmarks.flops import analytic_flops

H100_FP32_TFLOPS = 67.0  # H100 SXM, FP32 without tensor cores (NVIDIA's data sheet)
K40M_FP32_TFLOPS = 4.29
NMT_K40M_TFLOPS = 0.715  # tensorflow/nmt IWSLT'15 En-Vi on a K40m, 0.37 s/step (see above)
RATES = {"fast": NMT_K40M_TFLOPS / K40M_FP32_TFLOPS * H100_FP32_TFLOPS,
         "slow": NMT_K40M_TFLOPS}
# (source tokens, target tokens incl. the end token, source vocabulary, target vocabulary)
# per dataset: mean lengths of the mirrored copies (IWSLT'15 train head 18.5 / 21.9 words;
# newsdev2016 21.5 / 22.3 words, +15% for BPE at 32K), +1 for length buckets of width 2;
# the vocabularies of the official files (IWSLT'15), the BPE size (WMT'16) and the MSVD
# training captions' distinct words (9,462, min_count=1) with the 4 specials.
DATA = {("iwslt15_en_vi", "en"): (20, 23, 17_191, 7_709),
        ("iwslt15_en_vi", "vi"): (23, 20, 7_709, 17_191),
        ("wmt16_en_ro", "en"): (26, 27, 32_000, 32_000),
        ("wmt16_en_ro", "ro"): (27, 26, 32_000, 32_000)}
MSVD = (24, 8, 9_466)  # frames, caption tokens (mean 7.0 words + end), vocabulary
FEATURE_DIM = 1024     # GoogLeNet pool5


def _parse(module, argv):
    from absl import flags
    from experiments import flags as xflags
    fv = flags.FlagValues()
    module.define_flags(fv)
    fv(["prog"] + list(argv))
    xflags.apply_profile(module.PROFILES, fv)
    return fv


def run_flops(task, flagfile_path, extra=()):
    """``(total training FLOPs, steps, complete)`` of one run of a table."""
    from experiments import caption, summarize, translate
    from experiments import flags as xflags
    module = {"translate": translate, "summarize": summarize, "caption": caption}[task]
    fv = _parse(module, [f"--flagfile={flagfile_path}"] + list(extra))
    config = xflags.model_config_from_flags(fv)
    if task == "translate":
        src_len, tgt_len, src_v, tgt_v = DATA[(fv.dataset, fv.src)]
        config = dataclasses.replace(config, src_vocab_size=src_v, tgt_vocab_size=tgt_v)
        flops, complete = analytic_flops(config, fv.batch_size, src_len, tgt_len)
        return flops * fv.train_steps, fv.train_steps, complete
    if task == "caption":
        frames, tgt_len, vocab = MSVD
        config = dataclasses.replace(config, src_vocab_size=0, feature_dim=FEATURE_DIM,
                                     tgt_vocab_size=vocab)
        flops, complete = analytic_flops(config, fv.batch_size, frames, tgt_len)
        return flops * fv.train_steps, fv.train_steps, complete
    config = dataclasses.replace(config, src_vocab_size=fv.vocab_size,
                                 tgt_vocab_size=fv.vocab_size)
    phases = summarize.schedule(fv)
    total, start, complete = 0, 0, True
    # each phase at its truncation lengths (CNN/DM articles average 781 tokens and
    # summaries 56, so a batch of 16 nearly always fills them), then coverage at the last
    spans = [(end, enc, dec) for end, enc, dec in phases.phases]
    spans.append((phases.total_steps,) + spans[-1][1:])
    for end, enc, dec in spans:
        flops, ok = analytic_flops(config, fv.batch_size, enc, dec + 1)
        total, start, complete = total + flops * (end - start), end, complete and ok
    return total, phases.total_steps, complete


def table_estimate(table):
    """``{"runs", "steps", "flops", "longest", "complete"}`` over the model runs of
    ``table`` (``longest``: the FLOPs of its costliest run, which bounds the wall time on
    many machines; runs without a flagfile, lead-3 and decode-only ones, train nothing)."""
    import os
    from experiments.tables.registry import TABLES, TASK_OF
    from experiments.tables.spec import CONFIG_DIR
    out = {"runs": 0, "steps": 0, "flops": 0, "longest": 0, "complete": True}
    for _, flagfile, extra in TABLES[table]:
        if not flagfile or any(a.startswith("--mode=") for a in extra):
            continue
        flops, steps, complete = run_flops(TASK_OF[table], os.path.join(CONFIG_DIR, flagfile),
                                           [a for a in extra if a != "--noprogress"])
        out["runs"] += 1
        out["steps"] += steps
        out["flops"] += flops
        out["longest"] = max(out["longest"], flops)
        out["complete"] = out["complete"] and complete
    return out


# The paper-scale tables and the benchmark size whose measured rate stands for them.
PAPER_TABLES = (("table4", "translation"), ("table1", "summarization"),
                ("table3", "translation"))


def measured_rates(bench_path):
    """``{size: TFLOP/s}`` of a ``make bench`` JSON: soft attention's best achieved rate
    over its XLA settings, per size."""
    with open(bench_path, encoding="utf-8") as f:
        records = json.load(f)["train"]
    rates = {}
    for r in records:
        if r.get("variant") == "soft" and r.get("gflops_per_s"):
            rates[r["size"]] = max(rates.get(r["size"], 0.0), r["gflops_per_s"] / 1e3)
    return rates


def _hours(flops, tflops):
    return flops / (tflops * 1e12) / 3600


def markdown(bench_path=None):
    """The table of README "Paper scale": per table its model runs, steps, FLOPs, and the
    hours on one GPU (all runs one after the other) and of its longest run (the wall time
    with as many machines as runs), at each rate."""
    rates = measured_rates(bench_path) if bench_path else None
    if rates is None:
        columns = [(f"{RATES[k]:.{1 if k == 'fast' else 2}f} TFLOP/s", RATES[k], k)
                   for k in ("fast", "slow")]
    header = "| table | model runs | training steps | training FLOPs |"
    if rates is None:
        for label, _, _ in columns:
            header += f" one H100, hours at {label} | longest run, hours at {label} |"
    else:
        header += " measured TFLOP/s (make bench) | one GPU, hours | longest run, hours |"
    width = header.count("|") - 1
    lines = [header, "|---|" + "---:|" * (width - 1)]
    totals = {}
    for table, size in PAPER_TABLES:
        e = table_estimate(table)
        mark = "" if e["complete"] else "≥"
        cells = [table, f"{e['runs']}", f"{e['steps']:,}", f"{mark}{e['flops']:.2e}"]
        per_rate = columns if rates is None else [
            (None, rates.get(size), "measured")]
        if rates is not None:
            rate = rates.get(size)
            cells.append(f"{rate:.2f} ({size})" if rate else f"not measured ({size})")
        for _, rate, key in per_rate:
            if not rate:
                cells += ["–", "–"]
                continue
            hours = _hours(e["flops"], rate)
            totals[key] = totals.get(key, 0.0) + hours
            cells += [f"{mark}{hours:,.1f}", f"{mark}{_hours(e['longest'], rate):,.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    total = ["all three", "", "", ""] + ([""] if rates is not None else [])
    for _, _, key in (columns if rates is None else [(None, None, "measured")]):
        total += [f"{totals.get(key, 0.0):,.1f}", ""]
    lines.append("| " + " | ".join(total) + " |")
    return "\n".join(lines)


def main(argv=None):
    """``python -m benchmarks.estimate [--bench bench.json]``: the GPU hours of the
    paper-scale tables as a markdown table."""
    import argparse
    parser = argparse.ArgumentParser(prog="python -m benchmarks.estimate",
                                     description=main.__doc__.split(":")[0])
    parser.add_argument("--bench", default=None,
                        help="a make bench JSON from the GPU: use its measured FLOP rates")
    args = parser.parse_args(argv)
    print(markdown(args.bench))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
