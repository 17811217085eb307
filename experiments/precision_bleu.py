"""Does mixed precision cost BLEU? Runs trained with the same flags in two precisions,
side by side, with a paired bootstrap (issue 11: bf16 within 0.5 BLEU of fp32).

    python -m experiments.precision_bleu --baseline RUN [RUN ...] --candidate RUN [RUN ...] \\
        --out results/precision_bf16.md

Each RUN is a translate model_dir (or its archive) holding ``results.json``; the
baseline runs are paired with the candidate runs seed by seed. The report writes each
run's val / test BLEU, its precision and its training command, the paired bootstrap of
test BLEU (sacrebleu's, on the runs' ``decode_test.txt``), and a JSON beside the
markdown. Training minutes are listed as recorded; they are not a speed measurement
(the runs may have shared the machine): step-time ratios come from ``make bench`` /
``make bench-peers`` on an idle machine.
"""

import argparse
import json
import os
import sys


def _load(paths, flag):
    from experiments.tables.render import find_results
    runs = []
    for path in paths:
        found = find_results([path])
        if not found:
            sys.exit(f"{flag}: no translate results.json in {path}")
        runs += found
    return runs


def _summary(runs):
    from experiments.tables.render import flag_of, mean_std
    test = [r["bleu"]["test"] for r in runs]
    mean, std = mean_std(test)
    return {"runs": len(runs), "test_bleu_mean": mean, "test_bleu_std": std,
            "val_bleu": [r["bleu"]["dev"] for r in runs], "test_bleu": test,
            "precision": sorted({flag_of(r, "precision", "float32") for r in runs}),
            "train_minutes": [round(r.get("train_wall_time_sec", 0) / 60, 1) for r in runs],
            "commands": [r.get("train_command") or r.get("command") for r in runs]}


def compare(baseline_paths, candidate_paths):
    from experiments.tables.significance import bleu_vs
    base = _load(baseline_paths, "--baseline")
    cand = _load(candidate_paths, "--candidate")
    baseline, candidate = _summary(base), _summary(cand)
    return {"baseline": baseline, "candidate": candidate,
            "difference_test_bleu": candidate["test_bleu_mean"] - baseline["test_bleu_mean"],
            "paired_bootstrap_test_bleu": bleu_vs(base, cand)}


def render(result, command):
    b, c = result["baseline"], result["candidate"]

    def mean(s):
        return (f"{s['test_bleu_mean']:.2f}" if s["test_bleu_std"] is None
                else f"{s['test_bleu_mean']:.2f} ± {s['test_bleu_std']:.2f}")
    lines = ["# BLEU by training precision (CPU scale)", "",
             f"Command: `{command}`", "",
             "| runs | precision | val BLEU | test BLEU | train minutes (as recorded) |",
             "|:---|:---|:---|:---|:---|"]
    for name, s in (("baseline", b), ("candidate", c)):
        lines.append(f"| {name} ({s['runs']}) | {', '.join(s['precision'])} | "
                     f"{' / '.join(f'{v:.2f}' for v in s['val_bleu'])} | {mean(s)} | "
                     f"{' / '.join(str(m) for m in s['train_minutes'])} |")
    boot = result["paired_bootstrap_test_bleu"]
    lines += ["", f"Candidate − baseline, test BLEU: {result['difference_test_bleu']:+.2f}."]
    if boot:
        lines.append(f"Paired bootstrap (sacrebleu, {boot['n_samples']} resamples, "
                     f"{boot['seeds']} seed pair(s)): {boot['difference']:+.2f} BLEU, "
                     f"p = {boot['p_value']:.3f}.")
    lines += ["", "Training commands:", ""]
    lines += [f"- `{cmd}`" for s in (b, c) for cmd in s["commands"]]
    lines += ["", "Train minutes are as the runs recorded them, beside whatever else the "
              "machine ran: not a speed measurement (see `make bench-peers`)."]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", nargs="+", required=True, help="fp32 run directories")
    parser.add_argument("--candidate", nargs="+", required=True,
                        help="run directories of the other precision")
    parser.add_argument("--out", required=True, help="markdown report (a .json beside it)")
    args = parser.parse_args(argv)
    from acvi_tf.utils.files import write_report, write_text
    result = compare(args.baseline, args.candidate)
    command = "python -m experiments.precision_bleu " + " ".join(
        sys.argv[1:] if argv is None else argv)
    write_report(args.out, render(result, command))
    write_text(os.path.splitext(args.out)[0] + ".json", json.dumps(result, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
