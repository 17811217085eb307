"""How long a table's run takes, read from the table's archive (``--finish_within``).

Every archived ``results.json`` records ``wall_time_sec``, its run's training and
evaluation time (summed over the segments of a resumed run, so a gap between sessions
does not count), and ``provenance.cpu_models`` the CPU it ran on. A run's expected length
is the median over the archived seeds of its row, else over every archived run of the
table (a row not run yet), else unknown; of those, only the runs on this machine's CPU
where there are any. The CPU matters more than the row's spread: a Transformer seed of
Table 4 trained at a median 1,075 target tokens/s on an AVX2-only AMD EPYC against 1,915
on one with AVX-512 (the LSTM rows at similar rates on both). It is still an estimate
from whatever load those runs had: a margin belongs in the window it is compared with.
"""

import glob
import json
import os
import statistics


def row_of(run_name):
    """The table row of a run directory's name: ``multi30k_ved_s2`` -> ``multi30k_ved``."""
    head, sep, tail = run_name.rpartition("_s")
    return head if sep and head and tail.isdigit() else run_name


def run_cpu(result):
    """The CPU a run's ``results.json`` (parsed) ran on: its one ``provenance.cpu_models``
    entry; None when it has none, or several (resumed on another machine)."""
    cpus = (result.get("provenance") or {}).get("cpu_models") or []
    return cpus[0] if len(cpus) == 1 and isinstance(cpus[0], str) else None


def archived_seconds(archive_dir):
    """{row: [(wall seconds, CPU) of each archived run of it]} of the runs under
    ``archive_dir`` (the CPU from :func:`run_cpu`, None where unknown); a file that does
    not parse, or a run with no positive ``wall_time_sec``, counts for nothing."""
    out = {}
    for path in sorted(glob.glob(os.path.join(archive_dir, "*", "results.json"))):
        try:
            with open(path, encoding="utf-8") as f:
                result = json.load(f)
            seconds = result.get("wall_time_sec")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(seconds, (int, float)) and seconds > 0:
            out.setdefault(row_of(os.path.basename(os.path.dirname(path))), []).append(
                (float(seconds), run_cpu(result)))
    return out


def _median_preferring(runs, cpu):
    """(median seconds, whether from ``cpu``'s runs) of [(seconds, cpu)] runs: those on
    ``cpu`` when there are any, else all of them."""
    same = [s for s, c in runs if cpu is not None and c == cpu]
    return statistics.median(same or [s for s, _ in runs]), bool(same)


def estimate(run_name, archived, cpu=None):
    """(expected seconds, whether from runs on ``cpu``) of a run: :func:`expected_seconds`
    and where its figure came from; (None, False) with no archived run."""
    mine = archived.get(row_of(run_name))
    if mine:
        return _median_preferring(mine, cpu)
    every = [r for runs in archived.values() for r in runs]
    return _median_preferring(every, cpu) if every else (None, False)


def expected_seconds(run_name, archived, cpu=None):
    """The median length of the run's row's archived runs (:func:`archived_seconds`), else
    of every archived run, else None; in each case of those that ran on ``cpu`` (this
    machine's :func:`acvi_tf.utils.provenance.cpu_description`) when there are any."""
    return estimate(run_name, archived, cpu)[0]


def plan_summary(names, archived, parallel=1, cpu=None):
    """One line for a table's dry run: how many of ``names`` (the runs still to train) and
    how long they are expected to take: the sum of their lengths (run-hours), and that sum
    over ``parallel`` lanes (a lower bound when the lengths differ), and how many of the
    lengths come from runs on this machine's ``cpu``; the runs with no estimate are
    counted apart."""
    if not names:
        return "nothing to train"
    estimates = [estimate(n, archived, cpu) for n in names]
    known = [s for s, _ in estimates if s is not None]
    line = f"{len(names)} run(s) to train"
    if known:
        total = sum(known) / 3600
        here = sum(1 for s, same in estimates if s is not None and same)
        line += (f", expected ~{total:.1f} run-hours"
                 + (f", ~{total / parallel:.1f} h {parallel} at a time" if parallel > 1 else "")
                 + " (each run: the median length of its row's archived runs"
                 + (f"; {here} of {len(known)} from runs on this CPU, {cpu}" if cpu else "")
                 + ")")
    if len(known) < len(names):
        line += f"; {len(names) - len(known)} with no archived run to estimate from"
    return line
