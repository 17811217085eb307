"""VED's sentence latent (Bahuleyan et al. 2018) through the generic latent hook."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.latent.ved import SentenceLatent
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from tests.train_helpers import train_per_token

V = 10


def _config(**overrides):
    cfg = dict(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8, encoder_units=8,
               decoder_units=16, attention_units=8, head_units=16, latent="ved",
               latent_options={"latent_dim": 4})
    cfg.update(overrides)
    return ModelConfig(**cfg)


def _log_normal(x, mean, log_var):
    return -0.5 * (((x - mean) ** 2) / np.exp(log_var) + log_var + np.log(2 * np.pi)).sum(-1)


def test_kl_z_is_the_closed_form_and_matches_monte_carlo():
    """kl_z from prepare() equals E_q[log q(z) - log N(z; 0, I)] estimated from samples of
    the layer's own posterior (drawn in numpy from its mu and sigma)."""
    latent = SentenceLatent(latent_dim=3)
    rng = np.random.default_rng(0)
    finals = [(tf.constant(rng.normal(size=[2, 6]).astype(np.float32)),
               tf.zeros([2, 6]))]
    out = latent.prepare(None, None, finals, tf.constant(0), training=False)
    mean, log_var = (t.numpy().astype(np.float64) for t in latent.posterior(finals))
    np.testing.assert_allclose(out["z"].numpy(), mean, rtol=1e-6)  # decoding: z = mu
    for b in range(2):
        z = mean[b] + np.exp(0.5 * log_var[b]) * rng.normal(size=[400_000, 3])
        terms = _log_normal(z, mean[b], log_var[b]) - _log_normal(z, 0.0, np.zeros(3))
        # within 5 Monte-Carlo standard errors (the weights are unseeded, so the KL's
        # size, and with it the estimate's spread, differs from run to run)
        stderr = terms.std() / np.sqrt(terms.size)
        assert out["aux"]["kl_z"].numpy()[b] == pytest.approx(terms.mean(), abs=5 * stderr)


def test_training_samples_z_with_the_posterior_law():
    """One source repeated n times: the n draws (independent per row) have mean mu, sd sigma."""
    latent = SentenceLatent(latent_dim=2)
    n = 20_000
    finals = [(tf.tile(tf.constant([[0.5, -1.0, 2.0]]), [n, 1]), tf.zeros([n, 3]))]
    mean, log_var = (t.numpy()[0] for t in latent.posterior(finals))
    draws = latent.prepare(None, None, finals, tf.constant(7), training=True)["z"].numpy()
    sd = np.exp(0.5 * log_var)
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * sd / np.sqrt(n))
    np.testing.assert_allclose(draws.std(0), sd, rtol=0.05)


@pytest.mark.parametrize("feed", ["input", "both"])
def test_ved_learns_and_decodes_with_the_mean(feed):
    keras.utils.set_random_seed(0)
    model = Seq2Seq(_config(latent_options={"latent_dim": 4, "feed": feed}))
    task = ReverseTask(vocab_size=V, batch_size=16, seed=0)
    logs = train_per_token(model, task.batch_at, 60)
    losses = [x["objective"] for x in logs]
    assert np.all(np.isfinite(losses)) and all(x["kl_z"] >= 0 for x in logs)
    assert np.mean(losses[-10:]) < np.mean(losses[:5]) - 0.2, losses
    assert model.loss_weights()["kl_z"] == 1.0
    # decoding uses z = mu: no randomness, whatever the seed; and the beam's score is the
    # teacher-forced likelihood of its output under that same z
    batch = {k: tf.constant(v) for k, v in task.batch_at(999).items()}
    a = model.decode(batch, beam_width=2, max_length=6, seed=1)
    b = model.decode(batch, beam_width=2, max_length=6, seed=2)
    np.testing.assert_array_equal(a["ids"].numpy(), b["ids"].numpy())
    np.testing.assert_allclose(a["log_probs"].numpy(), b["log_probs"].numpy())
    ids, lengths = a["ids"].numpy()[:, 0], a["lengths"].numpy()[:, 0]
    clean = np.array([np.all(r[:n] != 0) for r, n in zip(ids, lengths)])
    tgt_out, tgt_in = np.zeros_like(ids), np.zeros_like(ids)
    for i, (r, n) in enumerate(zip(ids, lengths)):
        tgt_out[i, :n] = r[:n]
        tgt_in[i, :n] = np.concatenate([[2], r[:n - 1]])
    forced = model.teacher_forced(dict(batch, tgt_in=tf.constant(tgt_in),
                                       tgt_out=tf.constant(tgt_out)), seed=3)
    np.testing.assert_allclose(-forced["nll"].numpy()[clean], a["log_probs"].numpy()[clean, 0],
                               atol=1e-4)


def test_config_round_trip_and_unknown_latent():
    cfg = _config(latent_options={"latent_dim": 3, "kl_weight": 0.5, "feed": "output"})
    model = Seq2Seq(cfg)
    assert Seq2Seq.from_config(model.get_config()).config == cfg
    assert model.loss_weights()["kl_z"] == 0.5
    with pytest.raises(ValueError, match="ved"):
        Seq2Seq(_config(latent="nope"))
    with pytest.raises(ValueError, match="feed"):
        SentenceLatent(feed="sideways")
