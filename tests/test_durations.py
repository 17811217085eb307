"""The suite's scheduling order (tests/durations.py)."""

import json
import types

import pytest

from tests import durations


def _items(*nodeids):
    return [types.SimpleNamespace(nodeid=n) for n in nodeids]


def test_files_run_heaviest_first_with_their_tests_together_and_in_order():
    items = _items("a.py::x", "b.py::z", "a.py::y", "c.py::p", "c.py::q[1]")
    costs = {"a.py::x": 1.0, "a.py::y": 1.0, "b.py::z": 5.0, "c.py::p": 0.1}
    # c.py::q[1] is new: it counts as the median test (1.0), so c.py costs 1.1 < a.py's 2.0
    assert [i.nodeid for i in durations.order(items, costs)] == [
        "b.py::z", "a.py::x", "a.py::y", "c.py::p", "c.py::q[1]"]
    assert durations.order(items, {}) == items  # no file: the collection's order


def _xdist_first_slices(count, workers):
    """The test counts pytest-xdist's own worksteal scheduler first sends each of
    ``workers`` idle workers from a collection of ``count`` tests."""
    from xdist.scheduler.worksteal import WorkStealingScheduling

    def getvalue(name):
        return {"tx": ["popen"] * workers, "numprocesses": workers}.get(name)

    class Node:
        def __init__(self, i):
            self.gateway = types.SimpleNamespace(id=f"gw{i}")
            self.shutting_down, self.sent = False, []

        def send_runtest_some(self, indices):
            self.sent += indices

    scheduler = WorkStealingScheduling(types.SimpleNamespace(getvalue=getvalue))
    nodes = [Node(i) for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, [f"t{i}" for i in range(count)])
    scheduler.schedule()
    assert [i for node in nodes for i in node.sent] == list(range(count))  # contiguous
    return [len(node.sent) for node in nodes]


@pytest.mark.parametrize("count, workers", [(10, 2), (10, 3), (743, 3), (9, 4)])
def test_slice_sizes_are_the_ones_xdist_worksteal_sends(count, workers):
    assert durations.slice_sizes(count, workers) == _xdist_first_slices(count, workers)


def test_each_worker_slice_gets_whole_files_heaviest_first_and_about_equal_cpu():
    # Two workers take 5 tests each. Files by cost: h1 (10), h2 (9), m (8: 2 tests),
    # l (3: 6 tests). h1 -> slice 0, h2 -> slice 1, m -> slice 1 (the lighter; 17), and l,
    # too many for either's room (4, 2), fills slice 0 (the lighter, 10) then slice 1.
    items = _items(*[f"l.py::t{i}" for i in range(6)], "m.py::a", "m.py::b", "h2.py::x",
                   "h1.py::x")
    costs = {"h1.py::x": 10.0, "h2.py::x": 9.0, "m.py::a": 4.0, "m.py::b": 4.0,
             **{f"l.py::t{i}": 0.5 for i in range(6)}}
    assert [i.nodeid for i in durations.order(items, costs, workers=2)] == [
        "h1.py::x", "l.py::t0", "l.py::t1", "l.py::t2", "l.py::t3",
        "h2.py::x", "m.py::a", "m.py::b", "l.py::t4", "l.py::t5"]
    # One worker: the files heaviest first, as without workers.
    assert durations.order(items, costs, workers=1) == durations.order(items, costs)


def test_the_file_is_made_from_acvi_test_cpu_records(tmp_path, monkeypatch):
    records = tmp_path / "cpu.jsonl"
    records.write_text(json.dumps({"test": "a.py::x", "cpu_seconds": 1.26,
                                   "wall_seconds": 2.0}) + "\n")
    out = tmp_path / "durations.json"
    monkeypatch.setattr(durations, "PATH", str(out))
    durations.main(["durations", str(records)])
    assert durations.load(str(out)) == {"a.py::x": 1.3}
    records.write_text("{}\n")
    with pytest.raises(SystemExit, match=r"cpu.jsonl:1: not an ACVI_TEST_CPU record"):
        durations.main(["durations", str(records)])
