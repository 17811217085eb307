"""--checkpoint_minutes: a checkpoint after any step that ends that many wall minutes after
the last one, so a run killed without warning (no SIGTERM to save its step) redoes only the
steps since, and its rerun ends where one uninterrupted run does."""

import types

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.errors import ConfigError
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from acvi_tf.training import trainer as trainer_module
from acvi_tf.training.trainer import Trainer, TrainConfig, checkpoint_step, resume_checkpoint

V = 10


def _trainer(model_dir, data, minutes, steps=8):
    cfg = TrainConfig(model_dir=str(model_dir), train_steps=steps, learning_rate=0.01,
                      log_every=2, eval_every=0, checkpoint_every=100, keep_checkpoints=10,
                      checkpoint_minutes=minutes, progress=False)
    model = ModelConfig(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8, encoder_units=8,
                        decoder_units=8, attention_units=8, head_units=8, dropout=0.1)
    return Trainer(lambda: Seq2Seq(model), cfg, data, log=lambda m: None)


class Killed(Exception):
    """The process ending at once (SIGKILL): no handler runs, nothing more is saved."""


def _clocked(task, clock, seconds_per_batch=40.0, kill_at=None):
    """The task's batches, the trainer's clock advancing ``seconds_per_batch`` as each is
    read; reading the batch of step ``kill_at`` kills the run."""
    def data(position):
        for batch, after in task(position):
            if after == kill_at:
                raise Killed()
            clock[0] += seconds_per_batch
            yield batch, after
    return data


def _saved_steps(model_dir):
    state = tf.train.get_checkpoint_state(str(model_dir / "ckpt"))
    return [checkpoint_step(p) for p in state.all_model_checkpoint_paths]


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(trainer_module, "time", types.SimpleNamespace(time=lambda: now[0]))
    return now


def test_timed_checkpoints_and_a_killed_run_that_resumes_from_one(tmp_path, clock):
    task = ReverseTask(vocab_size=V, batch_size=8, seed=3)
    full = _trainer(tmp_path / "full", task, minutes=0.0)  # the default: step checkpoints only
    full.train()
    assert _saved_steps(tmp_path / "full") == [8]
    # 40 s a step, a checkpoint once a minute has passed: after steps 2 and 4 (80 s each
    # time); the run is killed as it reads step 6's batch, after step 5
    killed = _trainer(tmp_path / "part", _clocked(task, clock, kill_at=6), minutes=1.0)
    with pytest.raises(Killed):
        killed.train()
    assert _saved_steps(tmp_path / "part") == [2, 4]
    assert checkpoint_step(resume_checkpoint(str(tmp_path / "part"), lambda m: None)) == 4
    # the same command resumes from step 4 and ends where the uninterrupted run does
    resumed = _trainer(tmp_path / "part", _clocked(task, clock), minutes=1.0)
    resumed.train()
    assert int(resumed.step.numpy()) == 8 and _saved_steps(tmp_path / "part") == [2, 4, 6, 8]
    for a, b in zip(full.model.trainable_variables, resumed.model.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_more_than_one_worker_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(trainer_module, "num_workers", lambda strategy: 2)
    task = ReverseTask(vocab_size=V, batch_size=8, seed=3)
    with pytest.raises(ConfigError, match="checkpoint_minutes: 5 needs one worker; this run "
                                          "has 2"):
        _trainer(tmp_path / "run", task, minutes=5.0).train()
    assert not (tmp_path / "run" / "train_config.json").exists()
