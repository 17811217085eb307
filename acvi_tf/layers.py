"""ACVI as a drop-in Keras attention layer: ``ACVIAttention`` (issue 37).

Called like ``keras.layers.Attention``, ``layer([query, value], mask=[query_mask,
value_mask])``, it scores every value position for every query step with Luong's
multiplicative score (Eq. 10, :class:`~acvi_tf.attention.scores.MultiplicativeScore`),
forms ACVI's Gaussian-mixture posterior over the context (Eqs. 17-19) and returns a
reparameterised sample of it in training (Eqs. 23-25), the posterior mean at inference.
Its KL term (Eq. 22) goes to the model's losses with ``add_loss``, so ``model.fit`` with
an ordinary likelihood loss trains the negative ELBO.

The math is the project's ACVI context variant's, not a copy: the posterior's terms, the
sampled context and both KL estimates come from the functions of
:mod:`acvi_tf.attention.acvi` that the variant calls (``posterior_terms``,
``posterior_context``, ``kl_per_step``, ``kl_penalty``). With the same seed, query step t
draws what the variant's decoder step t draws (``step_seeds``), so the two give the same
context, KL and gradients (tested).
"""

import keras
import tensorflow as tf

from acvi_tf.attention import acvi as acvi_math
from acvi_tf.attention.scores import MultiplicativeScore
from acvi_tf.utils.ops import masked_logits
from acvi_tf.utils.precision import to_float32

NAME = "ACVIAttention"


@keras.saving.register_keras_serializable(package="acvi_tf")
class ACVIAttention(keras.layers.Layer):
    """ACVI attention (Eqs. 17-25): a sampled context vector per query step.

    Inputs ``[query, value]``, query [B, T, Dq] (e.g. decoder states), value [B, N, D]
    (encoder states h_i, the means of the mixture's components). Returns the context
    [B, T, D], and the attention weights a_t [B, T, N] too with
    ``return_attention_scores=True``.

    Args:
      kl_weight: weight of the KL term in the loss (1: the ELBO). The term added with
        ``add_loss`` is kl_weight times the KL per real query step (the mean over the
        unmasked steps), which next to a per-token likelihood loss gives the project's
        loss, the negative ELBO per target token.
      num_samples: K, the mixture draws per query step of the Monte-Carlo KL (the
        variant's ``kl_samples``). The context is one reparameterised draw per call.
      mixing: ``"weighted"`` (Eq. 25) or ``"gumbel"`` (Eq. 23, Gumbel-Softmax weights).
      temperature: the Gumbel-Softmax temperature (0.5 in the paper; > 0).
      kl_estimator: ``"mc"`` (Monte Carlo with the mixture density) or ``"bound"``
        (sum_i a_t^i KL(N(h_i, sigma_i^2) || N(0, I)), an upper bound).
      sigma_net: ``"mlp"`` (Eq. 18: one hidden ReLU layer of size D) or ``"relu"``
        (log sigma^2 = ReLU(W h + b), the ICLR version).
      log_sigma_sq_init: initial bias of the last log sigma^2 layer (None: zeros).
      kl_reduce: ``"sum"`` (the KL of the D-dim context) or ``"mean"`` (divided by D).
      kl_free_bits: nats per query step below which the KL is not penalised.
      prior: ``"standard"`` N(0, I) (Eq. 21) or ``"mean_encoder"`` N(h_bar, I), h_bar the
        mean of the unmasked values.
      sample_at_decode: sample the context at inference too (default: the posterior
        mean sum_i a_t^i h_i, deterministic).
      seed: int seed of the layer's draws (``keras.random.SeedGenerator``: fresh noise
        at every training step, reproducible from the seed).

    Call arguments: ``mask=[query_mask, value_mask]`` (bool [B, T] and [B, N], either
    may be None; Keras passes them from masking layers): padded value positions get
    zero attention weight, padded query steps add no KL. ``seed`` (an int or [2] ints)
    samples with exactly that seed, in training or at inference.
    """

    def __init__(self, kl_weight=1.0, num_samples=1, mixing="weighted", temperature=0.5,
                 kl_estimator="mc", sigma_net="mlp", log_sigma_sq_init=None, kl_reduce="sum",
                 kl_free_bits=0.0, prior="standard", sample_at_decode=False, seed=None,
                 **kwargs):
        super().__init__(**kwargs)
        acvi_math.check_options(sigma_net, mixing, temperature, kl_estimator, num_samples,
                                kl_weight, log_sigma_sq_init, kl_reduce, kl_free_bits, prior,
                                prefix=f"{NAME} ", samples_name="num_samples")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"{NAME} seed={seed!r}: must be an int or None")
        self.kl_weight = float(kl_weight)
        self.num_samples = int(num_samples)
        self.mixing = mixing
        self.temperature = float(temperature)
        self.kl_estimator = kl_estimator
        self.sigma_net = sigma_net
        self.log_sigma_sq_init = None if log_sigma_sq_init is None else float(log_sigma_sq_init)
        self.kl_reduce = kl_reduce
        self.kl_free_bits = float(kl_free_bits)
        self.prior = prior
        self.sample_at_decode = bool(sample_at_decode)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        # The KL per real query step in nats (the estimator's, before kl_weight), logged
        # by model.fit as <layer name>_kl.
        self.kl_tracker = keras.metrics.Mean(name=f"{self.name}_kl")
        self.supports_masking = True

    # -- shapes ----------------------------------------------------------------------------

    def build(self, input_shape):
        query_shape, value_shape = _pair(input_shape, "inputs")
        _check_ranks(query_shape, value_shape)
        self.query_dim, self.value_dim = int(query_shape[-1]), int(value_shape[-1])
        # Eq. (10): e_t^i = h_i^T W s_t, W maps a value to the query's size.
        self.score = MultiplicativeScore(self.query_dim, name="score")
        self.score.W.build(tuple(value_shape))
        self.log_sigma_sq_net = acvi_math.build_sigma_net(self.value_dim, self.sigma_net,
                                                          self.log_sigma_sq_init)
        self.log_sigma_sq_net.build(tuple(value_shape))
        self.built = True

    def compute_output_spec(self, inputs, mask=None, training=None,
                            return_attention_scores=False, seed=None):
        query, value = _pair(inputs, "inputs")
        self._check_shapes(query.shape, value.shape, *_masks(mask))
        context = keras.KerasTensor(tuple(query.shape[:2]) + (value.shape[-1],), "float32")
        if not return_attention_scores:
            return context
        return context, keras.KerasTensor(tuple(query.shape[:2]) + (value.shape[1],),
                                          "float32")

    def compute_mask(self, inputs, mask=None):
        """The context of a padded query step is padding too (as keras.layers.Attention)."""
        return _masks(mask)[0]

    # -- the forward pass ---------------------------------------------------------------------

    def call(self, inputs, mask=None, training=None, return_attention_scores=False, seed=None):
        # tf.identity: the sigma-network is no masking layer, and a value carrying Keras'
        # mask would make it warn that it drops the mask (the mask arrives as value_mask).
        query, value = (tf.identity(to_float32(x)) for x in _pair(inputs, "inputs"))
        query_mask, value_mask = _masks(mask)
        self._check_shapes(query.shape, value.shape, query_mask, value_mask)
        if value_mask is None:
            value_mask = tf.ones(tf.shape(value)[:2], tf.bool)
        value_mask = tf.cast(value_mask, tf.bool)

        logits = masked_logits(self.scores(query, value), value_mask[:, None, :])
        terms = acvi_math.posterior_terms(self.log_sigma_sq_net, value, value_mask, self.prior)
        sample = seed is not None or bool(training) or self.sample_at_decode
        call_seed = self._call_seed(seed, sample)
        seeds = acvi_math.step_seeds(call_seed, tf.shape(query)[1]) if sample else None
        context, probs, log_probs = acvi_math.posterior_context(
            logits, value, terms["sigma_sq"], seeds, self.mixing, self.temperature, sample)
        self._add_kl(log_probs, value, terms, call_seed, query_mask)
        return (context, probs) if return_attention_scores else context

    def scores(self, query, value):
        """e_t^i = h_i^T W s_t (Eq. 10) for every query step t and value i: [B, T, N]."""
        # float32 keys: under a mixed dtype policy W computes in half precision, and the
        # scores feed the softmax and the mixture, which stay float32 (utils/precision.py).
        return tf.einsum("btq,bnq->btn", query, to_float32(self.score.precompute(value)))

    def _call_seed(self, seed, sample):
        """The stateless seed of this call's draws: the caller's, a fresh one from the
        seed generator when sampling, else a fixed one (the inference KL's draws are then
        the same at every call)."""
        if seed is not None:
            return tf.cast(seed, tf.int32)
        if sample:
            return tf.cast(self.seed_generator.next(), tf.int32)
        return tf.constant([self.seed or 0, 0], tf.int32)

    def _add_kl(self, log_probs, value, terms, seed, query_mask):
        """Eq. (22)'s KL, averaged over the real query steps, times kl_weight, to the loss."""
        kl_mc, kl_bound = acvi_math.kl_per_step(log_probs, value, terms, seed,
                                                self.num_samples, self.kl_estimator)
        chosen = kl_mc if self.kl_estimator == "mc" else kl_bound
        penalty = acvi_math.kl_penalty(chosen, self.value_dim, self.kl_free_bits,
                                       self.kl_reduce)
        steps = (tf.ones_like(penalty) if query_mask is None
                 else tf.cast(query_mask, penalty.dtype))
        count = tf.maximum(tf.reduce_sum(steps), 1.0)
        self.add_loss(self.kl_weight * tf.reduce_sum(penalty * steps) / count)
        self.kl_tracker.update_state(tf.reduce_sum(chosen * steps) / count)

    # -- checks -------------------------------------------------------------------------------

    def _check_shapes(self, query_shape, value_shape, query_mask=None, value_mask=None):
        """A ValueError naming the argument for a rank, size or mask-shape mismatch (the
        static shapes; dimensions unknown until run time are not checked here)."""
        _check_ranks(query_shape, value_shape)
        if self.built and query_shape[-1] is not None and query_shape[-1] != self.query_dim:
            raise ValueError(f"{NAME}: query's last dimension is {query_shape[-1]}, but the "
                             f"layer was built for {self.query_dim}")
        if self.built and value_shape[-1] is not None and value_shape[-1] != self.value_dim:
            raise ValueError(f"{NAME}: value's last dimension is {value_shape[-1]}, but the "
                             f"layer was built for {self.value_dim}")
        if not _same(query_shape[0], value_shape[0]):
            raise ValueError(f"{NAME}: query and value have batch sizes {query_shape[0]} and "
                             f"{value_shape[0]}")
        _check_mask("query_mask", query_mask, query_shape, "query", "[B, T]")
        _check_mask("value_mask", value_mask, value_shape, "value", "[B, N]")

    def get_config(self):
        return {**super().get_config(), "kl_weight": self.kl_weight,
                "num_samples": self.num_samples, "mixing": self.mixing,
                "temperature": self.temperature, "kl_estimator": self.kl_estimator,
                "sigma_net": self.sigma_net, "log_sigma_sq_init": self.log_sigma_sq_init,
                "kl_reduce": self.kl_reduce, "kl_free_bits": self.kl_free_bits,
                "prior": self.prior, "sample_at_decode": self.sample_at_decode,
                "seed": self.seed}


def _pair(inputs, name):
    """``[query, value]`` (or their shapes) from a list or tuple of two."""
    if not isinstance(inputs, (list, tuple)) or len(inputs) != 2:
        raise ValueError(f"{NAME}: {name} must be [query, value], got {inputs!r}")
    return inputs


def _masks(mask):
    """(query_mask, value_mask) from ``mask`` = None or [query_mask, value_mask]."""
    if mask is None:
        return None, None
    if not isinstance(mask, (list, tuple)) or len(mask) != 2:
        raise ValueError(f"{NAME}: mask must be [query_mask, value_mask] (either may be "
                         f"None), got {mask!r}")
    return tuple(mask)


def _check_ranks(query_shape, value_shape):
    for name, shape, layout in (("query", query_shape, "[B, T, Dq]"),
                                ("value", value_shape, "[B, N, D]")):
        if len(shape) != 3:
            raise ValueError(f"{NAME}: {name} must have rank 3, {layout}; got shape "
                             f"{tuple(shape)}")
        if shape[-1] is None:
            raise ValueError(f"{NAME}: {name}'s last dimension must be known; got shape "
                             f"{tuple(shape)}")


def _check_mask(name, mask, shape, of, layout):
    if mask is None:
        return
    mask_shape = tuple(mask.shape)
    if len(mask_shape) != 2 or not all(_same(a, b) for a, b in zip(mask_shape, shape[:2])):
        raise ValueError(f"{NAME}: {name} must have {of}'s first two dimensions, {layout} = "
                         f"{tuple(shape[:2])}; got shape {mask_shape}")


def _same(a, b):
    """Equal static sizes, or at least one unknown."""
    return a is None or b is None or a == b
