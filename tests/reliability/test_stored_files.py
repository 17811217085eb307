"""Stored files of a run directory (issue 12, defects 1, 7 and 8): a failed data read
leaves no vocabulary behind, and a truncated vocabulary or a garbled config is refused
in one line naming the file, before anything is read or written."""

import json
import os

import pytest

from acvi_tf.data.vocab import Vocab
from acvi_tf.errors import RunError
from acvi_tf.run.directory import save_run_config, save_vocab
from acvi_tf.run.records import load_run_config
from acvi_tf.utils import manifest
from tests.experiments.test_translate import _write_mirror
from tests import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _stored_run(model_dir):
    """A run directory as a first run leaves it before training: settings and vocabularies."""
    save_run_config(str(model_dir), {"mode": "train"}, "smoke", "python -m x", ["--a=1"])
    for lang, words in (("en", ["a", "man"]), ("de", ["ein", "mann"])):
        save_vocab(Vocab(words), str(model_dir), f"vocab.{lang}.txt")


def test_record_then_verify_accepts_untouched_files(tmp_path):
    _stored_run(tmp_path)
    entries = json.load(open(tmp_path / manifest.MANIFEST))["files"]
    assert sorted(entries) == ["flags.txt", "run_config.json", "vocab.de.txt", "vocab.en.txt"]
    assert entries["vocab.en.txt"]["bytes"] == os.path.getsize(tmp_path / "vocab.en.txt")
    manifest.verify(str(tmp_path))
    manifest.verify(str(tmp_path / "absent"))  # nothing to check yet


@pytest.mark.parametrize("damage,message", [
    (lambda p: p.write_text(p.read_text()[:-3]), "bytes instead of the"),
    (lambda p: p.write_text(p.read_text().replace("man", "men")), "same size, different"),
    (lambda p: p.unlink(), "is missing"),
])
def test_a_changed_stored_file_is_named(tmp_path, damage, message):
    _stored_run(tmp_path)
    damage(tmp_path / "vocab.en.txt")
    with pytest.raises(manifest.StoredFileError, match=message) as e:
        manifest.verify(str(tmp_path))
    assert str(tmp_path / "vocab.en.txt") in str(e.value)


def test_a_garbled_manifest_is_named(tmp_path):
    _stored_run(tmp_path)
    (tmp_path / manifest.MANIFEST).write_text("{")
    with pytest.raises(manifest.StoredFileError, match="manifest.json is unreadable"):
        manifest.verify(str(tmp_path))


def test_garbled_json_without_a_manifest_is_a_run_error_naming_it(tmp_path):
    (tmp_path / "run_config.json").write_text("garbage\n")
    with pytest.raises(RunError, match="run_config.json is not valid JSON"):
        load_run_config(str(tmp_path))


def _cli(args, env=None):
    return cli.run("experiments.translate", args,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(env or {})), timeout=600)


@pytest.mark.parametrize("mode", ["decode", "train"])
def test_cli_refuses_a_truncated_vocabulary_in_one_line(tmp_path, mode):
    model_dir = tmp_path / "run"
    _stored_run(model_dir)
    path = model_dir / "vocab.de.txt"
    path.write_text(path.read_text().split("\n", 1)[0] + "\n")
    before = {p: open(model_dir / p, "rb").read() for p in os.listdir(model_dir)}
    r = _cli([f"--model_dir={model_dir}", f"--mode={mode}", "--input=-"])
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert f"{path} was changed since the run wrote it" in r.stderr
    after = {p: open(model_dir / p, "rb").read() for p in os.listdir(model_dir)}
    assert after == before


def test_an_empty_training_side_writes_no_vocabulary(tmp_path):
    """Defect 1: the failed read used to leave a 4-token vocab.en.txt that the next run
    reused silently."""
    mirror = _write_mirror(str(tmp_path / "mirror"))
    open(os.path.join(mirror, "multi30k", "tok", "train.lc.norm.tok.en"), "w").close()
    model_dir = tmp_path / "run"
    r = _cli(["--profile=smoke", f"--model_dir={model_dir}", "--allow_partial_data"],
             env={"ACVI_DATA_MIRROR": mirror, "ACVI_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "train.lc.norm.tok.en has 0 lines" in r.stderr
    assert not model_dir.exists()
