"""Latent variables outside attention, registered by name (``ModelConfig.latent``).

A new latent is one module that subclasses :class:`Latent` and decorates it with
``@register_latent("name")``; import it here so it registers.
"""

from acvi_tf.latent.base import LATENTS, Latent, register_latent  # noqa: F401
from acvi_tf.latent import ved  # noqa: F401  (registers "ved")
from acvi_tf.latent import vrnmt  # noqa: F401  (registers "vrnmt")


def get_latent(name):
    return LATENTS.get(name)


def available():
    return LATENTS.names()
