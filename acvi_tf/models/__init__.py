"""Encoder, decoder (one step() for training and decoding), output heads, the seq2seq model.

``MODELS`` maps ``ModelConfig.model`` to a model class: "seq2seq" (the attentional
LSTM machine) and "transformer" (the Transformer baseline). The model modules
are imported on first use, so importing this package stays cheap.
"""

from acvi_tf.registry import Registry


def _register_all():
    # Registered here, not by decorators in the model modules: they would import this
    # package back (an import circle).
    if "seq2seq" not in MODELS:
        from acvi_tf.models import seq2seq, transformer
        MODELS.register("seq2seq")(seq2seq.Seq2Seq)
        MODELS.register("transformer")(transformer.Transformer)


MODELS = Registry("model", load=_register_all)


def model_names():
    """The ``--model`` choices."""
    _register_all()
    return MODELS.names()


def build_model(config):
    """The model class ``config.model`` names, built from ``config`` (a ModelConfig)."""
    _register_all()
    return MODELS.get(config.model)(config)
