"""Gaussian variational attention (Bahuleyan et al. 2018) against closed forms and numpy."""

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.attention.gaussian import GaussianAttention, gaussian_kl, masked_mean
from acvi_tf.attention.soft import SoftAttention
from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq

B, N, D = 3, 5, 4


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=[B, N]).astype(np.float32)
    mask = np.ones([B, N], bool)
    mask[0, 3:] = False
    memory = rng.normal(size=[B, N, D]).astype(np.float32)
    return scores, mask, memory


def _memory_state(variant, mask, memory):
    memory, mask = tf.constant(memory), tf.constant(mask)
    return {"memory": memory, "mask": mask, "seed": tf.constant(5),
            "variant": variant.prepare(memory, mask)}


def _step(variant, scores, mask, memory, training, time=0):
    return variant.step(tf.constant(scores), _memory_state(variant, mask, memory),
                        {"time": tf.constant(time), "variant": {}}, training=training)


def _np_log_normal(x, mean, log_var):
    return -0.5 * (((x - mean) ** 2) / np.exp(log_var) + log_var + np.log(2 * np.pi)).sum(-1)


@pytest.mark.parametrize("prior", ["standard", "mean_encoder"])
def test_closed_form_kl_matches_monte_carlo(prior):
    rng = np.random.default_rng(1)
    mean = rng.normal(size=[B, D])
    log_var = rng.normal(scale=0.7, size=[B, D])
    prior_mean = rng.normal(size=[B, D]) if prior == "mean_encoder" else np.zeros([B, D])
    closed = gaussian_kl(tf.constant(mean), tf.constant(log_var),
                         tf.constant(prior_mean) if prior == "mean_encoder" else None).numpy()
    for b in range(B):
        x = mean[b] + np.exp(0.5 * log_var[b]) * rng.normal(size=[400_000, D])
        mc = np.mean(_np_log_normal(x, mean[b], log_var[b])
                     - _np_log_normal(x, prior_mean[b], np.zeros(D)))
        assert closed[b] == pytest.approx(mc, abs=0.02 + 0.01 * abs(mc))


@pytest.mark.parametrize("prior", ["standard", "mean_encoder"])
def test_step_kl_uses_the_posterior_and_the_prior(prior):
    scores, mask, memory = _inputs()
    variant = GaussianAttention(D, prior=prior)
    _, probs, aux, _ = _step(variant, scores, mask, memory, training=True)
    probs, mean, log_var = (t.numpy() for t in variant.posterior(scores, memory, mask))
    h_bar = np.stack([memory[b][mask[b]].mean(0) for b in range(B)])
    prior_mean = h_bar if prior == "mean_encoder" else 0.0
    expected = 0.5 * (np.exp(log_var) + (mean - prior_mean) ** 2 - 1 - log_var).sum(-1)
    assert set(aux) == {"kl"} and aux["kl"].shape == (B,)
    np.testing.assert_allclose(aux["kl"], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean, np.einsum("bn,bnd->bd", probs, memory), atol=1e-6)


def test_decode_time_context_is_the_soft_context():
    scores, mask, memory = _inputs()
    variant = GaussianAttention(D)
    context, probs, _, _ = _step(variant, scores, mask, memory, training=False)
    soft_context, soft_probs, _, _ = SoftAttention(D).step(
        tf.constant(scores), {"memory": tf.constant(memory), "mask": tf.constant(mask)},
        {"variant": {}})
    np.testing.assert_allclose(probs, soft_probs, atol=1e-7)
    np.testing.assert_allclose(context, soft_context, atol=1e-6)
    again, _, _, _ = _step(variant, scores, mask, memory, training=False, time=3)
    np.testing.assert_allclose(again, context)  # deterministic: no noise at decode time
    sampled, _, _, _ = _step(GaussianAttention(D, sample_at_decode=True), scores, mask, memory,
                             training=False)
    assert not np.allclose(sampled, context, atol=1e-3)


def test_training_sample_is_reparameterised_and_stateless():
    rng = np.random.default_rng(2)
    big = 4000  # many rows: the standardised noise should be N(0, 1)
    scores = rng.normal(size=[big, N]).astype(np.float32)
    mask = np.ones([big, N], bool)
    memory = rng.normal(size=[big, N, D]).astype(np.float32)
    variant = GaussianAttention(D)
    context, _, _, _ = _step(variant, scores, mask, memory, training=True)
    _, mean, log_var = variant.posterior(scores, memory, mask)
    eps = (context.numpy() - mean.numpy()) / np.exp(0.5 * log_var.numpy())
    assert abs(eps.mean()) < 0.03 and abs(eps.std() - 1.0) < 0.03
    same, _, _, _ = _step(variant, scores, mask, memory, training=True)
    np.testing.assert_array_equal(same, context)  # same seed and time: the same draw
    other, _, _, _ = _step(variant, scores, mask, memory, training=True, time=1)
    assert not np.allclose(other, context)


@pytest.mark.parametrize("prior", ["standard", "mean_encoder"])
def test_gradients_reach_scores_and_sigma_net(prior):
    scores, mask, memory = _inputs()
    variant = GaussianAttention(D, prior=prior)
    s = tf.Variable(scores)
    w = tf.constant(np.random.default_rng(0).normal(size=[D]).astype(np.float32))
    state = _memory_state(variant, mask, memory)
    with tf.GradientTape(persistent=True) as tape:
        context, _, aux, _ = variant.step(s, state, {"time": tf.constant(0), "variant": {}},
                                          training=True)
        objective = tf.reduce_sum(context * w)
        kl = tf.reduce_sum(aux["kl"])
    for target in (objective, kl):
        g = tape.gradient(target, s).numpy()
        assert np.all(np.isfinite(g))
        assert np.abs(g[mask]).max() > 1e-6
        assert np.abs(g[~mask]).max() < 1e-6  # padding gets no gradient
        grads = tape.gradient(target, variant.trainable_variables)
        assert grads and all(g is not None and np.all(np.isfinite(g)) for g in grads)


def test_prior_mean_ignores_padding():
    scores, mask, memory = _inputs(3)
    h_bar = masked_mean(tf.constant(memory), tf.constant(mask)).numpy()
    np.testing.assert_allclose(h_bar[0], memory[0, :3].mean(0), atol=1e-6)
    np.testing.assert_allclose(h_bar[1], memory[1].mean(0), atol=1e-6)

    pad = 3
    rng = np.random.default_rng(4)
    memory_p = np.concatenate([memory, 100 * rng.normal(size=[B, pad, D])], 1).astype(np.float32)
    mask_p = np.concatenate([mask, np.zeros([B, pad], bool)], 1)
    memory_p[0, 3:5] = 100.0  # garbage in the padded rows of the original too
    variant = GaussianAttention(D, prior="mean_encoder")
    prepared = variant.prepare(tf.constant(memory_p), tf.constant(mask_p))
    np.testing.assert_allclose(prepared["prior_mean"], h_bar, atol=1e-5)

    scores_p = np.concatenate([scores, rng.normal(size=[B, pad])], 1).astype(np.float32)
    _, _, aux, _ = _step(variant, scores, mask, memory, training=True)
    _, probs_p, aux_p, _ = _step(variant, scores_p, mask_p, memory_p, training=False)
    assert np.all(probs_p.numpy()[~mask_p] == 0.0)
    np.testing.assert_allclose(aux_p["kl"], aux["kl"], rtol=1e-5)


def test_options_weights_and_config():
    variant = GaussianAttention(D, prior="mean_encoder", kl_weight=0.3)
    assert variant.loss_weights() == {"kl": 0.3}
    assert variant.aux_loss_names == ("kl",)
    config = variant.get_config()
    clone = GaussianAttention.from_config(config)
    assert (clone.prior, clone.kl_weight, clone.sample_at_decode) == ("mean_encoder", 0.3, False)
    with pytest.raises(ValueError, match="prior"):
        GaussianAttention(D, prior="uniform")


@pytest.mark.parametrize("prior", ["standard", "mean_encoder"])
def test_kl_enters_the_model_loss(prior):
    """(Beam score == teacher-forced likelihood is checked for every variant in
    tests/models/test_seq2seq.py.)"""
    model = Seq2Seq(ModelConfig(src_vocab_size=12, tgt_vocab_size=12, embed_dim=8,
                                encoder_units=8, decoder_units=16, attention_units=8,
                                head_units=16, attention="gaussian",
                                attention_options={"prior": prior}))
    batch = {k: tf.constant(v) for k, v in ReverseTask(vocab_size=12, batch_size=6).batch_at(3).items()}
    terms = model.loss_terms(batch, training=True, seed=1)
    assert float(terms["kl"]) > 0.0
    assert float(terms["objective"]) == pytest.approx(float(terms["nll"]) + float(terms["kl"]),
                                                      rel=1e-5)
