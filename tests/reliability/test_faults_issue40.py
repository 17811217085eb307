"""The faults of issue 40's second probe: each ends in one line (exit 1) or works, and
leaves the run directory as it found it. A resume past the checkpoint's step, a
truncated newest ``.data`` file, a full disk at a checkpoint, a bad flag value's help."""

import glob
import os
import shutil

import pytest
import tensorflow as tf

from acvi_tf.training import trainer as trainer_lib
from acvi_tf.training.trainer import CheckpointError
from tests import cli
from tests.reliability.test_bad_inputs import _cli
from tests.training.test_trainer import _trainer as _acvi_trainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIRROR = os.environ.get("ACVI_DATA_MIRROR", "/work/shared/data")
# (the first 8 dev/test lines: the final evaluation of the full real sets costs 6 s a run)
SMOKE = ["--profile=smoke", "--mode=train", "--max_eval_lines=8"]


def _env():
    return {"ACVI_DATA_MIRROR": MIRROR}


def _trainer(model_dir, steps, **kw):
    return _acvi_trainer(model_dir, steps, attention="soft", gumbel_fraction=0.0, **kw)


def _snapshot(path):
    """Every file under ``path`` with its size and modification time."""
    out = {}
    for root, _, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            st = os.stat(p)
            out[os.path.relpath(p, path)] = (st.st_size, st.st_mtime_ns)
    return out


def _short(stderr):
    """stderr without TensorFlow's start-up log lines."""
    return [line for line in stderr.splitlines()
            if line.strip() and not line.startswith(("I0000", "WARNING: All log", "W0000"))]


def _copy(trained, tmp_path):
    model_dir = str(tmp_path / "run")
    shutil.copytree(trained, model_dir)
    return model_dir


# -- 12: --train_steps below the checkpoint's step ------------------------------------------

def test_train_steps_below_the_checkpoint_is_refused_and_nothing_is_rewritten(trained,
                                                                               tmp_path):
    model_dir = _copy(trained, tmp_path)
    before = _snapshot(model_dir)
    r = _cli(SMOKE + [f"--model_dir={model_dir}", "--train_steps=3"], env=_env())
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert "--train_steps=3 is below step 6 of the checkpoint" in r.stderr
    assert "nothing was changed" in r.stderr
    assert _snapshot(model_dir) == before  # flags.txt, provenance.json: untouched


def test_the_trainer_refuses_train_steps_below_its_checkpoint(tmp_path):
    _trainer(tmp_path, 4, checkpoint_every=2).train()
    again = _trainer(tmp_path, 2, checkpoint_every=2)
    saved = (tmp_path / "train_config.json").read_text()
    with pytest.raises(CheckpointError, match="--train_steps=2 is below step 4"):
        again.train()
    assert (tmp_path / "train_config.json").read_text() == saved


# -- 2: a truncated newest .data file -------------------------------------------------------

def _truncate_data(prefix, by=1000):
    for path in glob.glob(prefix + ".data-*"):
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - by)


def test_a_short_data_file_makes_a_checkpoint_unreadable(tmp_path):
    _trainer(tmp_path, 4, checkpoint_every=2).train()
    prefix = str(tmp_path / "ckpt" / "ckpt-4")
    assert trainer_lib.checkpoint_is_readable(prefix)
    _truncate_data(prefix, by=8)
    assert not trainer_lib.checkpoint_is_readable(prefix)
    assert [s for s, _ in trainer_lib.readable_checkpoints(str(tmp_path), log=lambda m: None)] \
        == [2]


def test_a_truncated_newest_data_file_resumes_from_the_one_before(trained, tmp_path):
    model_dir = _copy(trained, tmp_path)
    _truncate_data(os.path.join(model_dir, "ckpt", "ckpt-6"))
    r = _cli(SMOKE + [f"--model_dir={model_dir}", "--train_steps=9"], env=_env())
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    assert "ckpt-6 cannot be read" in r.stderr
    assert "resumed from" in r.stderr and "ckpt-3 at step 3" in r.stderr
    assert trainer_lib.checkpoint_is_readable(os.path.join(model_dir, "ckpt", "ckpt-6"))
    assert trainer_lib.checkpoint_is_readable(os.path.join(model_dir, "ckpt", "ckpt-9"))


def test_every_data_file_truncated_is_refused_before_anything_is_written(trained, tmp_path):
    model_dir = _copy(trained, tmp_path)
    for prefix in ("ckpt-3", "ckpt-6"):
        _truncate_data(os.path.join(model_dir, "ckpt", prefix))
    before = _snapshot(model_dir)
    r = _cli(SMOKE + [f"--model_dir={model_dir}", "--train_steps=9"], env=_env())
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "holds checkpoint files but none can be read" in r.stderr
    assert _snapshot(model_dir) == before


# -- 1: a full disk at a checkpoint ----------------------------------------------------------

def _full_disk(monkeypatch, fail_at):
    """``io_ops.save_v2`` (the checkpoint's data write) fails with ENOSPC at the steps in
    ``fail_at`` after leaving a partial temp file, as a full disk does."""
    from tensorflow.python.ops import io_ops
    real = io_ops.save_v2

    def save_v2(prefix, *args, **kw):
        path = prefix.numpy().decode() if hasattr(prefix, "numpy") else str(prefix)
        if any(f"ckpt-{n}_temp" in path for n in fail_at):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".data-00000-of-00001.tempstate1", "wb") as f:
                f.write(b"\0" * 100)
            raise tf.errors.ResourceExhaustedError(
                None, None, f"{path}; No space left on device [Op:SaveV2]")
        return real(prefix, *args, **kw)
    monkeypatch.setattr(io_ops, "save_v2", save_v2)


def test_a_full_disk_at_a_later_checkpoint_leaves_the_last_good_one(tmp_path, monkeypatch):
    run = _trainer(tmp_path, 6, checkpoint_every=2)
    run.log = lambda m: None
    _full_disk(monkeypatch, fail_at=[4])
    with pytest.raises(CheckpointError, match=r"cannot write the checkpoint of step 4 .*No "
                                              r"space left on device.*ckpt-2\. Free space"):
        run.train()
    left = sorted(os.listdir(tmp_path / "ckpt"))
    assert left == ["checkpoint", "checksums-2.json", "ckpt-2.data-00000-of-00001",
                    "ckpt-2.index", "position-2.json"], left
    assert tf.train.latest_checkpoint(str(tmp_path / "ckpt")).endswith("ckpt-2")
    monkeypatch.undo()
    again = _trainer(tmp_path, 6, checkpoint_every=2)
    again.train()
    assert int(again.step.numpy()) == 6


def test_a_temp_directory_left_behind_is_removed_at_start_up(tmp_path):
    _trainer(tmp_path, 2, checkpoint_every=2).train()
    temp = tmp_path / "ckpt" / "ckpt-4_temp"
    temp.mkdir()
    (temp / "part-00000-of-00001.data-00000-of-00001.tempstate7").write_bytes(b"\0" * 10)
    again = _trainer(tmp_path, 4, checkpoint_every=2)
    logged = []
    again.log = logged.append
    again.train()
    assert not temp.exists()
    assert any("ckpt-4_temp" in m and "removed" in m for m in logged), logged
    assert int(again.step.numpy()) == 4


ENOSPC_SCRIPT = '''
import os, runpy, sys
import tensorflow as tf
from tensorflow.python.ops import io_ops
real = io_ops.save_v2
def save_v2(prefix, *args, **kw):
    path = prefix.numpy().decode() if hasattr(prefix, "numpy") else str(prefix)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path + ".data-00000-of-00001.tempstate1", "wb").write(b"0" * 100)
    raise tf.errors.ResourceExhaustedError(None, None, path + "; No space left on device")
io_ops.save_v2 = save_v2
runpy.run_module("experiments.translate", run_name="__main__", alter_sys=True)
'''


def test_a_full_disk_at_the_first_checkpoint_leaves_nothing_and_the_rerun_works(tmp_path):
    script = tmp_path / "enospc.py"
    script.write_text(ENOSPC_SCRIPT)
    model_dir = str(tmp_path / "run")
    env = dict(_env(), PYTHONPATH=ROOT)
    r = _cli([*SMOKE, f"--model_dir={model_dir}", "--train_steps=3"], env=env,
             module=str(script))
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert "cannot write the checkpoint of step 3" in r.stderr
    assert "No space left on device" in r.stderr
    assert not os.path.exists(model_dir)  # a failed first run leaves nothing behind
    r = _cli([*SMOKE, f"--model_dir={model_dir}", "--train_steps=3"], env=_env())
    assert r.returncode == 0, r.stderr[-3000:]
    assert os.path.exists(os.path.join(model_dir, "ckpt", "ckpt-3.index"))


# -- 13: a flag error prints its line, not the module's help -------------------------------

@pytest.mark.parametrize("module", ["experiments.translate", "experiments.summarize",
                                    "experiments.caption"])
def test_a_flag_error_is_one_line_without_the_help(tmp_path, module):
    model_dir = tmp_path / "run"
    r = _cli(["--profile=smoke", f"--model_dir={model_dir}", "--warmup_steps=10"],
             module=module)
    assert r.returncode == 1
    assert _short(r.stderr) == [
        "error: --warmup_steps: is the warm-up of --lr_decay=cosine (got --lr_decay=none)"], \
        r.stderr[-3000:]
    assert not model_dir.exists()


# -- 9: resuming a partial-data run with the full data -------------------------------------

def _partial_mirror(path, lines=2000):
    """The data mirror with Multi30k's training files cut to their first ``lines``."""
    os.makedirs(path)
    for name in os.listdir(MIRROR):
        if name != "multi30k":
            os.symlink(os.path.join(MIRROR, name), os.path.join(path, name))
    shutil.copytree(os.path.join(MIRROR, "multi30k"), os.path.join(path, "multi30k"),
                    symlinks=True, ignore=lambda d, names: [n for n in names
                                                            if n.startswith("train.")])
    tok = os.path.join(MIRROR, "multi30k", "tok")
    for name in os.listdir(tok):
        if name.startswith("train."):
            with open(os.path.join(tok, name), encoding="utf-8") as f:
                head = [next(f) for _ in range(lines)]
            with open(os.path.join(path, "multi30k", "tok", name), "w", encoding="utf-8") as f:
                f.writelines(head)
    return path


def test_resuming_a_partial_data_run_with_the_full_data_is_one_line(tmp_path):
    mirror = _partial_mirror(str(tmp_path / "mirror"))
    model_dir = str(tmp_path / "run")
    r = _cli(SMOKE + [f"--model_dir={model_dir}", "--train_steps=3"],
             env={"ACVI_DATA_MIRROR": mirror})
    assert r.returncode == 0, r.stderr[-3000:]
    r = _cli(SMOKE + [f"--model_dir={model_dir}"], env=_env())
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert _short(r.stderr)[-1].startswith(
        "error: cannot resume the training data: saved data position has num_examples=")
    assert os.path.exists(os.path.join(model_dir, "ckpt", "ckpt-3.index"))


# -- 4: a model flag the architecture refuses -----------------------------------------------

@pytest.mark.parametrize("flags,message", [
    (["--model=transformer", "--attention=acvi"],
     "error: --model: transformer: --attention apply to the seq2seq model only"),
    (["--model=transformer", "--embed_dim=10", "--num_heads=4"],
     "error: --model: transformer: embed_dim=10 is not divisible by num_heads=4"),
])
def test_a_model_the_architecture_refuses_is_a_flag_error_up_front(tmp_path, flags, message):
    model_dir = tmp_path / "run"
    r = _cli(["--profile=smoke", f"--model_dir={model_dir}", *flags])
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert _short(r.stderr)[-1].startswith(message), r.stderr[-2000:]
    assert not model_dir.exists()  # so the corrected rerun starts clean


# -- 5: --init_from=<another task's run> ----------------------------------------------------

def test_init_from_another_clis_run_is_refused_up_front(tmp_path):
    from acvi_tf.run.directory import save_run_config
    other = tmp_path / "summarization_run"
    save_run_config(str(other), {}, "smoke", "python -m experiments.summarize --x=1", [])
    (other / "model_config.json").write_text("{}")
    (other / "ckpt").mkdir()
    (other / "ckpt" / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    model_dir = tmp_path / "run"
    r = _cli(["--profile=smoke", f"--model_dir={model_dir}", f"--init_from={other}"])
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert _short(r.stderr)[-1] == (
        f"error: --init_from: {other} holds a run of experiments.summarize, not of "
        f"experiments.translate; a warm start needs a run of the same task")
    assert not model_dir.exists()


def test_a_warm_start_run_this_task_cannot_rebuild_is_a_flag_error(tmp_path, monkeypatch):
    """Without run_config.json to tell the task, the rebuild's own failure (a summarization
    model asks the translation batch for src_ext) is an --init_from error."""
    from acvi_tf.errors import ConfigError
    from acvi_tf.run import restore

    def load_model(model_dir, build_batch):
        raise KeyError("src_ext")
    monkeypatch.setattr(restore, "load_model", load_model)
    warm_start = restore.warm_start_fn(str(tmp_path / "other"), str(tmp_path), {}, log=None)
    with pytest.raises(ConfigError, match=r"init_from: cannot rebuild the run in .*other "
                                          r"for this task \(KeyError: 'src_ext'\)"):
        warm_start(None)


# -- 10: decoding while the same run trains and rotates its checkpoints ---------------------

def test_a_checkpoint_rotated_away_while_read_is_retried_on_the_newest(tmp_path, monkeypatch):
    import numpy as np
    from acvi_tf.models.seq2seq import Seq2Seq
    from acvi_tf.run import restore
    from tests.training.test_trainer import _cfg
    _trainer(tmp_path, 4, checkpoint_every=2, keep_checkpoints=2).train()
    for path in glob.glob(str(tmp_path / "ckpt" / "ckpt-2.*")):
        os.remove(path)  # what a training run's rotation does between listing and reading
    listed = [str(tmp_path / "ckpt" / "ckpt-2")]
    real = restore.checkpoint_to_evaluate
    monkeypatch.setattr(restore, "checkpoint_to_evaluate",
                        lambda model_dir: listed.pop() if listed else real(model_dir))
    logged = []
    monkeypatch.setattr(restore, "log", logged.append)
    batch = {"src": np.full([1, 2], 4, np.int32), "tgt_in": np.asarray([[2, 4]], np.int32),
             "tgt_out": np.asarray([[4, 3]], np.int32)}
    step = restore.restore_model(Seq2Seq(_cfg(attention="soft")), str(tmp_path), batch)
    assert step == 4
    assert any("ckpt-2 was replaced while it was read" in m and "ckpt-4" in m for m in logged)


# -- 11: a truncated vocabulary with manifest.json deleted ----------------------------------

def test_a_truncated_vocabulary_without_a_manifest_is_refused(trained, tmp_path):
    model_dir = _copy(trained, tmp_path)
    os.remove(os.path.join(model_dir, "manifest.json"))  # the manifest error's own advice
    vocab = os.path.join(model_dir, "vocab.de.txt")
    with open(vocab, "rb") as f:
        head = f.read(2000)
    with open(vocab, "wb") as f:
        f.write(head[:head.rindex(b"\n") + 1])
    r = cli.run("experiments.translate", ["--mode=decode", f"--model_dir={model_dir}"],
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **_env()), input="a man\n",
                timeout=600)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stdout == ""
    assert _short(r.stderr)[-1].startswith(f"error: {vocab} has ")
    assert "but the trained model's tgt_vocab_size is" in r.stderr


# -- Also: position files and the rotation after a garbled state file ------------------------

def test_position_and_checksum_files_go_with_their_rotated_checkpoints(tmp_path):
    _trainer(tmp_path, 8, checkpoint_every=2, keep_checkpoints=2).train()
    assert sorted(os.listdir(tmp_path / "ckpt")) == [
        "checkpoint", "checksums-6.json", "checksums-8.json", "ckpt-6.data-00000-of-00001",
        "ckpt-6.index", "ckpt-8.data-00000-of-00001", "ckpt-8.index", "position-6.json",
        "position-8.json"]


def test_after_a_garbled_state_file_the_older_checkpoints_still_rotate(tmp_path):
    _trainer(tmp_path, 8, checkpoint_every=2, keep_checkpoints=2).train(stop_at=4)
    (tmp_path / "ckpt" / "checkpoint").write_text("garbage\n")
    again = _trainer(tmp_path, 8, checkpoint_every=2, keep_checkpoints=2)
    again.train()
    left = sorted(p.name for p in (tmp_path / "ckpt").glob("ckpt-*.index"))
    assert left == ["ckpt-6.index", "ckpt-8.index"], left
    assert tf.train.latest_checkpoint(str(tmp_path / "ckpt")).endswith("ckpt-8")
