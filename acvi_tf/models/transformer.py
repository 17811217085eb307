"""The Transformer baseline (Vaswani et al., 2017) of the ACVI paper.

The ICLR version (Sections 4.2 and 4.3, after Fevry 2018) uses 256-d embeddings,
4 encoder and 4 decoder layers of 256 units, 4 heads and dropout 0.2
(summarization) or 0.1 (translation): ``ModelConfig(model="transformer",
embed_dim=256, transformer_layers=4, num_heads=4, dropout=...)``.

The model has the interface of :class:`acvi_tf.models.seq2seq.Seq2Seq`, so the
one trainer, greedy/beam search and the task CLIs use it unchanged. Training
runs all target positions in one pass under a causal mask; ``step`` (decoding)
runs one position against a key/value cache of the earlier ones, through the
same layers, so both give the same log-probabilities (tested).

Choices the papers leave open, taken from tensor2tensor / OpenNMT defaults:
layer normalisation before each sub-layer and once after the last layer
("pre-norm"; it trains without a learning-rate warm-up, which the trainer does
not have), dropout on the embeddings and on every sub-layer's output (Vaswani
Sec. 5.4; none inside the attention), no tied embeddings. Dropout is stateless
(:func:`acvi_tf.utils.ops.dropout`), as everywhere in acvi_tf.
"""

import math

import keras
import tensorflow as tf

from acvi_tf.decoding.greedy import write_time
from acvi_tf.models.diagnostics import diagnostic_sums
from acvi_tf.models.heads import HEADS
from acvi_tf.models.seq2seq import Seq2Seq
from acvi_tf.utils.layers import CompositeLayer
from acvi_tf.utils.ops import dropout, fold_seed, masked_softmax, sequence_mask
from acvi_tf.utils.precision import to_float32

DEFAULT_CACHE_LENGTH = 256  # decoder steps a state from start() holds when no max_length is given


def sinusoidal_positions(positions, dim):
    """Sec. 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same).

    ``positions``: int [T] -> float32 [T, dim] (``dim`` even).
    """
    if dim % 2:
        raise ValueError(f"sinusoidal positions need an even model size, got {dim}")
    inv_freq = tf.pow(10000.0, -tf.range(0, dim, 2, dtype=tf.float32) / dim)  # [dim/2]
    angles = tf.cast(positions, tf.float32)[:, None] * inv_freq[None, :]
    # Interleave so that column 2i is the sine and 2i+1 the cosine of the same angle.
    return tf.reshape(tf.stack([tf.sin(angles), tf.cos(angles)], axis=-1), [-1, dim])


def scaled_dot_product_attention(query, key, value, mask):
    """Eq. (1) of Vaswani et al. per head: softmax(Q K^T / sqrt(d_k)) V.

    ``query`` [B, T, H, d_k], ``key``/``value`` [B, S, H, d_k], ``mask`` bool,
    broadcastable to [B, H, T, S] (True: may attend). Returns the per-head
    outputs [B, T, H, d_k] and the attention probabilities [B, H, T, S]; the softmax
    and the probabilities are float32 whatever the projections compute in.
    """
    scale = tf.cast(1.0 / math.sqrt(query.shape[-1]), query.dtype)
    scores = tf.einsum("bthd,bshd->bhts", query * scale, key)
    probs = masked_softmax(to_float32(scores), mask)
    return tf.einsum("bhts,bshd->bthd", tf.cast(probs, value.dtype), value), probs


class AttentionSublayer(CompositeLayer):
    """A pre-norm multi-head attention sub-layer (Sec. 3.2.2): LayerNorm, then MHA.

    Only the projections of ``keras.layers.MultiHeadAttention`` are used (its
    public ``query_dense``/``key_dense``/``value_dense``/``output_dense``), so
    that keys and values can be cached across decoding steps and both paths
    share :func:`scaled_dot_product_attention`.
    """

    def __init__(self, model_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.model_dim = model_dim
        self.num_heads = num_heads
        self.norm = keras.layers.LayerNormalization(epsilon=1e-6, name="norm")
        self.mha = keras.layers.MultiHeadAttention(num_heads, model_dim // num_heads, name="mha")
        # Built now: start() projects the encoder output with it before any call.
        self.norm.build((None, None, model_dim))
        self.mha.build((None, None, model_dim), (None, None, model_dim))

    def keys_values(self, x):
        """[B, S, d] (already normalised) -> keys, values [B, S, H, d_k]."""
        return self.mha.key_dense(x), self.mha.value_dense(x)

    def attend(self, normed, keys, values, mask):
        """Queries from ``normed`` [B, T, d] -> (output [B, T, d], probs [B, H, T, S])."""
        heads, probs = scaled_dot_product_attention(self.mha.query_dense(normed), keys,
                                                    values, mask)
        return self.mha.output_dense(heads), probs

    def get_config(self):
        return {**super().get_config(), "model_dim": self.model_dim,
                "num_heads": self.num_heads}


class FeedForwardSublayer(CompositeLayer):
    """Eq. (2) of Vaswani et al. after a LayerNorm: max(0, x W1 + b1) W2 + b2."""

    def __init__(self, model_dim, ff_units, **kwargs):
        super().__init__(**kwargs)
        self.model_dim = model_dim
        self.ff_units = ff_units
        self.norm = keras.layers.LayerNormalization(epsilon=1e-6, name="norm")
        self.inner = keras.layers.Dense(ff_units, activation="relu", name="inner")
        self.outer = keras.layers.Dense(model_dim, name="outer")
        # Sizes are known: build now, so the layers holding these are complete when called.
        self.norm.build((None, None, model_dim))
        self.inner.build((None, None, model_dim))
        self.outer.build((None, None, ff_units))

    def call(self, x):
        return self.outer(self.inner(self.norm(x)))

    def get_config(self):
        return {**super().get_config(), "model_dim": self.model_dim, "ff_units": self.ff_units}


class TransformerLayer(CompositeLayer):
    """What encoder and decoder layers share: sizes, self-attention, feed-forward."""

    def __init__(self, model_dim, num_heads, ff_units, dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.model_dim, self.num_heads, self.ff_units = model_dim, num_heads, ff_units
        self.dropout_rate = dropout
        self.self_attention = AttentionSublayer(model_dim, num_heads, name="self_attention")
        self.feed_forward = FeedForwardSublayer(model_dim, ff_units, name="feed_forward")

    def get_config(self):
        return {**super().get_config(), "model_dim": self.model_dim,
                "num_heads": self.num_heads, "ff_units": self.ff_units,
                "dropout": self.dropout_rate}


class EncoderLayer(TransformerLayer):
    """Self-attention over the source (padding masked), then the feed-forward sub-layer."""

    def call(self, x, src_mask, seed, training=False):
        normed = self.self_attention.norm(x)
        keys, values = self.self_attention.keys_values(normed)
        out, _ = self.self_attention.attend(normed, keys, values, src_mask[:, None, None, :])
        x = x + dropout(out, self.dropout_rate, seed, training, salts=(0,))
        return x + dropout(self.feed_forward(x), self.dropout_rate, seed, training, salts=(1,))


class DecoderLayer(TransformerLayer):
    """Causal self-attention, attention over the encoder output, feed-forward.

    ``call(x [B, T, d], ...)`` runs either all T target positions at once under a
    causal mask (``cache=None``), or one position (T = 1) at decoder time
    ``time``: its keys and values are written into ``cache`` (buffers [B, L, H,
    d_k]) and it attends to cache positions 0..time.
    """

    def __init__(self, model_dim, num_heads, ff_units, dropout=0.0, **kwargs):
        super().__init__(model_dim, num_heads, ff_units, dropout, **kwargs)
        self.cross_attention = AttentionSublayer(model_dim, num_heads, name="cross_attention")

    def call(self, x, memory_kv, memory_mask, seed, cache=None, time=None, training=False):
        """Returns ``(x, cross-attention output [B, T, d], its probs [B, H, T, N], cache)``."""
        normed = self.self_attention.norm(x)
        keys, values = self.self_attention.keys_values(normed)
        if cache is None:
            length = tf.shape(x)[1]
            positions = tf.range(length)
            mask = (positions[None, :] <= positions[:, None])[None, None]  # [1, 1, T, T]
        else:
            keys = write_time(cache["keys"], keys[:, 0], time, time_axis=1)
            values = write_time(cache["values"], values[:, 0], time, time_axis=1)
            cache = {"keys": keys, "values": values}
            mask = (tf.range(tf.shape(keys)[1]) <= time)[None, None, None, :]  # [1, 1, 1, L]
        out, _ = self.self_attention.attend(normed, keys, values, mask)
        x = x + dropout(out, self.dropout_rate, seed, training, salts=(0,))
        context, probs = self.cross_attention.attend(
            self.cross_attention.norm(x), memory_kv[0], memory_kv[1],
            memory_mask[:, None, None, :])
        x = x + dropout(context, self.dropout_rate, seed, training, salts=(1,))
        x = x + dropout(self.feed_forward(x), self.dropout_rate, seed, training, salts=(2,))
        return x, context, probs, cache


class Transformer(keras.Model):
    """Encoder-decoder Transformer with the public interface of ``Seq2Seq``.

    Batches as for Seq2Seq: ``src`` ids [B, N] (or float features [B, N, F] with
    ``src_len``, projected to the model size by a Dense layer), ``tgt_in`` and
    ``tgt_out`` ids [B, T]. The model size is ``embed_dim``; ``head="pointer"``
    puts See et al.'s pointer-generator head (Eqs. 5-6) on the decoder output,
    with the last layer's cross-attention output as the context c_t and its
    head-averaged probabilities as a_t. ``head="softmax"`` is Vaswani's linear
    projection and softmax (``head_units`` unused). No context variant, latent
    or coverage: those belong to the LSTM machine. ``config.precision`` is the dtype
    policy of every layer, as in Seq2Seq; attention probabilities, the output softmax
    and the losses are float32.
    """

    # Seq2Seq's: _build_layers under the dtype policy of config.precision.
    __init__ = Seq2Seq.__init__

    def _build_layers(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        c = config
        if c.transformer_layers < 1:
            raise ValueError(f"transformer: transformer_layers must be >= 1, "
                             f"got {c.transformer_layers}")
        if c.embed_dim % c.num_heads:
            raise ValueError(f"transformer: embed_dim={c.embed_dim} is not divisible by "
                             f"num_heads={c.num_heads}")
        unsupported = {"attention": c.attention != "soft", "coverage": c.coverage,
                       "latent": bool(c.latent)}
        bad = [name for name, is_set in unsupported.items() if is_set]
        if bad:
            raise ValueError(f"transformer: --{', --'.join(bad)} apply to the seq2seq model only "
                             f"(got attention={c.attention!r}, coverage={c.coverage}, "
                             f"latent={c.latent!r})")
        if c.label_smoothing and c.head != "softmax":  # the copy slots' log(0 + 1e-12)
            raise ValueError(f"transformer: label_smoothing={c.label_smoothing} needs "
                             f"--head=softmax (got head={c.head!r})")
        d = c.embed_dim
        self.model_dim = d
        if c.src_vocab_size:
            self.src_embedding = keras.layers.Embedding(c.src_vocab_size, d, name="src_embedding")
        else:
            self.src_embedding = keras.layers.Dense(d, name="src_projection")
        self.tgt_embedding = keras.layers.Embedding(c.tgt_vocab_size, d, name="tgt_embedding")
        # One attribute per layer, not a list: Keras 3 keeps lists of layers out of
        # tf.train.Checkpoint's object graph, so their variables would not be saved.
        for i in range(c.transformer_layers):
            setattr(self, f"encoder_{i}", EncoderLayer(d, c.num_heads, c.ff_units, c.dropout,
                                                       name=f"encoder_{i}"))
            setattr(self, f"decoder_{i}", DecoderLayer(d, c.num_heads, c.ff_units, c.dropout,
                                                       name=f"decoder_{i}"))
        self.encoder_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="encoder_norm")
        self.decoder_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="decoder_norm")
        if c.head == "softmax":
            self.head = keras.layers.Dense(c.tgt_vocab_size, name="output")
        else:
            self.head = HEADS.get(c.head)(c.tgt_vocab_size, c.head_units, name="head")

    # -- the pieces shared with Seq2Seq (model-agnostic: they only use the methods below) --
    source_mask = Seq2Seq.source_mask
    loss_terms = Seq2Seq.loss_terms
    build_for_checkpoint = Seq2Seq.build_for_checkpoint
    get_config = Seq2Seq.get_config
    from_config = classmethod(Seq2Seq.from_config.__func__)

    @property
    def encoder_layers(self):
        return [getattr(self, f"encoder_{i}") for i in range(self.config.transformer_layers)]

    @property
    def decoder_layers(self):
        return [getattr(self, f"decoder_{i}") for i in range(self.config.transformer_layers)]

    def loss_weights(self):
        """``label_smoothing`` enters with weight eps: nll + eps (U - nll) is the smoothed
        loss (1 - eps) nll + eps U (:meth:`teacher_forced`)."""
        eps = self.config.label_smoothing
        return {"label_smoothing": eps} if eps else {}

    def aux_names(self):
        return ["label_smoothing"] if self.config.label_smoothing else []

    def kl_loss_names(self):
        return []

    def set_mode(self, coverage=None, **unused):
        """Schedule modes: ACVI's mixing does not apply; coverage cannot be switched on."""
        if coverage:
            raise ValueError("coverage mode requested for a transformer, which has no coverage")

    def read_modes(self):
        """No schedule mode changes the traced step (coverage on is refused above)."""
        return ()

    def _embed(self, layer, inputs, positions, seed, training, scale, salts=()):
        """Embedding (times sqrt(d), Sec. 3.4) plus sinusoidal positions, then dropout."""
        x = layer(inputs)
        if scale:
            x = x * math.sqrt(self.model_dim)
        x = x + tf.cast(sinusoidal_positions(positions, self.model_dim), x.dtype)[None]
        return dropout(x, self.config.dropout, seed, training, salts=salts)

    def _target_ids(self, ids):
        """Ids outside the vocabulary (pointer copies of source OOVs) are fed back as UNK."""
        return tf.where(ids < self.config.tgt_vocab_size, ids,
                        tf.cast(self.config.unk_id, ids.dtype))

    def encode(self, batch, training=False, seed=0):
        """Runs the encoder once per source: the ``memory_state`` that ``step`` reads.

        It holds ``memory`` [B, N, d], ``mask`` [B, N], ``seed``, each decoder
        layer's projected cross-attention keys and values (``memory_kv``), and the
        pointer-generator inputs when the batch has them.
        """
        seed = tf.cast(seed, tf.int32)
        mask = self.source_mask(batch)
        src = batch["src"]
        x = self._embed(self.src_embedding, src, tf.range(tf.shape(src)[1]),
                        seed, training, scale=bool(self.config.src_vocab_size), salts=(1,))
        for i, layer in enumerate(self.encoder_layers):
            x = layer(x, mask, fold_seed(seed, 2, i), training=training)
        memory = to_float32(self.encoder_norm(x) * tf.cast(mask, x.dtype)[:, :, None])
        memory_state = {"memory": memory, "mask": mask, "seed": seed,
                        "memory_kv": [layer.cross_attention.keys_values(memory)
                                      for layer in self.decoder_layers]}
        for key in ("src_ext", "max_oovs"):
            if key in batch:
                memory_state[key] = batch[key]
        return memory_state

    def start(self, batch, training=False, seed=0, with_targets=False, max_length=None):
        """Encodes the source: ``(memory_state, initial decoder state)``.

        The state is ``time`` (a scalar) and, per decoder layer, key and value
        buffers [B, L, H, d_k] for L = ``max_length`` steps (default
        ``DEFAULT_CACHE_LENGTH``); steps beyond L would attend to no history, so
        ``decode`` passes its own max_length. ``with_targets`` is accepted for
        the Seq2Seq interface; nothing here reads the reference.
        """
        del with_targets
        memory_state = self.encode(batch, training=training, seed=seed)
        length = max_length or DEFAULT_CACHE_LENGTH
        batch_size = tf.shape(memory_state["memory"])[0]
        heads = self.config.num_heads
        zeros = tf.zeros([batch_size, length, heads, self.model_dim // heads],
                         self.compute_dtype)  # the key/value projections' dtype
        state = {"time": tf.constant(0, tf.int32),
                 "cache": [{"keys": zeros, "values": zeros} for _ in self.decoder_layers]}
        return memory_state, state

    def _decode(self, ids, positions, memory_state, seed, training, caches=None, time=None):
        """The decoder over target inputs ``ids`` [B, T] at ``positions`` [T].

        Returns ``(log_probs [B, T, V'], attention [B, T, N], head extras, caches)``;
        attention is the last layer's cross-attention averaged over heads.
        """
        x = self._embed(self.tgt_embedding, self._target_ids(ids), positions,
                        seed, training, scale=True, salts=(0,))
        embedded = x
        new_caches = []
        for i, layer in enumerate(self.decoder_layers):
            x, context, probs, cache = layer(
                x, memory_state["memory_kv"][i], memory_state["mask"], fold_seed(seed, 1, i),
                cache=None if caches is None else caches[i], time=time, training=training)
            new_caches.append(cache)
        out = dropout(self.decoder_norm(x), self.config.dropout, seed, training, salts=(2,))
        attention = tf.reduce_mean(probs, axis=1)
        log_probs, extras = self._head(out, context, embedded, attention, memory_state)
        return log_probs, attention, extras, new_caches

    def _head(self, out, context, embedded, attention, memory_state):
        """The output distribution at every [B, T] position (heads take rows [B*T])."""
        if self.config.head == "softmax":
            return tf.nn.log_softmax(to_float32(self.head(out))), {}
        shape = tf.shape(out)
        rows = lambda x: tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0))
        # Row b*T + t of the flattened batch reads source b's extended ids.
        pointer_state = {"src_ext": tf.repeat(memory_state["src_ext"], shape[1], axis=0),
                         "max_oovs": memory_state["max_oovs"]}
        log_probs, extras = self.head(rows(out), rows(context), rows(embedded),
                                      rows(attention), pointer_state)
        unflatten = lambda x: tf.reshape(x, tf.concat([shape[:2], tf.shape(x)[1:]], 0))
        return unflatten(log_probs), {k: unflatten(v) for k, v in extras.items()}

    def step(self, input_ids, state, memory_state, training=False):
        """One decoding step: ``(log_probs [B, V'], new_state, extras)``.

        Runs the decoder on the single position ``state["time"]`` against the
        cached keys and values of the earlier positions. With ``training=True``
        its dropout noise differs from ``teacher_forced``'s.
        """
        t = state["time"]
        seed = fold_seed(memory_state["seed"], 3, t)
        log_probs, attention, extras, caches = self._decode(
            input_ids[:, None], t[None], memory_state, seed, training,
            caches=state["cache"], time=t)
        extras = {k: v[:, 0] for k, v in extras.items()}
        return (log_probs[:, 0], {"time": t + 1, "cache": caches},
                {"attention": attention[:, 0], "aux": {}, **extras})

    def teacher_forced(self, batch, training=False, seed=0, return_attention=False,
                       diagnostics=False):
        """All target positions in one causal pass; per-example sums as Seq2Seq's.

        Returns ``nll`` [B] (summed masked token NLL), ``num_tokens`` [B], with
        ``label_smoothing`` the summed cross-entropy to the uniform distribution minus
        ``nll`` [B], and, if asked, ``attention`` [B, T, N].
        """
        seed = tf.cast(seed, tf.int32)
        memory_state = self.encode(batch, training=training, seed=seed)
        tgt_in, tgt_out = batch["tgt_in"], batch["tgt_out"]
        tmask = tf.cast(sequence_mask(tgt_out, self.config.pad_id), tf.float32)
        log_probs, attention, _, _ = self._decode(
            tgt_in, tf.range(tf.shape(tgt_in)[1]), memory_state, fold_seed(seed, 4), training)
        target_lp = tf.gather(log_probs, tgt_out, batch_dims=2)
        out = {"nll": -tf.reduce_sum(target_lp * tmask, axis=1),
               "num_tokens": tf.reduce_sum(tmask, axis=1)}
        if self.config.label_smoothing:
            # U - nll, U the summed cross-entropy to the uniform distribution over the
            # vocabulary: with weight eps (loss_weights) the objective is label-smoothed.
            uniform = -tf.reduce_mean(log_probs, axis=-1)
            out["label_smoothing"] = tf.reduce_sum(uniform * tmask, axis=1) - out["nll"]
        if diagnostics:
            out.update(diagnostic_sums(attention, tmask, memory_state))
        if return_attention:
            out["attention"] = attention
        return out

    def decode(self, batch, beam_width=1, max_length=50, min_length=0,
               length_normalization="none", alpha=0.6, seed=0, ban_unk=False,
               no_repeat_ngram=0):
        """Greedy (beam_width 1) or beam search over ``step`` (see Seq2Seq.decode)."""
        from acvi_tf import decoding
        memory_state, state = self.start(batch, training=False, seed=seed,
                                         max_length=max_length)
        start_ids = tf.fill([tf.shape(memory_state["memory"])[0]],
                            tf.cast(self.config.bos_id, tf.int32))
        banned = (self.config.pad_id, self.config.bos_id) + (  # see decoding.never_emit
            (self.config.unk_id,) if ban_unk else ())
        if beam_width == 1:
            return decoding.greedy_search(
                decoding.never_emit(
                    lambda ids, s: self.step(ids, s, memory_state, training=False), banned),
                state, start_ids, self.config.eos_id, max_length, min_length=min_length,
                no_repeat_ngram=no_repeat_ngram)
        tiled = decoding.tile_beam(memory_state, beam_width)
        return decoding.beam_search(
            lambda ids, s: self.step(ids, s, tiled, training=False),
            state, start_ids, self.config.eos_id, beam_width, max_length,
            min_length=min_length, length_normalization=length_normalization, alpha=alpha,
            banned_ids=banned, no_repeat_ngram=no_repeat_ngram)
