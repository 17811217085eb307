"""Context-inference variants, registered by name.

``ATTENTION.names()`` is the single list of ``--attention=`` choices. A new
variant is one module that subclasses :class:`ContextVariant` and decorates it
with ``@register_attention("name")``; import it here so it registers.
"""

from acvi_tf.attention.base import ATTENTION, ContextVariant, register_attention  # noqa: F401
from acvi_tf.attention.scores import SCORES  # noqa: F401
from acvi_tf.attention import soft  # noqa: F401  (registers "soft")
from acvi_tf.attention import acvi  # noqa: F401  (registers "acvi")
from acvi_tf.attention import structured  # noqa: F401  (registers "structured")
from acvi_tf.attention import gaussian  # noqa: F401  (registers "gaussian")
from acvi_tf.attention import variational  # noqa: F401  (registers "variational")
from acvi_tf.attention import none  # noqa: F401  (registers "none", the no-attention floor)


def get_attention(name):
    return ATTENTION.get(name)


def available():
    return ATTENTION.names()
