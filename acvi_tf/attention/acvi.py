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

from acvi_tf.attention.base import WEIGHTED_SUM, ContextVariant, register_attention, weighted_sum
from acvi_tf.utils import ops
from acvi_tf.utils.ops import fold_seed, masked_logits
from acvi_tf.utils.precision import to_float32

tfd = tfp.distributions

MIXING_MODES = ("weighted", "gumbel")
KL_ESTIMATORS = ("mc", "bound")
SIGMA_NETS = ("mlp", "relu")
KL_REDUCTIONS = ("sum", "mean")
PRIORS = ("standard", "mean_encoder")
# The mixture density's quadratic form is evaluated in float64: in float32 its expanded
# square cancels catastrophically once sigma is small (issue 10: kl_mc reached 1e11 nats
# while its upper bound stayed near 2e3). The matmul is [B, T*K, 2D] x [B, 2D, N], a few
# percent of a step's FLOPs, so double precision costs little.
DENSITY_DTYPE = tf.float64
# log sigma^2 is floored smoothly at 2 log(1e-4): with no KL pressure (KL weight 0) sigma
# otherwise shrinks without bound (to exp(-100) and below), where even float64 cannot
# resolve the expanded square (c^2 - 2ch + h^2) / sigma^2. Below sigma = 1e-4 the noise is
# 1e-4 of an encoder state's scale: the context is deterministic for every purpose.
LOG_SIGMA_SQ_FLOOR = 2.0 * math.log(1e-4)


def floor_log_sigma_sq(log_sigma_sq):
    """floor + softplus(log sigma^2 - floor): the identity to within 1e-3 from 7 nats above
    the floor, smooth (gradients never vanish), never below the floor."""
    return LOG_SIGMA_SQ_FLOOR + tf.nn.softplus(log_sigma_sq - LOG_SIGMA_SQ_FLOOR)


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


def mixture_terms(memory, log_sigma_sq, prior_mean=None):
    """Per-source tensors of the mixture (Eq. 19), computed once in ``prepare``.

    With precision P_i = exp(-log sigma_i^2), the component log-density is a
    quadratic form in c,

        log N(c | h_i, sigma_i^2) = -1/2 ([c^2; c] . [P_i; -2 h_i P_i] + r_i),
        r_i = sum_d (h_id^2 P_id + log sigma_id^2) + D log(2 pi),

    so all steps score all N components with one batched matrix product
    (:func:`mixture_log_prob`) instead of N x D elementwise work, forward and
    backward. ``quadratic`` and ``offset`` are float64 (:data:`DENSITY_DTYPE`):
    the expanded square subtracts terms of size sum_d c_d^2 / sigma_d^2, which
    float32 cannot resolve once sigma is small. ``prior_mean`` [B, D] (the
    N(h_bar, I) prior) or None (N(0, I)) enters the closed-form bound.
    """
    precision = tf.exp(-tf.cast(log_sigma_sq, DENSITY_DTYPE))
    wide_memory = tf.cast(memory, DENSITY_DTYPE)
    depth = tf.cast(tf.shape(memory)[-1], DENSITY_DTYPE)
    terms = {"log_sigma_sq": log_sigma_sq,
             "sigma_sq": tf.exp(log_sigma_sq),
             "quadratic": tf.concat([precision, -2.0 * wide_memory * precision], axis=-1),
             "offset": (tf.reduce_sum(tf.square(wide_memory) * precision
                                      + tf.cast(log_sigma_sq, DENSITY_DTYPE), axis=-1)
                        + depth * math.log(2.0 * math.pi)),
             "component_kl": gaussian_kl_to_standard(
                 memory, log_sigma_sq, None if prior_mean is None else prior_mean[:, None, :])}
    if prior_mean is not None:
        terms["prior_mean"] = prior_mean
    return terms


def mixture_log_prob(log_probs, terms, samples):
    """log p(c; D) of Eq. (19): log sum_i a^i N(c | h_i, sigma_i^2), for many c at once.

    ``log_probs`` [B, S, N] are masked log attention probabilities (padding has a
    large negative value, hence zero weight), ``samples`` [B, S, D] one point
    each, ``terms`` from :func:`mixture_terms`; returns [B, S] in the samples'
    dtype. One batched matrix product scores every point against every
    component, in float64 (see :func:`mixture_terms`). Equal to tfp's
    ``MixtureSameFamily.log_prob``, which works from the differences
    (c - h_i) / sigma_i, for sigma from 1e-4 to 1 (tested).
    """
    wide = tf.cast(samples, DENSITY_DTYPE)
    features = tf.concat([tf.square(wide), wide], axis=-1)  # [B, S, 2D]
    log_density = -0.5 * (tf.einsum("bse,bne->bsn", features, terms["quadratic"])
                          + terms["offset"][:, None, :])
    log_density = tf.cast(log_density, samples.dtype)
    return tf.reduce_logsumexp(log_probs + log_density, axis=-1)


def sample_mixed_context(weights, memory, sigma_sq, seed, noise_scale=None, memory_state=None):
    """Eqs. (24)-(25) / (23): c_t = sum_i w_i c_ti with c_ti = h_i + sigma(h_i) * eps_ti.

    Given the weights w (the attention a_t for Eq. 25, or the relaxed one-hot z_t
    for Eq. 23), sum_i w_i sigma_i eps_ti with independent eps_ti has exactly the
    law of sqrt(sum_i w_i^2 sigma_i^2) * eps with one eps ~ N(0, I_D). Sampling it
    that way draws D normals per step instead of N x D, and stays reparameterised
    in w, h and sigma. ``noise_scale`` (a scalar, the trainer's noise warm-up)
    multiplies the noise term: 0 gives the weighted mean, soft attention's context.
    ``memory_state`` (a decoder step's) lets teacher forcing sum the gradients of
    ``memory`` and ``sigma_sq`` after the loop (:meth:`ACVI.loop_invariants`).
    ``weights`` [B, N] with a [2] ``seed`` (one decoder step), or [B, T, N] with [T, 2]
    seeds, step t's noise drawn from the t-th (T query steps at once).
    """
    mean = _mix(weights, memory, memory_state, "memory")
    std = tf.sqrt(_mix(tf.square(weights), sigma_sq, memory_state, "sigma_sq") + 1e-20)
    if noise_scale is not None:
        std = std * noise_scale
    return mean + std * _normal_noise(mean, seed)


def _normal_noise(mean, seed):
    """eps ~ N(0, I) shaped like ``mean``: [B, D] from a [2] seed, or [B, T, D] whose step t
    is drawn as [B, D] from the t-th of [T, 2] seeds (as decoder step t draws it)."""
    if len(mean.shape) == 2:
        return ops.stateless_normal(tf.shape(mean), seed, mean.dtype)
    return _each_step(lambda s, m: ops.stateless_normal(tf.shape(m), s, m.dtype), seed, mean)


def ancestral_sample(log_probs, memory, log_sigma_sq, seed):
    """An exact sample of the mixture (Eq. 19): k ~ Cat(a_t) (Gumbel-max), then c_tk (Eq. 24).

    ``log_probs`` [B, N] or [B, S, N] (one draw per row), memory and
    ``log_sigma_sq`` [B, N, D]; returns [B, D] or [B, S, D]. Reparameterised in
    the Gaussian part; the discrete choice carries no gradient.
    """
    gumbel = -tf.math.log(-tf.math.log(ops.stateless_uniform(
        tf.shape(log_probs), fold_seed(seed, 0), minval=1e-20)))
    k = tf.argmax(log_probs + gumbel, axis=-1, output_type=tf.int32)
    mean = tf.gather(memory, k, batch_dims=1)
    std = tf.exp(0.5 * tf.gather(log_sigma_sq, k, batch_dims=1))
    eps = ops.stateless_normal(tf.shape(mean), fold_seed(seed, 1), mean.dtype)
    return mean + std * eps


def relaxed_weights(logits, temperature, seed):
    """Eq. (23)'s z_t ~ RelaxedOneHotCategorical(temperature, a_t) (Gumbel-Softmax), [B, N]."""
    return tfd.RelaxedOneHotCategorical(temperature, logits=logits).sample(seed=seed)


# The salts of the draws: decoder step t's seed is fold_seed(seed, t, STEP_SALT), and from
# it come the Gumbel-Softmax weights (GUMBEL_SALT) and the noise of Eq. 24 (NOISE_SALT).
# The KL's mixture draws, taken for all steps at once, use fold_seed(seed, STEP_SALT, KL_SALT).
STEP_SALT, NOISE_SALT, GUMBEL_SALT, KL_SALT = 7919, 2, 3, 4


def step_seed(seed, time):
    """The [2] seed of decoder step ``time``'s draws."""
    return fold_seed(seed, time, STEP_SALT)


def step_seeds(seed, steps):
    """[T, 2]: :func:`step_seed` of steps 0..T-1, so that T query steps at once (the Keras
    layer) draw exactly what T decoder steps (the variant) draw one by one."""
    return tf.map_fn(lambda t: step_seed(seed, t), tf.range(steps),
                     fn_output_signature=tf.TensorSpec([2], tf.int32))


def _fold_steps(seeds, salt):
    """fold_seed(seed_t, salt) for each of [T, 2] step seeds."""
    return tf.map_fn(lambda s: fold_seed(s, salt), seeds,
                     fn_output_signature=tf.TensorSpec([2], tf.int32))


def _each_step(draw, seeds, tensor):
    """``draw(seeds[t], tensor[:, t])`` for every step t, stacked back on axis 1: each step
    draws with one decoder step's shapes from its own seed, hence the same numbers."""
    out = tf.map_fn(lambda args: draw(*args), (seeds, tf.experimental.numpy.moveaxis(tensor, 1, 0)),
                    fn_output_signature=tensor.dtype)
    return tf.experimental.numpy.moveaxis(out, 0, 1)


def mixing_weights(logits, probs, mixing, temperature, seed):
    """The weights that mix the components: a_t itself (Eq. 25, ``"weighted"``) or Eq. (23)'s
    relaxed one-hot z_t ~ RelaxedOneHotCategorical(temperature, a_t) (``"gumbel"``).

    One step: ``logits``/``probs`` [B, N], ``seed`` the step's [2] seed; T steps at once:
    [B, T, N] and the [T, 2] :func:`step_seeds`."""
    if mixing != "gumbel":
        return probs
    if len(logits.shape) == 2:
        return relaxed_weights(logits, temperature, fold_seed(seed, GUMBEL_SALT))
    return _each_step(lambda s, x: relaxed_weights(x, temperature, s),
                      _fold_steps(seed, GUMBEL_SALT), logits)


def posterior_context(logits, memory, sigma_sq, seed, mixing="weighted", temperature=0.5,
                      sample=True, noise_scale=None, memory_state=None):
    """The context c_t of Eqs. (23)-(25) and the attention it came from: (c, a, log a).

    ``logits`` are masked scores (padding at a large negative value: zero weight), [B, N]
    for one decoder step with ``seed`` its :func:`step_seed`, or [B, T, N] for T query
    steps at once with ``seed`` the [T, 2] :func:`step_seeds`. ``sample`` False gives
    the posterior mean sum_i a_t^i h_i of Eq. (19), used for decoding. The ACVI variant's
    step and the Keras layer (:mod:`acvi_tf.layers`) both compute their context here.
    """
    log_probs = tf.nn.log_softmax(logits)
    probs = tf.exp(log_probs)
    if not sample:
        return _mix(probs, memory, memory_state, "memory"), probs, log_probs
    weights = mixing_weights(logits, probs, mixing, temperature, seed)
    noise_seed = (fold_seed(seed, NOISE_SALT) if len(logits.shape) == 2
                  else _fold_steps(seed, NOISE_SALT))
    context = sample_mixed_context(weights, memory, sigma_sq, noise_seed, noise_scale,
                                   memory_state)
    return context, probs, log_probs


def _mix(weights, value, memory_state, name):
    """sum_i w_i x_i for weights [B, N] (through :func:`weighted_sum`, whose gradient
    teacher forcing may sum after the loop) or [B, T, N] (one batched product)."""
    if len(weights.shape) == 3:
        return tf.einsum("btn,bnd->btd", tf.cast(weights, value.dtype), value)
    return weighted_sum(weights, value, memory_state, name)


def kl_mixture_mc(log_probs, terms, samples):
    """Monte-Carlo estimate of KL[p(c_t; D) || p(c_t)] (the KL term of Eq. 22).

    ``log_probs`` [B, T, N] (a_t of each step t), ``samples`` [B, T, K, D]: K
    draws c ~ p(c_t; D) per step (:func:`ancestral_sample`); returns [B, T].
    The prior p(c_t) is N(0, I) (Eq. 21), or N(h_bar, I) when ``terms`` carries
    a ``prior_mean``. The KL between a Gaussian mixture and a Gaussian has no
    closed form: average log p(c) - log p_prior(c) over the draws, with log p(c)
    the mixture density (:func:`mixture_log_prob`). The value is unbiased. Its
    gradient flows through the Gaussian samples and through the mixture weights
    inside log p(c), but not through the discrete component choice (that
    score-function term is omitted: tfp's implicit reparameterisation of the
    mixture costs a D x D Jacobian per step and does not compile under XLA).
    """
    shape = tf.shape(samples)
    b, t, k, d = shape[0], shape[1], shape[2], shape[3]
    flat = tf.reshape(samples, [b, t * k, d])
    repeated = tf.repeat(log_probs, k, axis=1)  # [B, T*K, N], step-major like ``flat``
    depth = tf.cast(d, samples.dtype)
    centred = flat if "prior_mean" not in terms else flat - terms["prior_mean"][:, None, :]
    log_prior = -0.5 * (tf.reduce_sum(tf.square(centred), axis=-1)
                        + depth * math.log(2.0 * math.pi))
    log_ratio = mixture_log_prob(repeated, terms, flat) - log_prior
    return tf.reduce_mean(tf.reshape(log_ratio, [b, t, k]), axis=-1)


def kl_penalty(kl_per_step, depth, free_bits=0.0, reduce="sum"):
    """The KL that enters the loss, per step: max(KL_t, free_bits), divided by D if "mean".

    Free bits (Kingma et al. 2016, "Improved variational inference with inverse
    autoregressive flow", Eq. 15) per example and decoder step: below
    ``free_bits`` nats the penalty is the constant ``free_bits`` (no gradient);
    above it the KL and its gradient are unchanged. ``reduce="mean"`` divides
    by the context dimension D (a per-dimension KL), i.e. a KL weight of 1/D.
    """
    penalty = kl_per_step
    if free_bits > 0:
        penalty = tf.maximum(penalty, tf.cast(free_bits, penalty.dtype))
    if reduce == "mean":
        penalty = penalty / tf.cast(depth, penalty.dtype)
    return penalty


def kl_mixture_bound(probs, component_kl):
    """The closed-form upper bound sum_i a_t^i KL(N(h_i, sigma_i^2) || N(0, I)).

    By joint convexity of the KL divergence it is never below the true KL.
    """
    return tf.reduce_sum(probs * component_kl, axis=-1)


def kl_per_step(log_probs, memory, terms, seed, kl_samples=1, kl_estimator="mc"):
    """Both estimates of Eq. (22)'s KL[p(c_t; D) || p(c_t)] at every step: (MC, bound), [B, T].

    ``log_probs`` [B, T, N] (log a_t of each step), ``terms`` from :func:`mixture_terms`,
    ``seed`` the run's (the draws use fold_seed(seed, STEP_SALT, KL_SALT)). The MC
    estimate averages ``kl_samples`` exact mixture draws per step
    (:func:`ancestral_sample`, :func:`kl_mixture_mc`); the bound is
    :func:`kl_mixture_bound`. Only the one ``kl_estimator`` names carries a gradient
    (the other is for logging). The ACVI variant's deferred aux terms and the Keras
    layer's KL loss both come from here.
    """
    shape = tf.shape(log_probs)
    draws = ancestral_sample(tf.repeat(log_probs, kl_samples, axis=1), memory,
                             terms["log_sigma_sq"], fold_seed(seed, STEP_SALT, KL_SALT))
    draws = tf.reshape(draws, [shape[0], shape[1], kl_samples, -1])  # K draws per step
    kl_bound = kl_mixture_bound(tf.exp(log_probs), terms["component_kl"][:, None, :])
    if kl_estimator == "mc":
        kl_mc = kl_mixture_mc(log_probs, terms, draws)
    else:  # logged only: no backward pass through it
        kl_mc = kl_mixture_mc(*tf.nest.map_structure(tf.stop_gradient,
                                                     (log_probs, terms, draws)))
    return kl_mc, kl_bound


def build_sigma_net(memory_dim, sigma_net="mlp", log_sigma_sq_init=None):
    """The network of Eq. (18), log sigma^2(h): ``"mlp"``, one hidden ReLU layer of size
    dim(h) (journal version), or ``"relu"``, ReLU(W h + b) (ICLR version). The last
    layer's bias starts at ``log_sigma_sq_init`` (None: Keras' zeros, sigma ~ 1)."""
    bias = ("zeros" if log_sigma_sq_init is None
            else keras.initializers.Constant(float(log_sigma_sq_init)))
    if sigma_net == "mlp":
        return keras.Sequential([
            keras.layers.Dense(memory_dim, activation="relu", name="hidden"),
            keras.layers.Dense(memory_dim, bias_initializer=bias, name="log_sigma_sq")],
            name="sigma_mlp")
    return keras.layers.Dense(memory_dim, activation="relu", bias_initializer=bias,
                              name="log_sigma_sq")


def posterior_terms(log_sigma_sq_net, memory, mask, prior="standard"):
    """Per-source work of the posterior, once per source: log sigma^2(h_i) (Eq. 18,
    floored at :data:`LOG_SIGMA_SQ_FLOOR`) and the mixture's terms (:func:`mixture_terms`)
    against the prior N(0, I) (Eq. 21) or, with ``prior="mean_encoder"``, N(h_bar, I)
    with h_bar the mean of the real (``mask``) positions."""
    prior_mean = ops.masked_mean(memory, mask) if prior == "mean_encoder" else None
    log_sigma_sq = floor_log_sigma_sq(to_float32(log_sigma_sq_net(memory)))
    return mixture_terms(memory, log_sigma_sq, prior_mean)


def check_options(sigma_net="mlp", mixing="weighted", temperature=0.5, kl_estimator="mc",
                  kl_samples=1, kl_weight=1.0, log_sigma_sq_init=None, kl_reduce="sum",
                  kl_free_bits=0.0, prior="standard", prefix="acvi ", samples_name="kl_samples"):
    """ValueError naming the option for a value out of range (ACVI's and the layer's)."""
    _check("sigma_net", sigma_net, SIGMA_NETS, prefix)
    _check("mixing", mixing, MIXING_MODES, prefix)
    _check("kl_estimator", kl_estimator, KL_ESTIMATORS, prefix)
    _check("kl_reduce", kl_reduce, KL_REDUCTIONS, prefix)
    _check("prior", prior, PRIORS, prefix)
    _check_number("temperature", temperature, low=0.0, strict=True, prefix=prefix)
    _check_number("kl_weight", kl_weight, low=0.0, prefix=prefix)
    _check_number("kl_free_bits", kl_free_bits, low=0.0, prefix=prefix)
    _check_number(samples_name, kl_samples, low=1, integer=True, prefix=prefix)
    if log_sigma_sq_init is not None:
        _check_number("log_sigma_sq_init", log_sigma_sq_init, low=-30.0, high=30.0,
                      prefix=prefix)


@register_attention("acvi")
class ACVI(ContextVariant):
    """ACVI context variant (Eqs. 17-25).

    Args:
      memory_dim: dim(h_i).
      sigma_net: ``"mlp"``: log sigma^2 = MLP(h) with one hidden ReLU layer of size
        dim(h) (Eq. 18, journal version); ``"relu"``: log sigma^2 = ReLU(W h + b)
        (ICLR version; sigma >= 1 always).
      mixing: ``"weighted"`` (Eq. 25) or ``"gumbel"`` (Eq. 23). The trainer's
        schedule may override it with ``set_mode(acvi_mixing=...)``.
      temperature: Gumbel-Softmax temperature (0.5 in the paper; > 0).
      kl_estimator: which KL enters the loss: ``"mc"`` (Monte Carlo with the
        mixture density) or ``"bound"`` (closed-form upper bound). Both are logged.
      kl_samples: Monte-Carlo samples for the KL estimate.
      sample_at_decode: at decode time draw c_t instead of using the posterior
        mean sum_i a_t^i h_i.
      kl_weight: the weight of sum_t KL in the loss (1 gives the ELBO).
      log_sigma_sq_init: the initial bias of the last log sigma^2 layer, so that
        sigma ~ exp(init / 2) at step 0 (None: Keras' zero bias, sigma ~ 1). With
        ``sigma_net="relu"`` the ReLU floors log sigma^2 at 0 whatever the bias.
      kl_reduce: ``"sum"`` (the KL of the D-dim context, Eq. 22) or ``"mean"``
        (divided by D) for the penalised ``kl``; the logged ``kl_mc`` and
        ``kl_bound`` are always the KL in nats.
      kl_free_bits: nats per decoder step below which the KL is not penalised
        (:func:`kl_penalty`; 0: off).
      prior: ``"standard"``: N(0, I) (Eq. 21); ``"mean_encoder"``: N(h_bar, I),
        h_bar the mean of the real encoder states (Bahuleyan et al. 2018).
    """

    aux_loss_names = ("kl", "kl_mc", "kl_bound")
    kl_names = aux_loss_names  # all three estimate KL[p(c_t; D) || N(0, I)]; "kl" is weighted
    # Only the reparameterised context feeds the next decoder step; the KL terms are
    # computed after teacher forcing, for all steps at once (see deferred_aux).
    deferred_names = ("log_probs",)
    deferred_aux_names = aux_loss_names

    def __init__(self, memory_dim, sigma_net="mlp", mixing="weighted", temperature=0.5,
                 kl_estimator="mc", kl_samples=1, sample_at_decode=False, kl_weight=1.0,
                 log_sigma_sq_init=None, kl_reduce="sum", kl_free_bits=0.0, prior="standard",
                 **kwargs):
        super().__init__(memory_dim, **kwargs)
        check_options(sigma_net, mixing, temperature, kl_estimator, kl_samples, kl_weight,
                      log_sigma_sq_init, kl_reduce, kl_free_bits, prior)
        self.sigma_net = sigma_net
        self.mixing = mixing
        self.default_mixing = mixing
        self.temperature = float(temperature)
        self.kl_estimator = kl_estimator
        self.kl_samples = int(kl_samples)
        self.sample_at_decode = bool(sample_at_decode)
        self.kl_weight = float(kl_weight)
        self.log_sigma_sq_init = None if log_sigma_sq_init is None else float(log_sigma_sq_init)
        self.kl_reduce = kl_reduce
        self.kl_free_bits = float(kl_free_bits)
        self.prior = prior
        self.log_sigma_sq_net = build_sigma_net(memory_dim, sigma_net, self.log_sigma_sq_init)

    def loss_weights(self):
        return {"kl": self.kl_weight}

    modes = ("acvi_mixing",)

    def set_mode(self, acvi_mixing=None, **unused):
        self.mixing = acvi_mixing or self.default_mixing
        _check("acvi_mixing", self.mixing, MIXING_MODES)

    def prepare(self, memory, mask, training=False, targets=None):
        """log sigma^2(h_i) (Eq. 18, floored at :data:`LOG_SIGMA_SQ_FLOOR`) and the
        mixture's per-source terms, once per source."""
        return posterior_terms(self.log_sigma_sq_net, memory, mask, self.prior)

    def step(self, scores, memory_state, state, training=False):
        memory, mask = memory_state["memory"], memory_state["mask"]
        terms = memory_state["variant"]
        # One implementation with the Keras layer: posterior_context (Eqs. 19, 23-25).
        context, probs, log_probs = posterior_context(
            masked_logits(scores, mask), memory, terms["sigma_sq"],
            step_seed(memory_state["seed"], state["time"]), self.mixing, self.temperature,
            sample=training or self.sample_at_decode,
            noise_scale=memory_state.get("noise_scale"), memory_state=memory_state)
        aux = {"log_probs": log_probs}
        return context, probs, aux, state.get("variant", {})

    def loop_invariants(self, memory_state):
        return {**super().loop_invariants(memory_state),
                "sigma_sq": (WEIGHTED_SUM, memory_state["variant"]["sigma_sq"])}

    def deferred_aux(self, per_step, memory_state, step_mask):
        """Sum over valid steps of the MC KL and of the closed-form bound (both logged, in
        nats); ``kl``, the penalised one, is the one ``kl_estimator`` names after
        :func:`kl_penalty` (free bits, ``kl_reduce``)."""
        kl_mc, kl_bound = kl_per_step(per_step["log_probs"], memory_state["memory"],
                                      memory_state["variant"], memory_state["seed"],
                                      self.kl_samples, self.kl_estimator)
        chosen = kl_mc if self.kl_estimator == "mc" else kl_bound
        penalty = kl_penalty(chosen, self.memory_dim, self.kl_free_bits, self.kl_reduce)
        return {"kl_mc": tf.reduce_sum(kl_mc * step_mask, axis=1),
                "kl_bound": tf.reduce_sum(kl_bound * step_mask, axis=1),
                "kl": tf.reduce_sum(penalty * step_mask, axis=1)}

    def diagnostics(self, memory_state):
        """Per-source-position values averaged by the run diagnostics: the mean sigma
        over the D dimensions of each component, [B, N]."""
        return {"sigma_mean": tf.reduce_mean(
            tf.exp(0.5 * memory_state["variant"]["log_sigma_sq"]), axis=-1)}

    def get_config(self):
        return {**super().get_config(), "sigma_net": self.sigma_net,
                "mixing": self.default_mixing, "temperature": self.temperature,
                "kl_estimator": self.kl_estimator, "kl_samples": self.kl_samples,
                "sample_at_decode": self.sample_at_decode, "kl_weight": self.kl_weight,
                "log_sigma_sq_init": self.log_sigma_sq_init, "kl_reduce": self.kl_reduce,
                "kl_free_bits": self.kl_free_bits, "prior": self.prior}


def _check(flag, value, choices, prefix="acvi "):
    if value not in choices:
        raise ValueError(f"{prefix}{flag}={value!r}: choose one of {', '.join(choices)}")


def _check_number(flag, value, low=None, high=None, strict=False, integer=False,
                  prefix="acvi "):
    """Option values are checked when the variant is built, before anything is written."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and integer:
        ok = float(value).is_integer()
    if ok and low is not None:
        ok = value > low if strict else value >= low
    if ok and high is not None:
        ok = value <= high
    if not ok:
        bound = []
        if low is not None:
            bound.append(f"{'>' if strict else '>='} {low}")
        if high is not None:
            bound.append(f"<= {high}")
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{prefix}{flag}={value!r}: must be {kind} {' and '.join(bound)}".rstrip())
