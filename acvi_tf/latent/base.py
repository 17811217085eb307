"""The contract of latent variables outside attention (VED's sentence latent, VRNMT's
per-step latents), and their registry.

A latent plugs into the same seq2seq machine through two calls:

* ``prepare(memory, mask, finals, seed, training, targets)`` once per source, from the
  encoder's outputs (``finals``: one ``(h, c)`` pair per encoder layer). It returns a
  dict kept in ``memory_state["latent"]`` (tiled with the beams like the rest of the
  memory); its ``"aux"`` entry holds per-sequence losses ({name: [B]}, e.g. VED's
  ``kl_z``) that teacher forcing adds once per example.
* ``step(latent_memory, latent_state, decoder, training)`` once per decoder step, with
  ``decoder`` = ``{"time", "lstm" (the previous LSTM state), "input" (embedded
  y_{t-1})}``. It returns ``(to_input, to_output, aux, new_latent_state)``: tensors
  [B, k] concatenated to the decoder LSTM input and to the head's s_t (either may be
  None), and per-step losses {name: [B]} summed over the target like the variant's.

``sequence_aux_names`` and ``step_aux_names`` list the two kinds of losses;
``loss_weights`` says how each enters the objective (unweighted names are logged only).
"""

import keras

from acvi_tf.registry import Registry

LATENTS = Registry("latent variable")
register_latent = LATENTS.register


class Latent(keras.layers.Layer):
    """Base class; subclasses override ``prepare`` and ``step``."""

    sequence_aux_names = ()
    step_aux_names = ()

    def loss_weights(self):
        return {}

    def prepare(self, memory, mask, finals, seed, training=False, targets=None):
        return {"aux": {}}

    def initial_state(self, batch_size):
        return {}

    def step(self, latent_memory, latent_state, decoder, training=False):
        raise NotImplementedError
