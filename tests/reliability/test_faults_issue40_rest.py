"""The rest of issue 40: a killed export's temporary directory, tracebacks only with a
switch, checkpoint files verified (size and crc32) before the state file names them, the
one-worker MultiWorkerMirroredStrategy, and eval/decode past a truncated newest checkpoint."""

import fcntl
import glob
import json
import os
import socket
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.export import base as export_base
from acvi_tf.run import restore
from acvi_tf.run.restore import restore_model
from acvi_tf.training import checkpoint_checks
from acvi_tf.training.trainer import CheckpointError
from tests import cli
from tests.reliability.test_bad_inputs import _cli
# the smoke profile's run (its final evaluation on 8 dev pairs), the mirror, the trainer and
# the copy of the run (conftest.py's ``trained``) of the first half of issue 40's tests
from tests.reliability.test_faults_issue40 import ROOT, SMOKE, _copy, _env, _trainer
from tests.training.test_trainer import _cfg


def _short(stderr):
    """stderr without TensorFlow's start-up and INFO log lines."""
    return [line for line in stderr.splitlines()
            if line.strip() and not line.startswith(("I0000", "WARNING: All log", "W0000", "I1",
                                                     "INFO:tensorflow"))]


def _batch():
    return {"src": np.full([1, 2], 4, np.int32), "tgt_in": np.asarray([[2, 4]], np.int32),
            "tgt_out": np.asarray([[4, 3]], np.int32)}


# -- 1: a killed export's .export-* directory ------------------------------------------------

def _staging(parent, name, lock=True, age=3600):
    path = parent / name
    path.mkdir(parents=True)
    (path / "saved_model").mkdir()
    (path / "saved_model" / "saved_model.pb").write_bytes(b"\0" * 10)
    if lock:
        (path / export_base.STAGING_LOCK).write_text("")
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def test_a_killed_exports_staging_directory_goes_at_the_next_export(trained, tmp_path):
    exports = tmp_path / "exports"
    stale = [_staging(exports, ".export-killed1"),  # its lock file, held by no one
             _staging(exports, ".export-killed2", lock=False)]  # an export before the lock
    live = _staging(exports, ".export-live")
    with open(live / export_base.STAGING_LOCK, "a") as held:  # an export still writing
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = _cli(["--mode=export", f"--model_dir={trained}",
                  f"--export_dir={exports / 'm'}"], env=_env())
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    for path in stale:
        assert not path.exists()
        assert f"removed {path}, left by an export that did not finish" in r.stderr
    assert live.exists()  # another export's, still being written
    assert sorted(p.name for p in exports.iterdir()) == [".export-live", "m"]
    assert (exports / "m" / "saved_model.pb").exists()
    assert json.loads((exports / "m" / "assets" / "export.json").read_text())["step"] == 6


def test_a_staging_directory_just_made_is_left_to_its_export(tmp_path):
    young = _staging(tmp_path, ".export-starting", lock=False, age=0)
    other = tmp_path / "not-an-export"
    other.mkdir()
    assert export_base.clean_stale_staging(str(tmp_path), log=lambda m: None) == []
    assert young.exists() and other.exists()


def test_a_failed_export_leaves_no_staging_directory(tmp_path, monkeypatch):
    def fail(*args, **kw):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(tf.saved_model, "save", fail)
    model = tf.Module()
    model.w = tf.Variable(1.0)
    with pytest.raises(OSError, match="No space left"):
        export_base.save(str(tmp_path / "m"), model, lambda x: x * model.w,
                         [tf.TensorSpec([], tf.float32)], [], [], {}, log=lambda m: None)
    assert os.listdir(tmp_path) == []


# -- 2: tracebacks only with --verbosity=1 or ACVI_TRACEBACK=1 -------------------------------

@pytest.mark.parametrize("switch", [None, "--verbosity=1", "ACVI_TRACEBACK=1"])
def test_a_failure_is_one_line_and_its_traceback_comes_with_the_switch(tmp_path, switch):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    flags = ["--profile=smoke", f"--model_dir={not_a_dir}"]
    env = {}
    if switch and switch.startswith("--"):
        flags.append(switch)
    elif switch:
        env = dict([switch.split("=")])
    r = _cli(flags, env=env)
    assert r.returncode == 1
    error = f"error: --model_dir={not_a_dir} is a file, not a directory"
    assert _short(r.stderr)[-1] == error, r.stderr[-3000:]
    if switch is None:
        assert "Traceback" not in r.stderr
        assert _short(r.stderr) == [error]
    else:
        # the error it was turned from, where it was raised, then the one line, last
        assert "Traceback (most recent call last)" in r.stderr
        assert "acvi_tf.errors.RunError: --model_dir=" in r.stderr
        assert 'in locked_run_dir' in r.stderr


def test_a_flag_errors_traceback_comes_with_the_switch(tmp_path):
    r = _cli(["--profile=smoke", f"--model_dir={tmp_path / 'run'}", "--warmup_steps=10"],
             env={"ACVI_TRACEBACK": "1"})
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr
    assert "in check_schedule_flags" in r.stderr
    assert _short(r.stderr)[-1] == (
        "error: --warmup_steps: is the warm-up of --lr_decay=cosine (got --lr_decay=none)")
    assert not (tmp_path / "run").exists()


def test_the_switch_reads_the_environment_and_verbosity(monkeypatch):
    from absl import flags
    from experiments.flags import tracebacks_wanted
    fv = flags.FlagValues()
    flags.DEFINE_integer("verbosity", -1, "", flag_values=fv)
    fv(["prog"])
    monkeypatch.delenv("ACVI_TRACEBACK", raising=False)
    assert not tracebacks_wanted(fv)
    for value, wanted in (("1", True), ("0", False), ("", False)):
        monkeypatch.setenv("ACVI_TRACEBACK", value)
        assert tracebacks_wanted(fv) == wanted
    monkeypatch.delenv("ACVI_TRACEBACK")
    fv.verbosity = 1
    assert tracebacks_wanted(fv)


# -- 3: checkpoint files verified before the state file names them ---------------------------

def _sums(model_dir, step):
    with open(os.path.join(model_dir, "ckpt", f"checksums-{step}.json")) as f:
        return json.load(f)["files"]


def test_each_checkpoint_records_its_files_sizes_and_crc32(tmp_path):
    _trainer(tmp_path, 6, checkpoint_every=2, keep_checkpoints=2).train()
    names = sorted(os.listdir(tmp_path / "ckpt"))
    # the rotated checkpoint's checksums go with it, as its position file does
    assert [n for n in names if n.startswith("checksums-")] == ["checksums-4.json",
                                                                 "checksums-6.json"]
    for step in (4, 6):
        sums = _sums(str(tmp_path), step)
        assert sorted(sums) == [f"ckpt-{step}.data-00000-of-00001", f"ckpt-{step}.index"]
        for name, want in sums.items():
            assert want == checkpoint_checks._file_sums(str(tmp_path / "ckpt" / name))


def _garble_one_byte(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert os.path.getsize(path) == size


def test_a_garbled_byte_in_the_newest_data_file_resumes_from_the_one_before(tmp_path):
    _trainer(tmp_path, 6, checkpoint_every=2).train(stop_at=4)
    data = str(tmp_path / "ckpt" / "ckpt-4.data-00000-of-00001")
    _garble_one_byte(data)
    again = _trainer(tmp_path, 6, checkpoint_every=2)
    logged = []
    again.log = logged.append
    again.train()
    prefix = str(tmp_path / "ckpt" / "ckpt-4")
    warnings = [m for m in logged if m.startswith("WARNING")]
    assert warnings == [
        f"WARNING: {prefix} cannot be read (ckpt-4.data-00000-of-00001 does not match its "
        f"crc32 in checksums-4.json (garbled)); using the newest readable checkpoint "
        f"{tmp_path / 'ckpt' / 'ckpt-2'} instead"], logged
    assert any(m.startswith(f"resumed from {tmp_path / 'ckpt' / 'ckpt-2'} at step 2")
               for m in logged)
    assert int(again.step.numpy()) == 6
    assert checkpoint_checks.checkpoint_is_readable(prefix)  # written again on the way to 6


def test_a_checkpoint_that_does_not_read_back_is_never_named_by_the_state_file(tmp_path,
                                                                              monkeypatch):
    run = _trainer(tmp_path, 6, checkpoint_every=2)
    run.log = lambda m: None
    state = tmp_path / "ckpt" / "checkpoint"
    seen = []
    real = checkpoint_checks._tensors_problem

    def problem(prefix):
        if prefix.endswith("ckpt-4"):
            # the verification runs before the state file is updated
            seen.append(tf.train.latest_checkpoint(str(tmp_path / "ckpt")))
            return "truncated or garbled: a bad disk"
        return real(prefix)
    monkeypatch.setattr(checkpoint_checks, "_tensors_problem", problem)
    with pytest.raises(CheckpointError, match=r"cannot write the checkpoint of step 4 .*the "
                                              r"written checkpoint does not read back: "
                                              r"truncated or garbled: a bad disk.*ckpt-2"):
        run.train()
    assert seen == [str(tmp_path / "ckpt" / "ckpt-2")]
    assert 'model_checkpoint_path: "ckpt-2"' in state.read_text()
    assert sorted(os.listdir(tmp_path / "ckpt")) == [
        "checkpoint", "checksums-2.json", "ckpt-2.data-00000-of-00001", "ckpt-2.index",
        "position-2.json"]


def test_a_checkpoint_without_checksums_is_read_tensor_by_tensor(tmp_path):
    """Checkpoints written before the checksums (or by another tool) are still checked."""
    _trainer(tmp_path, 4, checkpoint_every=2).train()
    for path in glob.glob(str(tmp_path / "ckpt" / "checksums-*.json")):
        os.remove(path)
    prefix = str(tmp_path / "ckpt" / "ckpt-4")
    assert checkpoint_checks.checkpoint_problem(prefix) is None
    with open(prefix + ".data-00000-of-00001", "r+b") as f:
        f.truncate(os.path.getsize(prefix + ".data-00000-of-00001") - 8)
    assert checkpoint_checks.checkpoint_problem(prefix).startswith("truncated or garbled")


# -- 4: MultiWorkerMirroredStrategy with one worker ------------------------------------------

ONE_WORKER = textwrap.dedent("""
    import json, os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np
    import tensorflow as tf
    from acvi_tf.data.synthetic import ReverseTask
    from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
    from acvi_tf.training.trainer import Trainer, TrainConfig, make_strategy
    out = {}
    # (the multi-worker strategy first: it sets up the collectives of this process)
    for name in sys.argv[2:]:
        strategy = make_strategy(name)
        cfg = ModelConfig(src_vocab_size=10, tgt_vocab_size=10, embed_dim=8, encoder_units=8,
                          decoder_units=8, attention_units=8, head_units=8, dropout=0.1,
                          attention="soft")
        lines = []
        tc = TrainConfig(model_dir=os.path.join(sys.argv[1], name), train_steps=4,
                         learning_rate=0.01, progress=False, eval_every=0, log_every=1,
                         checkpoint_every=2, gumbel_fraction=0.0)
        t = Trainer(lambda: Seq2Seq(cfg), tc, ReverseTask(vocab_size=10, batch_size=8, seed=1),
                    strategy=strategy, log=lines.append)
        metrics = t.train()
        out[name] = {"replicas": strategy.num_replicas_in_sync,
                     "multi_worker": isinstance(
                         strategy, tf.distribute.MultiWorkerMirroredStrategy),
                     "chief": t.is_chief,
                     "losses": [float(l.split(" loss=")[1].split()[0]) for l in lines
                                if l.startswith("step ")],
                     "loss": float(metrics["loss"]),
                     "weights": [v.numpy().tolist() for v in t.model.trainable_variables]}
    json.dump(out, open(os.path.join(sys.argv[1], "out.json"), "w"))
""")


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("tf_config", ["none", "one worker"])
def test_multiworker_with_one_worker_trains_as_the_default_strategy(tmp_path, tf_config):
    """--strategy=multiworker on one machine without TF_CONFIG, or with a TF_CONFIG of one
    worker (its first use on one GPU), trains one replica (dropout on: the replica's seed
    is the default strategy's) and takes the default strategy's steps; it writes the
    checkpoints as the chief."""
    script = tmp_path / "one_worker.py"
    script.write_text(ONE_WORKER)
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("TF_CONFIG", None)
    if tf_config == "one worker":
        env["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"localhost:{_free_port()}"]},
                                       "task": {"type": "worker", "index": 0}})
    r = cli.run(str(script), [str(tmp_path), "multiworker", "default"], env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.load(open(tmp_path / "out.json"))
    mw, default = out["multiworker"], out["default"]
    assert mw["multi_worker"] and mw["replicas"] == 1 and mw["chief"]
    assert not default["multi_worker"]
    assert len(mw["losses"]) == 4 and mw["losses"] == default["losses"]
    np.testing.assert_allclose(mw["loss"], default["loss"], rtol=1e-6)
    for a, b in zip(mw["weights"], default["weights"]):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, atol=1e-6)
    assert sorted(os.path.basename(p) for p in glob.glob(
        str(tmp_path / "multiworker" / "ckpt" / "ckpt-*.index"))) == ["ckpt-2.index",
                                                                     "ckpt-4.index"]


def _train_losses(model_dir):
    with open(os.path.join(model_dir, "history.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return {r["step"]: r["train"]["loss"] for r in records if "train" in r}


STRATEGY_SCRIPT = '''
import runpy, sys
import tensorflow as tf
from acvi_tf.training import distribute  # experiments.saved_runs makes it from there
real = distribute.make_strategy
def make_strategy(*args, **kw):
    strategy = real(*args, **kw)
    multi = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    print(f"strategy: multi_worker={multi} replicas={strategy.num_replicas_in_sync}",
          file=sys.stderr)
    return strategy
distribute.make_strategy = make_strategy
runpy.run_module("experiments.translate", run_name="__main__", alter_sys=True)
'''


def test_the_cli_with_multiworker_on_one_machine_matches_the_default_run(trained, tmp_path):
    """The command of the issue, ``--strategy=multiworker`` on one machine, trains and
    logs the losses of the default strategy's run (the fixture's, the same flags)."""
    script = tmp_path / "strategy.py"
    script.write_text(STRATEGY_SCRIPT)
    model_dir = str(tmp_path / "run")
    r = _cli(SMOKE + [f"--model_dir={model_dir}", "--strategy=multiworker"],
             env=dict(_env(), PYTHONPATH=ROOT), module=str(script))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    assert "strategy: multi_worker=True replicas=1" in r.stderr
    ours, default = _train_losses(model_dir), _train_losses(trained)
    assert sorted(ours) == [2, 4, 6]
    np.testing.assert_allclose([ours[s] for s in sorted(ours)],
                               [default[s] for s in sorted(default)], rtol=1e-5)


# -- 5: eval/decode past a truncated newest checkpoint ---------------------------------------

def test_restore_falls_back_past_a_truncated_newest_checkpoint(tmp_path, monkeypatch):
    from acvi_tf.models.seq2seq import Seq2Seq
    _trainer(tmp_path, 4, checkpoint_every=2).train()
    data = str(tmp_path / "ckpt" / "ckpt-4.data-00000-of-00001")
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) - 1000)
    logged = []
    monkeypatch.setattr(restore, "log", logged.append)
    assert restore_model(Seq2Seq(_cfg(attention="soft")), str(tmp_path), _batch()) == 2
    assert len(logged) == 1 and logged[0].startswith(
        f"WARNING: {tmp_path / 'ckpt' / 'ckpt-4'} cannot be read (ckpt-4.data-00000-of-00001 "
        f"has "), logged
    assert logged[0].endswith(
        f"; using the newest readable checkpoint {tmp_path / 'ckpt' / 'ckpt-2'} instead")


def _decode(model_dir):
    return cli.run("experiments.translate", ["--mode=decode", f"--model_dir={model_dir}"],
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **_env()),
                   input="ein mann\nzwei frauen\n", timeout=600)


def test_decode_falls_back_past_a_truncated_newest_checkpoint(trained, tmp_path):
    model_dir = _copy(trained, tmp_path)
    ckpt = os.path.join(model_dir, "ckpt")
    data = os.path.join(ckpt, "ckpt-6.data-00000-of-00001")
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) - 1000)
    r = _decode(model_dir)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    warnings = [line for line in _short(r.stderr) if "WARNING" in line]
    assert len(warnings) == 1, r.stderr[-3000:]
    assert warnings[0].startswith(f"WARNING: {ckpt}/ckpt-6 cannot be read (")
    assert warnings[0].endswith(f"using the newest readable checkpoint {ckpt}/ckpt-3 instead")
    assert len(r.stdout.splitlines()) == 2
    # the decode of ckpt-3 itself (the state file naming it, ckpt-6 gone)
    for path in glob.glob(os.path.join(ckpt, "ckpt-6.*")):
        os.remove(path)
    with open(os.path.join(ckpt, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "ckpt-3"\nall_model_checkpoint_paths: "ckpt-3"\n')
    again = _decode(model_dir)
    assert again.returncode == 0 and "WARNING" not in again.stderr, again.stderr[-3000:]
    assert again.stdout == r.stdout
