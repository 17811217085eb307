"""``tables run --shard I/N``: the I-th of N disjoint slices of a table's runs, so that N
machines (a Slurm array, a ``for`` loop over ssh) share one table's runs in one shared
runs directory, and the table renders from all of them.

The slice is taken after ``--only`` and ``--seeds`` have chosen the runs, round-robin
(run k goes to shard k mod N + 1): the plan lists a table's cheap and expensive rows in
blocks (soft and ACVI first, then each baseline), so contiguous slices would give one
machine all the Transformer runs. Every machine must make the same plan, i.e. be given
the same ``--only`` and ``--seeds``; the union of the N slices is then the whole plan
and no run is in two slices.
"""


def parse(text):
    """``"I/N"`` -> ``(I, N)`` with 1 <= I <= N; ValueError with a one-line reason."""
    head, sep, tail = str(text).strip().partition("/")
    try:
        index, count = int(head), int(tail)
    except ValueError:
        index = count = None
    if not sep or index is None:
        raise ValueError(f"{text!r} is not I/N (e.g. 1/4: the first of 4 slices)")
    if count < 1 or not 1 <= index <= count:
        raise ValueError(f"{text!r}: need 1 <= I <= N (shards are numbered from 1)")
    return index, count


def select(runs, index, count):
    """The runs of shard ``index`` of ``count`` (1-based), in the plan's order."""
    return [run for k, run in enumerate(runs) if k % count == index - 1]
