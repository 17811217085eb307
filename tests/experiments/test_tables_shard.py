"""``tables run --shard I/N`` (experiments/tables/shard.py): N shards run disjoint slices
whose union is the unsharded run, into one runs directory, and the table renders from
all of them; a bad --shard is refused naming the flag."""

import os

import pytest

from experiments import tables
from experiments.tables import preflight, runner, shard
from tests.experiments.fake_training import use_fake_trainer

# A stand-in for training (as in test_tables.py): a translation results.json whose row is
# the run's name (multi30k_<system>[_s<seed>]), test BLEU 20 + seed.
FAKE_TRAIN = (
    "import json, os, re, sys\n"
    "args = dict(a[2:].split('=', 1) for a in sys.argv[1:] if '=' in a)\n"
    "d, s = args['model_dir'], int(args.get('seed', 0))\n"
    "system = re.sub(r'_s\\d+$', '', os.path.basename(d))[len('multi30k_'):]\n"
    "os.makedirs(d, exist_ok=True)\n"
    "json.dump({'task': 'translate', 'system': system, 'profile': 'cpu_converged',\n"
    "           'steps': 10, 'dataset': 'multi30k', 'src': 'en', 'tgt': 'de',\n"
    "           'decode': {'beam_width': 5}, 'bleu': {'dev': 19.0 + s, 'test': 20.0 + s},\n"
    "           'command': ' '.join(['python -m experiments.translate'] + sys.argv[1:])},\n"
    "          open(os.path.join(d, 'results.json'), 'w'))\n")
ONLY = ["multi30k_soft", "multi30k_acvi", "multi30k_ved"]


def test_parse_and_select():
    assert shard.parse("1/4") == (1, 4) and shard.parse(" 4/4 ") == (4, 4)
    for bad in ("0/4", "5/4", "1/0", "2", "a/b", "1/2/3", ""):
        with pytest.raises(ValueError):
            shard.parse(bad)
    runs = list(range(7))
    slices = [shard.select(runs, i, 3) for i in (1, 2, 3)]
    assert slices == [[0, 3, 6], [1, 4], [2, 5]]  # round-robin: disjoint, union is all
    assert shard.select(runs, 1, 1) == runs
    assert shard.select([0], 2, 2) == []  # more machines than runs: nothing to do


def _finished(root):
    return {d for d in os.listdir(root) if os.path.exists(os.path.join(root, d, "results.json"))}


def test_two_shards_make_the_runs_of_one_unsharded_run(tmp_path, monkeypatch):
    fake = tmp_path / "fake_train.py"
    fake.write_text(FAKE_TRAIN)
    use_fake_trainer(monkeypatch, fake)
    spec = runner.SPECS["table4-cpu"]  # no archive: nothing written into the repository
    monkeypatch.setitem(runner.SPECS, "table4-cpu",
                        type(spec)(spec.runs, spec.render, spec.task, profiles=spec.profiles))
    sharded, whole = tmp_path / "sharded", tmp_path / "whole"
    seen = []
    for i in (1, 2):
        out = tmp_path / f"shard{i}.md"
        assert runner.run_table("table4-cpu", str(sharded), str(out), only=ONLY,
                                seeds=(0, 1), shard=(i, 2), stream=open(os.devnull, "w")) == 0
        now = _finished(sharded)
        seen.append(now - set().union(*seen) if seen else now)
    assert runner.run_table("table4-cpu", str(whole), str(tmp_path / "whole.md"), only=ONLY,
                            seeds=(0, 1), stream=open(os.devnull, "w")) == 0
    assert seen[0] and seen[1] and not seen[0] & seen[1]
    assert _finished(sharded) == _finished(whole) == {
        f"{n}{s}" for n in ONLY for s in ("", "_s1")}
    # the second shard's table renders every run, the first shard's too
    last = (tmp_path / "shard2.md").read_text()
    for name in ("Baseline (soft attention)", "VED (Bahuleyan et al. 2018)"):
        assert any(line.startswith(f"| {name} |") and "(2 seeds)" in line
                   for line in last.split("\n")), (name, last)


@pytest.mark.parametrize("bad", ["3/2", "0/2", "two", "1-2"])
def test_a_bad_shard_is_refused_naming_the_flag(bad, capsys):
    with pytest.raises(SystemExit):
        tables.main(["run", "table4-cpu", "--runs_root", "r", "--out", "t.md", "--dry_run",
                     "--shard", bad])
    err = capsys.readouterr().err
    assert "--shard" in err and bad in err, err


def test_a_shard_of_a_dry_run_prints_its_slice(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(preflight.CHECKS, "translate", lambda *a: True)
    monkeypatch.chdir(tmp_path)
    lines = {}
    for i in (1, 2, 3):
        assert tables.main(["run", "table4", "--runs_root", "runs", "--out", "t.md",
                            "--dry_run", "--shard", f"{i}/3"]) == 0
        text = capsys.readouterr().out
        assert f"(shard {i}/3 of {len(tables.TABLES['table4'])})" in text
        lines[i] = [line for line in text.split("\n") if "[to run]" in line]
    every = sum(lines.values(), [])
    assert len(every) == len(set(every)) == len(tables.TABLES["table4"])


@pytest.mark.parametrize("target", ["table4", "table1", "table3", "table4-cpu"])
def test_make_passes_shard_through(target):
    import shutil
    import subprocess
    if not shutil.which("make"):
        pytest.skip("no make")
    repo = os.path.dirname(os.path.dirname(tables.CONFIG_DIR))
    run = subprocess.run(["make", "-n", "-C", repo, target, "SHARD=2/4"], capture_output=True,
                         text=True, check=True).stdout
    assert "--shard 2/4" in run, run
    plain = subprocess.run(["make", "-n", "-C", repo, target], capture_output=True, text=True,
                           check=True).stdout
    assert "--shard" not in plain, plain
