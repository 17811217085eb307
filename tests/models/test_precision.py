"""Mixed precision (``ModelConfig.precision``): every attention variant, latent and the
Transformer under ``mixed_bfloat16`` against the float32 model holding the same weights;
where float32 is kept; the policy stays with the model; float32 is unchanged."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from acvi_tf import attention, latent
from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models import build_model
from acvi_tf.models.seq2seq import ModelConfig
from acvi_tf.utils.precision import policy_scope

V = 12
# The same weights in both models, drawn with this spread: wider than Keras' initialisers,
# so the output distributions and the KL terms are far from uniform and zero, where a
# rounding error would hide.
WEIGHT_STD = 0.2


def _config(precision="float32", **overrides):
    cfg = dict(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8, encoder_units=8,
               decoder_units=16, attention_units=8, head_units=16, num_heads=2, ff_units=16,
               transformer_layers=1, precision=precision)
    cfg.update(overrides)
    return ModelConfig(**cfg)


def _cases():
    """(id, ModelConfig fields) of every registered variant, latent and the Transformer,
    and the summarization (pointer + coverage) and captioning (float features) paths."""
    out = [(f"attention:{a}", {"attention": a}) for a in attention.available()]
    out += [(f"latent:{v}", {"latent": v}) for v in latent.available()]
    out += [("model:transformer", {"model": "transformer"}),
            ("pointer+coverage:acvi", {"attention": "acvi", "head": "pointer", "coverage": True}),
            ("pointer:transformer", {"model": "transformer", "head": "pointer"}),
            ("features:acvi", {"attention": "acvi", "src_vocab_size": None, "feature_dim": 6})]
    return [pytest.param(fields, id=name) for name, fields in out]


def _batch(fields, batch_size=6):
    batch = ReverseTask(vocab_size=V, batch_size=batch_size, seed=1).batch_at(0)
    if fields.get("head") == "pointer":  # source words 8-11 are "article OOVs" 12-15
        batch["src_ext"] = np.where(batch["src"] >= 8, batch["src"] + 4, batch["src"])
        batch["max_oovs"] = np.int32(4)
        batch["tgt_out"] = np.where(batch["tgt_out"] == 9, 13, batch["tgt_out"])
    if fields.get("src_vocab_size", V) is None:
        rng = np.random.default_rng(2)
        batch["src_len"] = (batch["src"] != 0).sum(1).astype(np.int32)
        batch["src"] = (rng.standard_normal(batch["src"].shape + (fields["feature_dim"],))
                        * (batch["src"] != 0)[..., None]).astype(np.float32)
    return {k: tf.constant(v) for k, v in batch.items()}


def _same_weights(fields, precision, batch):
    """A float32 model and a ``precision`` model holding the same (random) weights."""
    models = []
    for p in ("float32", precision):
        model = build_model(_config(p, **fields))
        model.build_for_checkpoint(batch)
        models.append(model)
    rng = np.random.default_rng(0)
    for a, b in zip(models[0].weights, models[1].weights):
        assert a.shape == b.shape and a.dtype == b.dtype == "float32", (a.path, b.path)
        w = rng.normal(0.0, WEIGHT_STD, a.shape).astype(np.float32)
        a.assign(w)
        b.assign(w)
    return models


def _loss_and_grads(model, batch):
    with tf.GradientTape() as tape:
        terms = model.loss_terms(batch, training=False, seed=3)
        loss = terms["objective"] / terms["num_tokens"]
    grads = tape.gradient(loss, model.trainable_variables)
    # a variable the loss does not read (the unused score of attention "none") has no
    # gradient: zero, as the training step takes it
    flat = np.concatenate([tf.reshape(tf.zeros_like(v) if g is None else tf.convert_to_tensor(g),
                                      [-1]).numpy() for g, v in zip(grads, model.trainable_variables)])
    return terms, flat


@pytest.mark.parametrize("fields", _cases())
def test_bfloat16_agrees_with_float32_holding_the_same_weights(fields):
    batch = _batch(fields)
    m32, m16 = _same_weights(fields, "mixed_bfloat16", batch)
    terms32, grads32 = _loss_and_grads(m32, batch)
    terms16, grads16 = _loss_and_grads(m16, batch)
    assert set(terms16) == set(terms32)
    for name, value in terms16.items():
        assert value.dtype == tf.float32 and np.isfinite(value.numpy()), (name, value)
    tokens = float(terms32["num_tokens"])
    assert float(terms16["num_tokens"]) == tokens
    # bfloat16 keeps 8 significant bits (relative rounding 2**-9 per operation).
    np.testing.assert_allclose(float(terms16["nll"]) / tokens, float(terms32["nll"]) / tokens,
                               rtol=1e-2)
    for name in set(terms32) - {"nll", "num_tokens"}:  # KL, coverage, REINFORCE terms
        np.testing.assert_allclose(float(terms16[name]) / tokens,
                                   float(terms32[name]) / tokens, rtol=3e-2, atol=1e-2,
                                   err_msg=name)
    assert np.all(np.isfinite(grads16))
    cosine = grads16 @ grads32 / (np.linalg.norm(grads16) * np.linalg.norm(grads32))
    assert cosine > 0.99, cosine
    assert abs(np.linalg.norm(grads16) / np.linalg.norm(grads32) - 1.0) < 0.05


@pytest.mark.parametrize("fields", _cases())
def test_bfloat16_keeps_probabilities_and_log_probabilities_in_float32(fields):
    """One decoder step: the log-probabilities are float32 and normalised to float32
    precision (a bfloat16 log-softmax misses by ~1e-2), the attention probabilities sum
    to 1 just as tightly, and every aux loss is float32."""
    batch = _batch(fields)
    model = build_model(_config("mixed_bfloat16", **fields))
    memory_state, state = model.start(batch, with_targets=True)
    assert memory_state["memory"].dtype == tf.float32
    log_probs, new_state, extras = model.step(batch["tgt_in"][:, 0], state, memory_state)
    assert log_probs.dtype == tf.float32 and extras["attention"].dtype == tf.float32
    np.testing.assert_allclose(tf.reduce_logsumexp(log_probs, -1).numpy(), 0.0, atol=2e-6)
    np.testing.assert_allclose(tf.reduce_sum(extras["attention"], -1).numpy(), 1.0, atol=2e-6)
    for name, value in extras["aux"].items():
        assert value.dtype == tf.float32, name
    # The loop state keeps its dtypes from one step to the next (tf.while_loop needs it).
    for before, after in zip(tf.nest.flatten(state), tf.nest.flatten(new_state)):
        assert before.dtype == after.dtype


@pytest.mark.parametrize("fields", _cases())
def test_bfloat16_greedy_and_beam_search_return_float32_scores(fields):
    batch = _batch(fields, batch_size=3)
    model = build_model(_config("mixed_bfloat16", **fields))
    extended = V + (4 if fields.get("head") == "pointer" else 0)
    for width in (1, 3):
        out = model.decode(batch, beam_width=width, max_length=5)
        scores = out["log_prob"] if width == 1 else out["scores"]
        assert scores.dtype == tf.float32 and np.all(np.isfinite(scores.numpy()))
        assert np.all(scores.numpy() <= 0.0)
        ids = out["ids"].numpy()
        assert np.all((ids >= 0) & (ids < extended))
        if "attention" in out:
            assert out["attention"].dtype == tf.float32


@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_every_layer_has_the_policy_and_it_does_not_leak(precision):
    compute = {"mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}[precision]
    before = keras.config.dtype_policy()
    batch = _batch({})
    for fields in ({"attention": "variational", "latent": "vrnmt"}, {"model": "transformer"}):
        model = build_model(_config(precision, **fields))
        model.build_for_checkpoint(batch)
        layers = list(model._flatten_layers(include_self=True))
        assert len(layers) > 10
        for layer in layers:
            assert layer.dtype_policy.name == precision, (layer.path, layer.dtype_policy)
            assert layer.compute_dtype == compute
        assert {v.dtype for v in model.weights} == {"float32"}
    # The process-wide default is what it was: a model built next is float32.
    assert keras.config.dtype_policy() == before
    plain = build_model(_config(attention="acvi"))
    assert all(layer.dtype_policy.name == "float32"
               for layer in plain._flatten_layers(include_self=True))


@pytest.mark.parametrize("fields", [pytest.param({"attention": a}, id=a)
                                    for a in attention.available()]
                         + [pytest.param({"latent": "vrnmt"}, id="vrnmt"),
                            pytest.param({"model": "transformer"}, id="transformer")])
def test_float32_is_exactly_the_model_without_the_option(fields):
    """precision="float32" builds the float32 model whatever the process-wide Keras policy
    is, and gives exactly the numbers of a model built without the option (loss terms,
    gradients, greedy and beam decodes)."""
    batch = _batch(fields, batch_size=4)
    keras.utils.set_random_seed(7)
    plain = build_model(ModelConfig(**{k: v for k, v in vars(_config(**fields)).items()
                                       if k != "precision"}))
    plain.build_for_checkpoint(batch)
    with policy_scope("mixed_bfloat16"):  # a process-wide mixed default must not matter
        keras.utils.set_random_seed(7)
        explicit = build_model(_config("float32", **fields))
        explicit.build_for_checkpoint(batch)
    for a, b in zip(plain.weights, explicit.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    terms_a, grads_a = _loss_and_grads(plain, batch)
    terms_b, grads_b = _loss_and_grads(explicit, batch)
    for name in terms_a:
        np.testing.assert_array_equal(terms_a[name].numpy(), terms_b[name].numpy(), name)
    np.testing.assert_array_equal(grads_a, grads_b)
    for width in (1, 2):
        out_a = plain.decode(batch, beam_width=width, max_length=4)
        out_b = explicit.decode(batch, beam_width=width, max_length=4)
        for key in out_a:
            np.testing.assert_array_equal(out_a[key].numpy(), out_b[key].numpy(), key)


def test_an_unknown_precision_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="precision='float64': choose one of float32, "
                                         "mixed_bfloat16, mixed_float16"):
        build_model(_config("float64"))
