"""Batch shards (acvi_tf.utils.shards): the rows split and joined back, the shard count
chosen as documented (and TensorFlow's threads set in a fresh process), a sharded training
step equal in objective and gradients to the unsharded one, and a sharded decode equal
to the unsharded decode, row for row."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models import build_model
from acvi_tf.models.seq2seq import ModelConfig
from acvi_tf.tasks.decode_batches import best_hypothesis_decoder
from acvi_tf.training.step import loss_terms, train_step
from acvi_tf.training.trainer import TrainConfig, make_optimizer
from acvi_tf.utils import shards

V = 12


@pytest.fixture(autouse=True)
def _restore_state():
    saved = dict(shards._state)
    yield
    shards._state.clear()
    shards._state.update(saved)


def _batch(batch_size=7, seed=1):
    return {k: tf.constant(v) for k, v in
            ReverseTask(vocab_size=V, batch_size=batch_size, seed=seed).batch_at(0).items()}


def test_split_rows_cuts_consecutive_rows_and_keeps_scalars():
    batch = {"src": tf.reshape(tf.range(7 * 3), [7, 3]), "src_len": tf.range(7),
             "max_oovs": tf.constant(4)}
    parts = shards.split_rows(batch, 3)
    assert [int(p["src"].shape[0]) for p in parts] == [2, 2, 3]  # k * 7 // 3
    np.testing.assert_array_equal(np.concatenate([p["src"] for p in parts]), batch["src"])
    np.testing.assert_array_equal(np.concatenate([p["src_len"] for p in parts]), np.arange(7))
    assert all(int(p["max_oovs"]) == 4 for p in parts)
    few = shards.split_rows({"src": tf.ones([1, 3])}, 2)
    assert [int(p["src"].shape[0]) for p in few] == [0, 1]
    assert shards.split_rows(batch, 1)[0]["src"] is not None


def test_concat_rows_pads_the_other_axes_to_the_longest_shard():
    a = {"ids": tf.ones([2, 3], tf.int32), "lengths": tf.constant([3, 1]), "n": tf.constant(5)}
    b = {"ids": tf.fill([1, 5], 2), "lengths": tf.constant([5]), "n": tf.constant(5)}
    out = shards.concat_rows([a, b])
    np.testing.assert_array_equal(out["ids"], [[1, 1, 1, 0, 0], [1, 1, 1, 0, 0],
                                               [2, 2, 2, 2, 2]])
    np.testing.assert_array_equal(out["lengths"], [3, 1, 5])
    assert int(out["n"]) == 5


@pytest.mark.parametrize("kwargs, expected, words", [
    ({"requested": 1}, 1, "--cpu_shards=1"),
    ({"environ": {"TF_NUM_INTRAOP_THREADS": "1"}}, 1, "TF_NUM_INTRAOP_THREADS"),
    ({"gpu": True}, 1, "GPU"),
    ({"xla": True}, 1, "--xla"),
    ({"cores": 1}, 1, "one usable core"),
    ({"requested": 3, "environ": {"TF_NUM_INTEROP_THREADS": "1"}}, 3, "as the user set"),
])
def test_configure_chooses_the_count(kwargs, expected, words):
    args = {"requested": 0, "environ": {}, "cores": 2, "gpu": False, **kwargs}
    count, reason = shards.configure(**args)
    assert count == expected and words in reason
    assert shards.shards() == expected and shards.describe()["cpu_shards"] == expected


def test_auto_falls_back_to_one_shard_when_tensorflow_has_started(monkeypatch):
    monkeypatch.setattr(shards, "_set_threads", lambda count: False)
    assert shards.configure(0, environ={}, cores=2, gpu=False)[0] == 1
    # an explicit count still shards the rows
    assert shards.configure(2, environ={}, cores=2, gpu=False)[0] == 2
    monkeypatch.setattr(shards, "_set_threads", lambda count: True)
    assert shards.configure(0, environ={}, cores=4, gpu=False)[0] == 4
    assert shards.resolve(0) == 4 and shards.resolve(3) == 3


def test_a_fresh_process_gets_one_thread_per_op_and_a_thread_per_shard():
    code = ("from acvi_tf.utils import shards\n"
            "import tensorflow as tf\n"
            "n, _ = shards.configure(0, cores=2, gpu=False)\n"
            "tf.constant(1.0) + 1.0\n"  # TensorFlow starts with the threads set
            "print(n, tf.config.threading.get_intra_op_parallelism_threads(),"
            " tf.config.threading.get_inter_op_parallelism_threads())\n")
    env = {k: v for k, v in os.environ.items() if k not in shards.THREAD_VARIABLES}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=300)
    assert out.stdout.split()[-3:] == ["2", "1", "2"]
    env["TF_NUM_INTRAOP_THREADS"] = "2"  # the user's threads win: one shard, none set
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=300)
    assert out.stdout.split()[-3:] == ["1", "0", "0"]  # 0: TensorFlow's own choice


def _model(**overrides):
    keras.utils.set_random_seed(3)
    fields = dict(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8, encoder_units=8,
                  decoder_units=16, attention_units=8, head_units=16, dropout=0.0)
    fields.update(overrides)
    model = build_model(ModelConfig(**fields))
    model.build_for_checkpoint(_batch())
    return model


@pytest.mark.parametrize("overrides", [{"attention": "soft"},
                                       {"attention": "soft", "score": "additive",
                                        "coverage": True}])
def test_sharded_objective_and_gradients_equal_the_unsharded(overrides):
    """Nothing random (dropout 0, soft attention): the shards' summed terms are the batch's,
    and so are their gradients."""
    model = _model(**overrides)
    batch = _batch()
    seed = tf.constant(5)

    def terms_and_grads(count):
        with tf.GradientTape() as tape:
            terms = loss_terms(model, batch, seed, count)
        return terms, tape.gradient(terms["objective"], model.trainable_variables)

    whole, whole_grads = terms_and_grads(1)
    for count in (2, 3):
        parts, grads = terms_and_grads(count)
        assert set(parts) == set(whole)
        for name in whole:
            np.testing.assert_allclose(parts[name], whole[name], rtol=1e-5, err_msg=name)
        for g, w in zip(grads, whole_grads):
            np.testing.assert_allclose(tf.convert_to_tensor(g), tf.convert_to_tensor(w),
                                       rtol=1e-4, atol=1e-6)


def test_train_step_with_shards_applies_the_unsharded_update():
    batch = _batch(batch_size=6)
    models, results = [], []
    for count in (1, 2):
        model = _model()
        optimizer = make_optimizer(TrainConfig(model_dir="", optimizer="sgd",
                                               learning_rate=0.5), "float32")
        optimizer.build(model.trainable_variables)
        step = tf.function(lambda b, s: train_step(model, optimizer, b, s, clip_norm=1.0,
                                                   shards=count), autograph=False)
        results.append(step(batch, tf.constant(1)))
        models.append(model)
    assert float(results[0]["tokens"]) == float(results[1]["tokens"])
    np.testing.assert_allclose(results[1]["loss"], results[0]["loss"], rtol=1e-5)
    for a, b in zip(models[0].trainable_variables, models[1].trainable_variables):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-6)


def test_shard_seeds_differ_and_shard_zero_keeps_the_seed():
    seed = tf.constant(9)
    assert shards.shard_seed(seed, 0) is seed
    drawn = {int(shards.shard_seed(seed, k)) for k in (1, 2, 3)}
    assert len(drawn) == 3 and 9 not in drawn
    traced = tf.function(lambda s: tf.stack([shards.shard_seed(s, k) for k in (1, 2, 3)]))
    assert len(set(traced(seed).numpy().tolist())) == 3  # in a graph too


@pytest.mark.parametrize("beam_width", [1, 3])
def test_sharded_decode_equals_the_unsharded_decode(beam_width):
    model = _model()
    batch = {"src": _batch(batch_size=5)["src"]}
    signature = {"src": tf.TensorSpec([None, None], tf.int32)}
    out = {}
    for count in (1, 2):
        shards._state["shards"] = count
        decode = best_hypothesis_decoder(model, signature, beam_width=beam_width,
                                         max_length=6)
        out[count] = decode(batch)
    np.testing.assert_array_equal(out[2]["lengths"], out[1]["lengths"])
    for row, length in enumerate(out[1]["lengths"].numpy()):
        np.testing.assert_array_equal(out[2]["ids"][row, :length], out[1]["ids"][row, :length])
    np.testing.assert_allclose(out[2]["score"], out[1]["score"], rtol=1e-5)
    if "attention" in out[1]:
        np.testing.assert_allclose(out[2]["attention"], out[1]["attention"], atol=1e-6)


def test_provenance_records_the_shards():
    from acvi_tf.utils import provenance
    shards.configure(1)
    assert provenance.tf_settings()["batch_shards"] == {"cpu_shards": 1,
                                                       "reason": "--cpu_shards=1"}
