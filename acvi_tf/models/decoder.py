"""The attentional recurrent decoder (LSTM, or GRU) and its single ``step()``.

Teacher-forced training (``Seq2Seq.teacher_forced``) and every search strategy
(:mod:`acvi_tf.decoding`) advance the decoder with the same ``core_step``; ``step``
is ``core_step`` and then the output head. Teacher forcing, which knows every input
in advance, runs the head once after the loop on all steps' inputs (tested equal,
values and gradients, to running it at every step).
"""

import functools

import keras
import tensorflow as tf

from acvi_tf.attention.base import INPUT_FEED
from acvi_tf.utils.ops import dropout, fold_seed
from acvi_tf.utils.loop_gradients import tensors_only
from acvi_tf.utils.precision import concat_as, to_float32

CELLS = ("lstm", "gru")  # ModelConfig.decoder_cell


def make_cell(cell, units, name):
    """A Keras recurrent cell: ``"lstm"`` (state (h, c)) or ``"gru"`` (state (h,)).

    The GRU is Cho et al.'s, as in VRNMT's Eqs. (22)-(25): the reset gate applies to
    s_j before U (``reset_after=False``), s~ = tanh(W y + U [r * s] + C c + V z + b)
    with [y; c; z] the step's input.
    """
    if cell == "lstm":
        return keras.layers.LSTMCell(units, name=name)
    if cell == "gru":
        return keras.layers.GRUCell(units, reset_after=False, name=name)
    raise ValueError(f"decoder_cell={cell!r}: choose one of {', '.join(CELLS)}")


def _zeroed(x, zero_context):
    """``x``, or zeros where the context-use probe asks for them (see ``Decoder.step``)."""
    if zero_context is None or zero_context is False:
        return x
    if zero_context is True:
        return tf.zeros_like(x)
    # x * 1 is x exactly, x * 0 is 0 for every finite x
    return x * tf.cast(1.0 - zero_context, x.dtype)


class AttentionDecoder(keras.layers.Layer):
    """An n-layer LSTM (or GRU) decoder with attention, input feeding and an output head.

    At step t (Section 2.1): the input is [embedding(y_{t-1}); c_{t-1}] (the
    previous context fed with the input, as See et al. and Luong et al.), the
    LSTM stack gives s_t, the score layer gives e_t (Eqs. 1/8/10), the context
    variant gives (c_t, a_t), and the head gives log P_t (Eq. 4 or Eq. 6).
    The coverage vector k_t = sum_{tau<t} a_tau (Eq. 7) is carried in the state.

    ``cell`` picks the recurrent cell (:data:`CELLS`); the state's ``"rnn"`` entry
    holds one tuple of cell states per layer, (h, c) for the LSTM and (h,) for the GRU.
    A latent (:mod:`acvi_tf.latent`) is called twice per step: ``step`` before the
    recurrent stack (its ``to_input`` joins the input) and ``after_attention`` once
    s_t and c_t are known (its ``to_output`` joins s_t before the head).
    """

    def __init__(self, vocab_size, embed_dim, units, num_layers, score, variant, head,
                 dropout=0.0, unk_id=1, use_coverage=False, latent=None, cell="lstm",
                 **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embed_dim = embed_dim
        self.units = units
        self.num_layers = num_layers
        self.dropout_rate = dropout
        self.unk_id = unk_id
        self.use_coverage = use_coverage
        # See et al. train without coverage, then switch it on for the last phase;
        # while it is off w_k gets no gradient, so it stays at its zero init.
        self.coverage_active = use_coverage
        self.embedding = keras.layers.Embedding(vocab_size, embed_dim, name="embedding")
        self.cell = cell
        self.cells = [make_cell(cell, units, name=f"{cell}_{i}") for i in range(num_layers)]
        self.score = score
        self.variant = variant
        self.head = head
        self.latent = latent  # optional acvi_tf.latent.Latent (VED's z, ...)

    def set_mode(self, coverage=None, **unused):
        if coverage is not None:
            if coverage and not self.use_coverage:
                raise ValueError("coverage mode requested for a model built without coverage")
            self.coverage_active = bool(coverage) and self.use_coverage

    def prepare(self, memory, mask, seed, training=False, targets=None):
        """Per-source work done once: score keys (W_h h_i) and the variant's prepare()."""
        return {"memory": memory, "mask": mask, "seed": seed,
                "keys": self.score.precompute(memory),
                "variant": self.variant.prepare(memory, mask, training=training,
                                                targets=targets)}

    def loop_invariants(self, memory_state):
        """The per-source tensors every step reads linearly (the score's keys, the
        variant's memory, ...): ``{name: (equation, tensor)}``, for teacher forcing to
        sum their gradients after the loop (:mod:`acvi_tf.utils.loop_gradients`)."""
        out = dict(self.score.loop_invariants(memory_state))
        for name, spec in self.variant.loop_invariants(memory_state).items():
            if name in out:
                raise ValueError(f"loop invariant {name!r} declared by the score and by "
                                 f"{type(self.variant).__name__}")
            out[name] = spec
        return out

    def initial_state(self, memory_state, rnn_state):
        """``rnn_state``: one tuple of initial cell states per layer (the Bridge's)."""
        memory = memory_state["memory"]
        batch = tf.shape(memory)[0]
        return {"time": tf.constant(0, tf.int32),
                "rnn": [tuple(s) for s in rnn_state],
                "context": tf.zeros([batch, memory.shape[-1]], memory.dtype),
                "coverage": tf.zeros(tf.shape(memory)[:2], memory.dtype),
                "variant": self.variant.initial_state(batch),
                **({"latent": self.latent.initial_state(batch)} if self.latent is not None
                   else {})}

    def embed(self, ids):
        """The target embedding of ``ids``; ids outside the embedding vocabulary
        (pointer-generator copies of source OOVs) are embedded as UNK."""
        ids = tf.where(ids < self.vocab_size, ids, tf.cast(self.unk_id, ids.dtype))
        return self.embedding(ids)

    def step(self, input_ids, state, memory_state, training=False, zero_context=False,
             embedded=None):
        """One decoder step: ``(log_probs [B, V'], new_state, extras)``.

        Ids outside the embedding vocabulary (pointer-generator copies of source
        OOVs) are fed back as UNK. ``extras`` holds ``attention`` [B, N], the
        variant's named ``aux`` losses ([B] each) and the head's extras.
        ``zero_context`` replaces c_t by zeros wherever the decoder reads it (the
        head and the next input): the context-use diagnostic
        (:mod:`acvi_tf.training.diagnostics`). It is a Python bool, or a scalar float
        tensor (1: zeroed, 0: kept) so that one traced function serves both passes.

        It is :meth:`core_step` followed by the head; teacher forcing runs the head
        after the loop instead, on all steps at once (``Seq2Seq.teacher_forced``).
        """
        head_inputs, new_state, extras = self.core_step(
            input_ids, state, memory_state, training=training, zero_context=zero_context,
            embedded=embedded)
        # a Keras layer takes tensors only
        log_probs, head_extras = self.head(*head_inputs, tensors_only(memory_state))
        return log_probs, new_state, {**extras, **head_extras}

    def core_step(self, input_ids, state, memory_state, training=False, zero_context=False,
                  embedded=None):
        """Everything of :meth:`step` but the head, which reads nothing the next step
        needs: ``(head_inputs, new_state, extras)``, with ``head_inputs`` = (the head's
        s_t [with latent outputs], c_t, the input embedding x_t, a_t)."""
        t = state["time"]
        # this step's seed, folded once and only if something draws from it
        seed = functools.cache(lambda: fold_seed(memory_state["seed"], t, 31))
        # Teacher forcing embeds every input before the loop (``embedded``, the same
        # values): a lookup inside the loop accumulates a dense [V, E] gradient per step.
        x = self.embed(input_ids) if embedded is None else embedded
        inputs, to_output, latent_aux = [x, state["context"]], [], {}
        if self.latent is not None:
            to_input, latent_output, latent_aux, latent_state = self.latent.step(
                memory_state["latent"], state["latent"],
                {"time": t, "rnn": state["rnn"], "input": x}, training=training)
            if to_input is not None:
                inputs.append(to_input)
            if latent_output is not None:
                to_output.append(latent_output)
        h = dropout(concat_as(inputs, x.dtype), self.dropout_rate, seed, training, salts=(0,))
        new_rnn = []
        for i, cell in enumerate(self.cells):
            h, cell_state = cell(h, list(state["rnn"][i]), training=training)
            new_rnn.append(tuple(cell_state))
            if i < self.num_layers - 1:
                h = dropout(h, self.dropout_rate, seed, training, salts=(1, i))
        s_t = h
        coverage = state["coverage"]
        scores = to_float32(self.score.step(memory_state, s_t,
                                            coverage=coverage if self.coverage_active else None))
        context, probs, aux, variant_state = self.variant.step(
            scores, memory_state, {"time": t, "variant": state["variant"]}, training=training)
        context = _zeroed(context, zero_context)
        aux = dict(aux)
        if self.use_coverage:
            # Eq. (9): the coverage loss sum_i min(a_t^i, k_t^i); zero while coverage is off.
            aux["coverage"] = (tf.reduce_sum(tf.minimum(probs, coverage), axis=-1)
                               if self.coverage_active else tf.zeros_like(probs[:, 0]))
        if self.latent is not None:  # latents of s_t and c_t (VRNMT's z_j, Eqs. 14-20)
            latent_output, after_aux, latent_state = self.latent.after_attention(
                memory_state["latent"], latent_state,
                {"time": t, "s": s_t, "context": context, "input": x, "embed": self.embed,
                 "seed": fold_seed(seed(), 3)}, training=training)
            if latent_output is not None:
                to_output.append(latent_output)
            latent_aux = {**latent_aux, **after_aux}
        out = dropout(s_t, self.dropout_rate, seed, training, salts=(2,))
        if to_output:
            out = concat_as([out] + to_output, out.dtype)
        aux.update(latent_aux)
        feed = context
        if INPUT_FEED in aux:  # the variant feeds the next input another vector than c_t
            feed = _zeroed(aux.pop(INPUT_FEED), zero_context)
        new_state = {"time": t + 1, "rnn": new_rnn, "context": feed,
                     "coverage": coverage + probs, "variant": variant_state}
        if self.latent is not None:
            new_state["latent"] = latent_state
        return (out, context, x, probs), new_state, {"attention": probs, "aux": aux}

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "embed_dim": self.embed_dim, "units": self.units,
                "num_layers": self.num_layers, "dropout": self.dropout_rate,
                "unk_id": self.unk_id, "use_coverage": self.use_coverage, "cell": self.cell}
