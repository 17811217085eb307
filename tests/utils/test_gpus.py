"""acvi_tf/utils/gpus.py: --profile=paper without a GPU is refused in one line naming the
fix (pip install -e ".[gpu]", or --allow_cpu); the other profiles and --allow_cpu pass."""

import os

import pytest

from acvi_tf.utils import gpus
from tests import cli

H100 = ["/physical_device:GPU:0 (NVIDIA H100 80GB HBM3, compute capability 9.0)"]


def test_the_paper_profile_needs_a_gpu_unless_allow_cpu():
    problem = gpus.cpu_only_problem("paper", False, gpus=[], built_with_cuda=True)
    assert "\n" not in problem
    assert 'pip install -e ".[gpu]"' in problem and "--allow_cpu" in problem
    assert "--profile=paper" in problem and "sees no GPU" in problem
    no_cuda = gpus.cpu_only_problem("paper", False, gpus=[], built_with_cuda=False)
    assert "no CUDA support" in no_cuda and "--allow_cpu" in no_cuda
    assert gpus.cpu_only_problem("paper", True, gpus=[]) is None
    assert gpus.cpu_only_problem("paper", False, gpus=H100) is None
    for profile in ("cpu", "smoke", "cpu_converged"):
        assert gpus.cpu_only_problem(profile, False, gpus=[]) is None


def test_visible_gpus_is_a_list_of_names():
    found = gpus.visible_gpus()
    assert isinstance(found, list) and all("GPU" in g for g in found)


@pytest.mark.parametrize("module,extra", [("experiments.translate", []),
                                          ("experiments.summarize", ["--coverage_steps=2"])])
def test_the_cli_refuses_in_one_line_before_reading_data(module, extra, tmp_path):
    if gpus.visible_gpus():
        pytest.skip("this machine has a GPU")
    empty = tmp_path / "empty"  # no data: the refusal comes first
    empty.mkdir()
    env = dict(os.environ, ACVI_DATA_MIRROR=str(empty), ACVI_DATA_DIR=str(tmp_path / "d"))
    r = cli.run(module, ["--profile=paper", f"--model_dir={tmp_path / 'run'}",
                         "--train_steps=10"] + extra, env=env, cwd=str(tmp_path))
    assert r.returncode != 0
    last = [line for line in r.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("error: --profile=paper") and "--allow_cpu" in last, r.stderr
    assert 'pip install -e ".[gpu]"' in last
    assert not os.path.exists(tmp_path / "run" / "run_config.json")
    # a dry run still prints the command: checking a plan needs no GPU
    r = cli.run(module, ["--profile=paper", "--dry_run", f"--model_dir={tmp_path / 'run'}"]
                + extra, env=env, cwd=str(tmp_path))
    assert "GPU" not in r.stdout + r.stderr and "command:" in r.stdout, r.stdout + r.stderr
