"""Bad option values are flag errors before the run directory is written (issue 12, defect 4),
and decode files keep an empty last hypothesis (defect 6)."""

import os

import pytest

from acvi_tf.utils.files import write_lines
from tests import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("option,message", [("kl_estimator=bogus", "kl_estimator"),
                                            ("temperature=0", "temperature")])
def test_bad_acvi_option_value_writes_nothing(tmp_path, option, message):
    model_dir = tmp_path / "run"
    r = cli.run("experiments.translate", ["--profile=smoke", f"--model_dir={model_dir}",
                                          "--attention=acvi", f"--attention_option={option}"])
    assert r.returncode != 0
    assert "attention_option" in r.stderr and message in r.stderr
    assert "Traceback" not in r.stderr
    assert not model_dir.exists()


def test_empty_last_hypothesis_keeps_its_line(tmp_path):
    path = tmp_path / "decode_test.txt"
    write_lines(str(path), ["ein mann", "", "eine frau", ""])
    assert path.read_text().split("\n")[:-1] == ["ein mann", "", "eine frau", ""]
    assert not os.path.exists(str(path) + ".tmp")
