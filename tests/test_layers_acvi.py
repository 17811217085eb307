"""acvi_tf.layers.ACVIAttention, the Keras layer (issue 37): the same math as the ACVI
context variant, masks against a brute-force numpy computation, .keras round trips, errors
that name the argument, and the README's example run as it stands."""

import ast
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import acvi_tf
from acvi_tf.attention import acvi as acvi_lib
from acvi_tf.attention.acvi import ACVI
from acvi_tf.layers import ACVIAttention

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B, T, N, DQ, D = 3, 4, 5, 6, 8
SEED = 11


def _inputs(seed=0):
    """query [B, T, Dq], value [B, N, D] and masks with padding in both."""
    rng = np.random.default_rng(seed)
    query = rng.normal(size=[B, T, DQ]).astype(np.float32)
    value = rng.normal(size=[B, N, D]).astype(np.float32)
    query_mask = np.ones([B, T], bool)
    query_mask[1, 2:] = False
    value_mask = np.ones([B, N], bool)
    value_mask[0, 3:] = False
    value_mask[2, 4:] = False
    return query, value, query_mask, value_mask


def _layer(**options):
    keras.utils.set_random_seed(0)
    layer = ACVIAttention(log_sigma_sq_init=-1.0, **options)
    layer.build([(None, None, DQ), (None, None, D)])
    return layer


def test_exported_from_the_package():
    assert acvi_tf.ACVIAttention is ACVIAttention


@pytest.mark.parametrize("mixing,estimator", [("weighted", "mc"), ("gumbel", "bound")])
def test_same_context_kl_and_gradients_as_the_acvi_variant(mixing, estimator):
    """The layer over T query steps against the ACVI context variant's step run at decoder
    steps t = 0..T-1 on the same scores (the layer's own W), memory, masks and seed, then
    its deferred KL over the real steps: equal contexts, attention, KL loss and gradients
    (query, value, W and the sigma-network)."""
    query, value, query_mask, value_mask = _inputs()
    options = dict(mixing=mixing, kl_estimator=estimator, kl_weight=0.7)
    layer = _layer(num_samples=2, **options)
    variant = ACVI(D, kl_samples=2, log_sigma_sq_init=-1.0, **options)
    variant.log_sigma_sq_net.build((None, None, D))
    variant.log_sigma_sq_net.set_weights(layer.log_sigma_sq_net.get_weights())
    q, v = tf.constant(query), tf.constant(value)
    weights = np.random.default_rng(1).normal(size=[B, T, D]).astype(np.float32)

    with tf.GradientTape(persistent=True) as tape:
        tape.watch([q, v])
        context, probs = layer([q, v], mask=[query_mask, value_mask], training=True,
                               return_attention_scores=True, seed=SEED)
        (layer_kl,) = layer.losses
        layer_objective = tf.reduce_sum(context * weights) + layer_kl

        memory_state = {"memory": v, "mask": tf.constant(value_mask), "seed": tf.constant(SEED),
                        "variant": variant.prepare(v, tf.constant(value_mask))}
        keys = layer.score.precompute(v)
        steps = [variant.step(layer.score.step({"keys": keys}, q[:, t]), memory_state,
                              {"time": tf.constant(t), "variant": {}}, training=True)
                 for t in range(T)]
        step_mask = tf.constant(query_mask, tf.float32)
        kl = variant.deferred_aux({"log_probs": tf.stack([s[2]["log_probs"] for s in steps], 1)},
                                  memory_state, step_mask)["kl"]
        variant_kl = variant.kl_weight * tf.reduce_sum(kl) / tf.reduce_sum(step_mask)
        variant_context = tf.stack([s[0] for s in steps], axis=1)
        variant_objective = tf.reduce_sum(variant_context * weights) + variant_kl

    np.testing.assert_allclose(context, variant_context, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probs, tf.stack([s[1] for s in steps], 1), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(layer_kl, variant_kl, rtol=1e-5)
    assert float(layer_kl) > 0.1
    shared = [q, v, layer.score.W.kernel]
    ours = tape.gradient(layer_objective, shared + layer.log_sigma_sq_net.trainable_variables)
    theirs = tape.gradient(variant_objective,
                           shared + variant.log_sigma_sq_net.trainable_variables)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        assert np.abs(a).max() > 0


def _np_floor(log_sigma_sq):
    floor = acvi_lib.LOG_SIGMA_SQ_FLOOR
    return floor + np.logaddexp(0.0, log_sigma_sq - floor)


def test_masks_against_a_brute_force_computation_over_the_real_positions():
    """At inference with the bound estimator everything is deterministic: per example, over
    only its real query steps and value positions, numpy computes the scores h_i^T W s_t,
    a_t, the posterior mean and sum_i a_t^i KL(N(h_i, sigma_i^2) || N(0, I)) with the
    layer's weights; the layer's loss is kl_weight times that KL averaged over the real
    steps, and padded positions get exactly zero weight."""
    query, value, query_mask, value_mask = _inputs(seed=3)
    layer = _layer(kl_estimator="bound", kl_weight=0.5)
    context, probs = layer([query, value], mask=[query_mask, value_mask],
                           return_attention_scores=True)
    (kl_loss,) = layer.losses
    kernel = layer.score.W.kernel.numpy()
    (w1, b1), (w2, b2) = [layer.log_sigma_sq_net.get_layer(n).get_weights()
                          for n in ("hidden", "log_sigma_sq")]
    kl_sum, steps = 0.0, 0
    for b in range(B):
        h = value[b, value_mask[b]].astype(np.float64)
        lss = _np_floor(np.maximum(h @ w1 + b1, 0.0) @ w2 + b2)
        component_kl = 0.5 * (np.exp(lss) + h ** 2 - 1.0 - lss).sum(-1)
        for t in np.flatnonzero(query_mask[b]):
            e = (h @ kernel) @ query[b, t]
            a = np.exp(e - e.max())
            a /= a.sum()
            np.testing.assert_allclose(probs[b, t].numpy()[value_mask[b]], a, rtol=1e-5,
                                       atol=1e-7)
            np.testing.assert_allclose(context[b, t], a @ h, rtol=1e-5, atol=1e-6)
            kl_sum += a @ component_kl
            steps += 1
    np.testing.assert_array_equal(probs.numpy()[np.broadcast_to(~value_mask[:, None], probs.shape)],
                                  0.0)
    np.testing.assert_allclose(kl_loss, 0.5 * kl_sum / steps, rtol=1e-5)


def test_padding_changes_nothing_real_in_training():
    """Monte-Carlo KL and sampled contexts: new numbers at the padded value positions and
    padded query steps leave the loss and every real step's context unchanged."""
    query, value, query_mask, value_mask = _inputs(seed=4)
    layer = _layer(num_samples=3)

    def run(q, v):
        context = layer([q, v], mask=[query_mask, value_mask], training=True, seed=SEED)
        return context.numpy(), float(layer.losses[0])

    context, loss = run(query, value)
    rng = np.random.default_rng(9)
    query[~query_mask] = 50.0 * rng.normal(size=query[~query_mask].shape)
    value[~value_mask] = 50.0 * rng.normal(size=value[~value_mask].shape)
    context2, loss2 = run(query, value)
    np.testing.assert_allclose(context2[query_mask], context[query_mask], rtol=1e-6, atol=1e-6)
    assert loss2 == pytest.approx(loss, rel=1e-6)
    unmasked = layer([query, value], training=True, seed=SEED)
    assert float(layer.losses[0]) != pytest.approx(loss, rel=1e-3)  # the masks did matter
    assert unmasked.shape == (B, T, D)


def test_inference_is_the_posterior_mean_and_training_samples_fresh_noise():
    query, value, query_mask, value_mask = _inputs(seed=5)
    layer = _layer(seed=3)
    masks = [query_mask, value_mask]
    mean, probs = layer([query, value], mask=masks, return_attention_scores=True)
    np.testing.assert_allclose(mean, np.einsum("btn,bnd->btd", probs, value), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(layer([query, value], mask=masks), mean)
    first, second = (layer([query, value], mask=masks, training=True) for _ in range(2))
    assert np.abs(first - mean).max() > 0.05 and np.abs(first - second).max() > 0.05
    seeded = [layer([query, value], mask=masks, seed=[1, 2]).numpy() for _ in range(2)]
    np.testing.assert_array_equal(seeded[0], seeded[1])
    assert np.abs(seeded[0] - mean).max() > 0.05


def _model():
    keras.utils.set_random_seed(0)
    src = keras.Input((None,), dtype="int32", name="src")
    tgt = keras.Input((None,), dtype="int32", name="tgt")
    memory = keras.layers.LSTM(D, return_sequences=True)(
        keras.layers.Embedding(10, D, mask_zero=True)(src))
    states = keras.layers.Embedding(10, DQ, mask_zero=True)(tgt)
    context = ACVIAttention(mixing="gumbel", num_samples=2, seed=4, name="acvi")([states, memory])
    model = keras.Model([src, tgt], keras.layers.Dense(10)(context))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_keras_file_round_trip_gives_identical_outputs(tmp_path):
    """A functional model holding the layer, trained a step, saved to .keras and reloaded:
    the same predictions, the same evaluated loss (likelihood + KL), the same config, and
    the same sampled context for the same call seed."""
    model = _model()
    rng = np.random.default_rng(0)
    src = rng.integers(1, 10, size=[4, 6]).astype(np.int32)
    src[0, 4:] = 0
    tgt = rng.integers(1, 10, size=[4, 5]).astype(np.int32)
    tgt[1, 3:] = 0
    model.fit([src, tgt], tgt, epochs=1, verbose=0)
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(loaded.predict([src, tgt], verbose=0),
                                  model.predict([src, tgt], verbose=0))
    assert loaded.evaluate([src, tgt], tgt, verbose=0) == model.evaluate([src, tgt], tgt,
                                                                         verbose=0)
    ours, theirs = model.get_layer("acvi"), loaded.get_layer("acvi")
    assert isinstance(theirs, ACVIAttention) and theirs.get_config() == ours.get_config()
    rebuilt = ACVIAttention.from_config(ours.get_config())
    assert rebuilt.get_config() == ours.get_config()
    query, value, _, _ = _inputs()
    value = value[..., :D]
    np.testing.assert_array_equal(theirs([query, value], seed=7), ours([query, value], seed=7))


@pytest.mark.parametrize("build,call,argument", [
    (dict(kl_weight=-0.1), None, "kl_weight"),
    (dict(num_samples=0), None, "num_samples"),
    (dict(mixing="average"), None, "mixing"),
    (dict(kl_estimator="exact"), None, "kl_estimator"),
    (dict(seed=1.5), None, "seed"),
    ({}, lambda q, v, qm, vm: ([q[:, 0], v], None), "query"),
    ({}, lambda q, v, qm, vm: ([q, v[..., None]], None), "value"),
    ({}, lambda q, v, qm, vm: ([q[..., :3], v], None), "query"),
    ({}, lambda q, v, qm, vm: ([q, v[..., :3]], None), "value"),
    ({}, lambda q, v, qm, vm: ([q[:2], v], None), "batch"),
    ({}, lambda q, v, qm, vm: (q, None), "inputs"),
    ({}, lambda q, v, qm, vm: ([q, v], [qm[:, :2], vm]), "query_mask"),
    ({}, lambda q, v, qm, vm: ([q, v], [qm, vm[..., None]]), "value_mask"),
    ({}, lambda q, v, qm, vm: ([q, v], vm), "mask"),
])
def test_bad_input_is_refused_naming_the_argument(build, call, argument):
    if call is None:
        with pytest.raises(ValueError, match=rf"\b{argument}\b"):
            ACVIAttention(**build)
        return
    layer = _layer()
    inputs, mask = call(*_inputs())
    with pytest.raises(ValueError, match=rf"\b{argument}\b"):
        layer(inputs, mask=mask)


def _readme_example():
    """The first python block of README.md's "Use ACVI in your own Keras model" section."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    section = readme.split("\n## Use ACVI in your own Keras model\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_runs_and_its_loss_falls(tmp_path):
    """The README's code block, as it stands, in a fresh interpreter that imports only
    keras and acvi_tf: model.fit runs, prints a loss and a KL per epoch, and the loss falls."""
    code = _readme_example()
    imported = {alias.name.split(".")[0] for node in ast.walk(ast.parse(code))
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in (node.names if isinstance(node, ast.Import)
                              else [ast.alias(node.module)])}
    assert imported == {"keras", "acvi_tf"}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    epochs = re.findall(r"loss ([0-9.]+) .*KL ([0-9.]+) nats", run.stdout)
    assert len(epochs) >= 3, run.stdout
    losses = [float(loss) for loss, _ in epochs]
    assert losses[-1] < losses[0] - 0.05, losses
    assert all(np.isfinite(float(kl)) and float(kl) >= 0 for _, kl in epochs)
