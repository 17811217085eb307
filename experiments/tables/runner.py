r"""Runs a table: checks the data, trains/evaluates every missing run (each a
subprocess of its task CLI, ``python -m experiments.<task>``; ``--parallel N`` at a
time through :mod:`experiments.jobs`), archives the finished runs' small files into the
table's archive (``results/<table>/runs/``, :mod:`experiments.archive`), then renders
it. Finished runs are skipped, so a table resumes. Also the command line::

    python -m experiments.tables table4 --runs runs/table4 --out results/table4.md
    python -m experiments.tables run table4-cpu --runs_root runs/table4_cpu \
        --out results/table4_cpu.md [--only multi30k_soft,multi30k_acvi] [--seeds 0,1,2] \
        [--parallel 2] [--shard 1/4] [--start_within 90] [--finish_within 170]
        [--order seeds|rows] [--dry_run]

``--shard I/N`` runs only the I-th of N disjoint slices of those runs
(:mod:`experiments.tables.shard`): N machines given the same ``--runs_root`` (a shared
filesystem) and the same ``--only`` / ``--seeds`` run the whole table between them,
and each renders the table from every run finished there so far.

``--seeds`` runs each named run once per seed: seed 0 in ``<runs_root>/<name>``, seed k
in ``<runs_root>/<name>_s<k>`` with ``--seed=k``.

The runs start seed by seed (``--order seeds``, the default): seed 0 of every chosen row,
then seed 1 of every row, ..., so a runner stopped partway leaves every row with its first
seeds rather than some rows complete and others empty; ``--order rows`` keeps the table's
order, a row's seeds together. ``--start_within M`` starts no run more than M minutes
after the runner started (the ones started finish): with M the time left minus a run's
length, no run is cut off by the end of an allocation. ``--finish_within M`` starts a run
only if its expected length (the median of its row's archived runs) ends within M minutes.

``run`` stops before training anything, with exit code 2, when a dataset's files are
missing or are partial copies (the mirror holds only a 999-line head of IWSLT'15 train
and 10K Europarl lines of WMT'16): it says what to download and prints the commands it
would run.
"""

import argparse
import os
import sys
import time

from acvi_tf.utils.provenance import cpu_description
from experiments.archive import archive, archived_run
from experiments.jobs import Job, run_jobs, shell
from experiments.tables import preflight, run_length, shard as shard_lib, status as status_lib
from experiments.tables.registry import RENDER, SPECS, TABLES, TASK_OF
from experiments.tables.render import RESULT_KEYS, find_results
from experiments.tables.write import rows_of, write_table  # noqa: F401 (tests, scripts)
from experiments.tables.spec import CONFIG_DIR, REPO_ROOT, read_flagfile


def run_name(name, seed):
    """A run's directory name under the runs root: seed 0 keeps the table's name."""
    return name if seed == 0 else f"{name}_s{seed}"


PLANNED = "planned"


def row_seeds(table, name, seeds):
    """The seeds of row ``name``: ``seeds``, or with ``seeds == "planned"`` 0..n-1 for the
    row's planned count n (``Table.planned_seeds``, 1 where the table names none)."""
    return range(SPECS[table].planned_seeds.get(name, 1)) if seeds == PLANNED else seeds


def plan(table, runs_root, only=None, seeds=(0,)):
    """[(name, argv, model_dir, settings)] of the runs of ``TABLES[table]`` (those named in
    ``only`` when given), once per seed (``seeds``, or "planned": :func:`row_seeds`), run
    by the table's task CLI; ``settings`` are the flagfile's and the extra args'
    ``--key=value`` pairs (bare ``--flag`` / ``--noflag`` read as "true" / "false")."""
    module = f"experiments.{TASK_OF[table]}"
    out = []
    for name, flagfile, extra in TABLES[table]:
        if only is not None and name not in only:
            continue
        settings = {}
        argv = [sys.executable, "-m", module]
        if flagfile:
            argv.append(f"--flagfile={os.path.relpath(os.path.join(CONFIG_DIR, flagfile))}")
            settings.update(read_flagfile(os.path.join(CONFIG_DIR, flagfile)))
        for arg in extra:
            key, sep, value = arg[2:].partition("=")
            settings[key] = value if sep else ("false" if key.startswith("no") else "true")
        for seed in row_seeds(table, name, seeds):
            model_dir = os.path.join(runs_root, run_name(name, seed))
            seeded = [f"--seed={seed}"] if seed else []
            out.append((run_name(name, seed),
                        argv + list(extra) + [f"--model_dir={model_dir}"] + seeded, model_dir,
                        dict(settings, **({"seed": str(seed)} if seed else {}))))
    return out


def archive_runs(table, runs, archive_root=REPO_ROOT):
    """Archives the finished ``runs`` (of :func:`plan`) into the table's archive under
    ``archive_root`` (a repository: this one, or e.g. the main checkout when the runs
    train from a worktree at a fixed commit), if the table has one; returns how many
    were copied."""
    if not SPECS[table].archive:
        return 0
    return archive([(name, model_dir) for name, _, model_dir, _ in runs],
                   os.path.join(archive_root, SPECS[table].archive))


def seed_of(run):
    """The seed of a run of :func:`plan`."""
    return int(run[3].get("seed", 0))


def run_table(table, runs_root, out, dry_run=False, stream=None, only=None, seeds=(0,),
              parallel=1, shard=None, archive_root=REPO_ROOT, retrain_archived=False,
              order="seeds", start_until=None, finish_until=None):
    """Checks the data of every run, runs the missing ones (``parallel`` at a time, each
    job's output in ``<runs_root>/logs`` when more than one), archives each run as soon as
    it ends and then every finished run under ``runs_root`` whose command the archive
    lacks (into the table's archive under ``archive_root``), renders the table to ``out``
    from ``runs_root`` and the archives under ``archive_root``. ``shard=(I, N)``: only the
    I-th of N disjoint slices of the runs (:mod:`~experiments.tables.shard`); the table
    still renders from every run under ``runs_root``. A run whose command finished and is
    in the archive is not run again (its archived results render the row) unless
    ``retrain_archived``. ``order``: "seeds" (every row's seed 0, then every row's seed 1,
    ...) or "rows" (the plan's order). ``start_until``: no run starts after this time
    (seconds since the epoch; see :func:`experiments.jobs.run_jobs`); ``finish_until``:
    none starts unless its expected length (:mod:`~experiments.tables.run_length`, from
    the archive, its runs on this machine's CPU first) ends before this time. Returns 2,
    running nothing, when data (or features, or trained models) are missing; 1 when a run
    failed (the table is not written)."""
    stream = stream or sys.stdout
    task = TASK_OF[table]
    runs = plan(table, runs_root, only, seeds)
    of = ""
    if shard is not None:
        of = f" (shard {shard[0]}/{shard[1]} of {len(runs)})"
        runs = shard_lib.select(runs, *shard)
    if order == "seeds":
        runs = sorted(runs, key=seed_of)  # stable: the table's row order within a seed
    elif order != "rows":
        raise ValueError(f"order must be 'seeds' or 'rows', got {order!r}")

    where = os.path.normpath(os.path.join(archive_root, SPECS[table].archive))

    def in_archive(run):  # its command finished and was archived: not trained again
        return bool(SPECS[table].archive) and not retrain_archived and bool(
            archived_run(where, run[0], run[1]))

    def todo(run):
        return [] if preflight.done(task, run[2], run[3]) or in_archive(run) else [run[1]]

    print(f"{table}: {len(runs)} runs under {runs_root}{of}", file=stream)
    to_run = [run[0] for run in runs if todo(run)]
    for run in runs:
        state = "to run" if run[0] in to_run else "archived" if in_archive(run) else "done"
        print(f"  [{state}] {shell(run[1])}", file=stream)
    lengths = run_length.archived_seconds(where)  # the archive read once: summary and jobs
    cpu = cpu_description()  # the runs of this machine's CPU estimate first
    print("  " + run_length.plan_summary(to_run, lengths, parallel, cpu), file=stream)
    if not preflight.CHECKS[task](table, runs, stream):
        return 2
    if dry_run:
        return 0

    def archived(run):
        # at once, not after the last run: a machine lost hours later loses no finished run
        if archive_runs(table, [run], archive_root):
            return f"archived in {where}"
        return None

    failed = run_jobs([Job(run[0], lambda run=run: todo(run), done=lambda run=run: archived(run),
                           expected_seconds=run_length.expected_seconds(run[0], lengths, cpu))
                       for run in runs], parallel,
                      os.path.join(runs_root, "logs") if parallel > 1 else None, stream,
                      start_until=start_until, finish_until=finish_until)
    # every seed found under runs_root, finished by the table's measure (Table 5's: its
    # DUC2004 decode), that the archive lacks: an archived run is never replaced by a rerun
    every = [run for run in plan(table, runs_root, seeds=sorted(
        {s for name, _, _ in TABLES[table] for s in row_seeds(table, name, seeds)}
        | _seeds_under(runs_root)))
        if preflight.done(task, run[2], run[3]) and not archived_run(where, run[0], run[1])]
    copied = archive_runs(table, every, archive_root)
    if copied:
        print(f"{copied} finished runs archived in {where}", file=stream)
    if failed:
        print(f"{failed} run(s) failed; the table is not written", file=stream)
        return 1
    epilogue = SPECS[table].epilogue
    text = write_table(table, find_results(SPECS[table].result_paths(runs_root, archive_root),
                                           *RESULT_KEYS[task]), out,
                       epilogue(runs_root, out, stream) if epilogue else ())
    print(f"\n{text}\n\nwritten to {out}", file=stream)
    return 0


def _minutes_from_now(minutes):
    return None if minutes is None else time.time() + 60 * minutes


def _seeds_under(runs_root):
    """The seeds k of the ``<name>_s<k>`` run directories under ``runs_root``."""
    if not os.path.isdir(runs_root):
        return set()
    found = set()
    for d in os.listdir(runs_root):
        head, sep, tail = d.rpartition("_s")
        if sep and head and tail.isdigit():
            found.add(int(tail))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m experiments.tables",
                                     description="Results JSON -> markdown tables, with the "
                                                 "paper's numbers quoted beside ours.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in RENDER:
        p = sub.add_parser(name, help=f"render the {name} table from run directories")
        p.add_argument("--runs", nargs="+", required=True,
                       help="model_dirs with results.json, or folders of them")
        p.add_argument("--out", help="markdown file to write (default: print only)")
    p = sub.add_parser("run", help="check the data, run every missing run, render the table")
    p.add_argument("table", choices=sorted(TABLES))
    p.add_argument("--runs_root", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--dry_run", action="store_true",
                   help="check the data and print the commands; run nothing")
    p.add_argument("--only", default="all",
                   help="comma-separated run names of the table to run (e.g. "
                        "lead3,pg_soft,pg_acvi), or 'all'; the table renders every result "
                        "found under --runs_root (and in its archive) either way")
    p.add_argument("--seeds", default="0",
                   help="comma-separated seeds of each run (e.g. 0,1,2): seed k > 0 runs "
                        "in <runs_root>/<name>_s<k> with --seed=k; 'planned': each row's "
                        "planned number of seeds (table4-cpu: 5 for soft, ACVI (ours), "
                        "variational, VRNMT, the Transformer, 3 for the other baselines "
                        "and the controls, 1 for the floors)")
    p.add_argument("--parallel", type=int, default=1,
                   help="runs at once, one thread each, their output in <runs_root>/logs")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run only the I-th (1..N) of N disjoint slices of the chosen runs, "
                        "e.g. one per machine of a cluster sharing --runs_root; every "
                        "machine needs the same --only and --seeds")
    p.add_argument("--archive_root", default=REPO_ROOT,
                   help="the repository whose results/ receives the finished runs' small "
                        "files (default: this checkout); e.g. the main checkout when the "
                        "runs train from a git worktree at a fixed commit")
    p.add_argument("--retrain_archived", action="store_true",
                   help="train again the runs whose finished results are in the archive")
    p.add_argument("--order", choices=("seeds", "rows"), default="seeds",
                   help="seeds: every row's seed 0 first, then every row's seed 1, ... (a "
                        "runner stopped partway leaves every row with seeds); rows: the "
                        "table's order, a row's seeds together")
    p.add_argument("--start_within", type=float, default=None, metavar="MINUTES",
                   help="start no run later than this many minutes after the runner "
                        "starts (runs already started finish); e.g. the time left in an "
                        "allocation minus one run's length")
    p.add_argument("--finish_within", type=float, default=None, metavar="MINUTES",
                   help="start a run only if it is expected to end within this many minutes "
                        "of the runner's start (its length: the median of its row's "
                        "archived runs, else of the table's; leave a margin)")
    status_lib.add_arguments(sub.add_parser("status", help=status_lib.HELP))
    args = parser.parse_args(argv)
    if args.command == "status":
        return status_lib.main(args.runs_root)
    if args.command == "run":
        only = None
        if args.only != "all":
            only = [n for n in args.only.split(",") if n]
            known = [r[0] for r in TABLES[args.table]]
            unknown = [n for n in only if n not in known]
            if unknown or not only:
                parser.error(f"--only: {', '.join(unknown) or 'no run names'} not among "
                             f"{args.table}'s runs: {', '.join(known)}")
        try:
            seeds = (PLANNED if args.seeds == PLANNED else
                     sorted({int(x) for x in args.seeds.split(",") if x.strip()}))
        except ValueError:
            seeds = []
        if seeds != PLANNED and (not seeds or min(seeds) < 0):
            parser.error(f"--seeds: {args.seeds!r} is not a list of seeds like 0,1,2, "
                         f"nor 'planned'")
        if args.parallel < 1:
            parser.error(f"--parallel: {args.parallel} must be at least 1")
        shard = None
        if args.shard is not None:
            try:
                shard = shard_lib.parse(args.shard)
            except ValueError as e:
                parser.error(f"--shard: {e}")
        for flag in ("start_within", "finish_within"):
            if getattr(args, flag) is not None and getattr(args, flag) < 0:
                parser.error(f"--{flag}: {getattr(args, flag)} minutes must be >= 0")
        if not os.path.isdir(args.archive_root):
            parser.error(f"--archive_root: {args.archive_root} is not a directory")
        return run_table(args.table, args.runs_root, args.out, args.dry_run, only=only,
                         seeds=seeds, parallel=args.parallel, shard=shard,
                         archive_root=os.path.abspath(args.archive_root),
                         retrain_archived=args.retrain_archived, order=args.order,
                         start_until=_minutes_from_now(args.start_within),
                         finish_until=_minutes_from_now(args.finish_within))
    results = find_results(args.runs, *RESULT_KEYS[TASK_OF[args.command]])
    if not results:
        parser.error(f"--runs: no results.json of a translation run under {args.runs}")
    print(write_table(args.command, results, args.out))
    return 0
