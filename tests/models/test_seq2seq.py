"""The seq2seq machine: padding, learning, overfitting, decoding with the one step()."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from acvi_tf import attention
from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from tests.train_helpers import train_per_token

V = 12


def tiny_config(**overrides):
    cfg = dict(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8, encoder_units=8,
               decoder_units=16, attention_units=8, head_units=16)
    cfg.update(overrides)
    return ModelConfig(**cfg)


def _train(model, batches, steps, lr=0.02, seed=0):
    return [x["nll"] for x in train_per_token(model, batches, steps, lr=lr, seed=seed)]


@pytest.mark.parametrize("score", ["additive", "multiplicative"])
@pytest.mark.parametrize("variant", attention.available())
def test_padding_gets_zero_attention_and_changes_nothing(variant, score):
    model = Seq2Seq(tiny_config(attention=variant, score=score))
    batch = ReverseTask(vocab_size=V, batch_size=4, seed=1).batch_at(0)
    padded = dict(batch, src=np.pad(batch["src"], [(0, 0), (0, 3)]))
    out = model.teacher_forced({k: tf.constant(v) for k, v in batch.items()},
                               return_attention=True)
    out_padded = model.teacher_forced({k: tf.constant(v) for k, v in padded.items()},
                                      return_attention=True)
    att = out_padded["attention"].numpy()  # [B, T, N]
    src_pad = padded["src"] == 0
    assert np.abs(att * src_pad[:, None, :]).max() == 0.0
    np.testing.assert_allclose(out["nll"], out_padded["nll"], rtol=1e-5)
    np.testing.assert_allclose(att[:, :, :batch["src"].shape[1]], out["attention"], atol=1e-6)


@pytest.mark.parametrize("variant", attention.available())
def test_every_variant_learns_the_synthetic_task(variant):
    keras.utils.set_random_seed(0)  # the weights' draws: not what ran before in this worker
    task = ReverseTask(vocab_size=V, batch_size=16, seed=0)
    model = Seq2Seq(tiny_config(attention=variant))
    losses = _train(model, task.batch_at, 60)
    assert all(np.isfinite(losses))
    assert np.mean(losses[-10:]) < np.mean(losses[:5]) - 0.2, losses


def test_overfits_one_batch():
    keras.utils.set_random_seed(0)
    batch = ReverseTask(vocab_size=V, batch_size=8, seed=2).batch_at(0)
    model = Seq2Seq(tiny_config(attention="soft"))
    losses = _train(model, lambda i: batch, 200, lr=0.03)
    assert losses[-1] < 0.1, losses[-5:]
    decoded = model.decode({k: tf.constant(v) for k, v in batch.items()}, beam_width=1,
                           max_length=batch["tgt_out"].shape[1])
    ids = decoded["ids"].numpy()
    for row, target in zip(ids, batch["tgt_out"]):
        n = int((target != 0).sum())
        np.testing.assert_array_equal(row[:n], target[:n])


@pytest.mark.parametrize("variant", attention.available())
def test_beam_width_one_equals_greedy_and_beam_is_never_worse(variant):
    model = Seq2Seq(tiny_config(attention=variant))
    batch = {k: tf.constant(v) for k, v in ReverseTask(vocab_size=V, batch_size=3).batch_at(5).items()}
    greedy = model.decode(batch, beam_width=1, max_length=6)
    beam = model.decode(batch, beam_width=4, max_length=6)
    assert beam["ids"].shape[:2] == (3, 4)
    # beam search (no normalisation) finds a hypothesis at least as likely as greedy's
    assert np.all(beam["log_probs"].numpy()[:, 0] >= greedy["log_prob"].numpy() - 1e-4)
    assert beam["attention"].shape[:2] == (3, 4)


@pytest.mark.parametrize("variant", attention.available())
def test_beam_scores_match_teacher_forced_log_likelihood(variant):
    """The score beam search reports equals the model's own likelihood of that output."""
    keras.utils.set_random_seed(0)
    model = Seq2Seq(tiny_config(attention=variant))
    batch = {k: tf.constant(v) for k, v in ReverseTask(vocab_size=V, batch_size=4).batch_at(3).items()}
    out = model.decode(batch, beam_width=3, max_length=5)
    ids, lengths = out["ids"].numpy()[:, 0], out["lengths"].numpy()[:, 0]
    tgt_out = np.zeros_like(ids)
    tgt_in = np.zeros_like(ids)
    for i, (row, n) in enumerate(zip(ids, lengths)):
        tgt_out[i, :n] = row[:n]
        tgt_in[i, :n] = np.concatenate([[2], row[:n - 1]])
    forced = model.teacher_forced(dict(batch, tgt_in=tf.constant(tgt_in),
                                       tgt_out=tf.constant(tgt_out)))
    # An untrained model may emit PAD (id 0), which teacher forcing masks out: skip those rows.
    clean = np.array([np.all(row[:n] != 0) for row, n in zip(ids, lengths)])
    assert clean.any()
    np.testing.assert_allclose(-forced["nll"].numpy()[clean], out["log_probs"].numpy()[clean, 0],
                               atol=1e-4)


def test_features_encoder_and_config_round_trip():
    cfg = tiny_config(src_vocab_size=None, feature_dim=6, attention="acvi",
                      attention_options={"sigma_net": "relu"})
    model = Seq2Seq(cfg)
    batch = {"src": tf.random.normal([2, 5, 6]), "src_len": tf.constant([5, 3]),
             "tgt_in": tf.constant([[2, 5, 6], [2, 7, 0]]), "tgt_out": tf.constant([[5, 6, 3], [7, 3, 0]])}
    terms = model.loss_terms(batch)
    assert np.isfinite(float(terms["objective"]))
    clone = Seq2Seq.from_config(model.get_config())
    assert clone.config == cfg
    assert ModelConfig.from_dict(__import__("json").loads(cfg.to_json())) == cfg


def test_num_samples_tiles_the_batch():
    batch = {k: tf.constant(v) for k, v in ReverseTask(vocab_size=V, batch_size=4).batch_at(0).items()}
    model = Seq2Seq(tiny_config(attention="acvi", num_samples=3))
    terms = model.loss_terms(batch, training=True, seed=1)
    tokens = float(tf.reduce_sum(tf.cast(batch["tgt_out"] > 0, tf.float32)))
    assert float(terms["num_tokens"]) == pytest.approx(tokens)


def test_deferred_acvi_kl_equals_per_step_sums():
    """ACVI's KL terms are computed after the loop (deferred_aux): they must equal the
    per-step sums over real target positions, here the closed-form bound
    sum_t sum_i a_t^i KL_i recomputed from the returned attention."""
    from acvi_tf.attention.acvi import gaussian_kl_to_standard
    batch = {k: tf.constant(v) for k, v in
             ReverseTask(vocab_size=V, batch_size=4, min_len=2, max_len=6).batch_at(3).items()}
    model = Seq2Seq(tiny_config(attention="acvi"))
    out = model.teacher_forced(batch, training=False, return_attention=True)
    mask = model.source_mask(batch)
    memory, _ = model.encoder(batch["src"], mask, training=False, seed=tf.constant(0))
    component_kl = gaussian_kl_to_standard(memory, model.variant.log_sigma_sq_net(memory))
    tmask = (batch["tgt_out"].numpy() != 0).astype(np.float32)
    expected = np.einsum("btn,bn,bt->b", out["attention"].numpy(), component_kl.numpy(), tmask)
    np.testing.assert_allclose(out["kl_bound"].numpy(), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["kl"].numpy(), out["kl_mc"].numpy())


@pytest.mark.parametrize("kl_scale", [None, 0.5])
def test_a_zero_weighted_kl_is_logged_and_leaves_the_gradients_of_nll_plus_zero_kl(kl_scale):
    """KL weight 0 (ACVI (ours)): the objective skips the term, so its backward pass is not
    run; the KL is still logged, and the gradients equal those of the straightforward
    nll + 0 * kl, with the same sampled contexts."""
    batch = {k: tf.constant(v) for k, v in
             ReverseTask(vocab_size=V, batch_size=4, min_len=2, max_len=6).batch_at(3).items()}
    model = Seq2Seq(tiny_config(attention="acvi",
                                attention_options={"kl_weight": 0.0}))
    scale = None if kl_scale is None else tf.constant(kl_scale)
    model.loss_terms(batch, training=True, seed=5, kl_scale=scale)  # builds the weights
    with tf.GradientTape(persistent=True) as tape:
        terms = model.loss_terms(batch, training=True, seed=5, kl_scale=scale)
        straightforward = terms["nll"] + 0.0 * terms["kl"]
    # Logged: the bound is positive; the one-sample MC estimate may be of either sign.
    assert float(terms["kl_bound"]) > 0 and np.isfinite(float(terms["kl"]))
    np.testing.assert_allclose(float(terms["objective"]), float(terms["nll"]))
    skipped = tape.gradient(terms["objective"], model.trainable_variables)
    full = tape.gradient(straightforward, model.trainable_variables)
    for a, b in zip(skipped, full):
        np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(),
                                   tf.convert_to_tensor(b).numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("variant,score,precision", [
    ("acvi", "multiplicative", "float32"), ("soft", "additive", "float32"),
    ("acvi", "multiplicative", "mixed_bfloat16")])
def test_loop_gradients_summed_after_the_loop_equal_the_per_step_ones(variant, score, precision):
    """Teacher forcing embeds the targets before the loop and sums the gradients of h_i,
    the multiplicative score's keys and ACVI's sigma^2 after it (utils.loop_gradients):
    the objective and every weight's gradient equal those of the straightforward loop,
    a lookup and TensorFlow's accumulation per step (defer_loop_gradients=False), with
    coverage on for the additive score and K = 2 samples. (Eager here; the graph-mode
    loop is tested in tests/utils/test_loop_gradients.py.)"""
    batch = {k: tf.constant(v) for k, v in
             ReverseTask(vocab_size=V, batch_size=4, min_len=2, max_len=6).batch_at(3).items()}
    model = Seq2Seq(tiny_config(attention=variant, score=score, num_samples=2,
                                coverage=score == "additive", precision=precision))
    out = {}
    for defer in (False, True):
        model.defer_loop_gradients = defer
        with tf.GradientTape() as tape:
            objective = model.loss_terms(batch, training=True, seed=5)["objective"]
        out[defer] = objective, tape.gradient(objective, model.trainable_variables)
    tol = 1e-5 if precision == "float32" else 2e-2  # bfloat16 sums in another order
    np.testing.assert_allclose(float(out[True][0]), float(out[False][0]), rtol=1e-6)
    for v, a, b in zip(model.trainable_variables, out[True][1], out[False][1]):
        a, b = tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy()
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max(), err_msg=v.path)


def test_unknown_variant_lists_choices():
    with pytest.raises(ValueError, match="soft"):
        Seq2Seq(tiny_config(attention="nope"))


@pytest.mark.parametrize("score", ["additive", "multiplicative"])
@pytest.mark.parametrize("variant", attention.available())
def test_beam_search_reading_the_untiled_memory_changes_nothing(variant, score, monkeypatch):
    """Beam search's products linear in the memory read it once per sentence
    (loop_gradients.SharedRows): the same hypotheses, scores and attention as the plain
    products over the K tiled copies."""
    from acvi_tf.utils import loop_gradients
    keras.utils.set_random_seed(0)
    model = Seq2Seq(tiny_config(attention=variant, score=score))
    batch = {k: tf.constant(v) for k, v in ReverseTask(vocab_size=V, batch_size=3).batch_at(2).items()}
    grouped_calls = []
    contract = loop_gradients.SharedRows.contract

    def counted(self, *args):
        out = contract(self, *args)
        grouped_calls.append(out is not None)
        return out
    monkeypatch.setattr(loop_gradients.SharedRows, "contract", counted)
    shared = model.decode(batch, beam_width=4, max_length=6)
    monkeypatch.setattr(loop_gradients.SharedRows, "contract", lambda self, *a: None)
    plain = model.decode(batch, beam_width=4, max_length=6)
    np.testing.assert_array_equal(shared["ids"].numpy(), plain["ids"].numpy())
    for key in ("scores", "log_probs", "attention"):
        np.testing.assert_allclose(shared[key].numpy(), plain[key].numpy(), atol=1e-5,
                                   err_msg=key)
    if variant == "soft":  # its context is a weighted sum of the memory: grouped
        assert any(grouped_calls)
