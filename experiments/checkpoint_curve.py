r"""A run's kept checkpoints scored with one evaluation mode: a learning curve measured with
a table's own protocol rather than the quick evaluation logged during training (issue 34).

The evaluations in ``history.jsonl`` are quick by design (greedy decodes of a small eval
subset: 50 articles for summarization), so their curve is noisy; a budget read off it is
noisy too. This scores checkpoints ``--steps`` of ``--model_dir`` with an evaluation mode of
the run's own CLI (``--mode=val`` by default: for summarization the test protocol of
Table 1 on the first 500 val articles, beam 4), each in a scratch copy of the run
directory (``<work_dir>/step_<N>``: the run's small files copied, the checkpoint's files
linked), so the run itself is never written to and may still be training. It writes a
markdown table of ``--metric`` against the step, the JSON beside it, and the commands::

    python -m experiments.checkpoint_curve --model_dir=/work/runs_sum/s2s20k_cont10000 \
        --steps=4000,6000,8000,10000 --out results/summarization_baselines/s2s20k_curve.md

Keep the checkpoints to score while the run trains (``--keep_checkpoints``: the Trainer
keeps the newest 3 by default). ``--metric`` is a dotted path into the mode's section of
results.json (``val.rouge.rouge_1``, the default). Choose with validation scores only: a
curve over test scores must not select anything.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys

from acvi_tf.run.records import load_run_config, made_by
from acvi_tf.training.checkpoints import listed_checkpoints
from acvi_tf.utils.files import load_json, save_json, write_report
from acvi_tf.utils.provenance import command_line
from experiments.convergence import (add_target_flags, budget_table, check_target_flags,
                                     extrapolate)
from experiments.tables.render import markdown_table

# What a scratch copy leaves out: the run's own results and decodes (the mode writes its
# own), its logs, and every checkpoint but the one scored.
NOT_COPIED = ("results.json", "best.json", "history.jsonl", "decode_*", "reference_*",
              "rouge1_items_*")


class CurveError(ValueError):
    """A bad --model_dir, --steps or --metric, named in the message."""


def run_module(model_dir):
    """The ``experiments.X`` CLI that trained ``model_dir`` (its run_config.json's command)."""
    saved = load_run_config(model_dir)
    if saved is None:
        raise CurveError(f"--model_dir: {model_dir} holds no run_config.json (not a run "
                         f"directory)")
    module = made_by(saved)
    if not module:
        raise CurveError(f"{model_dir}/run_config.json: its command {saved.get('command')!r} "
                         f"names no python -m module")
    return module


def kept_checkpoints(model_dir):
    """``{step: checkpoint prefix}`` of the checkpoints ``model_dir/ckpt`` holds."""
    return dict(listed_checkpoints(model_dir))


def scratch_copy(model_dir, prefix, scratch):
    """``scratch`` made a run directory whose only checkpoint is ``prefix`` (one of
    ``model_dir``'s): the small files copied (a mode writes into its run directory), the
    checkpoint's data and index linked (read only), its checksum and position files copied."""
    if os.path.exists(scratch):
        shutil.rmtree(scratch)
    os.makedirs(os.path.join(scratch, "ckpt"))
    skipped = {os.path.basename(p) for pattern in NOT_COPIED
               for p in glob.glob(os.path.join(model_dir, pattern))}
    for name in os.listdir(model_dir):
        path = os.path.join(model_dir, name)
        if os.path.isfile(path) and name not in skipped:
            shutil.copy2(path, os.path.join(scratch, name))
    name = os.path.basename(prefix)
    for path in glob.glob(prefix + ".*"):
        os.symlink(os.path.abspath(path), os.path.join(scratch, "ckpt", os.path.basename(path)))
    step = name.rsplit("-", 1)[1]
    for extra in (f"checksums-{step}.json", f"position-{step}.json"):
        path = os.path.join(os.path.dirname(prefix), extra)
        if os.path.exists(path):
            shutil.copy2(path, os.path.join(scratch, "ckpt", extra))
    with open(os.path.join(scratch, "ckpt", "checkpoint"), "w", encoding="utf-8") as f:
        f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
    return scratch


def lookup(results, metric, where):
    """``results`` at the dotted path ``metric``, a number; a CurveError names what is there."""
    node = results
    for i, key in enumerate(metric.split(".")):
        if not isinstance(node, dict) or key not in node:
            have = ", ".join(sorted(node)) if isinstance(node, dict) else type(node).__name__
            raise CurveError(f"--metric: {where} has no {'.'.join(metric.split('.')[:i + 1])!r}"
                             f" (there: {have})")
        node = node[key]
    if not isinstance(node, (int, float)):
        raise CurveError(f"--metric: {metric!r} in {where} is not a number")
    return float(node)


def score_step(model_dir, step, prefix, mode, metric, work_dir, extra_flags=(), module=None,
               rescore=False):
    """Scores ``model_dir``'s checkpoint ``prefix`` (of ``step``) with ``--mode=mode`` of its
    CLI in a scratch copy; returns ``{"step", "value", "command", "results"}``. A scratch
    copy already scored by the same command from the same checkpoint file (its
    ``scored.json``) is read again rather than decoded again, unless ``rescore``: a curve
    stopped halfway resumes where it stopped."""
    module = module or run_module(model_dir)
    scratch = os.path.join(work_dir, f"step_{step}")
    argv = [f"--mode={mode}", f"--model_dir={scratch}", "--noprogress", *extra_flags]
    command = command_line(module, argv)
    stamp = {"command": command, "checkpoint": checkpoint_stamp(prefix)}
    marker = os.path.join(scratch, "scored.json")
    if rescore or not os.path.exists(marker) or load_json(marker) != stamp:
        scratch_copy(model_dir, prefix, scratch)
        proc = subprocess.run([sys.executable, "-m", module, *argv], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if proc.returncode != 0:
            raise CurveError(f"step {step}: `{command}` failed (exit {proc.returncode}):\n"
                             + "\n".join(proc.stderr.strip().splitlines()[-15:]))
    path = os.path.join(scratch, "results.json")
    results = load_json(path)
    section = results.get(mode, results)
    scored = section.get("steps", results.get("steps"))
    if scored is not None and int(scored) != step:
        raise CurveError(f"step {step}: {path} says it scored step {scored}")
    row = {"step": step, "value": lookup(results, metric, path), "command": command,
           "results": path}
    save_json(marker, stamp)
    return row


def checkpoint_stamp(prefix):
    """The size and modification time of the checkpoint's index file: a checkpoint written
    again (a run restarted over the same directory) is scored again."""
    info = os.stat(prefix + ".index")
    return {"index": os.path.abspath(prefix + ".index"), "size": info.st_size,
            "mtime": info.st_mtime}


def as_history(rows, metric):
    """The scored rows as history.jsonl's evaluations, for :mod:`experiments.convergence`."""
    return [{"step": r["step"], "eval": {metric: r["value"]}} for r in rows]


def render(model_dir, mode, metric, rows, command, target=None, fit_steps=4000):
    lines = [f"# {metric} against the step: {model_dir}", "",
             f"Generated by `{command}`. Each checkpoint was scored by its run's CLI with "
             f"`--mode={mode}` (the command in each row) in a scratch copy of the run "
             f"directory: the protocol of that mode, not the quick evaluation of "
             f"history.jsonl.", ""]
    table = [[f"{r['step']:,}", f"{r['value']:.2f}", f"`{r['command']}`"] for r in rows]
    lines.append(markdown_table(["step", metric, "command"], table, align="rrl"))
    if target is not None:
        lines += [""] + budget_table([(os.path.basename(model_dir), model_dir,
                                       as_history(rows, metric))], target, fit_steps, metric,
                                     metric)
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m experiments.checkpoint_curve",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", required=True, help="the run directory")
    parser.add_argument("--steps", default="all",
                        help="comma-separated steps whose checkpoints to score, or 'all' "
                             "that ckpt/ keeps (default: %(default)s)")
    parser.add_argument("--mode", default="val",
                        help="the evaluation mode of the run's CLI (default: %(default)s)")
    parser.add_argument("--metric", default="val.rouge.rouge_1",
                        help="dotted path of the score in results.json (default: %(default)s)")
    parser.add_argument("--flag", action="append", default=[],
                        help="an extra flag for every evaluation, e.g. --flag=--ban_unk")
    add_target_flags(parser)
    parser.add_argument("--rescore", action="store_true",
                        help="decode every step again, even one a scratch copy already "
                             "scored with the same command")
    parser.add_argument("--work_dir", default=None,
                        help="where the scratch copies go (default: <model_dir>_curve)")
    parser.add_argument("--out", required=True,
                        help="the markdown table; the JSON is written beside it (.json)")
    args = parser.parse_args(argv)
    check_target_flags(parser, args)
    model_dir = os.path.normpath(args.model_dir)
    try:
        module = run_module(model_dir)
        kept = kept_checkpoints(model_dir)
        if args.steps == "all":
            steps = sorted(kept)
        else:
            try:
                steps = [int(s) for s in args.steps.split(",") if s.strip()]
            except ValueError:
                parser.error(f"--steps: {args.steps!r} is not 'all' or comma-separated steps")
            missing = [s for s in steps if s not in kept]
            if missing:
                raise CurveError(f"--steps: {model_dir} keeps no checkpoint of step(s) "
                                 f"{', '.join(map(str, missing))}; it keeps "
                                 f"{', '.join(map(str, sorted(kept))) or 'none'} (train with "
                                 f"--keep_checkpoints=K to keep more)")
        if not steps:
            raise CurveError(f"--steps: {model_dir} keeps no checkpoint")
        work_dir = args.work_dir or model_dir + "_curve"
        rows = []
        for step in steps:
            row = score_step(model_dir, step, kept[step], args.mode, args.metric, work_dir,
                             args.flag, module, args.rescore)
            print(f"step {step:,}: {args.metric} = {row['value']:.2f}", flush=True)
            rows.append(row)
    except CurveError as e:
        print(f"python -m experiments.checkpoint_curve: error: {e}", file=sys.stderr)
        return 2
    command = command_line("experiments.checkpoint_curve", argv)
    write_report(args.out, render(model_dir, args.mode, args.metric, rows, command,
                                  args.target, args.fit_steps))
    save_json(os.path.splitext(args.out)[0] + ".json",
               {"command": command, "model_dir": model_dir, "mode": args.mode,
                "metric": args.metric, "rows": rows,
               "extrapolation": None if args.target is None else dict(
                   extrapolate(as_history(rows, args.metric), args.target, args.fit_steps,
                               args.metric) or {}, target=args.target)})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
