"""SIGTERM / SIGINT stop a training run after the step it is at, with that step's
checkpoint, and the same command resumes it exactly (acvi_tf/training/stop_signal.py)."""

import os
import signal
import threading

import numpy as np
import pytest

from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from acvi_tf.training.stop_signal import Interrupted, StopRequests
from acvi_tf.training.trainer import Trainer, TrainConfig, checkpoint_step, resume_checkpoint

V = 10


def _trainer(model_dir, data, steps=8):
    cfg = TrainConfig(model_dir=str(model_dir), train_steps=steps, learning_rate=0.01,
                      log_every=2, eval_every=0, checkpoint_every=100, progress=False)
    model = ModelConfig(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8, encoder_units=8,
                        decoder_units=8, attention_units=8, head_units=8, dropout=0.1)
    return Trainer(lambda: Seq2Seq(model), cfg, data, log=lambda m: None)


def _signalling(task, at, signum):
    """The task's batches; the process signals itself as the batch of step ``at`` is read
    (as a scheduler's SIGTERM arrives at any moment of a step)."""
    def data(position):
        for batch, after in task(position):
            if after == at:
                os.kill(os.getpid(), signum)
            yield batch, after
    return data


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_saves_the_step_and_the_rerun_ends_where_one_run_does(tmp_path, signum):
    task = ReverseTask(vocab_size=V, batch_size=8, seed=3)
    full = _trainer(tmp_path / "full", task)
    full.train()
    before = signal.getsignal(signum)
    stopped = _trainer(tmp_path / "part", _signalling(task, 3, signum))
    with pytest.raises(Interrupted) as info:
        stopped.train()
    assert info.value.step == 3 and info.value.exit_code == 128 + signum
    assert f"stopped by {signal.Signals(signum).name} at step 3" in str(info.value)
    assert "run the same command again to resume" in str(info.value)
    assert signal.getsignal(signum) is before  # the handler is the caller's again
    assert checkpoint_step(resume_checkpoint(str(tmp_path / "part"), lambda m: None)) == 3
    resumed = _trainer(tmp_path / "part", task)
    resumed.train()
    assert int(resumed.step.numpy()) == 8
    for a, b in zip(full.model.trainable_variables, resumed.model.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_sigterm_twice_is_one_request_and_a_second_ctrl_c_stops_at_once():
    with StopRequests() as stops:
        assert not stops.requested
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # a runner passing on the scheduler's
        assert stops.signum == signal.SIGTERM
    with StopRequests() as stops:
        os.kill(os.getpid(), signal.SIGINT)
        assert stops.signum == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)


def test_outside_the_main_thread_nothing_is_installed():
    seen = []

    def body():
        with StopRequests() as stops:
            seen.append((signal.getsignal(signal.SIGTERM), stops.requested))
    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [(before, False)]
