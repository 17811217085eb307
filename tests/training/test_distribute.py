"""acvi_tf.training.distribute and the Trainer under tf.distribute (issue 42): batches the
replicas do not divide are cut, and 2 and 3 mirrored replicas then take exactly the steps
one device takes on the cut batches; a non-finite step under a strategy still stops the
run before a checkpoint; --deterministic; a strategy made after TensorFlow started is a
clear error. The replicas are logical CPU devices in a forked process (the split must
come before TensorFlow starts)."""

import json
import textwrap

import numpy as np
import pytest

from acvi_tf.training import distribute
from tests import cli


def test_trim_to_replicas_cuts_the_rows_the_replicas_do_not_divide():
    batch = {"src": np.arange(16).reshape(8, 2), "len": np.arange(8), "max_oovs": np.int32(3)}
    same, dropped = distribute.trim_to_replicas(batch, 2)
    assert same is batch and dropped == 0
    cut, dropped = distribute.trim_to_replicas(batch, 3)
    assert dropped == 2 and cut["src"].shape == (6, 2) and cut["len"].tolist() == list(range(6))
    assert cut["max_oovs"] == 3  # a scalar stays whole
    small, dropped = distribute.trim_to_replicas({"src": np.zeros([1, 4])}, 2)
    assert small is None and dropped == 1
    assert distribute.trim_to_replicas(batch, 1) == (batch, 0)


def test_the_wait_for_the_chiefs_marker_reads_its_variable(monkeypatch):
    monkeypatch.delenv(distribute.SHARED_DIR_WAIT_ENV, raising=False)
    assert distribute.shared_dir_wait_seconds() == 10.0
    monkeypatch.setenv(distribute.SHARED_DIR_WAIT_ENV, "2.5")
    assert distribute.shared_dir_wait_seconds() == 2.5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(distribute.SHARED_DIR_WAIT_ENV, bad)
        with pytest.raises(distribute.StrategyError,
                           match=rf"\$ACVI_SHARED_DIR_WAIT='{bad}': give the seconds"):
            distribute.shared_dir_wait_seconds()


def test_a_strategy_made_after_tensorflow_started_is_a_clear_error(monkeypatch):
    """This process has run TensorFlow ops: logical devices and collective ops can no
    longer be set up, and each says so instead of TensorFlow's own error."""
    import tensorflow as tf
    tf.constant(1.0)  # (started, whatever ran before)
    assert distribute.runtime_started()
    cpu = tf.config.list_physical_devices("CPU")[0]
    if len(tf.config.get_logical_device_configuration(cpu) or []) < 5:
        with pytest.raises(distribute.StrategyError, match="--num_devices=5: .* before "
                                                           "TensorFlow starts"):
            distribute.make_strategy("mirrored", num_devices=5)
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["localhost:1", "localhost:2"]},
        "task": {"type": "worker", "index": 0}}))
    with pytest.raises(distribute.StrategyError, match="--strategy=multiworker: TensorFlow "
                                                       "started before the strategy"):
        distribute.make_strategy("multiworker")


REPLICAS = textwrap.dedent("""
    import json, os, sys
    import numpy as np, tensorflow as tf
    from acvi_tf.training.distribute import make_strategy
    make_strategy("mirrored", num_devices=3)  # first: splits the CPU into 3 devices
    from acvi_tf.data.synthetic import ReverseTask
    from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
    from acvi_tf.training.trainer import Trainer, TrainConfig, TrainingDiverged

    # A last partial bucket batch (5), a batch smaller than the replicas (1), and
    # summarization's 16 (not divisible by 3). One length: each batch size is one trace.
    SIZES = [8, 5, 1, 16]
    task = ReverseTask(vocab_size=10, min_len=5, max_len=5, batch_size=16, seed=1)

    def stream(cut_to=1):
        def data(position):
            for p, n in enumerate(SIZES):
                n -= n % cut_to  # the reference: one device fed the cut batches
                if n:
                    yield {k: v[:n] for k, v in task.batch_at(p).items()}, p + 1
        return data

    def cfg(attention="soft", dropout=0.0, precision="float32"):
        return ModelConfig(src_vocab_size=10, tgt_vocab_size=10, embed_dim=8,
                           encoder_units=8, decoder_units=8, attention_units=8,
                           head_units=8, dropout=dropout, attention=attention,
                           precision=precision)

    def train(name, strategy, data, steps=3, model=cfg, **kw):
        lines = []
        tc = TrainConfig(model_dir=os.path.join(sys.argv[1], name), train_steps=steps,
                         learning_rate=0.01, clip_norm=0.5, progress=False, eval_every=0,
                         log_every=1, gumbel_fraction=0.0, **kw)
        t = Trainer(lambda: Seq2Seq(model()), tc, data, strategy=strategy,
                    log=lines.append)
        t.train()
        return t, lines

    out = {}
    for r in (2, 3):
        for name, strategy, data in (("one", make_strategy(), stream(r)),
                                     ("mirrored", make_strategy("mirrored", r), stream())):
            t, lines = train(f"{name}{r}", strategy, data)
            history = [json.loads(l) for l in open(os.path.join(t.config.model_dir,
                                                                "history.jsonl"))]
            out[f"{name}{r}"] = {
                "replicas": strategy.num_replicas_in_sync,
                "losses": [float(l.split(" loss=")[1].split()[0]) for l in lines
                           if l.startswith("step ")],
                "said": [l for l in lines if "dropped" in l],
                "dropped": [h["dropped_rows"] for h in history if "dropped_rows" in h],
                "weights": [v.numpy().tolist() for v in t.model.trainable_variables]}

    # mixed_float16's loss scaling under two replicas (each replica unscales its
    # gradients before they are summed), and MirroredStrategy on one device (a user's one
    # GPU; it crashed in merge_call before: issue 40), against one device on those batches.
    for name, strategy, data, precision in (
            ("fp16_one", make_strategy(), stream(2), "mixed_float16"),
            ("fp16_mirrored", make_strategy("mirrored", 2), stream(), "mixed_float16"),
            ("mirrored1", make_strategy("mirrored", 1), stream(2), "float32")):
        t, _ = train(name, strategy, data, model=lambda: cfg(precision=precision))
        scale = getattr(t.optimizer, "dynamic_scale", None)
        out[name] = {"replicas": strategy.num_replicas_in_sync,
                     "loss_scale": None if scale is None else float(scale.numpy()),
                     "weights": [v.numpy().tolist() for v in t.model.trainable_variables]}

    # A NaN loss at the 4th step under two replicas (the update cannot be skipped
    # there): the check before the checkpoint of step 4 stops the run.
    def nan_at_step_4(model):
        real = model.loss_terms
        def loss_terms(batch, training=False, seed=0, **kw):
            terms = real(batch, training=training, seed=seed, **kw)
            if training:
                bad = tf.equal(trainer.step, 3)
                terms["objective"] = tf.where(bad, np.float32(np.nan), terms["objective"])
            return terms
        model.loss_terms = loss_terms

    tc = TrainConfig(model_dir=os.path.join(sys.argv[1], "nan"), train_steps=6,
                     learning_rate=0.01, progress=False, eval_every=0, log_every=100,
                     checkpoint_every=2)
    trainer = Trainer(lambda: Seq2Seq(cfg()), tc, ReverseTask(vocab_size=10, batch_size=8),
                      strategy=make_strategy("mirrored", 2), log=lambda m: None)
    nan_at_step_4(trainer.model)
    try:
        trainer.train()
        out["nan"] = "trained on"
    except TrainingDiverged as e:
        out["nan"] = str(e)
    out["nan_checkpoints"] = sorted(os.listdir(os.path.join(sys.argv[1], "nan", "ckpt")))

    # --deterministic: op determinism on, and two runs (with dropout) end with the very
    # same weights.
    weights = []
    for name in ("det_a", "det_b"):
        t, _ = train(name, make_strategy(), ReverseTask(vocab_size=10, batch_size=8), 2,
                     lambda: cfg("soft", 0.1), deterministic=True)
        weights.append([v.numpy().tolist() for v in t.model.trainable_variables])
    from tensorflow.python.framework import config  # (no public reader of the switch)
    out["determinism_on"] = config.is_op_determinism_enabled()
    out["det_equal"] = weights[0] == weights[1]
    json.dump(out, open(os.path.join(sys.argv[1], "out.json"), "w"))
""")


def test_mirrored_replicas_cut_partial_batches_and_match_one_device(tmp_path):
    """2 and 3 mirrored replicas on batches of 8, 5, 1 and 16 rows train as one
    device on those batches cut to a multiple of the replicas (the batch of 1 skipped):
    the same losses step by step and the same weights; the cut is said once and its total
    recorded in history.jsonl. Under two replicas a NaN loss at step 4 stops the run at
    the check before step 4's checkpoint (log_every=100: the per-step host sync is gone).
    Two --deterministic runs give identical weights. Under mixed_float16 two replicas
    take one device's steps (to float16's precision; the loss scale 2^15 on both), and
    MirroredStrategy on one device takes one device's steps."""
    script = tmp_path / "replicas.py"
    script.write_text(REPLICAS)
    r = cli.run(str(script), [str(tmp_path)], timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.load(open(tmp_path / "out.json"))
    for n, dropped in ((2, 1 + 1), (3, 2 + 2 + 1 + 1)):
        one, many = out[f"one{n}"], out[f"mirrored{n}"]
        assert one["replicas"] == 1 and many["replicas"] == n
        assert len(many["losses"]) == 3  # four batches, one too small for the replicas
        np.testing.assert_allclose(many["losses"], one["losses"], rtol=1e-4)
        for a, b in zip(many["weights"], one["weights"]):
            np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-4, atol=1e-5)
        assert len(many["said"]) == 2 and many["dropped"] == [dropped]
        assert f"not divisible by the {n} replicas" in many["said"][0]
        assert not one["said"] and not one["dropped"]
    for name, reference, tolerance, replicas in (("fp16_mirrored", "fp16_one", 1e-3, 2),
                                                 ("mirrored1", "one2", 1e-5, 1)):
        assert out[name]["replicas"] == replicas
        assert out[name]["loss_scale"] == out[reference].get("loss_scale") == (
            2.0 ** 15 if reference == "fp16_one" else None)
        for a, b in zip(out[name]["weights"], out[reference]["weights"]):
            np.testing.assert_allclose(np.array(a), np.array(b), rtol=10 * tolerance,
                                       atol=tolerance)
    assert "non-finite loss or gradient at step 4" in out["nan"], out["nan"]
    assert "ckpt-2" in out["nan"]
    assert [n for n in out["nan_checkpoints"] if n.endswith(".index")] == ["ckpt-2.index"]
    assert out["determinism_on"] and out["det_equal"]
