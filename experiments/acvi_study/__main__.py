"""``python -m experiments.acvi_study plan|run|report``: see the package's docstring."""

import argparse
import os
import sys

from experiments import acvi_study
from experiments.acvi_study import grid, report
from experiments.jobs import run_jobs, shell


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m experiments.acvi_study",
                                     description=acvi_study.__doc__.split("\n\n")[0],
                                     epilog=acvi_study.__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, about in (("plan", "every selected cell, its state and its command"),
                        ("run", "run what the selected cells still need"),
                        ("report", "archive the finished runs, write the report")):
        p = sub.add_parser(name, help=about)
        p.add_argument("--runs_root", default="runs/acvi_study")
        p.add_argument("--only", default="", help="cells or groups, comma-separated")
        if name == "run":
            p.add_argument("--parallel", type=int, default=1,
                           help="cells at once, one thread each (logs under RUNS_ROOT/logs)")
        if name == "report":
            p.add_argument("--out", default="results/acvi_study.md")
    args = parser.parse_args(argv)
    selected = grid.select(grid.cells(args.runs_root), args.only)
    if args.command == "plan":
        for cell in selected:
            name, group, about, argv_, model_dir = cell
            state = ("to run" if not grid.done(model_dir) else
                     "val to run" if grid.todo(cell) else "done")
            print(f"[{state}] {name} ({group}): {about}\n    {shell(argv_)}")
        return 0
    if args.command == "run":
        return 1 if run_jobs(grid.jobs(selected), args.parallel,
                             os.path.join(args.runs_root, "logs")) else 0
    return report.write(args.runs_root, grid.cells(args.runs_root), args.out)


if __name__ == "__main__":
    sys.exit(main())
