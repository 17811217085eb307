"""The README's result figures, generated from the tables' JSON (issue 33, item 6).

The README quotes no result by hand. Each figure it shows sits in a block

    <!-- BEGIN generated: table4-cpu -->
    ...
    <!-- END generated: table4-cpu -->

whose lines this module writes from ``results/<table>.json`` (written beside each table's
markdown by ``python -m experiments.tables``). After re-rendering a table:

    python -m experiments.readme_results           # rewrite the blocks in README.md
    python -m experiments.readme_results --check   # exit 1, naming the stale blocks

The test suite runs the check, so a table re-rendered without this step fails it.
"""

import argparse
import json
import os
import re
import statistics
import sys

from experiments.readme_speed import speed

# Only the standard library: the check runs in the test suite and needs no TensorFlow.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO_ROOT, "README.md")
BEGIN = re.compile(r"^<!-- BEGIN generated: ([\w.-]+) -->$")
END = "<!-- END generated: {} -->"


def _mean_std(values, planned=None):
    """mean ± std (n seeds); "n of m seeds" while a row has fewer than its planned m."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    n = len(values)
    seeds = f"{n} of {planned} seeds" if planned and n < planned else \
        f"{n} seed{'s' if n > 1 else ''}"
    if n == 1:
        return f"{values[0]:.2f} ({seeds})"
    return f"{statistics.fmean(values):.2f} ± {statistics.stdev(values):.2f} ({seeds})"


def _versus(entry):
    if entry.get("diff_to_soft") is None:
        return "–"
    low, high = entry["ci95"]
    p = entry.get("welch_p")
    welch = "–" if p is None else (f"{p:.2f}" if p >= 0.01 else f"{p:.1e}")
    return f"{entry['diff_to_soft']:+.2f} [{low:+.2f}, {high:+.2f}], Welch p = {welch}"


def _commits(entry):
    return ", ".join(sorted({c[:7] for c in entry.get("commit", []) if c})) or "–"


def _baseline_first(data, baseline):
    """The (key, entry) pairs of a table's JSON, the baseline's row first."""
    return sorted(data.items(), key=lambda item: item[0] != baseline)


def _load(name):
    path = os.path.join(REPO_ROOT, "results", f"{name}.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise SystemExit(f"{path}: missing; render the table first "
                         f"(python -m experiments.tables {name.replace('_', '-')} ...)")


def _block(name, header, rows):
    """A generated block: a markdown table of ``header`` (cells, alignments) and ``rows``,
    then where its numbers come from."""
    source = f"results/{name}.json"
    return (["| " + " | ".join(c for c, _ in header) + " |",
             "|" + "|".join(a for _, a in header) + "|"]
            + ["| " + " | ".join(row) + " |" for row in rows]
            + ["", f"Generated from [{source}]({source}) ([{name}.md](results/{name}.md): "
                   f"every run's command)."])


def table4_cpu():
    data = _load("table4_cpu")
    header = [("row (Multi30k En→De, CPU scale converged)", ":--"), ("test2016 BLEU", "--:"),
              ("val BLEU", "--:"), ("vs soft attention: Δ [95% interval], Welch p", ":--"),
              ("commit", ":--")]
    return _block("table4_cpu", header, [
        [entry.get("name", key), _mean_std(entry["test_bleu"], entry.get("planned_seeds")),
         _mean_std(entry["val_bleu"]),
         _versus(entry), _commits(entry)] for key, entry in _baseline_first(data, "soft")])


def table1_cpu():
    data = _load("table1_cpu")
    header = [("row (CNN/DM, first 500 test articles, CPU scale, 2,000 steps)", ":--"),
              ("ROUGE-1", "--:"), ("ROUGE-2", "--:"), ("ROUGE-L", "--:"),
              ("vs pointer-generator + coverage (SA), ROUGE-1: Δ [95% interval], Welch p",
               ":--")]
    # The final models only: a coverage run's scores before coverage are a stage of it.
    final = {k: v for k, v in data.items()
             if k.endswith("_coverage") or "softmax" in k or k == "lead-3"}
    return _block("table1_cpu", header, [
        [entry["name"]] + [_mean_std(entry[k]) for k in ("rouge_1", "rouge_2", "rouge_l")]
        + [_versus(entry)] for _, entry in _baseline_first(final, "soft_coverage")])


# The README's answer to "does ACVI help?": (table JSON, row key, label, baseline key,
# baseline label, score key, score label, where). Rows not rendered yet say so.
VERDICTS = (
    ("table4_cpu", "acvi", "ACVI (ours)", "soft", "soft attention", "test_bleu",
     "test2016 BLEU", "Multi30k En→De, Table 4 at CPU scale, converged"),
    ("table4_cpu", "acvi_paper_elbo", "ACVI with the paper's ELBO", "soft", "soft attention",
     "test_bleu", "test2016 BLEU", "Multi30k En→De, Table 4 at CPU scale, converged"),
    ("table1_cpu", "acvi_coverage", "pointer-generator + ACVI (ours) + coverage", "soft_coverage",
     "pointer-generator + coverage (SA)", "rouge_1", "ROUGE-1",
     "CNN/DM, Table 1 at CPU scale, 2,000 steps"),
    ("table1_cpu", "acvi_paper_elbo_coverage",
     "pointer-generator + ACVI with the paper's ELBO + coverage",
     "soft_coverage", "pointer-generator + coverage (SA)", "rouge_1", "ROUGE-1",
     "CNN/DM, Table 1 at CPU scale, 2,000 steps"),
)


def reading(low, high):
    """Where a difference's 95% interval lies against 0: ahead, behind or level."""
    if low > 0:
        return "**ahead**"
    if high < 0:
        return "**behind**"
    return "**level** (the interval spans 0: no evidence either way)"


def verdict():
    """One line per comparison of :data:`VERDICTS`: the reading of its two-level interval,
    the difference, the interval, Welch's p and the seeds on each side."""
    lines, tables = [], {}
    for table, key, label, base, base_label, score, score_label, where in VERDICTS:
        data = tables.setdefault(table, _load(table))
        entry, baseline = data.get(key), data.get(base, {})
        head = f"- {label} against {base_label}, {score_label} ({where}): "
        if not entry or entry.get("diff_to_soft") is None:
            lines.append(head + "not run yet.")
            continue
        low, high = entry["ci95"]
        seeds = (len([v for v in entry[score] if v is not None]),
                 len([v for v in baseline.get(score, []) if v is not None]))
        lines.append(head + f"{reading(low, high)}: {_versus(entry)}, "
                            f"{seeds[0]} vs {seeds[1]} seeds.")
    sources = sorted(tables)
    lines += ["", "Generated from " + " and ".join(
        f"[results/{t}.json](results/{t}.json)" for t in sources) + "."]
    figures = [f"results/{t}_seeds.png" for t in sources
               if os.path.exists(os.path.join(REPO_ROOT, "results", f"{t}_seeds.png"))]
    if figures:
        lines += ["Every seed of every row, against its baseline's spread: " + ", ".join(
            f"[{f}]({f})" for f in figures) + "."]
    return lines


BLOCKS = {"table4-cpu": table4_cpu, "table1-cpu": table1_cpu, "verdict": verdict,
          "speed": speed}


def render(text, blocks=None, where=README):
    """``text`` with every generated block's lines replaced by ``blocks[name]()``; an
    unknown block name or a BEGIN without its END is an error naming the line."""
    blocks = BLOCKS if blocks is None else blocks
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        out.append(lines[i])
        match = BEGIN.match(lines[i])
        i += 1
        if not match:
            continue
        name = match.group(1)
        if name not in blocks:
            raise ValueError(f"{where}:{i}: unknown generated block {name!r} "
                             f"(known: {', '.join(sorted(blocks))})")
        end = next((j for j in range(i, len(lines)) if lines[j] == END.format(name)), None)
        if end is None:
            raise ValueError(f"{where}:{i}: {lines[i - 1]} has no {END.format(name)}")
        out += blocks[name]() + [lines[end]]
        i = end + 1
    return "\n".join(out)


def stale_blocks(text, blocks=None):
    """The names of the blocks whose lines differ from what :func:`render` writes."""
    new = render(text, blocks)
    if new == text:
        return []
    names = [m.group(1) for m in map(BEGIN.match, text.split("\n")) if m]
    return [n for n in names
            if render(text, {k: (v if k == n else _keep(text, k))
                             for k, v in (blocks or BLOCKS).items()}) != text]


def _keep(text, name):
    """A block function that writes back the block's current lines."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line == f"<!-- BEGIN generated: {name} -->")
    end = lines.index(END.format(name), start)
    return lambda: lines[start + 1:end]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m experiments.readme_results",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a block is out of date")
    parser.add_argument("--readme", default=README)
    args = parser.parse_args(argv)
    with open(args.readme, encoding="utf-8") as f:
        text = f.read()
    if args.check:
        stale = stale_blocks(text)
        if stale:
            print(f"{args.readme}: generated blocks out of date: {', '.join(stale)}; run "
                  f"python -m experiments.readme_results", file=sys.stderr)
            return 1
        print(f"{args.readme}: generated blocks up to date")
        return 0
    new = render(text, where=args.readme)
    with open(args.readme, "w", encoding="utf-8") as f:
        f.write(new)
    print(f"{args.readme}: {'updated' if new != text else 'already up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
