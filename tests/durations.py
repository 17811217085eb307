"""The suite's scheduling order from each test's CPU seconds.

``python -m tests.durations FILE`` turns the JSON lines that ``ACVI_TEST_CPU=FILE make
test`` writes into ``tests/durations.json``. conftest reads that file to hand the test
files to the pytest workers in slices of equal CPU, each heaviest first
(:func:`order`), so that no worker is left running a 20-second end-to-end test alone at
the end. A test missing from the file (a new one) counts as the median test; an old file
costs time, never a result.
"""

import json
import os
import statistics
import sys

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "durations.json")


def load(path=PATH):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def slice_sizes(count, workers):
    """The contiguous slices pytest-xdist's worksteal scheduler first hands ``workers`` idle
    workers from ``count`` tests: worker k gets ``remaining // (workers - k)``."""
    sizes = []
    for k in range(workers):
        sizes.append((count - sum(sizes)) // (workers - k))
    return sizes


def order(items, durations, workers=1):
    """``items`` arranged for pytest-xdist's worksteal scheduler on ``workers`` workers.

    The scheduler gives each worker one contiguous slice of the collection, equal in
    number of tests (:func:`slice_sizes`), and an idle worker then steals the back half
    of the longest queue. So the files (by their summed CPU seconds; a test missing from
    ``durations``, a new one, counts as the median) are dealt heaviest first to the slice
    with the least CPU so far that still has room for the whole file, and each slice runs
    its files heaviest first: the slices cost about the same, the heavy end-to-end tests
    start first, and what is left to steal at the end is light. A file's tests stay
    together and in their own order (a module-scoped fixture, a trained model, is built
    again on every worker that runs one of its tests) except a file too many in number
    for any slice's room, which fills the slices in turn. ``workers`` 1: the files
    heaviest first."""
    if not durations:
        return list(items)
    default = statistics.median(durations.values())
    weight = {item.nodeid: durations.get(item.nodeid, default) for item in items}
    files = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    cost = {f: sum(weight[i.nodeid] for i in tests) for f, tests in files.items()}
    ranked = sorted(files, key=lambda f: -cost[f])  # stable: the collection's order on ties
    slices = [[] for _ in range(max(1, workers))]
    room = slice_sizes(len(items), len(slices))
    load = [0.0] * len(slices)
    for f in ranked:
        tests = files[f]
        fits = [k for k in range(len(slices)) if room[k] >= len(tests)]
        while tests:
            k = min(fits or [k for k in range(len(slices)) if room[k]],
                    key=lambda k: (load[k], k))
            part, tests = tests[:room[k]], tests[room[k]:]
            slices[k] += part
            room[k] -= len(part)
            load[k] += sum(weight[i.nodeid] for i in part)
            fits = []
    return [item for s in slices for item in s]


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: python -m tests.durations FILE  (FILE from ACVI_TEST_CPU=FILE make test)")
    costs = {}
    with open(argv[1], encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                record = json.loads(line)
                costs[record["test"]] = round(float(record["cpu_seconds"]), 1)
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"{argv[1]}:{number}: not an ACVI_TEST_CPU record ({e})")
    with open(PATH, "w", encoding="utf-8") as f:
        json.dump(dict(sorted(costs.items())), f, indent=0)
        f.write("\n")
    print(f"wrote {PATH}: {len(costs)} tests, {sum(costs.values()):.0f} CPU-seconds")


if __name__ == "__main__":
    main(sys.argv)
