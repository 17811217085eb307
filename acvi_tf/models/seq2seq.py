"""The attentional seq2seq machine that every experiment swaps one part of."""

import dataclasses
import json
import typing

import keras
import tensorflow as tf

from acvi_tf import attention as attention_lib
from acvi_tf import latent as latent_lib
from acvi_tf.attention.scores import SCORES
from acvi_tf.models.decoder import CELLS, AttentionDecoder
from acvi_tf.models.diagnostics import diagnostic_sums
from acvi_tf.models.encoder import Bridge, Encoder
from acvi_tf.models.heads import HEADS
from acvi_tf.models.word_dropout import word_dropout
from acvi_tf.attention.base import TARGET_LOG_PROB
from acvi_tf.utils.loop_gradients import (LOOP_KEY, SHARED_ROWS_KEY, LoopGradients, SharedRows,
                                         tensors_only)
from acvi_tf.utils.ops import fold_seed, sequence_mask
from acvi_tf.registry import registered_names
from acvi_tf.utils.lstm_impl import LSTM_IMPLS
from acvi_tf.utils.precision import PRECISIONS, policy_scope, to_float32
from acvi_tf.utils.settings import setting


@dataclasses.dataclass
class ModelConfig:
    """Every architectural hyper-parameter, one declaration each: a field with help is a
    flag of the task CLIs (:mod:`acvi_tf.utils.settings`), the rest the task fills in."""
    src_vocab_size: int | None = None  # None: the source is float features [B, N, feature_dim]
    tgt_vocab_size: int = 1000         # decoder embedding / softmax vocabulary
    feature_dim: int = 0               # size of source feature vectors (video frames)
    embed_dim: int = setting(256, "Word embedding size.", lower_bound=1)
    encoder_units: int = setting(256, "BiLSTM units per direction.", lower_bound=1)  # h_i: 2x
    encoder_layers: int = setting(1, "Stacked BiLSTM layers.", lower_bound=1)
    decoder_units: int = setting(256, "Decoder LSTM units.", lower_bound=1)  # s_t
    decoder_layers: int = setting(1, "Stacked decoder LSTM layers.", lower_bound=1)
    decoder_cell: str = setting("lstm", "Decoder recurrent cell: lstm, or gru (Cho et al.'s, "
                                "as VRNMT's Eqs. 22-25).", choices=CELLS)
    score: str = setting("additive", "Attention score: additive (Eq. 1), multiplicative "
                         "(Eq. 10) or scaled_multiplicative (Eq. 10 / sqrt(d)).",
                         choices=SCORES.names)
    attention_units: int = setting(256, "Additive score size.", lower_bound=1)  # W_h h_i, W_s s_t
    attention: str = setting("soft", "Context variant (from the attention registry).",
                             choices=attention_lib.available)
    attention_options: dict = setting(
        help="key=value passed to the attention variant (repeatable); values are Python "
        "literals, e.g. kl_weight=0.5, kl_estimator='bound' (bare words are strings).",
        flag="attention_option", default_factory=dict)  # the variant's constructor kwargs
    head: str = setting("softmax", "Output head.", choices=HEADS.names)  # Eq. 4 or Eqs. 5-6
    head_units: int = setting(256, "Hidden size of the output head (Eq. 4).", lower_bound=1)
    coverage: bool = setting(False, "Coverage (Eqs. 8-9).")
    coverage_weight: float = setting(1.0, "lambda of Eq. 9.", lower_bound=0)
    dropout: float = setting(0.0, "Dropout rate.", lower_bound=0.0, upper_bound=0.99)
    word_dropout: float = setting(
        0.0, "Word dropout (Bowman et al. 2016): in training, each decoder input word (not "
        "<bos>, not padding) becomes UNK with this probability.", lower_bound=0.0,
        upper_bound=0.99)
    label_smoothing: float = setting(
        0.0, "Label smoothing of the training loss (Szegedy et al. 2016; Vaswani et al. 2017 "
        "use 0.1), --model=transformer with the softmax head: (1 - eps) NLL + eps x the "
        "cross-entropy to the uniform distribution over the vocabulary. The logged and "
        "evaluated NLL stays unsmoothed.", lower_bound=0.0, upper_bound=0.99)
    num_samples: int = setting(1, "Monte-Carlo samples of the ELBO.", lower_bound=1)  # tiles B
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2
    eos_id: int = 3
    latent: str = setting(
        "", "A latent variable outside attention (from the latent registry): '' (none), ved "
        "(Bahuleyan et al.'s sentence latent) or vrnmt (Su et al.'s per-step latent; the "
        "paper's decoder is --decoder_cell=gru).",
        choices=lambda: [""] + list(latent_lib.available()))
    latent_options: dict = setting(
        help="key=value passed to the latent (repeatable), e.g. latent_dim=64, feed=output.",
        flag="latent_option", default_factory=dict)
    model: str = setting(
        "seq2seq", "Architecture (from the model registry): seq2seq, the attentional LSTM "
        "machine whose context variant --attention picks; transformer, the Transformer "
        "baseline (--embed_dim, --transformer_layers, --num_heads, --ff_units, --dropout).",
        choices=registered_names("model"))
    num_heads: int = setting(4, "Transformer attention heads.", lower_bound=1)
    ff_units: int = setting(1024, "Transformer feed-forward inner size.", lower_bound=1)
    transformer_layers: int = setting(4, "Transformer encoder layers and decoder layers "
                                      "(each).", lower_bound=1)
    precision: str = setting(
        "float32", "Keras dtype policy of the model's layers: float32; mixed_bfloat16 or "
        "mixed_float16 (float32 variables, layers computing in bfloat16 / float16; softmax, "
        "attention probabilities, log-probabilities, KL terms, losses and beam scores stay "
        "float32; mixed_float16 trains with dynamic loss scaling). Restored from model_dir "
        "in eval, decode and export.", choices=PRECISIONS)
    lstm_impl: str = setting(
        "auto", "What runs the encoder's BiLSTM (the same weights either way): scan, the "
        "hand-written recurrence (faster on CPU; compiles under --xla); keras, Keras' LSTM "
        "(cuDNN on a GPU); block, TensorFlow's fused BlockLSTM op (opt-in: measure it on "
        "your machine); auto: keras on a GPU without --xla, else scan. The choice is "
        "logged. A resumed run may change it; eval, decode and export use the trained "
        "run's.", choices=LSTM_IMPLS)  # the BiLSTMs of the encoder and of variational's q

    # Fields that say how this machine runs the model, not what the model is (the weights
    # and values are the same either way): a resumed run may change them.
    RUN_FIELDS: typing.ClassVar[tuple] = ("lstm_impl",)

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d):
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown model config keys: {sorted(unknown)}")
        return cls(**d)


class Seq2Seq(keras.Model):
    """Encoder -> bridge -> attentional decoder with a registered context variant.

    ``teacher_forced(batch)`` and ``decode(batch)`` both run ``decoder.step``.
    Batches are dicts: ``src`` (ids [B, N] or features [B, N, F] with
    ``src_len``), ``tgt_in`` and ``tgt_out`` (ids [B, T], padded with pad_id).

    ``config.precision`` is the dtype policy of every layer (:mod:`acvi_tf.utils.precision`);
    the encoder states enter the decoder's memory as float32, so the context variants,
    latents and losses compute in float32 whatever the layers compute in.

    ``defer_loop_gradients`` (True; not part of the model) moves gradient work out of the
    teacher-forced loop: the target embeddings are looked up before it, and in training
    the gradients of the per-source tensors every step reads linearly are summed after
    it (:mod:`acvi_tf.utils.loop_gradients`). False gives the straightforward loop (a
    lookup per step, TensorFlow's per-step accumulation): the same values and gradients
    (tests compare the two). ``head_in_loop`` (False; not part of the model) runs the
    output head inside that loop at every step instead of once after it: the same values
    and gradients (tested).
    """

    defer_loop_gradients = True
    head_in_loop = False

    def __init__(self, config: ModelConfig, **kwargs):
        with policy_scope(config.precision):
            self._build_layers(config, **kwargs)

    def _build_layers(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        c = config
        if c.label_smoothing:
            raise ValueError(f"label_smoothing={c.label_smoothing}: implemented for "
                             f"--model=transformer (softmax head) only")
        self.encoder = Encoder(c.src_vocab_size, c.embed_dim, c.encoder_units,
                               c.encoder_layers, c.dropout, lstm_impl=c.lstm_impl,
                               name="encoder")
        memory_dim = self.encoder.output_dim
        self.bridge = Bridge(c.decoder_units, c.decoder_layers, c.decoder_cell, name="bridge")
        score_units = c.attention_units if c.score == "additive" else c.decoder_units
        score = SCORES.get(c.score)(score_units, use_coverage=c.coverage, name="score")
        variant_cls = attention_lib.get_attention(c.attention)
        options = dict(c.attention_options)
        if variant_cls.uses_target_vocab:  # an inference network over the reference ids
            options = {"target_vocab_size": c.tgt_vocab_size, "pad_id": c.pad_id,
                       "unk_id": c.unk_id, "lstm_impl": c.lstm_impl, **options}
        variant = variant_cls(memory_dim, name=c.attention, **options)
        head = HEADS.get(c.head)(c.tgt_vocab_size, c.head_units, name="head")
        latent = (latent_lib.get_latent(c.latent)(name=c.latent, **c.latent_options)
                  if c.latent else None)
        self.decoder = AttentionDecoder(c.tgt_vocab_size, c.embed_dim, c.decoder_units,
                                        c.decoder_layers, score, variant, head,
                                        dropout=c.dropout, unk_id=c.unk_id,
                                        use_coverage=c.coverage, latent=latent,
                                        cell=c.decoder_cell,
                                        name="decoder")

    # -- the pieces ---------------------------------------------------------
    @property
    def variant(self):
        return self.decoder.variant

    @property
    def latent(self):
        return self.decoder.latent

    def kl_loss_names(self):
        """The aux names that are KL terms (the variant's and the latent's ``kl_names``):
        the ones KL cost annealing scales (``loss_terms(kl_scale=...)``)."""
        names = list(self.variant.kl_names)
        if self.latent is not None:
            names.extend(self.latent.kl_names)
        return names

    def loss_weights(self):
        """How each named auxiliary loss enters the training loss."""
        weights = dict(self.variant.loss_weights())
        if self.config.coverage:
            weights["coverage"] = self.config.coverage_weight
        if self.latent is not None:
            weights.update(self.latent.loss_weights())
        return weights

    def aux_names(self):
        names = list(self.variant.aux_loss_names)
        if self.config.coverage:
            names.append("coverage")
        if self.latent is not None:  # per-step latent losses (per-sequence ones are added once)
            names.extend(self.latent.step_aux_names)
        return names

    def set_mode(self, **mode):
        """Schedule modes (``acvi_mixing``, ``coverage``) are read when a step is traced."""
        self.variant.set_mode(**mode)
        self.decoder.set_mode(**mode)

    def read_modes(self):
        """The schedule modes a traced step depends on (None: any of them): the variant's
        and ``coverage`` (kept even without coverage built in, so that switching it on
        still traces, and fails there)."""
        variant = self.variant.read_modes()
        return None if variant is None else tuple(variant) + ("coverage",)

    def source_mask(self, batch):
        src = batch["src"]
        if src.dtype.is_floating:
            return tf.sequence_mask(batch["src_len"], tf.shape(src)[1])
        return sequence_mask(src, self.config.pad_id)

    def start(self, batch, training=False, seed=0, with_targets=False, noise_scale=None):
        """Encodes the source: ``(memory_state, initial decoder state)``.

        ``with_targets`` hands ``batch["tgt_out"]`` to the variant's prepare()
        (inference networks over the reference); decoding never does.
        ``noise_scale`` (a scalar; the trainer's noise warm-up) is handed to the
        variant's step as ``memory_state["noise_scale"]``.
        """
        seed = tf.cast(seed, tf.int32)
        mask = self.source_mask(batch)
        memory, finals = self.encoder(batch["src"], mask, training=training,
                                      seed=fold_seed(seed, 1))
        memory = to_float32(memory)  # the variants' math is float32 (utils.precision)
        targets = batch["tgt_out"] if with_targets else None
        memory_state = self.decoder.prepare(memory, mask, seed, training=training,
                                            targets=targets)
        for key in ("src_ext", "max_oovs"):  # pointer-generator inputs, when present
            if key in batch:
                memory_state[key] = batch[key]
        if noise_scale is not None:
            memory_state["noise_scale"] = tf.cast(noise_scale, tf.float32)
        if self.latent is not None:
            memory_state["latent"] = self.latent.prepare(memory, mask, finals, fold_seed(seed, 2),
                                                         training=training, targets=targets)
        state = self.decoder.initial_state(memory_state, self.bridge(finals))
        return memory_state, state

    def step(self, input_ids, state, memory_state, training=False, zero_context=False,
             embedded=None):
        return self.decoder.step(input_ids, state, memory_state, training=training,
                                 zero_context=zero_context, embedded=embedded)

    # -- training -------------------------------------------------------------
    def teacher_forced(self, batch, training=False, seed=0, return_attention=False,
                       zero_context=False, diagnostics=False, noise_scale=None):
        """Runs ``step`` over the reference; per-example sums of every loss term.

        Returns a dict: ``nll`` [B] (summed masked token NLL), one [B] sum per
        aux loss name, ``num_tokens`` [B], and ``attention`` [B, T, N] if asked.
        ``zero_context`` runs the decoder with c_t = 0 (the context-use
        diagnostic); ``diagnostics`` adds the sums of :func:`diagnostic_sums`.
        In training, ``word_dropout`` > 0 replaces decoder input words by UNK
        (:func:`word_dropout`, seeded from ``seed``); the targets are unchanged.
        """
        memory_state, state = self.start(batch, training=training, seed=seed, with_targets=True,
                                         noise_scale=noise_scale)
        tgt_in, tgt_out = batch["tgt_in"], batch["tgt_out"]
        if training and self.config.word_dropout > 0:
            tgt_in = word_dropout(tgt_in, self.config.word_dropout, fold_seed(seed, 1403),
                                  self.config.pad_id, self.config.unk_id)
        tmask = tf.cast(sequence_mask(tgt_out, self.config.pad_id), tf.float32)
        batch_size, length = tf.shape(tgt_in)[0], tf.shape(tgt_in)[1]
        deferred = tuple(self.variant.deferred_names)
        names = [n for n in self.aux_names() if n not in self.variant.deferred_aux_names]
        zeros = tf.zeros([batch_size], tf.float32)
        sums = {"nll": zeros, **{n: zeros for n in names}}
        # Per-step tensors collected for the variant's deferred_aux (and the attention).
        arrays = {n: tf.TensorArray(tf.float32, size=length) for n in deferred}
        if return_attention or diagnostics:
            arrays["attention"] = tf.TensorArray(tf.float32, size=length)
        # The head reads nothing the next step needs: the loop stores its inputs and the
        # head runs once on all steps after it, one [T*B, units] x [units, V] product
        # instead of T small ones, and once more on each of the variant's head_contexts.
        # Stored as float32: the head casts to its compute dtype, which rounds a bfloat16
        # or float16 value back to itself. ``head_in_loop`` runs the head at every step
        # instead (the straightforward way, which the tests compare this with).
        head_later = not self.head_in_loop
        head_contexts = tuple(self.variant.head_contexts)
        scored = ((TARGET_LOG_PROB,) + tuple(f"{n}_{TARGET_LOG_PROB}" for n in head_contexts)
                  if head_contexts else ())
        if not head_later:
            arrays.update({n: tf.TensorArray(tf.float32, size=length) for n in scored})
        head_inputs = (tuple(tf.TensorArray(tf.float32, size=length) for _ in range(4))
                       if head_later else ())
        # In training the gradients of the per-source tensors every step reads linearly
        # (h_i, the score keys, ACVI's sigma^2) are summed after the loop, one batched
        # product each, instead of accumulated at every step (utils.loop_gradients);
        # otherwise nothing is declared and the loop's calls do nothing.
        loop = LoopGradients(length, self.decoder.loop_invariants(memory_state)
                             if training and self.defer_loop_gradients else None)
        step_memory = {**memory_state, LOOP_KEY: loop}
        head_memory = tensors_only(step_memory)  # a Keras layer takes tensors only
        embedded = None
        if self.defer_loop_gradients:  # all steps' x_t at once: the lookup's gradient is one
            embedded = self.decoder.embed(tgt_in)  # scatter, not T dense [V, E] additions
            embedded = tf.TensorArray(embedded.dtype, size=length).unstack(
                _swap_batch_time(embedded))

        def body(t, state, sums, arrays, head_inputs, loop_arrays):
            loop.begin(t)
            x_t = None if embedded is None else embedded.read(t)
            inputs, state, extras = self.decoder.core_step(
                tgt_in[:, t], state, step_memory, training, zero_context=zero_context,
                embedded=x_t)
            aux = extras["aux"]
            if head_later:
                head_inputs = tuple(a.write(t, tf.cast(v, tf.float32))
                                    for a, v in zip(head_inputs, inputs))
                new = {"nll": sums["nll"]}
            else:
                def target_log_prob(context):
                    log_probs = self.decoder.head(inputs[0], context, *inputs[2:],
                                                  head_memory)[0]
                    return tf.gather(log_probs, tgt_out[:, t], batch_dims=1)
                target_lp = target_log_prob(inputs[1])
                aux = {**aux, **dict(zip(scored, [target_lp] + [target_log_prob(aux[n])
                                                                for n in head_contexts]))}
                new = {"nll": sums["nll"] - target_lp * tmask[:, t]}
            m = tmask[:, t]
            for n in names:
                new[n] = sums[n] + aux[n] * m
            arrays = {n: a.write(t, extras["attention"] if n == "attention" else aux[n])
                      for n, a in arrays.items()}
            loop_arrays = loop.write(t, loop_arrays)
            return t + 1, state, new, arrays, head_inputs, loop_arrays

        _, _, sums, arrays, head_inputs, loop_arrays = tf.while_loop(
            lambda t, *_: t < length, body,
            (tf.constant(0), state, sums, arrays, head_inputs, loop.initial_arrays()),
            maximum_iterations=length)  # XLA needs the bound for gradients
        loop.finish(loop_arrays)
        time_major = {n: a.stack() for n, a in arrays.items()}
        if head_later:
            log_probs = self._head_target_log_probs(head_inputs, memory_state, tgt_out,
                                                    [time_major[n] for n in head_contexts])
            sums["nll"] = sums["nll"] - tf.reduce_sum(log_probs[0] * tf.transpose(tmask),
                                                      axis=0)
            time_major.update(zip(scored, log_probs))
        stacked = {n: _swap_batch_time(v) for n, v in time_major.items()}
        out = dict(sums)
        if self.latent is not None:
            out.update(memory_state["latent"]["aux"])
        if deferred:
            out.update(self.variant.deferred_aux({n: stacked[n] for n in deferred + scored},
                                                 memory_state, tmask))
        out["num_tokens"] = tf.reduce_sum(tmask, axis=1)
        if diagnostics:
            out.update(diagnostic_sums(stacked["attention"], tmask, memory_state,
                                       self.variant.diagnostics(memory_state)))
        if return_attention:
            out["attention"] = stacked["attention"]
        return out

    def _head_target_log_probs(self, head_inputs, memory_state, tgt_out, contexts=()):
        """log P_t(y_t), [T, B], of the head run once on the stacked per-step inputs
        ([T, B, ...] each, flattened time-major to [T * B, ...]); then one more [T, B] for
        each of ``contexts`` ([T, B, D]) in place of the stacked c_t."""
        length, batch_size = tf.shape(tgt_out)[1], tf.shape(tgt_out)[0]

        def flat(v):
            return tf.reshape(v, tf.concat([[-1], tf.shape(v)[2:]], 0))
        s, c, x, probs = [flat(a.stack()) for a in head_inputs]
        head = self.decoder.head
        targets = tf.reshape(tf.transpose(tgt_out), [-1])
        tiled = head.tile_memory(memory_state, length)
        return [tf.reshape(head.target_log_prob(targets, s, context, x, probs, tiled),
                           [length, batch_size])
                for context in [c] + [flat(v) for v in contexts]]

    def loss_terms(self, batch, training=False, seed=0, kl_scale=None, noise_scale=None,
                   **probes):
        """Sums over the batch of every term, with K-sample tiling (``num_samples``).

        Returns scalars: ``nll``, each aux name, ``num_tokens``, and
        ``objective`` = nll + sum_name weight * aux (the negative ELBO for ACVI).
        Divide by the (global) token count to get per-token values.

        ``kl_scale`` (a scalar, e.g. the trainer's KL annealing factor; Bowman et al.
        2016) multiplies the weights of the KL terms (:meth:`kl_loss_names`) only;
        coverage, REINFORCE and likelihood terms keep their weights. None: 1.
        ``noise_scale`` (a scalar, the trainer's noise warm-up) scales ACVI's sampled
        context noise (:meth:`start`). None: 1.

        ``probes`` (``zero_context``, ``diagnostics``) go to ``teacher_forced``;
        only the true ones are passed, so a model without them still works.
        """
        k = self.config.num_samples
        if k > 1:
            batch = {key: (tf.repeat(v, k, axis=0) if v.shape.rank else v)
                     for key, v in batch.items()}
        if noise_scale is not None:
            probes["noise_scale"] = noise_scale
        per_example = self.teacher_forced(batch, training=training, seed=seed,
                                          **{k: v for k, v in probes.items()
                                             if v is not None and v is not False})
        terms = {name: tf.reduce_sum(v) / k for name, v in per_example.items()}
        weights = self.loss_weights()
        if kl_scale is not None and weights:
            annealed = set(self.kl_loss_names())
            weights = {n: w * kl_scale if n in annealed else w for n, w in weights.items()}
        objective = terms["nll"]
        for name, w in weights.items():
            if isinstance(w, (int, float)) and w == 0:
                # Logged only: 0 * term would still run the term's whole backward pass
                # (ACVI (ours) on Multi30k has KL weight 0).
                continue
            objective = objective + w * terms[name]
        terms["objective"] = objective
        return terms

    # -- decoding ---------------------------------------------------------------
    def decode(self, batch, beam_width=1, max_length=50, min_length=0,
               length_normalization="none", alpha=0.6, seed=0, ban_unk=False,
               no_repeat_ngram=0):
        """Greedy (beam_width 1) or beam search with the same ``step``; ``ban_unk``
        never emits ``<unk>``; ``no_repeat_ngram`` = n > 0 never repeats an n-gram of
        the output (:mod:`acvi_tf.decoding.ngram_block`)."""
        from acvi_tf import decoding
        memory_state, state = self.start(batch, training=False, seed=seed)
        batch_size = tf.shape(memory_state["memory"])[0]
        start_ids = tf.fill([batch_size], tf.cast(self.config.bos_id, tf.int32))
        banned = (self.config.pad_id, self.config.bos_id) + ((self.config.unk_id,)
                                                             if ban_unk else ())
        if beam_width == 1:
            def step_fn(ids, s):
                return self.step(ids, s, memory_state, training=False)
            return decoding.greedy_search(decoding.never_emit(step_fn, banned), state,
                                          start_ids, self.config.eos_id,
                                          max_length, min_length=min_length,
                                          no_repeat_ngram=no_repeat_ngram)
        tiled_memory = decoding.tile_beam(memory_state, beam_width)
        # The step's products linear in the memory read it once per sentence, not K times.
        tiled_memory[SHARED_ROWS_KEY] = SharedRows(beam_width, memory_state, tiled_memory)

        def beam_step_fn(ids, s):
            return self.step(ids, s, tiled_memory, training=False)
        return decoding.beam_search(beam_step_fn, state, start_ids, self.config.eos_id,
                                    beam_width, max_length, min_length=min_length,
                                    length_normalization=length_normalization, alpha=alpha,
                                    banned_ids=banned, no_repeat_ngram=no_repeat_ngram)

    def build_for_checkpoint(self, batch):
        """Creates every variable by running one forward pass, eagerly, on ``batch`` cut to
        its first example, first source position and first target step
        (:func:`first_step`): the variables' shapes come from the config alone, and an
        eager pass runs the decoder's loop body and the encoder's scan once per step."""
        self.loss_terms(first_step(batch), training=False)

    def get_config(self):
        return {"config": dataclasses.asdict(self.config)}

    @classmethod
    def from_config(cls, config):
        return cls(ModelConfig.from_dict(config["config"]))


def first_step(batch):
    """``batch`` cut to one example and one step: every [B, T, ...] tensor to [1, 1, ...],
    a [B] tensor (``src_len``) to its first value capped at 1, a scalar (``max_oovs``)
    kept. Enough to create a model's variables, whose shapes never depend on lengths."""
    out = {}
    for k, v in batch.items():
        v = tf.convert_to_tensor(v)
        if v.shape.rank >= 2:
            out[k] = v[:1, :1]
        elif v.shape.rank == 1:
            out[k] = tf.minimum(v[:1], tf.ones([], v.dtype))
        else:
            out[k] = v
    return out


def _swap_batch_time(x):
    """[T, B, ...] <-> [B, T, ...]."""
    return tf.transpose(x, tf.concat([[1, 0], tf.range(2, tf.rank(x))], axis=0))
