"""Categorical variational attention: Deng, Kim, Chiu, Guo and Rush, "Latent Alignment
and Variational Attention", NeurIPS 2018 (the REINFORCE variant, their ``-mode sample``).

The alignment z_t in {1..N} is a latent variable of the generative model

    p(y_t | x, y_<t) = sum_i p(z_t = i | x, y_<t) p(y_t | h_i, s_t),

whose prior p(z_t | x, y_<t) = a_t is the decoder's soft attention (Eq. 2 of the
ACVI paper: softmax of the task's scores over the real source positions). The
variational posterior q(z_t | x, y) sees the whole reference: a BiLSTM over the
embedded target gives u_t, and

    q(z_t = i | x, y) = softmax_i(u_t^T W h_i)          (bilinear, padding masked).

The per-step ELBO term is E_q[log p(y_t | h_{z_t}, s_t)] - KL(q(z_t) || p(z_t)).
Training draws one z_t ~ q (stateless seed), feeds the head the hard context
c_t = h_{z_t}, and gets the gradient of the first term
  * for the generative model from the sample (the model's ``nll`` is
    -log p(y_t | h_{z_t}));
  * for q from REINFORCE with the soft-attention output as the baseline:
    r_t = log p(y_t | h_{z_t}) - log p(y_t | c_t^soft), c_t^soft = sum_i a_t^i h_i,
    surrogate -stop_gradient(r_t) log q(z_t) (aux ``reinforce``).
The KL between the two categoricals is analytic (aux ``kl``, weight ``kl_weight``).

The soft path is also trained (aux ``nll_soft`` = -log p(y_t | c_t^soft), weight
``baseline_weight``, default 1): a better baseline lowers the estimator's variance,
and the soft context is what this model decodes with. The authors' code has this
term behind ``-train_baseline`` (off in their recipes); we default it on because
decoding here uses the soft context, which the authors' k-max evaluation does not.

Input feeding (the context carried to the next decoder input) uses the soft
context in training as in decoding (``input_feed="soft"``, the authors' default
``-p_input_feed mean``), so the decoder state sees the same kind of vector at train
and test time; ``input_feed="sample"`` feeds h_{z_t} instead.

Decoding (no reference, so no q): the context is the prior's expectation
c_t^soft = sum_i a_t^i h_i, i.e. the model decodes like soft attention with its
prior (the paper evaluates generation with the prior). Evaluation with a reference
but ``training=False`` does the same and still reports ``kl``; ``reinforce`` and
``reward`` are then 0 and ``nll_soft`` equals ``nll``.
"""

import keras
import tensorflow as tf

from acvi_tf.attention.base import (INPUT_FEED, TARGET_LOG_PROB, ContextVariant,
                                    register_attention, weighted_sum)
from acvi_tf.utils.lstm_impl import choose_lstm_impl, run_bidirectional
from acvi_tf.utils.ops import fold_seed, masked_logits, masked_softmax
from acvi_tf.utils.precision import to_float32

INPUT_FEEDS = ("soft", "sample")


def categorical_kl(log_q, log_p, mask):
    """KL(q || p) = sum_{i real} q_i (log q_i - log p_i), [B], for log-probs [B, N].

    Padded positions (mask False) carry zero mass in both and are left out, so the
    large negative logits they get never enter the sum.
    """
    terms = tf.exp(log_q) * (log_q - log_p)
    return tf.reduce_sum(tf.where(mask, terms, tf.zeros_like(terms)), axis=-1)


def reinforce_surrogate(reward, log_q_sample):
    """-stop_gradient(r) * log q(z), shifted to the value 0.

    Its gradient is -r * grad log q(z) (the score-function estimator of
    -grad E_q[log p(y | z)] with the baseline folded into r); subtracting the
    stopped log q(z) leaves that gradient unchanged and keeps the logged objective
    equal to the (negative) ELBO instead of adding a meaningless surrogate value.
    """
    reward = tf.stop_gradient(reward)
    return -reward * (log_q_sample - tf.stop_gradient(log_q_sample))


@register_attention("variational")
class VariationalAttention(ContextVariant):
    """Deng et al. (2018) categorical variational attention trained with REINFORCE.

    Args:
      memory_dim: dim(h_i).
      target_vocab_size, pad_id, unk_id: the target vocabulary of the inference
        network's own embedding (filled in by Seq2Seq, see ``uses_target_vocab``).
      embed_dim: the inference network's target embedding size (default dim(h)/2).
      units: its BiLSTM units per direction (default dim(h)/2).
      kl_weight: weight of sum_t KL(q || p) (1 gives the ELBO).
      baseline_weight: weight of the soft path's NLL ``nll_soft`` (0 turns it off).
      input_feed: ``"soft"`` or ``"sample"``, the context fed to the next step in training.
      lstm_impl: what runs the inference network's BiLSTM (Seq2Seq passes the encoder's
        ``ModelConfig.lstm_impl``; :func:`acvi_tf.utils.lstm_impl.choose_lstm_impl`).

    Aux losses per step: ``kl``, ``reinforce`` (value 0, gradient only),
    ``nll_soft``, and the logged-only ``reward`` r_t.
    """

    aux_loss_names = ("kl", "reinforce", "nll_soft", "reward")
    kl_names = ("kl",)  # KL(q || p); the REINFORCE surrogate and nll_soft are not annealed
    uses_target_vocab = True
    # The head on the soft context too (REINFORCE's baseline), run after teacher forcing's
    # loop on all steps at once, as on the sampled context.
    deferred_names = ("soft_context", "log_q_sample")
    head_contexts = ("soft_context",)
    deferred_aux_names = ("reinforce", "nll_soft", "reward")

    def __init__(self, memory_dim, target_vocab_size=None, pad_id=0, unk_id=1,
                 embed_dim=None, units=None, kl_weight=1.0, baseline_weight=1.0,
                 input_feed="soft", lstm_impl="auto", **kwargs):
        super().__init__(memory_dim, **kwargs)
        if not target_vocab_size:
            raise ValueError("variational attention needs target_vocab_size "
                             "(Seq2Seq passes ModelConfig.tgt_vocab_size)")
        if input_feed not in INPUT_FEEDS:
            raise ValueError(f"variational input_feed={input_feed!r}: choose one of "
                             f"{', '.join(INPUT_FEEDS)}")
        self.target_vocab_size = int(target_vocab_size)
        self.pad_id, self.unk_id = int(pad_id), int(unk_id)
        self.embed_dim = int(embed_dim or max(memory_dim // 2, 1))
        self.units = int(units or max(memory_dim // 2, 1))
        self.kl_weight = float(kl_weight)
        self.baseline_weight = float(baseline_weight)
        self.input_feed = input_feed
        self.lstm_impl = lstm_impl
        self.target_embedding = keras.layers.Embedding(self.target_vocab_size, self.embed_dim,
                                                       name="q_embedding")
        # return_state as the encoder's layers (both implementations return the states);
        # the weights are the same either way
        self.target_rnn = keras.layers.Bidirectional(
            keras.layers.LSTM(self.units, return_sequences=True, return_state=True),
            name="q_bilstm")
        # W of the bilinear score u_t^T W h_i, applied to the memory once per source.
        self.bilinear = keras.layers.Dense(2 * self.units, use_bias=False, name="q_bilinear")

    def loss_weights(self):
        return {"kl": self.kl_weight, "reinforce": 1.0, "nll_soft": self.baseline_weight}

    def prepare(self, memory, mask, training=False, targets=None):
        """The inference network, once per source: q's logits for every target step.

        Returns ``{"q_logits": [B, T, N] (padding masked)}`` when the reference is given,
        else ``{}`` (decoding: the prior alone).
        """
        if targets is None:
            return {}
        targets = tf.cast(targets, tf.int32)
        tmask = tf.not_equal(targets, self.pad_id)
        # Pointer-generator targets may hold extended-vocabulary ids: embed them as UNK.
        ids = tf.where(targets < self.target_vocab_size, targets, self.unk_id)
        impl, _ = choose_lstm_impl(self.lstm_impl)
        u, _, _ = run_bidirectional(self.target_rnn, self.target_embedding(ids), tmask, impl)
        logits = to_float32(tf.einsum("btu,bnu->btn", u, self.bilinear(memory)))
        return {"q_logits": masked_logits(logits, mask[:, None, :])}

    def step(self, scores, memory_state, state, training=False):
        memory, mask = memory_state["memory"], memory_state["mask"]
        prior = masked_softmax(scores, mask)
        soft = weighted_sum(prior, memory, memory_state, "memory")
        variant = memory_state.get("variant", {})
        if "q_logits" not in variant:  # decoding: no reference, the prior's expectation
            return soft, prior, {}, state.get("variant", {})
        t = state["time"]
        log_q = tf.nn.log_softmax(tf.gather(variant["q_logits"], t, axis=1), axis=-1)
        log_p = tf.nn.log_softmax(masked_logits(scores, mask), axis=-1)
        aux = {"kl": categorical_kl(log_q, log_p, mask), "soft_context": to_float32(soft)}
        if not training:  # evaluation: the context is the soft one; nothing to reinforce
            aux["log_q_sample"] = tf.zeros_like(aux["kl"])
            return soft, prior, aux, state.get("variant", {})
        seed = fold_seed(memory_state["seed"], t, 7919)
        z = tf.random.stateless_categorical(log_q, 1, seed=seed, dtype=tf.int32)[:, 0]
        hard = tf.gather(memory, z, batch_dims=1)
        aux["log_q_sample"] = tf.gather(log_q, z, batch_dims=1)
        aux[INPUT_FEED] = soft if self.input_feed == "soft" else hard
        return hard, prior, aux, state.get("variant", {})

    def deferred_aux(self, per_step, memory_state, step_mask):
        """The REINFORCE terms, summed over the steps, from the head's log-probabilities of
        the targets at the sampled context (``target_log_prob``, the model's NLL) and at
        the soft one: r_t = log p(y_t | h_{z_t}) - log p(y_t | c_t^soft). In evaluation the
        context is the soft one, so r_t = 0 and ``nll_soft`` equals ``nll``."""
        sampled = per_step[TARGET_LOG_PROB]
        soft = per_step["soft_context_" + TARGET_LOG_PROB]
        reward = sampled - soft
        terms = {"reinforce": reinforce_surrogate(reward, per_step["log_q_sample"]),
                 "nll_soft": -soft, "reward": tf.stop_gradient(reward)}
        return {n: tf.reduce_sum(v * step_mask, axis=1) for n, v in terms.items()}

    def get_config(self):
        return {**super().get_config(), "target_vocab_size": self.target_vocab_size,
                "pad_id": self.pad_id, "unk_id": self.unk_id, "embed_dim": self.embed_dim,
                "units": self.units, "kl_weight": self.kl_weight,
                "baseline_weight": self.baseline_weight, "input_feed": self.input_feed,
                "lstm_impl": self.lstm_impl}
