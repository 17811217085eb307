"""CompositeLayer: building a model never traces a layer's call symbolically."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras.src import backend as keras_backend

from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from acvi_tf.utils.layers import CompositeLayer


@pytest.mark.parametrize("parts", [dict(attention="acvi", score="additive", coverage=True),
                                   dict(attention="soft", latent="vrnmt")])
def test_a_model_builds_without_keras_symbolic_trace(parts, monkeypatch):
    """The encoder, bridge, score, head and VRNMT's Gaussian nets reach their first call
    built, so Keras never runs ``compute_output_spec`` (a whole extra trace of the call)
    to build their sub-layers; every sub-layer is built by that first call."""
    traced = []  # (Keras swallows an exception raised here when the call is eager)
    monkeypatch.setattr(keras_backend, "compute_output_spec",
                        lambda fn, *args, **kwargs: traced.append(fn.__self__.name))
    model = Seq2Seq(ModelConfig(src_vocab_size=12, tgt_vocab_size=12, embed_dim=8,
                                encoder_units=8, decoder_units=8, attention_units=8,
                                head_units=8, **parts))
    batch = ReverseTask(vocab_size=12, batch_size=2, seed=0).batch_at(0)
    model.build_for_checkpoint({k: tf.constant(v) for k, v in batch.items()})
    assert not traced, traced
    composites = [layer for layer in model._flatten_layers()
                  if isinstance(layer, CompositeLayer)]
    assert len(composites) >= 4, composites
    unbuilt = [inner.name for layer in composites for inner in layer._flatten_layers()
               if not inner.built]
    assert not unbuilt, unbuilt
    assert all(np.all(np.isfinite(v.numpy())) for v in model.trainable_variables)


def test_a_composite_layer_is_built_before_its_first_call_and_its_sublayers_on_it():
    class Two(CompositeLayer):
        def __init__(self):
            super().__init__()
            self.inner = keras.layers.Dense(3)

        def call(self, x):
            return self.inner(x)

    layer = Two()
    assert layer.built and not layer.inner.built
    assert layer(tf.ones([2, 5])).shape == (2, 3)
    assert layer.inner.built and [tuple(v.shape) for v in layer.weights] == [(5, 3), (3,)]
