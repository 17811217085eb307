"""experiments.archive.archived_run: which archived runs count as the run a table plans."""

import json

from experiments.archive import archived_run

PLANNED = ["/usr/bin/python3", "-m", "experiments.translate",
           "--flagfile=../../repo/experiments/configs/table4cpu_multi30k_soft.flags",
           "--noprogress", "--profile=cpu_converged", "--model_dir=/tmp/r/multi30k_soft_s1",
           "--seed=1"]


def _archive(tmp_path, name, results):
    d = tmp_path / name
    d.mkdir()
    (d / "results.json").write_text(results if isinstance(results, str)
                                    else json.dumps(results))


def test_the_same_command_from_another_directory_and_runs_root_matches(tmp_path):
    _archive(tmp_path, "multi30k_soft_s1", {"train_command": (
        "python -m experiments.translate --flagfile=experiments/configs/"
        "table4cpu_multi30k_soft.flags --noprogress --profile=cpu_converged "
        "--model_dir=runs/table4_cpu/multi30k_soft_s1 --seed=1")})
    assert archived_run(str(tmp_path), "multi30k_soft_s1", PLANNED) == str(
        tmp_path / "multi30k_soft_s1" / "results.json")


def test_another_seed_profile_or_flagfile_does_not_match(tmp_path):
    base = ("python -m experiments.translate --flagfile=experiments/configs/"
            "table4cpu_multi30k_soft.flags --noprogress --profile=cpu_converged "
            "--model_dir=runs/x")
    for name, command in (("seed", base + " --seed=2"),
                          ("profile", base.replace("cpu_converged", "cpu") + " --seed=1"),
                          ("flagfile", base.replace("soft", "acvi") + " --seed=1")):
        _archive(tmp_path, name, {"train_command": command})
        assert archived_run(str(tmp_path), name, PLANNED) is None, name
    assert archived_run(str(tmp_path), "missing", PLANNED) is None


def test_an_unreadable_archive_is_not_a_finished_run(tmp_path):
    _archive(tmp_path, "garbled", '{"train_command": "python -m exp')
    assert archived_run(str(tmp_path), "garbled", PLANNED) is None


def test_table5_matches_on_its_duc2004_decode_command(tmp_path):
    _archive(tmp_path, "pg_acvi", {
        "train_command": "python -m experiments.summarize --flagfile=experiments/configs/"
                         "table1_cpu_pg_acvi.flags --noprogress --model_dir=/w/pg_acvi",
        "duc2004": {"command": "python -m experiments.summarize --flagfile=experiments/"
                               "configs/table5_duc2004.flags --model_dir=/w/pg_acvi"}})
    planned = ["python", "-m", "experiments.summarize",
               "--flagfile=experiments/configs/table5_duc2004.flags",
               "--model_dir=runs/table1_cpu/pg_acvi"]
    assert archived_run(str(tmp_path), "pg_acvi", planned)
