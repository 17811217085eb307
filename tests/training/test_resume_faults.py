"""Resume faults (issue 12): a garbled checkpoint state file, an unreadable checkpoint, a
new learning rate on resume. Nothing restarts at step 0 over good checkpoints."""

import glob
import os

import numpy as np
import pytest

from tests.training.test_trainer import _trainer as _acvi_trainer
from tests.training.test_trainer import _weights


def _trainer(model_dir, steps, **kw):
    """Soft attention, one training mode: what is tested here is the checkpoints, and one
    traced step per trainer costs half of ACVI's two (weighted and Gumbel mixing);
    tests/training/test_trainer.py resumes ACVI across its mode switch."""
    return _acvi_trainer(model_dir, steps, attention="soft", gumbel_fraction=0.0, **kw)


def _messages(trainer):
    logged = []
    trainer.log = logged.append
    return logged


def test_garbled_state_file_resumes_from_the_newest_readable_checkpoint(tmp_path):
    full = _trainer(tmp_path / "full", 8, checkpoint_every=2)
    full.train()
    part = _trainer(tmp_path / "part", 8, checkpoint_every=2)
    part.train(stop_at=6)
    with open(tmp_path / "part" / "ckpt" / "checkpoint", "w") as f:
        f.write("garbage\n")
    resumed = _trainer(tmp_path / "part", 8, checkpoint_every=2)
    logged = _messages(resumed)
    resumed.train()
    assert any("WARNING" in m and "ckpt-6" in m for m in logged), logged
    assert any("resumed from" in m and "ckpt-6" in m for m in logged)
    for a, b in zip(_weights(full), _weights(resumed)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_unreadable_newest_checkpoint_falls_back_to_the_one_before(tmp_path):
    run = _trainer(tmp_path, 8, checkpoint_every=2)
    run.train(stop_at=6)
    for path in glob.glob(str(tmp_path / "ckpt" / "ckpt-6.data-*")):
        with open(path, "r+b") as f:
            f.truncate(10)
    os.remove(tmp_path / "ckpt" / "ckpt-6.index")  # a half-written newest checkpoint
    resumed = _trainer(tmp_path, 8, checkpoint_every=2)
    logged = _messages(resumed)
    resumed.train()
    assert any("ckpt-4" in m and "resumed" in m for m in logged), logged
    assert int(resumed.step.numpy()) == 8


def test_only_unreadable_checkpoints_are_refused_not_overwritten(tmp_path):
    run = _trainer(tmp_path, 4, checkpoint_every=2)
    run.train()
    for path in glob.glob(str(tmp_path / "ckpt" / "ckpt-*.index")):
        with open(path, "wb") as f:
            f.write(b"broken")
    again = _trainer(tmp_path, 6, checkpoint_every=2)
    again.log = lambda m: None
    with pytest.raises(RuntimeError, match="none can be read"):
        again.train()
    assert sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "ckpt" / "ckpt-*.index"))) \
        == ["ckpt-2.index", "ckpt-4.index"]


def test_a_new_learning_rate_applies_on_resume_and_is_said(tmp_path):
    run = _trainer(tmp_path, 6, checkpoint_every=2)
    run.train(stop_at=4)
    resumed = _trainer(tmp_path, 6, checkpoint_every=2)
    resumed.config.learning_rate = 0.001
    logged = _messages(resumed)
    resumed.train()
    assert any("learning rate: the checkpoint had 0.01; --learning_rate=0.001" in m
               for m in logged), logged
    assert float(np.asarray(resumed.optimizer.learning_rate)) == pytest.approx(0.001)


def test_training_time_adds_up_over_resumed_sessions(tmp_path):
    """Defect 8: ``train_wall_time_sec`` counted only the last session."""
    import json
    import time
    first = _trainer(tmp_path, 6, checkpoint_every=2)
    first.train(stop_at=4)
    position = tmp_path / "ckpt" / "position-4.json"
    saved = json.loads(position.read_text())
    assert 0 < saved["train_seconds"] <= first.train_seconds()
    saved["train_seconds"] = 1000.0  # as if the first session had been long
    position.write_text(json.dumps(saved))
    resumed = _trainer(tmp_path, 6, checkpoint_every=2)
    t0 = time.time()
    resumed.train()
    assert 1000.0 < resumed.train_seconds() <= 1000.0 + (time.time() - t0)
