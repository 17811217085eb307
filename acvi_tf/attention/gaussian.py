"""Gaussian variational attention: Bahuleyan, Mou, Vechtomova and Poupart,
"Variational Attention for Sequence-to-Sequence Models", COLING 2018 (the
"Variational Attention" and "Prior p(a_j)" slides of 004_*; Eqs. 6-7 of the slides).

The attention vector is a latent variable

    q(a_t | x) = N(a_t | mu_t, diag sigma_t^2),  mu_t = sum_i alpha_t^i h_i,

whose mean is the deterministic soft-attention context (Eqs. 2-3 of the ACVI
paper; the identity map, as in the paper, so the deterministic attention is
its mode) and whose log standard deviation is a small network of that context,
as in the authors' code (``ved_varAttn/.../attention_wrapper.py``):

    log sigma_t = W_2 tanh(W_1 mu_t + b_1) + b_2,   log sigma_t^2 = 2 log sigma_t.

Training draws the reparameterised sample a_t = mu_t + sigma_t * eps (stateless
seed); decoding uses the mean mu_t (``sample_at_decode=True`` samples instead).
The loss adds gamma_a * sum_t KL(q(a_t) || p(a_t)) (the objective's attention
term with lambda_KL folded into ``kl_weight``), in closed form, against either

    prior="standard":      p(a_t) = N(0, I)
    prior="mean_encoder":  p(a_t) = N(h_bar, I),  h_bar = mean of the real (unpadded) h_i.
"""

import keras
import tensorflow as tf

from acvi_tf.attention.base import ContextVariant, register_attention, weighted_sum
from acvi_tf.utils import ops
from acvi_tf.utils.ops import fold_seed, masked_softmax
from acvi_tf.utils.precision import to_float32

PRIORS = ("standard", "mean_encoder")


gaussian_kl = ops.gaussian_kl  # KL(N(mean, diag sigma^2) || N(prior_mean, I))


masked_mean = ops.masked_mean  # h_bar of the N(h_bar, I) prior


@register_attention("gaussian")
class GaussianAttention(ContextVariant):
    """Bahuleyan et al. (2018) Gaussian variational attention.

    Args:
      memory_dim: dim(h_i) (= dim(a_t)).
      prior: ``"standard"`` (N(0, I), their VAttn-0) or ``"mean_encoder"``
        (N(h_bar, I), their VAttn-h_bar).
      kl_weight: the weight of sum_t KL in the loss (1 gives the ELBO). Their objective
        J = J_rec + lambda_KL [KL(q(z) || p(z)) + gamma_a sum_j KL(q(a_j) || p(a_j))]
        is ``--latent=ved --latent_option kl_weight=lambda_KL --attention=gaussian
        --attention_option kl_weight=lambda_KL*gamma_a`` (their code: gamma_a = 0.1).
        KL annealing (the trainer's ``kl_anneal_steps``, their schedule of lambda_KL)
        scales both KL weights by the same factor, so gamma_a stays their ratio.
      sample_at_decode: draw a_t at decode time instead of using the mean.

    Aux losses: ``kl`` [B] per step.
    """

    aux_loss_names = ("kl",)
    kl_names = ("kl",)

    def __init__(self, memory_dim, prior="standard", kl_weight=1.0, sample_at_decode=False,
                 **kwargs):
        super().__init__(memory_dim, **kwargs)
        if prior not in PRIORS:
            raise ValueError(f"gaussian prior={prior!r}: choose one of {', '.join(PRIORS)}")
        self.prior = prior
        self.kl_weight = float(kl_weight)
        self.sample_at_decode = bool(sample_at_decode)
        # log sigma = W_2 tanh(W_1 mu + b_1) + b_2 (the authors' two dense layers).
        self.log_sigma_net = keras.Sequential([
            keras.layers.Dense(memory_dim, activation="tanh", name="hidden"),
            keras.layers.Dense(memory_dim, name="log_sigma")], name="sigma_net")

    def loss_weights(self):
        return {"kl": self.kl_weight}

    def prepare(self, memory, mask, training=False, targets=None):
        """The prior mean h_bar, once per source (only for prior="mean_encoder")."""
        if self.prior == "mean_encoder":
            return {"prior_mean": masked_mean(memory, mask)}
        return {}

    def posterior(self, scores, memory, mask, memory_state=None):
        """(probs [B, N], mean [B, D], log sigma^2 [B, D]) of q(a_t | x)."""
        probs = masked_softmax(scores, mask)
        # the deterministic soft context
        mean = weighted_sum(probs, memory, memory_state, "memory")
        log_sigma_sq = 2.0 * to_float32(self.log_sigma_net(mean))
        return probs, mean, log_sigma_sq

    def step(self, scores, memory_state, state, training=False):
        probs, mean, log_sigma_sq = self.posterior(scores, memory_state["memory"],
                                                   memory_state["mask"], memory_state)
        prior_mean = None
        if self.prior == "mean_encoder":
            prior_mean = memory_state.get("variant", {}).get("prior_mean")
            if prior_mean is None:  # step() called without prepare()
                prior_mean = masked_mean(memory_state["memory"], memory_state["mask"])
        kl = gaussian_kl(mean, log_sigma_sq, prior_mean)
        if training or self.sample_at_decode:
            seed = fold_seed(memory_state["seed"], state["time"], 104729)
            eps = ops.stateless_normal(tf.shape(mean), seed, mean.dtype)
            context = mean + tf.exp(0.5 * log_sigma_sq) * eps  # reparameterised sample
        else:
            context = mean  # the posterior mean (= its mode), deterministic for beam search
        return context, probs, {"kl": kl}, state.get("variant", {})

    def get_config(self):
        return {**super().get_config(), "prior": self.prior, "kl_weight": self.kl_weight,
                "sample_at_decode": self.sample_at_decode}
