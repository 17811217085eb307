"""The contract of latent variables outside attention (VED's sentence latent, VRNMT's
per-step latents), and their registry.

A latent plugs into the same seq2seq machine through three calls:

* ``prepare(memory, mask, finals, seed, training, targets)`` once per source, from the
  encoder's outputs (``finals``: one ``(h, c)`` pair per encoder layer). It returns a
  dict kept in ``memory_state["latent"]`` (tiled with the beams like the rest of the
  memory); its ``"aux"`` entry holds per-sequence losses ({name: [B]}, e.g. VED's
  ``kl_z``) that teacher forcing adds once per example.
  ``targets`` is the reference ``tgt_out`` [B, T] during teacher forcing and None when
  decoding; a latent that keeps it must leave it out of the dict when None (the dict
  is tiled with the beams, and None is not a tensor).
* ``step(latent_memory, latent_state, decoder, training)`` once per decoder step, before
  the recurrent stack, with ``decoder`` = ``{"time", "rnn" (the previous recurrent
  state, one tuple per layer), "input" (embedded y_{t-1})}``. It returns
  ``(to_input, to_output, aux, new_latent_state)``: tensors [B, k] concatenated to the
  decoder's recurrent input and to the head's s_t (either may be None), and per-step
  losses {name: [B]} summed over the target like the variant's.
* ``after_attention(latent_memory, latent_state, decoder, training)`` once per step,
  after the attention, with ``decoder`` = ``{"time", "s" (s_t), "context" (c_t),
  "input" (embedded y_{t-1}), "embed" (a function: ids -> the decoder's target
  embeddings, e.g. of ``targets[:, time]``), "seed" (a stateless seed for this step's
  noise)}``. It returns ``(to_output, aux, new_latent_state)`` like ``step``'s; the
  default does nothing. VRNMT's per-step z_j (Eqs. 14-20) lives here.

The latent state (``initial_state``) is carried, tiled and reordered with the beams, so
a latent can pass a value from step j to step j + 1 (VRNMT feeds z_j to the next input).

``sequence_aux_names`` and ``step_aux_names`` list the two kinds of losses;
``loss_weights`` says how each enters the objective (unweighted names are logged only).
"""

import keras

from acvi_tf.registry import Registry

LATENTS = Registry("latent variable")
register_latent = LATENTS.register


class Latent(keras.layers.Layer):
    """Base class; subclasses override ``prepare``, ``step`` and/or ``after_attention``."""

    sequence_aux_names = ()
    step_aux_names = ()
    # The aux names (of either kind) that are KL divergences: KL cost annealing (Bowman
    # et al. 2016; the trainer's kl_anneal_steps) scales their weights, and only theirs.
    kl_names = ()

    def loss_weights(self):
        return {}

    def prepare(self, memory, mask, finals, seed, training=False, targets=None):
        return {"aux": {}}

    def initial_state(self, batch_size):
        return {}

    def step(self, latent_memory, latent_state, decoder, training=False):
        """``(to_input, to_output, aux, new_latent_state)`` before the recurrent stack;
        a no-op here."""
        return None, None, {}, latent_state

    def after_attention(self, latent_memory, latent_state, decoder, training=False):
        """``(to_output, aux, new_latent_state)`` once s_t and c_t are known; a no-op here."""
        return None, {}, latent_state
