"""The suite's scheduling order: each test's CPU seconds, heaviest first.

``python -m tests.durations FILE`` turns the JSON lines that ``ACVI_TEST_CPU=FILE make
test`` writes into ``tests/durations.json``. conftest reads that file to hand the test
files to the pytest workers heaviest first (:func:`order`), so that no worker is left
running a 30-second end-to-end test alone at the end of the suite. A test missing from the file
(a new one) counts as the median test; an old file costs time, never a result.
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


def order(items, durations):
    """``items`` with their test files heaviest first (by the files' summed CPU seconds),
    each file's tests kept together and in their own order.

    pytest-xdist's worksteal scheduler hands each worker one contiguous slice of the
    collection and an idle worker steals the back half of the longest queue, so the heavy
    end-to-end files start first and what is stolen at the end is light. A file's tests
    stay together because a module-scoped fixture (a trained model) is built again
    whenever a worker comes back to its module."""
    if not durations:
        return list(items)
    default = statistics.median(durations.values())

    def path(item):
        return item.nodeid.split("::")[0]
    cost, first = {}, {}
    for i, item in enumerate(items):
        cost[path(item)] = cost.get(path(item), 0.0) + durations.get(item.nodeid, default)
        first.setdefault(path(item), i)
    return sorted(items, key=lambda item: (-cost[path(item)], first[path(item)]))


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
