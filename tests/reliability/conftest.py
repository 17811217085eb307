"""The smoke translation run that issue 40's fault tests break in their own copies."""

import pytest

from tests.reliability.test_bad_inputs import _cli
from tests.reliability.test_faults_issue40 import SMOKE, _env


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One smoke translation run of 6 steps (checkpoints at 3 and 6), one per test module;
    a test that changes it works on a copy (``_copy``)."""
    model_dir = str(tmp_path_factory.mktemp("issue40") / "run")
    r = _cli(SMOKE + [f"--model_dir={model_dir}"], env=_env())
    assert r.returncode == 0, r.stderr[-3000:]
    return model_dir
