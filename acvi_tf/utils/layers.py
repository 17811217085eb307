"""A Keras layer made of sub-layers that build themselves, without Keras' symbolic trace."""

import keras


class CompositeLayer(keras.layers.Layer):
    """A layer whose state is its sub-layers (and weights made in ``__init__``), each of
    which builds itself on its first call.

    Keras builds a layer that has no ``build`` of its own and holds unbuilt sub-layers by
    first tracing its whole ``call`` on symbolic inputs (``backend.compute_output_spec``,
    in a scratch graph) and only then running the real call. For the encoder that is one
    more trace of both BiLSTM scans every time a model is built: 0.16 CPU-s per model at
    the tests' sizes, 14% of ``tests/models/test_seq2seq.py``. Marked built from the
    start, the layer goes straight to its call and the sub-layers build there, on the same
    inputs that trace would have given them: the same variables, names and checkpoint
    entries. The Transformer's layers, whose sub-layers build in ``__init__`` (their sizes
    are known), are composite layers too.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.built = True
