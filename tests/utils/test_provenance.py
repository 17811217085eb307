"""Provenance of a run (issue 33, item 6): the commit, time and machine load of every
start of a run in ``provenance.json``, their summary in ``results.json`` and the
commit in the tables' footnotes. The commits are checked against ``git rev-parse`` of
a repository each test makes; the times against the clock."""

import datetime
import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

import acvi_tf
from acvi_tf.errors import RunError
from acvi_tf.run.directory import load_provenance, locked_run_dir, run_segment, start_segment
from acvi_tf.run.results import finish_results
from acvi_tf.utils import provenance
from experiments.tables.render import Footnotes

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           "-c", "commit.gpgsign=false", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo, text):
    """Writes ``text`` into the tracked file and commits it; returns the new HEAD."""
    (repo / "tracked.txt").write_text(text)
    _git(repo, "add", "tracked.txt")
    _git(repo, "commit", "-q", "-m", text)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A new git repository with one commit, standing in for the package's checkout."""
    path = tmp_path / "repo"
    path.mkdir()
    _git(path, "init", "-q")
    _commit(path, "one\n")
    monkeypatch.setattr(provenance, "REPO_ROOT", str(path))
    return path


def _seconds_ago(stamp):
    then = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    return (now - then).total_seconds()


@needs_git
def test_snapshot_names_head_and_turns_unclean_when_a_tracked_file_changes(repo):
    snap = provenance.snapshot(str(repo))
    assert snap["commit"] == _git(repo, "rev-parse", "HEAD")
    assert snap["clean"] is True
    assert 0 <= _seconds_ago(snap["time"]) < 60
    assert snap["load"] == pytest.approx(list(os.getloadavg()), abs=0.5)
    assert snap["cpus"] == os.cpu_count() and snap["host"] == socket.gethostname()
    assert snap["cpu"] == provenance.cpu_description()
    (repo / "untracked.txt").write_text("scratch\n")  # untracked files do not count
    assert provenance.snapshot(str(repo))["clean"] is True
    (repo / "tracked.txt").write_text("changed\n")
    assert provenance.snapshot(str(repo))["clean"] is False


@needs_git
def test_a_rendered_table_in_results_leaves_the_tree_clean(repo):
    # A table run writes results/<table>.md into the tree it trains from; the runs after
    # it are still at the committed code.
    (repo / "results").mkdir()
    (repo / "results" / "table.md").write_text("old\n")
    _git(repo, "add", "results/table.md")
    _git(repo, "commit", "-q", "-m", "table")
    (repo / "results" / "table.md").write_text("re-rendered\n")
    assert provenance.snapshot(str(repo))["clean"] is True
    (repo / "tracked.txt").write_text("code changed\n")
    assert provenance.snapshot(str(repo))["clean"] is False


@needs_git
def test_the_default_repository_is_the_one_holding_the_imported_package():
    package = os.path.dirname(os.path.abspath(acvi_tf.__file__))
    head = subprocess.run(["git", "-C", package, "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode != 0:
        pytest.skip("the package is not in a git checkout")
    assert provenance.snapshot()["commit"] == head.stdout.strip()


def test_snapshot_outside_git_or_without_git_records_none(tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.mkdir()
    snap = provenance.snapshot(str(plain))
    assert snap["commit"] is None and snap["clean"] is None and snap["time"]
    monkeypatch.setenv("PATH", str(tmp_path / "no_binaries_here"))  # no git at all
    snap = provenance.snapshot()
    assert snap["commit"] is None and snap["clean"] is None and len(snap["load"]) == 3


CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512_bf16 amx_tile amx_bf16 avx512_vnni
processor\t: 1
model name\t: Some Other CPU
flags\t\t: fpu
"""


def test_cpu_description_names_the_model_and_its_vector_extensions(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    assert provenance.cpu_description(str(path)) == (
        "Intel(R) Xeon(R) Platinum 8488C [avx2 fma avx512f avx512_vnni avx512_bf16 amx_tile "
        "amx_bf16]")
    path.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t: fpu avx2 fma avx\n")
    assert provenance.cpu_description(str(path)) == "AMD EPYC [avx2 fma]"
    path.write_text("processor\t: 0\n")  # no model, no flags (another architecture)
    assert provenance.cpu_description(str(path)) is None
    assert provenance.cpu_description(str(tmp_path / "missing")) is None


def test_a_run_resumed_on_another_machine_records_both_cpus(tmp_path, monkeypatch):
    cpus = iter(["AMD EPYC [avx2 fma]", "Intel Xeon [avx2 fma avx512f]"])
    monkeypatch.setattr(provenance, "cpu_description", lambda: next(cpus))
    first, second = provenance.snapshot(str(tmp_path)), provenance.snapshot(str(tmp_path))
    segments = [provenance.new_segment("a", "train", first),
                provenance.new_segment("b", "train", second)]
    assert provenance.summary(segments, second)["cpu_models"] == [
        "AMD EPYC [avx2 fma]", "Intel Xeon [avx2 fma avx512f]"]
    assert provenance.summary(segments[:1], first)["cpu_models"] == ["AMD EPYC [avx2 fma]"]


def test_snapshots_record_onednn_as_tensorflow_reports_it_and_a_resume_that_changed_it():
    import tensorflow as tf  # noqa: F401  (imported: tf_settings asks TensorFlow itself)
    from tensorflow.python.util import _pywrap_util_port
    settings = provenance.tf_settings()
    assert settings["onednn"] is bool(_pywrap_util_port.IsMklEnabled())
    assert settings["env"] == {k: os.environ[k] for k in provenance.TF_ENV if k in os.environ}
    off, on = ({"tensorflow": {"onednn": v}} for v in (False, True))
    segments = [provenance.new_segment("a", "train", off), provenance.new_segment("b", "train", on)]
    assert provenance.summary(segments, on)["onednn"] == [False, True]
    assert provenance.summary(segments[:1], off)["onednn"] == [False]
    old = {"commit": None}  # a snapshot from before tf_settings existed
    assert provenance.summary([provenance.new_segment("a", "train", old)], old)["onednn"] == []


def test_importing_the_package_first_turns_onednn_on_unless_the_user_chose():
    """What a user's run gets: ``import acvi_tf`` before TensorFlow sets oneDNN on where
    TensorFlow's own default is off (CPUs without AVX-512 VNNI / bf16 / AMX); an explicit
    TF_ENABLE_ONEDNN_OPTS=0 stays. TensorFlow itself is asked, in a fresh process."""
    code = ("import acvi_tf, os, tensorflow\n"
            "from acvi_tf.utils import provenance\n"
            "s = provenance.tf_settings()\n"
            "print(s['onednn'], s['env'].get('TF_ENABLE_ONEDNN_OPTS'))")
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["True", "1"]
    # here the test process's own choice (conftest's "0" unless the user set one) stayed
    assert provenance.tf_settings()["onednn"] is (os.environ["TF_ENABLE_ONEDNN_OPTS"] == "1")


@needs_git
def test_two_starts_across_a_code_change_and_one_finish(repo, tmp_path):
    model_dir = str(tmp_path / "run")
    first = _git(repo, "rev-parse", "HEAD")
    start_segment(model_dir, "python -m experiments.translate --mode=train", "train")
    # the first start is killed (its segment stays open), the code changes, the run resumes
    second = _commit(repo, "two\n")
    start_segment(model_dir, "python -m experiments.translate", "train_eval")
    results = finish_results(model_dir, {"steps": 3})

    segments = json.load(open(os.path.join(model_dir, "provenance.json")))
    assert [(s["command"].split()[-1], s["mode"]) for s in segments] == [
        ("--mode=train", "train"), ("experiments.translate", "train_eval")]
    assert [s["start"]["commit"] for s in segments] == [first, second]
    assert segments[0]["end"] is None and segments[1]["end"]["commit"] == second
    entry = results["provenance"]
    assert entry == json.load(open(os.path.join(model_dir, "results.json")))["provenance"]
    assert entry["commit"] == second and entry["commits"] == [first, second]
    assert entry["clean"] is True and entry["segments"] == 2
    assert entry["start"] == segments[0]["start"]["time"]
    assert entry["end"] == segments[1]["end"]["time"]
    assert entry["load"] == {"start": segments[0]["start"]["load"],
                             "end": segments[1]["end"]["load"]}
    assert results["steps"] == 3


@needs_git
def test_a_start_ends_when_its_mode_returns_and_a_failed_start_stays_open(repo, tmp_path):
    model_dir = str(tmp_path / "run")
    with run_segment(model_dir, "train", "train"):  # --mode=train writes no results
        pass
    with run_segment(model_dir, "eval", "eval"):
        finished = finish_results(model_dir, {})["provenance"]
    with pytest.raises(RuntimeError):
        with run_segment(model_dir, "eval again", "eval"):
            raise RuntimeError("evaluation failed")
    segments = load_provenance(model_dir)
    assert [s["command"] for s in segments] == ["train", "eval", "eval again"]
    assert segments[0]["end"]["time"] >= segments[0]["start"]["time"]
    assert segments[1]["end"]["time"] == finished["end"]  # finish_results ended it
    assert segments[2]["end"] is None


@needs_git
def test_an_old_run_directory_without_provenance_json_still_gets_results(repo, tmp_path):
    model_dir = tmp_path / "old_run"
    model_dir.mkdir()
    (model_dir / "results.json").write_text(json.dumps({"bleu": {"test": 20.0}}))
    results = finish_results(str(model_dir), {"bleu": {"dev": 19.0}})
    assert results["bleu"] == {"test": 20.0, "dev": 19.0}
    entry = results["provenance"]
    assert entry["commit"] == _git(repo, "rev-parse", "HEAD") and entry["segments"] == 0
    assert entry["start"] is None and 0 <= _seconds_ago(entry["end"]) < 60
    assert not (model_dir / "provenance.json").exists()


@needs_git
def test_footnotes_show_the_short_commit_and_a_dirty_or_crossed_tree(repo, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setattr(provenance, "cpu_description", lambda: "Some CPU [avx2 fma]")
    monkeypatch.setattr(provenance, "tf_settings", lambda: {"onednn": True, "env": {}})
    head = _git(repo, "rev-parse", "HEAD")
    start_segment(str(tmp_path / "a"), "python -m experiments.translate", "train_eval")
    clean = finish_results(str(tmp_path / "a"), {"command": "python -m x", "steps": 1500})
    (repo / "tracked.txt").write_text("edited, not committed\n")
    start_segment(str(tmp_path / "b"), "python -m experiments.translate", "train")
    second = _commit(repo, "two\n")
    start_segment(str(tmp_path / "b"), "python -m experiments.translate", "train_eval")
    crossed = finish_results(str(tmp_path / "b"), {"command": "python -m y"})
    notes = Footnotes()
    notes.add(clean)
    notes.add(crossed)
    machine = "Some CPU [avx2 fma], oneDNN on"
    assert notes.items[0] == f"`python -m x` (1,500 steps; commit {head[:7]}; {machine})"
    assert notes.items[1] == f"`python -m y` (commits {head[:7]}, {second[:7]}+dirty; {machine})"
    notes.add({"command": "python -m old", "steps": 10})  # a run without the entry
    assert notes.items[2] == "`python -m old` (10 steps; commit not recorded)"
    resumed = {"command": "python -m z", "provenance": {
        "cpu_models": ["AMD EPYC [avx2 fma]", "Intel Xeon [avx2 fma avx512f]"],
        "onednn": [False, True]}}
    notes.add(resumed)
    assert notes.items[3] == ("`python -m z` (commit not recorded; AMD EPYC [avx2 fma] + "
                              "Intel Xeon [avx2 fma avx512f], oneDNN off, on)")


def test_a_garbled_provenance_json_is_an_error_naming_it(tmp_path):
    (tmp_path / "provenance.json").write_text(json.dumps({"not": "a list"}))
    with pytest.raises(RunError, match="provenance.json is not a JSON list"):
        start_segment(str(tmp_path), "cmd", "train")


def test_a_failed_first_run_leaves_no_directory_behind(tmp_path):
    model_dir = str(tmp_path / "new")
    with pytest.raises(ValueError):
        with locked_run_dir(model_dir), run_segment(model_dir, "cmd", "train"):
            assert os.path.exists(os.path.join(model_dir, "provenance.json"))
            raise ValueError("bad option")
    assert not os.path.exists(model_dir)


def test_only_the_chief_of_a_multi_worker_run_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["localhost:1", "localhost:2"]},
        "task": {"type": "worker", "index": 1}}))
    start_segment(str(tmp_path), "cmd", "train_eval")
    finish_results(str(tmp_path), {"steps": 1})
    assert os.listdir(tmp_path) == []
