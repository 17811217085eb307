"""Amortized Context Vector Inference (ACVI), Eqs. (17)-(25).

The context vector c_t is a latent variable with the Gaussian-mixture posterior

    p(c_t; D) = sum_i a_t^i N(c_t | h_i, diag sigma^2(h_i))            (Eq. 19)

whose weights are the attention probabilities (Eq. 14), means the encoder
states (Eq. 17) and log-variances an MLP of h_i (Eq. 18). Training maximises
the ELBO (Eq. 22) against the prior N(0, I) (Eq. 21) with reparameterised
samples: c_ti = h_i + sigma(h_i) * eps (Eq. 24), mixed either by the attention
weights (Eq. 25, "weighted") or by a Gumbel-Softmax relaxed categorical sample
(Eq. 23, "gumbel", temperature 0.5).
"""

import math

import keras
import tensorflow as tf
import tensorflow_probability as tfp

from acvi_tf.attention.base import ContextVariant, register_attention, weighted_sum
from acvi_tf.utils import ops
from acvi_tf.utils.ops import fold_seed, masked_logits

tfd = tfp.distributions

MIXING_MODES = ("weighted", "gumbel")
KL_ESTIMATORS = ("mc", "bound")
SIGMA_NETS = ("mlp", "relu")


gaussian_kl_to_standard = ops.gaussian_kl  # KL(N(mean, diag sigma^2) || N(0, I))


def context_posterior(log_probs, memory, log_sigma_sq):
    """The mixture posterior p(c_t; D) of Eq. (19) as a tfp distribution.

    ``log_probs`` are masked log attention probabilities [B, N]; padded
    positions carry a large negative logit, hence zero weight.
    """
    return tfd.MixtureSameFamily(
        mixture_distribution=tfd.Categorical(logits=log_probs),
        components_distribution=tfd.Independent(
            tfd.Normal(loc=memory, scale=tf.exp(0.5 * log_sigma_sq)), reinterpreted_batch_ndims=1))


def mixture_terms(memory, log_sigma_sq):
    """Per-source tensors of the mixture (Eq. 19), computed once in ``prepare``.

    With precision P_i = exp(-log sigma_i^2), the component log-density is a
    quadratic form in c,

        log N(c | h_i, sigma_i^2) = -1/2 ([c^2; c] . [P_i; -2 h_i P_i] + r_i),
        r_i = sum_d (h_id^2 P_id + log sigma_id^2) + D log(2 pi),

    so each decoder step scores all N components with one batched
    matrix-vector product (:func:`mixture_log_prob`) instead of N x D
    elementwise work, forward and backward.
    """
    precision = tf.exp(-log_sigma_sq)
    depth = tf.cast(tf.shape(memory)[-1], memory.dtype)
    return {"log_sigma_sq": log_sigma_sq,
            "sigma_sq": tf.exp(log_sigma_sq),
            "quadratic": tf.concat([precision, -2.0 * memory * precision], axis=-1),
            "offset": (tf.reduce_sum(tf.square(memory) * precision + log_sigma_sq, axis=-1)
                       + depth * math.log(2.0 * math.pi)),
            "component_kl": gaussian_kl_to_standard(memory, log_sigma_sq)}


def mixture_log_prob(log_probs, terms, samples):
    """log p(c; D) of Eq. (19): log sum_i a^i N(c | h_i, sigma_i^2), for many c at once.

    ``log_probs`` [B, S, N] are masked log attention probabilities (padding has a
    large negative value, hence zero weight), ``samples`` [B, S, D] one point
    each, ``terms`` from :func:`mixture_terms`; returns [B, S]. One batched
    matrix product scores every point against every component. Equal to tfp's
    ``MixtureSameFamily.log_prob`` (tested); the expanded square loses float32
    precision only when sigma^2 is tiny (absolute error ~1e-7 x sum_d c_d^2 / sigma_d^2).
    """
    features = tf.concat([tf.square(samples), samples], axis=-1)  # [B, S, 2D]
    log_density = -0.5 * (tf.einsum("bse,bne->bsn", features, terms["quadratic"])
                          + terms["offset"][:, None, :])
    return tf.reduce_logsumexp(log_probs + log_density, axis=-1)


def sample_mixed_context(weights, memory, sigma_sq, seed):
    """Eqs. (24)-(25) / (23): c_t = sum_i w_i c_ti with c_ti = h_i + sigma(h_i) * eps_ti.

    Given the weights w (the attention a_t for Eq. 25, or the relaxed one-hot z_t
    for Eq. 23), sum_i w_i sigma_i eps_ti with independent eps_ti has exactly the
    law of sqrt(sum_i w_i^2 sigma_i^2) * eps with one eps ~ N(0, I_D). Sampling it
    that way draws D normals per step instead of N x D, and stays reparameterised
    in w, h and sigma.
    """
    mean = weighted_sum(weights, memory)
    std = tf.sqrt(weighted_sum(tf.square(weights), sigma_sq) + 1e-20)
    eps = tf.random.stateless_normal(tf.shape(mean), seed=seed, dtype=mean.dtype)
    return mean + std * eps


def ancestral_sample(log_probs, memory, log_sigma_sq, seed):
    """An exact sample of the mixture (Eq. 19): k ~ Cat(a_t) (Gumbel-max), then c_tk (Eq. 24).

    ``log_probs`` [B, N] or [B, S, N] (one draw per row), memory and
    ``log_sigma_sq`` [B, N, D]; returns [B, D] or [B, S, D]. Reparameterised in
    the Gaussian part; the discrete choice carries no gradient.
    """
    gumbel = -tf.math.log(-tf.math.log(tf.random.stateless_uniform(
        tf.shape(log_probs), seed=fold_seed(seed, 0), minval=1e-20, maxval=1.0)))
    k = tf.argmax(log_probs + gumbel, axis=-1, output_type=tf.int32)
    mean = tf.gather(memory, k, batch_dims=1)
    std = tf.exp(0.5 * tf.gather(log_sigma_sq, k, batch_dims=1))
    eps = tf.random.stateless_normal(tf.shape(mean), seed=fold_seed(seed, 1), dtype=mean.dtype)
    return mean + std * eps


def relaxed_weights(logits, temperature, seed):
    """Eq. (23)'s z_t ~ RelaxedOneHotCategorical(temperature, a_t) (Gumbel-Softmax), [B, N]."""
    return tfd.RelaxedOneHotCategorical(temperature, logits=logits).sample(seed=seed)


def kl_mixture_mc(log_probs, terms, samples):
    """Monte-Carlo estimate of KL[p(c_t; D) || N(0, I)] (the KL term of Eq. 22).

    ``log_probs`` [B, T, N] (a_t of each step t), ``samples`` [B, T, K, D]: K
    draws c ~ p(c_t; D) per step (:func:`ancestral_sample`); returns [B, T].
    The KL between a Gaussian mixture and a Gaussian has no closed form: average
    log p(c) - log N(c; 0, I) over the draws, with log p(c) the mixture density
    (:func:`mixture_log_prob`). The value is unbiased. Its gradient flows
    through the Gaussian samples and through the mixture weights inside log p(c),
    but not through the discrete component choice (that score-function term is
    omitted: tfp's implicit reparameterisation of the mixture costs a D x D
    Jacobian per step and does not compile under XLA).
    """
    shape = tf.shape(samples)
    b, t, k, d = shape[0], shape[1], shape[2], shape[3]
    flat = tf.reshape(samples, [b, t * k, d])
    repeated = tf.repeat(log_probs, k, axis=1)  # [B, T*K, N], step-major like ``flat``
    depth = tf.cast(d, samples.dtype)
    log_prior = -0.5 * (tf.reduce_sum(tf.square(flat), axis=-1) + depth * math.log(2.0 * math.pi))
    log_ratio = mixture_log_prob(repeated, terms, flat) - log_prior
    return tf.reduce_mean(tf.reshape(log_ratio, [b, t, k]), axis=-1)


def kl_mixture_bound(probs, component_kl):
    """The closed-form upper bound sum_i a_t^i KL(N(h_i, sigma_i^2) || N(0, I)).

    By joint convexity of the KL divergence it is never below the true KL.
    """
    return tf.reduce_sum(probs * component_kl, axis=-1)


@register_attention("acvi")
class ACVI(ContextVariant):
    """ACVI context variant (Eqs. 17-25).

    Args:
      memory_dim: dim(h_i).
      sigma_net: ``"mlp"``: log sigma^2 = MLP(h) with one hidden ReLU layer of size
        dim(h) (Eq. 18, journal version); ``"relu"``: log sigma^2 = ReLU(W h + b)
        (ICLR version).
      mixing: ``"weighted"`` (Eq. 25) or ``"gumbel"`` (Eq. 23). The trainer's
        schedule may override it with ``set_mode(acvi_mixing=...)``.
      temperature: Gumbel-Softmax temperature (0.5 in the paper).
      kl_estimator: which KL enters the loss: ``"mc"`` (Monte Carlo with the
        mixture density) or ``"bound"`` (closed-form upper bound). Both are logged.
      kl_samples: Monte-Carlo samples for the KL estimate.
      sample_at_decode: at decode time draw c_t instead of using the posterior
        mean sum_i a_t^i h_i.
      kl_weight: the weight of sum_t KL in the loss (1 gives the ELBO).
    """

    aux_loss_names = ("kl", "kl_mc", "kl_bound")
    kl_names = aux_loss_names  # all three estimate KL[p(c_t; D) || N(0, I)]; "kl" is weighted
    # Only the reparameterised context feeds the next decoder step; the KL terms are
    # computed after teacher forcing, for all steps at once (see deferred_aux).
    deferred_names = ("log_probs",)
    deferred_aux_names = aux_loss_names

    def __init__(self, memory_dim, sigma_net="mlp", mixing="weighted", temperature=0.5,
                 kl_estimator="mc", kl_samples=1, sample_at_decode=False, kl_weight=1.0,
                 **kwargs):
        super().__init__(memory_dim, **kwargs)
        _check("sigma_net", sigma_net, SIGMA_NETS)
        _check("mixing", mixing, MIXING_MODES)
        _check("kl_estimator", kl_estimator, KL_ESTIMATORS)
        self.sigma_net = sigma_net
        self.mixing = mixing
        self.default_mixing = mixing
        self.temperature = float(temperature)
        self.kl_estimator = kl_estimator
        self.kl_samples = int(kl_samples)
        self.sample_at_decode = bool(sample_at_decode)
        self.kl_weight = float(kl_weight)
        if sigma_net == "mlp":
            self.log_sigma_sq_net = keras.Sequential([
                keras.layers.Dense(memory_dim, activation="relu", name="hidden"),
                keras.layers.Dense(memory_dim, name="log_sigma_sq")], name="sigma_mlp")
        else:
            self.log_sigma_sq_net = keras.layers.Dense(memory_dim, activation="relu",
                                                       name="log_sigma_sq")

    def loss_weights(self):
        return {"kl": self.kl_weight}

    def set_mode(self, acvi_mixing=None, **unused):
        self.mixing = acvi_mixing or self.default_mixing
        _check("acvi_mixing", self.mixing, MIXING_MODES)

    def prepare(self, memory, mask, training=False, targets=None):
        """log sigma^2(h_i) (Eq. 18) and the mixture's per-source terms, once per source."""
        return mixture_terms(memory, self.log_sigma_sq_net(memory))

    def step(self, scores, memory_state, state, training=False):
        memory, mask = memory_state["memory"], memory_state["mask"]
        terms = memory_state["variant"]
        logits = masked_logits(scores, mask)
        seed = fold_seed(memory_state["seed"], state["time"], 7919)

        log_probs = tf.nn.log_softmax(logits)
        probs = tf.exp(log_probs)

        if training or self.sample_at_decode:
            if self.mixing == "gumbel":
                # Eq. (23): relaxed one-hot z_t ~ RelaxedOneHotCategorical(T, a_t).
                weights = relaxed_weights(logits, self.temperature, fold_seed(seed, 3))
            else:
                weights = probs  # Eq. (25)
            context = sample_mixed_context(weights, memory, terms["sigma_sq"], fold_seed(seed, 2))
        else:
            # The posterior mean of Eq. (19).
            context = weighted_sum(probs, memory)

        aux = {"log_probs": log_probs}
        return context, probs, aux, state.get("variant", {})

    def deferred_aux(self, per_step, memory_state, step_mask):
        """Sum over valid steps of the MC KL and of the closed-form bound (both logged);
        ``kl`` is the one ``kl_estimator`` names."""
        terms = memory_state["variant"]
        log_probs = per_step["log_probs"]  # [B, T, N]
        shape = tf.shape(log_probs)
        k = self.kl_samples
        draws = ancestral_sample(tf.repeat(log_probs, k, axis=1), memory_state["memory"],
                                 terms["log_sigma_sq"], fold_seed(memory_state["seed"], 7919, 4))
        draws = tf.reshape(draws, [shape[0], shape[1], k, -1])  # K draws per step
        kl_bound = kl_mixture_bound(tf.exp(log_probs), terms["component_kl"][:, None, :])
        if self.kl_estimator == "mc":
            kl_mc = kl_mixture_mc(log_probs, terms, draws)
        else:  # logged only: no backward pass through it
            kl_mc = kl_mixture_mc(*tf.nest.map_structure(tf.stop_gradient,
                                                         (log_probs, terms, draws)))
        sums = {"kl_mc": tf.reduce_sum(kl_mc * step_mask, axis=1),
                "kl_bound": tf.reduce_sum(kl_bound * step_mask, axis=1)}
        sums["kl"] = sums["kl_mc"] if self.kl_estimator == "mc" else sums["kl_bound"]
        return sums

    def get_config(self):
        return {**super().get_config(), "sigma_net": self.sigma_net,
                "mixing": self.default_mixing, "temperature": self.temperature,
                "kl_estimator": self.kl_estimator, "kl_samples": self.kl_samples,
                "sample_at_decode": self.sample_at_decode, "kl_weight": self.kl_weight}


def _check(flag, value, choices):
    if value not in choices:
        raise ValueError(f"acvi {flag}={value!r}: choose one of {', '.join(choices)}")
