"""What ``make bench`` writes: the JSON, the tables it prints, the log lines on stderr and
the error strings its records carry."""

import json
import os
import sys

import numpy as np


def error_text(e):
    """An exception as a record's ``error`` string (cut at 2000 characters)."""
    text = f"{type(e).__name__}: {e}".strip()
    return text if len(text) <= 2000 else text[:2000] + " [...]"


def onoff(flag):
    return "on" if flag else "off"


def log_stderr(msg):
    """A progress line on stderr."""
    print(msg, file=sys.stderr, flush=True)


def write_json(path, value):
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
        prefix = f"{r['size']:<14}{r['variant']:<13}{onoff(r['xla']):<4}"
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
            prefix = f"{r['size']:<14}{r['variant']:<13}{onoff(r['xla']):<4}"
            if r.get("error"):
                lines.append(prefix + f"  ERROR {r['error'][:110]}")
            else:
                lines.append(prefix + f"{r['beam_width']:>5}{r['batch']:>6}{r['max_length']:>8}"
                             f"{r['ms_per_call_median']:>10.1f}{r['sentences_per_s']:>9.2f}"
                             f"{r['first_call_s']:>9.1f}")
    over = [r for r in result["train"] if r.get("ratio_to_soft") and r["ratio_to_soft"] > 1.10]
    if over:
        lines += ["", "over the 1.10 target (ms/step / soft's, median): " + ", ".join(
            f"{r['variant']}@{r['size']}/xla={onoff(r['xla'])} {r['ratio_to_soft']:.2f}"
            for r in over)]
    return "\n".join(lines)


