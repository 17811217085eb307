"""Deng et al. (2018) categorical variational attention against numpy and enumeration."""

import keras
import numpy as np
import tensorflow as tf

from acvi_tf.attention.variational import (VariationalAttention, categorical_kl,
                                           reinforce_surrogate)
from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from tests.train_helpers import train_per_token

B, N, D, T, V = 3, 6, 4, 5, 9


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=[B, N]).astype(np.float32)
    mask = np.ones([B, N], bool)
    mask[0, 4:] = False
    mask[2, 2:] = False
    memory = rng.normal(size=[B, N, D]).astype(np.float32)
    targets = rng.integers(4, V, size=[B, T]).astype(np.int32)
    targets[1, 3:] = 0  # padding
    return scores, mask, memory, targets


def _memory_state(variant, mask, memory, targets, seed=5):
    memory, mask = tf.constant(memory), tf.constant(mask)
    targets = None if targets is None else tf.constant(targets)
    return {"memory": memory, "mask": mask, "seed": tf.constant(seed),
            "variant": variant.prepare(memory, mask, targets=targets)}


def _np_log_softmax(x, mask):
    x = np.where(mask, x, -np.inf)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_kl_matches_numpy_and_padding_has_no_mass():
    scores, mask, memory, targets = _inputs()
    variant = VariationalAttention(D, target_vocab_size=V)
    ms = _memory_state(variant, mask, memory, targets)
    q_logits = ms["variant"]["q_logits"].numpy()
    for t in (0, 3):
        _, prior, aux, _ = variant.step(tf.constant(scores), ms, {"time": tf.constant(t)},
                                        training=False)
        log_q = _np_log_softmax(q_logits[:, t].astype(np.float64), mask)
        log_p = _np_log_softmax(scores.astype(np.float64), mask)
        q = np.exp(log_q)
        expected = np.array([np.sum(q[b, mask[b]] * (log_q[b, mask[b]] - log_p[b, mask[b]]))
                             for b in range(B)])
        np.testing.assert_allclose(aux["kl"].numpy(), expected, rtol=1e-5, atol=1e-6)
        assert np.all(expected > 0)
        np.testing.assert_allclose(prior.numpy(), np.exp(log_p), rtol=1e-5, atol=1e-7)
        assert np.all(prior.numpy()[~mask] == 0.0)
        assert np.all(np.exp(q_logits[:, t] - q_logits[:, t].max(-1, keepdims=True))[~mask] == 0.0)
    # KL(q || q) = 0, and the helper ignores padded columns whatever their logits
    lq = tf.nn.log_softmax(tf.where(mask, scores, -1e9))
    np.testing.assert_allclose(categorical_kl(lq, lq, tf.constant(mask)).numpy(), 0.0, atol=1e-6)


def test_samples_follow_q_and_never_hit_padding():
    """z_t ~ q: the hard context is a real h_i, with frequencies matching q(z_t)."""
    scores, mask, memory, targets = _inputs(1)
    variant = VariationalAttention(D, target_vocab_size=V)
    ms = _memory_state(variant, mask, memory, targets)
    q = tf.nn.softmax(ms["variant"]["q_logits"][:, 2]).numpy()
    counts = np.zeros([B, N])
    draws = 400
    for s in range(draws):
        ms["seed"] = tf.constant(s)
        hard, _, aux, _ = variant.step(tf.constant(scores), ms, {"time": tf.constant(2)},
                                       training=True)
        # which memory row was picked: the one the hard context equals
        z = np.argmin(np.abs(memory - hard.numpy()[:, None, :]).sum(-1), axis=-1)
        np.testing.assert_allclose(hard.numpy(), memory[np.arange(B), z])
        counts[np.arange(B), z] += 1
        np.testing.assert_allclose(aux["log_q_sample"].numpy(),
                                   np.log(q[np.arange(B), z]), rtol=1e-5)
    assert counts[~mask].sum() == 0
    np.testing.assert_allclose(counts / draws, q, atol=4 * np.sqrt(0.25 / draws))


def test_reinforce_with_baseline_is_unbiased():
    """-grad of the surrogate, averaged over samples z ~ q, equals grad E_q[f(z)] by enumeration;
    the baseline changes the variance, not the mean."""
    logits = tf.Variable([0.3, -1.0, 0.8, 0.1, -0.4])
    f = tf.constant([1.5, -2.0, 0.4, 3.0, -0.7])
    with tf.GradientTape() as tape:
        exact = tf.reduce_sum(tf.nn.softmax(logits) * f)
    exact_grad = tape.gradient(exact, logits).numpy()
    num = 200_000
    z = tf.random.stateless_categorical(tf.tile(logits[None], [num, 1]), 1, seed=[3, 4])[:, 0]
    for baseline in (0.0, float(exact)):
        with tf.GradientTape() as tape:
            log_q = tf.gather(tf.nn.log_softmax(logits), z)
            surrogate = reinforce_surrogate(tf.gather(f, z) - baseline, log_q)
            loss = tf.reduce_mean(surrogate)
        assert np.allclose(surrogate.numpy(), 0.0)  # value 0: the logged objective stays the ELBO
        estimate = -tape.gradient(loss, logits).numpy()
        np.testing.assert_allclose(estimate, exact_grad, atol=0.03)


def test_deferred_aux_reward_is_sampled_minus_soft_log_likelihood_over_real_steps():
    _, mask, memory, targets = _inputs(2)
    variant = VariationalAttention(D, target_vocab_size=V)
    ms = _memory_state(variant, mask, memory, targets)
    rng = np.random.default_rng(0)
    hard, soft, log_q = (rng.normal(size=[B, T]).astype(np.float32) for _ in range(3))
    step_mask = (targets != 0).astype(np.float32)
    out = variant.deferred_aux({"target_log_prob": tf.constant(hard),
                                "soft_context_target_log_prob": tf.constant(soft),
                                "log_q_sample": tf.constant(log_q)}, ms, tf.constant(step_mask))
    np.testing.assert_allclose(out["reward"].numpy(), ((hard - soft) * step_mask).sum(1),
                               rtol=1e-5)
    np.testing.assert_allclose(out["nll_soft"].numpy(), -(soft * step_mask).sum(1), rtol=1e-5)
    np.testing.assert_allclose(out["reinforce"].numpy(), 0.0, atol=1e-6)


def test_decoding_without_targets_uses_the_prior_expectation():
    scores, mask, memory, _ = _inputs(3)
    variant = VariationalAttention(D, target_vocab_size=V)
    ms = _memory_state(variant, mask, memory, None)
    assert ms["variant"] == {}
    for training in (False, True):
        context, prior, aux, _ = variant.step(tf.constant(scores), ms, {"time": tf.constant(0)},
                                              training=training)
        assert aux == {}
        np.testing.assert_allclose(context.numpy(),
                                   np.einsum("bn,bnd->bd", prior.numpy(), memory), rtol=1e-5)


def test_training_lowers_both_the_sampled_and_the_soft_nll_and_decodes():
    """The soft path (what decoding uses) learns too, and the trained model decodes."""
    keras.utils.set_random_seed(0)
    vocab = 10
    task = ReverseTask(vocab_size=vocab, batch_size=16, seed=0)
    model = Seq2Seq(ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, embed_dim=8,
                                encoder_units=8, decoder_units=16, attention_units=8,
                                head_units=16, attention="variational"))
    logs = train_per_token(model, task.batch_at, 60)
    for name in ("nll", "nll_soft"):
        curve = [x[name] for x in logs]
        assert np.all(np.isfinite(curve))
        assert np.mean(curve[-10:]) < np.mean(curve[:5]) - 0.2, (name, curve)
    assert all(x["kl"] >= -1e-6 for x in logs)
    batch = {k: tf.constant(v) for k, v in task.batch_at(1000).items()}
    out = model.decode(batch, beam_width=2, max_length=6)
    assert out["ids"].shape[:2] == (16, 2)


def test_the_models_reinforce_term_and_gradient_equal_the_standalone_estimator(monkeypatch):
    """Inside Seq2Seq's teacher forcing (training, one seed), against the standalone
    estimator on the same samples, with the head run at every step (``head_in_loop``;
    tests/models/test_heads.py checks the head after the loop against it).

    Recorded at every step: the variant's hard context and prior a_t, and every call of
    the output head with the context it was given. From them, outside the model: z_t is
    the memory row the hard context equals, log p(y_t | h_{z_t}) and log p(y_t | c_t^soft)
    are the head's outputs for the calls whose context is h_{z_t} and sum_i a_t^i h_i
    (numpy), r_t their difference, and the standalone surrogate is
    sum_t m_t reinforce_surrogate(r_t, log q_t(z_t)) with log q from the inference
    network's logits. The model's summed ``reward`` is sum_t m_t r_t, its ``reinforce`` is
    0 in value and weighs 1 in the objective, and its gradient equals the standalone one
    for every weight (the inference network's and the encoder's nonzero; the decoder's
    and the head's zero, the reward being a constant)."""
    keras.utils.set_random_seed(0)
    batch = {k: tf.constant(v) for k, v in
             ReverseTask(vocab_size=V, batch_size=3, min_len=2, max_len=5, seed=4)
             .batch_at(0).items()}
    model = Seq2Seq(ModelConfig(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8,
                                encoder_units=4, decoder_units=8, attention_units=8,
                                head_units=8, attention="variational"))
    model.build_for_checkpoint(batch)
    model.head_in_loop = True
    assert model.loss_weights()["reinforce"] == 1.0
    steps = {}
    now = []  # the step being run
    step = VariationalAttention.step
    head = model.decoder.head
    head_call = head.call

    def recording_step(self, scores, memory_state, state, training=False):
        out = step(self, scores, memory_state, state, training=training)
        now.append(int(state["time"]))
        steps[now[-1]] = {"hard": out[0].numpy(), "prior": out[1].numpy(),
                          "memory": memory_state["memory"].numpy(), "head": []}
        return out

    def recording_head(s, c, *args, **kwargs):
        out = head_call(s, c, *args, **kwargs)
        steps[now[-1]]["head"].append((c.numpy(), out[0].numpy()))
        return out
    monkeypatch.setattr(VariationalAttention, "step", recording_step)
    monkeypatch.setattr(head, "call", recording_head)
    seed = tf.constant(7)
    with tf.GradientTape() as tape:
        out = model.teacher_forced(batch, training=True, seed=seed)
        reinforce = tf.reduce_sum(out["reinforce"])
    g_model = tape.gradient(reinforce, model.trainable_variables)
    monkeypatch.undo()

    y = batch["tgt_out"].numpy()
    m = (y != 0).astype(np.float32)
    length = y.shape[1]
    rows = np.arange(len(y))
    assert sorted(steps) == list(range(length))
    z = np.zeros(y.shape, np.int64)
    reward = np.zeros(y.shape)
    for t in range(length):
        memory = steps[t]["memory"]
        distance = np.abs(memory - steps[t]["hard"][:, None, :]).sum(-1)  # [B, N]
        z[:, t] = distance.argmin(-1)
        assert np.all(distance.min(-1) == 0.0), distance  # the hard context is a real h_i
        soft = np.einsum("bn,bnd->bd", steps[t]["prior"], memory)

        def head_at(context):
            found = [lp for c, lp in steps[t]["head"] if np.allclose(c, context, atol=1e-5)]
            assert found, (t, "no head output at this context")
            return found[0][rows, y[:, t]]
        reward[:, t] = head_at(memory[rows, z[:, t]]) - head_at(soft)
    np.testing.assert_allclose(out["reward"].numpy(), (reward * m).sum(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["reinforce"].numpy(), 0.0, atol=1e-6)
    assert np.abs(reward * m).max() > 1e-3

    with tf.GradientTape() as tape:
        memory_state, _ = model.start(batch, training=True, seed=seed, with_targets=True)
        log_q = tf.nn.log_softmax(memory_state["variant"]["q_logits"], axis=-1)  # [B, T, N]
        log_q_z = tf.gather(log_q, tf.constant(z), batch_dims=2)
        standalone = tf.reduce_sum(reinforce_surrogate(tf.constant(reward, tf.float32),
                                                       log_q_z) * m)
    g_standalone = tape.gradient(standalone, model.trainable_variables)
    nonzero = []
    for v, a, b in zip(model.trainable_variables, g_model, g_standalone):
        a = np.zeros(v.shape) if a is None else tf.convert_to_tensor(a).numpy()
        b = np.zeros(v.shape) if b is None else tf.convert_to_tensor(b).numpy()
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=v.path)
        if np.abs(b).max() > 1e-6:
            nonzero.append(v.path)
    assert any("q_bilinear" in p for p in nonzero), nonzero
    assert any("q_bilstm" in p for p in nonzero), nonzero
    assert any(p.startswith("encoder/") for p in nonzero), nonzero
    assert not any(p.startswith(("head/", "lstm_0/", "score/", "embedding/"))
                   for p in nonzero), nonzero


def test_the_inference_networks_bilstm_runs_either_implementation_alike():
    """--lstm_impl reaches the inference network's BiLSTM (Seq2Seq passes it): q's logits
    and their gradients are the same under scan and keras, padded targets and an empty
    target row included."""
    _, mask, memory, targets = _inputs()
    targets[2] = 0  # a row with no target step
    variants = [VariationalAttention(D, target_vocab_size=V, lstm_impl=impl)
                for impl in ("scan", "keras")]
    for v in variants:
        v.prepare(tf.constant(memory), tf.constant(mask), targets=tf.constant(targets))
    rng = np.random.default_rng(3)
    for a, b in zip(*(v.weights for v in variants)):
        value = rng.normal(scale=0.5, size=a.shape).astype(np.float32)
        a.assign(value), b.assign(value)
    results = []
    for v in variants:
        with tf.GradientTape() as tape:
            logits = v.prepare(tf.constant(memory), tf.constant(mask),
                               targets=tf.constant(targets))["q_logits"]
            loss = tf.reduce_sum(tf.nn.log_softmax(logits) * tf.cast(mask[:, None], tf.float32))
        results.append([logits] + tape.gradient(loss, v.trainable_variables))
    assert len(results[0]) > 4
    for a, b in zip(*results):
        np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b),
                                   rtol=2e-5, atol=2e-6)
    model = Seq2Seq(ModelConfig(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8,
                                encoder_units=4, attention="variational", lstm_impl="keras"))
    assert model.variant.lstm_impl == "keras"
