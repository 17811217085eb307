"""The variational encoder-decoder's sentence latent: Bahuleyan, Mou, Vechtomova and
Poupart, "Variational Attention for Sequence-to-Sequence Models", COLING 2018 (the
"Variational Encoder-Decoder" slides of 004_*), as the ACVI paper's VED baseline
(ICLR version, Section 3: a N(0, I) prior, a diagonal Gaussian posterior from dense
layers on the final BiLSTM state, 100-dimensional latents in the MT experiments).

    q(z | x) = N(mu, diag sigma^2),  mu = W_mu h_N + b_mu,  log sigma^2 = W_s h_N + b_s,

with h_N the encoder's last-layer final state [forward; backward]. Training draws the
reparameterised z = mu + sigma * eps (stateless seed); decoding and evaluation use
z = mu (the MAP setting of their Table 2). The objective adds lambda_KL * KL(q(z) || N(0, I))
(the regularisation term of the slides' Eqs. 6-7, closed form), aux ``kl_z`` with weight
``kl_weight``, once per sentence.

z reaches the decoder at every step: concatenated to the LSTM input
[embedding(y_{t-1}); c_{t-1}; z] (``feed="input"``, the authors' code), to the head's
s_t so it enters the softmax layer (``feed="output"``, as the ACVI paper describes the
baseline), or both.
"""

import keras
import tensorflow as tf

from acvi_tf.attention.gaussian import gaussian_kl
from acvi_tf.latent.base import Latent, register_latent
from acvi_tf.utils.ops import fold_seed, stateless_normal
from acvi_tf.utils.precision import to_float32

FEEDS = ("input", "output", "both")


@register_latent("ved")
class SentenceLatent(Latent):
    """VED's sentence latent z ~ q(z | x).

    Args:
      latent_dim: dim(z).
      kl_weight: lambda_KL, the weight of KL(q(z|x) || N(0, I)).
      feed: ``"input"``, ``"output"`` or ``"both"`` (see the module docstring).
      sample_at_decode: draw z at decode time instead of using the mean.
    """

    sequence_aux_names = ("kl_z",)
    kl_names = ("kl_z",)

    def __init__(self, latent_dim=100, kl_weight=1.0, feed="input", sample_at_decode=False,
                 **kwargs):
        super().__init__(**kwargs)
        if feed not in FEEDS:
            raise ValueError(f"ved feed={feed!r}: choose one of {', '.join(FEEDS)}")
        self.latent_dim = int(latent_dim)
        self.kl_weight = float(kl_weight)
        self.feed = feed
        self.sample_at_decode = bool(sample_at_decode)
        self.mean_layer = keras.layers.Dense(self.latent_dim, name="mu")
        self.log_var_layer = keras.layers.Dense(self.latent_dim, name="log_sigma_sq")

    def loss_weights(self):
        return {"kl_z": self.kl_weight}

    def posterior(self, finals):
        """(mu, log sigma^2), [B, k] each, from the last encoder layer's final h."""
        h = finals[-1][0]
        return to_float32(self.mean_layer(h)), to_float32(self.log_var_layer(h))

    def prepare(self, memory, mask, finals, seed, training=False, targets=None):
        mean, log_var = self.posterior(finals)
        if training or self.sample_at_decode:
            eps = stateless_normal(tf.shape(mean), fold_seed(seed, 211), mean.dtype)
            z = mean + tf.exp(0.5 * log_var) * eps
        else:
            z = mean
        return {"z": z, "aux": {"kl_z": gaussian_kl(mean, log_var)}}

    def step(self, latent_memory, latent_state, decoder, training=False):
        z = latent_memory["z"]
        to_input = z if self.feed in ("input", "both") else None
        to_output = z if self.feed in ("output", "both") else None
        return to_input, to_output, {}, latent_state

    def get_config(self):
        return {**super().get_config(), "latent_dim": self.latent_dim,
                "kl_weight": self.kl_weight, "feed": self.feed,
                "sample_at_decode": self.sample_at_decode}
