"""Best-validation checkpoint selection (TrainConfig.select_best): the model the final
evaluation scores is the one of the best evaluation, across a resume, and best.json says
which step it was."""

import json

import numpy as np
import pytest

from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models.seq2seq import Seq2Seq
from acvi_tf.training.trainer import (BEST_FILE, Trainer, TrainConfig, parse_select_best,
                                      read_best)
from tests.training.test_trainer import V, _cfg

# a validation score by step that peaks in the middle (step 4 of 8)
SCORES = {2: 5.0, 4: 9.0, 6: 7.0, 8: 3.0}


def _run(model_dir, select, steps=8, stop_at=None, seen=None, calls=None):
    """``seen``: step -> the weights its (periodic) evaluation saw, and "final" -> those
    of the final-protocol call; ``calls``: every (step, final) the Trainer asked for."""
    seen = {} if seen is None else seen
    calls = [] if calls is None else calls

    def eval_fn(model, step, final=None):
        calls.append((step, final))
        seen["final" if final else step] = [v.numpy().copy() for v in model.trainable_variables]
        # a final-protocol score (beam search on the whole set) is far above the periodic
        # ones: were it compared with them, the last step would always win
        bonus = 100.0 if final or (final is None and step == steps) else 0.0
        return {"scalars": {"dev_bleu": SCORES[step] + bonus,
                            "dev_nll": 10.0 - SCORES[step] - bonus}}
    cfg = TrainConfig(model_dir=str(model_dir), train_steps=steps, learning_rate=0.05,
                      log_every=2, eval_every=2, checkpoint_every=2, progress=False,
                      select_best=select)
    trainer = Trainer(lambda: Seq2Seq(_cfg(attention="soft")), cfg,
                      ReverseTask(vocab_size=V, batch_size=8, seed=3), eval_fn=eval_fn,
                      log=lambda m: None)
    trainer.train(stop_at=stop_at)
    return trainer, seen


@pytest.mark.parametrize("select", ["dev_bleu", "-dev_nll"])
def test_the_final_model_is_the_best_evaluations(select, tmp_path):
    """The last step's evaluation is a periodic one like the others (final=False), so a
    final-protocol score cannot win by its decoding; the final-protocol evaluation then
    runs on the selected model (its decodes and diagnostics go into the results)."""
    calls = []
    trainer, seen = _run(tmp_path, select, calls=calls)
    assert calls == [(2, None), (4, None), (6, None), (8, False), (8, True)]
    best = read_best(str(tmp_path))
    assert best["step"] == 4 and best["value"] == (9.0 if select == "dev_bleu" else 1.0)
    final = [v.numpy() for v in trainer.model.trainable_variables]
    for got, want, scored in zip(final, seen[4], seen["final"]):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(scored, want)  # the final protocol saw the best model
    assert any(not np.array_equal(a, b) for a, b in zip(final, seen[8]))  # not the last
    assert int(trainer.step.numpy()) == 8  # the counter keeps the last step


def test_selection_survives_a_resume(tmp_path):
    _, first = _run(tmp_path, "dev_bleu", stop_at=6)  # the best (step 4) kept before the stop
    assert read_best(str(tmp_path))["step"] == 4
    trainer, seen = _run(tmp_path, "dev_bleu")  # resumes at 6, evaluates 8: worse
    assert set(seen) == {8, "final"}
    assert json.load(open(tmp_path / BEST_FILE))["step"] == 4
    for got, want in zip(trainer.model.trainable_variables, first[4]):
        np.testing.assert_array_equal(got.numpy(), want)


def test_no_selection_evaluates_the_last_model_and_bad_names_are_refused(tmp_path):
    trainer, seen = _run(tmp_path / "plain", "")
    assert read_best(str(tmp_path / "plain")) is None
    for got, want in zip(trainer.model.trainable_variables, seen[8]):
        np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(ValueError, match="gives no 'dev_rouge'.*dev_bleu, dev_nll"):
        _run(tmp_path / "bad", "dev_rouge")
    assert parse_select_best("-dev_nll") == ("dev_nll", -1)
    with pytest.raises(ValueError, match="--select_best="):
        parse_select_best("dev bleu")
