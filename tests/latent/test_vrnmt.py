"""VRNMT's per-step latents (Su et al. 2018, Eqs. 13-26) through the latent hooks."""

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.latent.vrnmt import RecurrentLatent, diagonal_gaussian_kl
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from tests.models.test_transformer import as_references
from tests.train_helpers import train_per_token

V = 10
tfd = tfp.distributions


def _config(**overrides):
    options = overrides.pop("latent_options", {})
    cfg = dict(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8, encoder_units=8,
               decoder_units=16, attention_units=8, head_units=16, latent="vrnmt",
               latent_options={"latent_dim": 4, **options})
    cfg.update(overrides)
    return ModelConfig(**cfg)


def _batch(i=0, batch_size=4):
    task = ReverseTask(vocab_size=V, batch_size=batch_size, min_len=4, max_len=6, seed=0)
    return {k: tf.constant(v) for k, v in task.batch_at(i).items()}


def test_kl_is_the_closed_form_of_two_diagonal_gaussians():
    rng = np.random.default_rng(0)
    mq, mp = rng.normal(size=[2, 2, 3, 5]).astype(np.float64)
    lq, lp = rng.normal(size=[2, 2, 3, 5]).astype(np.float64)
    ours = diagonal_gaussian_kl(*(tf.constant(a) for a in (mq, lq, mp, lp))).numpy()
    q = tfd.MultivariateNormalDiag(mq, np.exp(0.5 * lq))
    p = tfd.MultivariateNormalDiag(mp, np.exp(0.5 * lp))
    np.testing.assert_allclose(ours, tfd.kl_divergence(q, p).numpy(), rtol=1e-10)
    # and a Monte-Carlo estimate E_q[log q - log p] for one row
    z = q[0, 0].sample(200_000, seed=1).numpy()
    mc = np.mean(q[0, 0].log_prob(z) - p[0, 0].log_prob(z))
    assert ours[0, 0] == pytest.approx(mc, abs=0.03)
    np.testing.assert_allclose(diagonal_gaussian_kl(mq, lq, mq, lq).numpy(), 0.0, atol=1e-12)


def _record(monkeypatch, latent):
    """Records the (mean, log_var) the posterior and the prior give at every call."""
    calls = {"posterior": [], "prior": []}
    for name in calls:
        original = getattr(latent, name)

        def wrapper(*args, _original=original, _name=name):
            out = _original(*args)
            calls[_name].append([t.numpy() for t in out])
            return out
        monkeypatch.setattr(latent, name, wrapper)
    return calls


def _forced_means(monkeypatch, model, batch):
    """Runs teacher forcing step by step (eagerly); returns the recorded means, [T, B, k]."""
    calls = _record(monkeypatch, model.latent)
    memory_state, state = model.start(batch, with_targets=True)
    for t in range(batch["tgt_in"].shape[1]):
        _, state, extras = model.step(batch["tgt_in"][:, t], state, memory_state)
        assert extras["aux"]["kl_z"].shape == (batch["tgt_in"].shape[0],)
    monkeypatch.undo()
    return {k: np.stack([mean for mean, _ in v]) for k, v in calls.items()}


def test_the_posterior_sees_y_j_and_the_prior_does_not(monkeypatch):
    """Changing the reference word y_j (tgt_out[:, j], not the decoder input) changes
    q's mean at j only from j on; the prior at j (a function of y_<j) is unchanged."""
    keras.utils.set_random_seed(0)
    model = Seq2Seq(_config())
    batch = _batch()
    j = 2
    changed = batch["tgt_out"].numpy().copy()
    changed[:, j] = np.where(changed[:, j] == 5, 6, 5)
    a = _forced_means(monkeypatch, model, batch)
    b = _forced_means(monkeypatch, model, dict(batch, tgt_out=tf.constant(changed)))
    np.testing.assert_array_equal(a["posterior"][:j], b["posterior"][:j])
    assert np.all(np.abs(a["posterior"][j] - b["posterior"][j]).max(-1) > 1e-6)
    np.testing.assert_array_equal(a["prior"][:j + 1], b["prior"][:j + 1])
    # z_j (the posterior mean here) reaches s_{j+1}, hence the prior at j + 1
    assert np.abs(a["prior"][j + 1] - b["prior"][j + 1]).max() > 1e-6


def test_decoding_uses_the_prior_mean_and_never_the_targets(monkeypatch):
    keras.utils.set_random_seed(1)
    model = Seq2Seq(_config())
    batch = _batch(3)
    memory_state, _ = model.start(batch, with_targets=False)
    assert set(memory_state["latent"]) == {"aux"}

    def no_posterior(*args):
        raise AssertionError("the posterior was used while decoding")
    monkeypatch.setattr(model.latent, "posterior", no_posterior)
    a = model.decode(batch, beam_width=2, max_length=6, seed=1)
    no_targets = {k: v for k, v in batch.items() if k not in ("tgt_in", "tgt_out")}
    b = model.decode(no_targets, beam_width=2, max_length=6, seed=2)
    np.testing.assert_array_equal(a["ids"].numpy(), b["ids"].numpy())
    np.testing.assert_allclose(a["log_probs"].numpy(), b["log_probs"].numpy())
    # the z carried in the state is the prior mean of each step
    calls = _record(monkeypatch, model.latent)
    memory_state, state = model.start(batch)
    _, state, _ = model.step(tf.fill([4], 2), state, memory_state)
    np.testing.assert_allclose(state["latent"]["z"].numpy(), calls["prior"][0][0])
    # sample_at_decode: a draw from the prior, which depends on the seed
    model.latent.sample_at_decode = True
    c = model.decode(batch, beam_width=1, max_length=6, seed=1)["log_prob"].numpy()
    d = model.decode(batch, beam_width=1, max_length=6, seed=2)["log_prob"].numpy()
    assert np.abs(c - d).max() > 1e-6


def test_training_samples_z_from_the_posterior():
    """Training draws z_j ~ q (seeded): two seeds differ, and outside training the forced
    NLL is deterministic; eval_z picks whose mean that is."""
    keras.utils.set_random_seed(2)
    model = Seq2Seq(_config())
    batch = _batch()
    t1 = model.teacher_forced(batch, training=True, seed=1)
    t2 = model.teacher_forced(batch, training=True, seed=2)
    assert np.abs(t1["nll"].numpy() - t2["nll"].numpy()).max() > 1e-6
    np.testing.assert_allclose(t1["kl_z"].numpy(), model.teacher_forced(
        batch, training=True, seed=1)["kl_z"].numpy())
    post = model.teacher_forced(batch, seed=1)
    np.testing.assert_allclose(post["nll"].numpy(), model.teacher_forced(batch, seed=5)["nll"])
    model.latent.eval_z = "prior"
    prior = model.teacher_forced(batch, seed=1)
    # a different z_j from step 0 on: the states, the NLL and the later KLs differ
    assert np.abs(prior["nll"].numpy() - post["nll"].numpy()).max() > 1e-6
    assert np.all(post["kl_z"].numpy() >= 0) and np.all(prior["kl_z"].numpy() >= 0)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_vrnmt_learns_and_beam_score_is_the_forced_likelihood(cell):
    """A VRNMT Seq2Seq trains on a tiny fixed batch, beam-decodes, and with z the prior
    mean (``eval_z="prior"``) the beam's score is the teacher-forced likelihood."""
    keras.utils.set_random_seed(0)
    model = Seq2Seq(_config(decoder_cell=cell, latent_options={"eval_z": "prior"}))
    batch = ReverseTask(vocab_size=V, batch_size=8, seed=3).batch_at(0)
    logs = train_per_token(model, lambda i: batch, 40)
    losses = [x["objective"] for x in logs]
    assert np.all(np.isfinite(losses)) and all(x["kl_z"] >= 0 for x in logs)
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.3, losses
    assert model.loss_weights()["kl_z"] == 1.0 and model.aux_names() == ["kl_z"]
    batch = _batch(7)
    beam = model.decode(batch, beam_width=3, max_length=6)
    ids, lengths = beam["ids"].numpy()[:, 0], beam["lengths"].numpy()[:, 0]
    forced = model.teacher_forced(dict(batch, **as_references(ids, lengths)), seed=3)
    # A model may emit PAD (id 0), which teacher forcing masks out: skip those rows.
    clean = np.all((ids != 0) | (np.arange(ids.shape[1]) >= lengths[:, None]), axis=1)
    assert clean.any()
    np.testing.assert_allclose(-forced["nll"].numpy()[clean],
                               beam["log_probs"].numpy()[clean, 0], atol=1e-4)


def test_options_config_round_trip_and_errors():
    cfg = _config(latent_options={"kl_weight": 0.5, "hidden_units": 6, "eval_z": "prior"},
                  decoder_cell="gru")
    model = Seq2Seq(cfg)
    assert Seq2Seq.from_config(model.get_config()).config == cfg
    assert model.loss_weights() == {"kl_z": 0.5}
    assert model.latent.kl_names == ("kl_z",)
    layer = RecurrentLatent(latent_dim=3)
    assert layer.hidden_units == 3 and layer.get_config()["eval_z"] == "posterior"
    with pytest.raises(ValueError, match="eval_z"):
        RecurrentLatent(eval_z="both")


def test_pointer_head_with_source_oov_targets():
    """Copied OOV targets (ids >= the vocabulary) reach the posterior as UNK."""
    from tests.models.test_heads import _pointer_batch
    model = Seq2Seq(_config(src_vocab_size=6, tgt_vocab_size=6, head="pointer", coverage=True,
                            decoder_cell="gru"))
    batch = _pointer_batch()
    out = model.teacher_forced(batch, training=True, seed=1)
    assert np.all(np.isfinite(out["nll"])) and np.all(out["kl_z"].numpy() >= 0)
    assert model.aux_names() == ["coverage", "kl_z"]
    assert model.decode(batch, beam_width=2, max_length=4)["ids"].shape[:2] == (2, 2)
