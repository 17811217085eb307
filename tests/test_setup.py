"""setup.py's GPU install path: the ``gpu`` extra is ``tensorflow[and-cuda]`` at the
pinned TensorFlow version, and ``pip install --dry-run -e ".[gpu]"`` resolves.

The resolve asks the package registry and downloads the CUDA wheels' metadata (20-35 s
and hundreds of MB here, every time), so it runs only with ``ACVI_TEST_NETWORK=1``
(``make check-gpu-install`` sets it) and skips when the registry cannot be reached; the
pin check runs always."""

import ast
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What pip prints when it cannot reach the index (no network, no proxy, DNS down); not
# "No matching distribution", which a wrong pin gives too.
OFFLINE = ("Failed to establish a new connection", "NewConnectionError",
           "Temporary failure in name resolution", "Name or service not known",
           "Network is unreachable", "ConnectTimeoutError", "ProxyError")


def setup_kwargs():
    """``install_requires`` and ``extras_require`` of setup.py's ``setup(...)`` call, read
    without running it."""
    tree = ast.parse(open(os.path.join(REPO, "setup.py"), encoding="utf-8").read())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call)
                and getattr(n.func, "id", "") == "setup")
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords
            if k.arg in ("install_requires", "extras_require")}


def test_the_gpu_extra_is_tensorflow_and_cuda_at_the_pinned_version():
    kw = setup_kwargs()
    pin = next(r for r in kw["install_requires"] if r.startswith("tensorflow=="))
    assert kw["extras_require"]["gpu"] == [pin.replace("tensorflow==", "tensorflow[and-cuda]==")]


@pytest.mark.skipif(os.environ.get("ACVI_TEST_NETWORK") != "1",
                    reason="asks the package registry: ACVI_TEST_NETWORK=1 (make check-gpu-install)")
def test_pip_resolves_the_gpu_extra(tmp_path):
    report = tmp_path / "report.json"
    # --no-build-isolation: the build backend (setuptools) is the one installed here, so
    # only the requirements themselves are resolved against the registry.
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-build-isolation",
         "--ignore-installed", "--retries", "1", "--timeout", "20", "--report", str(report),
         "-e", ".[gpu]"], cwd=REPO, capture_output=True, text=True, timeout=900)
    if run.returncode != 0 and any(s in run.stdout + run.stderr for s in OFFLINE):
        pytest.skip(f"the package registry is not reachable: {run.stderr.strip()[-300:]}")
    assert run.returncode == 0, run.stdout + run.stderr
    chosen = {i["metadata"]["name"].lower(): i["metadata"]["version"]
              for i in json.loads(report.read_text())["install"]}
    pin = next(r for r in setup_kwargs()["install_requires"] if r.startswith("tensorflow=="))
    assert chosen["tensorflow"] == pin.split("==")[1]
    assert any(name.startswith("nvidia-cudnn") for name in chosen), sorted(chosen)
