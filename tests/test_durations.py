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
