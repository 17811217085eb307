"""Bad input gets one line naming the flag or file, and writes nothing (issue 12):
bad flag values, decode input that is not UTF-8 or not a file, another CLI's run
directory, a data file that is a directory, a truncated checkpoint."""

import glob
import io
import os

import numpy as np
import pytest

from acvi_tf.errors import RunError
from acvi_tf.models.seq2seq import Seq2Seq
from acvi_tf.run.directory import save_run_config
from acvi_tf.run.restore import restore_model
from acvi_tf.tasks.decode_batches import read_lines
from tests.experiments.test_translate import _write_mirror
from tests.training.test_trainer import _cfg, _trainer
from tests import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cli(args, env=None, module="experiments.translate"):
    return cli.run(module, args, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(env or {})),
                   timeout=600)


@pytest.mark.parametrize("flag,message", [
    ("--train_steps=-1", "--train_steps"),
    ("--batch_size=0", "--batch_size"),
    ("--attention=bogus", "--attention"),
    ("--attention_option=nonsense", "'nonsense' is not key=value"),
    ("--attention_option=unknown_key=1", "unknown_key not an option of --attention=soft"),
    ("--learning_rate=-1", "--learning_rate"),
    ("--beam_width=0", "--beam_width"),
    ("--profile=bogus", "--profile"),
    ("--gumbel_fraction=2", "--gumbel_fraction"),
    ("--init_from=/nonexistent", "/nonexistent holds no trained run"),
    ("--noise_warmup_steps=10", "--noise_warmup_steps: scales ACVI's sampled context noise"),
    # issue 40: a numpy traceback before, and the directory left behind
    ("--seed=-5", "--seed"),
    ("--warmup_steps=10", "--warmup_steps: is the warm-up of --lr_decay=cosine"),
    # issue 40: a ZeroDivisionError before, and a vocabulary left behind
    ("--max_length=1", "--max_length: 1 keeps none of the"),
    # a non-finite loss before the first checkpoint: the one-line message, nothing kept
    ("--learning_rate=1e30", "non-finite loss or gradient at step"),
])
def test_a_bad_flag_is_named_and_nothing_is_written(tmp_path, flag, message):
    model_dir = tmp_path / "run"
    # a tiny Multi30k copy: the checks that run after the data loads (--max_length, a
    # non-finite loss) need data, and the test must not depend on ../shared being there
    mirror = _write_mirror(str(tmp_path / "mirror"))
    r = _cli(["--profile=smoke", f"--model_dir={model_dir}", flag],
             env={"ACVI_DATA_MIRROR": mirror, "ACVI_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode != 0
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert not model_dir.exists()


@pytest.mark.parametrize("flags, message", [
    (["--checkpoint_minutes=5", "--strategy=multiworker"],
     "--checkpoint_minutes: 5 needs one worker"),
    (["--xla", "--strategy=mirrored"],
     "--xla: XLA cannot compile the cross-replica training step"),
])
def test_a_setting_the_strategy_cannot_serve_is_refused_up_front(tmp_path, flags, message):
    r = _cli(["--profile=smoke", f"--model_dir={tmp_path / 'run'}"] + flags)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert message in r.stderr
    assert not (tmp_path / "run").exists()


def test_another_clis_run_directory_is_refused(tmp_path):
    save_run_config(str(tmp_path), {}, "smoke", "python -m experiments.summarize --x=1", [])
    before = sorted(os.listdir(tmp_path))
    r = _cli([f"--model_dir={tmp_path}", "--mode=decode", "--input=README.md"])
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "holds a run of experiments.summarize, not of experiments.translate" in r.stderr
    assert sorted(os.listdir(tmp_path)) == before  # no vocabulary written into it


def test_a_data_file_that_is_a_directory_is_named(tmp_path):
    mirror = _write_mirror(str(tmp_path / "mirror"))
    path = os.path.join(mirror, "multi30k", "tok", "train.lc.norm.tok.en")
    os.remove(path)
    os.mkdir(path)
    r = _cli(["--profile=smoke", f"--model_dir={tmp_path / 'run'}", "--allow_partial_data"],
             env={"ACVI_DATA_MIRROR": mirror, "ACVI_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert f"error: {path}: Is a directory" in r.stderr
    assert not (tmp_path / "run").exists()


def test_decode_input_that_is_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a man\nein \xff mann\n")
    with pytest.raises(RunError, match=r"in.txt, line 2: not UTF-8 \(byte 0xff at column 5"):
        read_lines(str(path), None)
    with pytest.raises(RunError, match="is a directory"):
        read_lines(str(tmp_path), None)
    stdin = io.TextIOWrapper(io.BytesIO(b"x\n\xc3\n"), encoding="utf-8")
    with pytest.raises(RunError, match="<stdin>, line 2"):
        read_lines("", stdin)


def test_decode_input_lines_are_kept_exactly(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes("ein mann\n\nzwei  frauen\r\nüber\n".encode())
    assert read_lines(str(path), None) == ["ein mann", "", "zwei  frauen\r", "über"]
    assert read_lines("", io.TextIOWrapper(io.BytesIO(b"a\nb"), encoding="utf-8")) == ["a", "b"]


def test_a_truncated_checkpoint_is_named(tmp_path):
    run = _trainer(tmp_path, 2, attention="soft", checkpoint_every=2)
    run.train()
    for path in glob.glob(str(tmp_path / "ckpt" / "ckpt-2.data-*")):
        with open(path, "r+b") as f:
            f.truncate(100)
    batch = {"src": np.full([1, 2], 4, np.int32), "tgt_in": np.asarray([[2, 4]], np.int32),
             "tgt_out": np.asarray([[4, 3]], np.int32)}
    with pytest.raises(RunError, match="cannot restore checkpoint .*ckpt-2 .*truncated"):
        restore_model(Seq2Seq(_cfg(attention="soft")), str(tmp_path), batch)
