"""VRNMT's per-step latents: Su, Wu, Xiong, Lu, Han and Zhang, "Variational Recurrent
Neural Machine Translation", AAAI 2018 (Section 3, Eqs. 12-26), as a latent of the
seq2seq machine.

At every decoder step j a latent z_j, inferred after the attention from
y_{j-1} (the embedded previous word), s_j (the decoder state) and c_j (the context):

    posterior (Eqs. 13-16)  q(z_j | x, y_<=j) = N(mu_j, sigma_j^2 I),
        h_zj = g(W_z^phi [y_{j-1}; s_j; c_j; y_j] + b_z^phi),
        mu_j = W_mu^phi h_zj + b_mu^phi,   log sigma_j^2 = W_sigma^phi h_zj + b_sigma^phi;
    prior (Eqs. 17-20)      p(z_j | x, y_<j) = N(mu'_j, sigma'_j^2 I), the same shape
        without y_j and with its own parameters (theta).

y_j is the reference word at step j (``targets[:, j]``, embedded with the decoder's own
target embedding), so the posterior exists only under teacher forcing.

z_j reaches the output layer (Eq. 21: the head sees [s_j; z_j] with c_j) and the next
decoder state (Eqs. 22-25: z_j joins the input [y_j; c_j; z_j] of step j + 1, whose
recurrent cell, the GRU of the paper with ``--decoder_cell=gru`` or an LSTM, turns it
into s_{j+1}); z_0 = 0.

Training (Eq. 26) draws the reparameterised z_j = mu_j + sigma_j * eps from q (L = 1;
``ModelConfig.num_samples`` averages more) and adds kl_weight * sum_j KL(q_j || p_j),
closed form between two diagonal Gaussians, as the per-step aux ``kl_z``. Decoding has
no reference: z_j = mu'_j, the prior mean, "as implemented in Zhang et al. 2016"
(``sample_at_decode=True`` draws from the prior instead). Teacher forcing outside
training (the dev loss) uses the posterior mean (``eval_z="posterior"``, so the dev
objective is the ELBO's) or the prior mean (``eval_z="prior"``: the forced NLL is then
the decoder's own likelihood of the reference, the one beam search scores).
"""

import keras
import tensorflow as tf

from acvi_tf.latent.base import Latent, register_latent
from acvi_tf.utils import ops
from acvi_tf.utils.layers import CompositeLayer
from acvi_tf.utils.precision import to_float32

EVAL_Z = ("posterior", "prior")


diagonal_gaussian_kl = ops.gaussian_kl  # the per-step KL(q_j || p_j) of Eq. (26)


class GaussianNet(CompositeLayer):
    """h = g(W [features] + b); mu = W_mu h + b_mu; log sigma^2 = W_sigma h + b_sigma.

    The posterior's Eqs. (14)-(16) or the prior's Eqs. (18)-(20), by what it is fed.
    """

    def __init__(self, latent_dim, hidden_units, activation="tanh", **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(hidden_units, activation=activation, name="h_z")
        self.mean = keras.layers.Dense(latent_dim, name="mu")
        self.log_var = keras.layers.Dense(latent_dim, name="log_sigma_sq")

    def call(self, features):
        h = self.hidden(tf.concat(features, axis=-1))
        return to_float32(self.mean(h)), to_float32(self.log_var(h))  # the KL is float32


@register_latent("vrnmt")
class RecurrentLatent(Latent):
    """VRNMT's z_j, one per decoder step (see the module docstring).

    Args:
      latent_dim: d_z, dim(z_j) (the paper: 2000 with 1000 hidden units).
      hidden_units: d'_e, the size of h_zj and h'_zj (None: latent_dim, as the paper's
        d'_e = d_z).
      activation: g of Eqs. (14) and (18) (the paper leaves it unnamed; tanh as VNMT).
      kl_weight: the weight of sum_j KL(q(z_j) || p(z_j)) (1 gives Eq. 26's bound).
      sample_at_decode: draw z_j from the prior at decode time instead of its mean.
      eval_z: ``"posterior"`` or ``"prior"``: whose mean gives z_j in teacher forcing
        outside training.

    Aux losses: ``kl_z`` [B] per step (only when the reference is given).
    """

    step_aux_names = ("kl_z",)
    kl_names = ("kl_z",)  # annealed with the other KL terms (the trainer's KL annealing)

    def __init__(self, latent_dim=100, hidden_units=None, activation="tanh", kl_weight=1.0,
                 sample_at_decode=False, eval_z="posterior", **kwargs):
        super().__init__(**kwargs)
        if eval_z not in EVAL_Z:
            raise ValueError(f"vrnmt eval_z={eval_z!r}: choose one of {', '.join(EVAL_Z)}")
        self.latent_dim = int(latent_dim)
        self.hidden_units = int(hidden_units or latent_dim)
        self.activation = activation
        self.kl_weight = float(kl_weight)
        self.sample_at_decode = bool(sample_at_decode)
        self.eval_z = eval_z
        self.posterior_net = GaussianNet(self.latent_dim, self.hidden_units, activation,
                                         name="posterior")  # phi, Eqs. (14)-(16)
        self.prior_net = GaussianNet(self.latent_dim, self.hidden_units, activation,
                                     name="prior")  # theta, Eqs. (18)-(20)

    def loss_weights(self):
        return {"kl_z": self.kl_weight}

    def prepare(self, memory, mask, finals, seed, training=False, targets=None):
        """Keeps the reference (teacher forcing only) for the posterior's y_j."""
        return {"aux": {}, **({"targets": targets} if targets is not None else {})}

    def initial_state(self, batch_size):
        return {"z": tf.zeros([batch_size, self.latent_dim])}  # z_0 = 0

    def posterior(self, y_prev, s, context, y):
        """(mu_j, log sigma_j^2) of q(z_j | x, y_<=j), Eqs. (14)-(16)."""
        return self.posterior_net([y_prev, s, context, y])

    def prior(self, y_prev, s, context):
        """(mu'_j, log sigma'_j^2) of p(z_j | x, y_<j), Eqs. (18)-(20)."""
        return self.prior_net([y_prev, s, context])

    def step(self, latent_memory, latent_state, decoder, training=False):
        """z_{j-1} joins the recurrent input that makes s_j (Eqs. 22-25)."""
        return latent_state["z"], None, {}, latent_state

    def after_attention(self, latent_memory, latent_state, decoder, training=False):
        """z_j from q (training), or a mean; ``kl_z`` when the reference is given."""
        y_prev, s, context = decoder["input"], decoder["s"], decoder["context"]
        mean, log_var = self.prior(y_prev, s, context)
        sample, aux = self.sample_at_decode, {}
        targets = latent_memory.get("targets")
        if targets is not None:
            y = decoder["embed"](targets[:, decoder["time"]])
            q_mean, q_log_var = self.posterior(y_prev, s, context, y)
            aux["kl_z"] = diagonal_gaussian_kl(q_mean, q_log_var, mean, log_var)
            if training or self.eval_z == "posterior":
                mean, log_var, sample = q_mean, q_log_var, training
        z = mean
        if sample:  # the reparameterisation z = mu + sigma * eps
            eps = ops.stateless_normal(tf.shape(mean), decoder["seed"], mean.dtype)
            z = mean + tf.exp(0.5 * log_var) * eps
        return z, aux, {"z": z}  # z_j to the head (Eq. 21) and to step j + 1

    def get_config(self):
        return {**super().get_config(), "latent_dim": self.latent_dim,
                "hidden_units": self.hidden_units, "activation": self.activation,
                "kl_weight": self.kl_weight, "sample_at_decode": self.sample_at_decode,
                "eval_z": self.eval_z}
