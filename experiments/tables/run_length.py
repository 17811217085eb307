"""How long a table's run takes, read from the table's archive (``--finish_within``).

Every archived ``results.json`` records ``wall_time_sec``, its run's training and
evaluation time (summed over the segments of a resumed run, so a gap between sessions
does not count). A run's expected length is the median over the archived seeds of its
row, else over every archived run of the table (a row not run yet), else unknown. It is
an estimate from whatever machine and load those runs had: a margin belongs in the
window it is compared with.
"""

import glob
import json
import os
import statistics


def row_of(run_name):
    """The table row of a run directory's name: ``multi30k_ved_s2`` -> ``multi30k_ved``."""
    head, sep, tail = run_name.rpartition("_s")
    return head if sep and head and tail.isdigit() else run_name


def archived_seconds(archive_dir):
    """{row: [wall seconds of each archived run of it]} of the runs under ``archive_dir``;
    a file that does not parse, or a run with no positive ``wall_time_sec``, counts for
    nothing."""
    out = {}
    for path in sorted(glob.glob(os.path.join(archive_dir, "*", "results.json"))):
        try:
            with open(path, encoding="utf-8") as f:
                seconds = json.load(f).get("wall_time_sec")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(seconds, (int, float)) and seconds > 0:
            out.setdefault(row_of(os.path.basename(os.path.dirname(path))), []).append(
                float(seconds))
    return out


def expected_seconds(run_name, archived):
    """The median of ``archived[row]`` (:func:`archived_seconds`) for the run's row, else
    of every archived run, else None."""
    mine = archived.get(row_of(run_name))
    if mine:
        return statistics.median(mine)
    every = [s for runs in archived.values() for s in runs]
    return statistics.median(every) if every else None


def plan_summary(names, archived, parallel=1):
    """One line for a table's dry run: how many of ``names`` (the runs still to train) and
    how long they are expected to take: the sum of their lengths (run-hours), and that sum
    over ``parallel`` lanes (a lower bound when the lengths differ); the runs with no
    estimate are counted apart."""
    if not names:
        return "nothing to train"
    lengths = [expected_seconds(n, archived) for n in names]
    known = [s for s in lengths if s is not None]
    line = f"{len(names)} run(s) to train"
    if known:
        total = sum(known) / 3600
        line += (f", expected ~{total:.1f} run-hours"
                 + (f", ~{total / parallel:.1f} h {parallel} at a time" if parallel > 1 else "")
                 + " (each run: the median length of its row's archived runs)")
    if len(known) < len(names):
        line += f"; {len(names) - len(known)} with no archived run to estimate from"
    return line
