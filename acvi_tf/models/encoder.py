"""The BiLSTM encoder: h_i = [forward h_i; backward h_i] (Section 2.1)."""

import keras
import tensorflow as tf

from acvi_tf.utils.layers import CompositeLayer
from acvi_tf.errors import ConfigError
from acvi_tf.utils.lstm_impl import LSTM_IMPLS, choose_lstm_impl, run_bidirectional
from acvi_tf.utils.ops import dropout


class Encoder(CompositeLayer):
    """Trainable embeddings (or raw features) -> n-layer BiLSTM with padding masks.

    Each layer's weights live in a Keras ``Bidirectional(LSTM)`` (checkpoint paths as
    ever), whichever implementation runs them (:mod:`acvi_tf.utils.lstm_impl`):
    ``scan``, :func:`acvi_tf.utils.lstm.bidirectional_sequence`, with the input
    projection computed for all steps before the recurrence (CPU, XLA); or ``keras``,
    the layer itself, cuDNN on a GPU. ``lstm_impl="auto"`` picks per device when the
    call is traced.

    Args:
      vocab_size: source vocabulary; ``None`` feeds float features [B, N, F]
        straight to the BiLSTM (video frames).
      embed_dim: embedding size (ignored for features).
      units: LSTM units per direction; h_i has 2 * units.
      num_layers: stacked BiLSTM layers.
      dropout: dropout rate on the inputs and between layers.
      lstm_impl: ``auto``, ``scan`` or ``keras`` (:func:`choose_lstm_impl`).

    ``call(inputs, mask, training, seed)`` returns ``(memory [B, N, 2u],
    final_states)`` where ``final_states`` is a list with one ``(h, c)`` pair of
    [B, 2u] tensors per layer (forward and backward finals concatenated).
    """

    def __init__(self, vocab_size, embed_dim, units, num_layers=1, dropout=0.0,
                 lstm_impl="auto", **kwargs):
        super().__init__(**kwargs)
        if lstm_impl not in LSTM_IMPLS:
            raise ConfigError("lstm_impl", f"{lstm_impl!r}: choose one of "
                              f"{', '.join(LSTM_IMPLS)}")
        self.lstm_impl = lstm_impl
        self.vocab_size = vocab_size
        self.embed_dim = embed_dim
        self.units = units
        self.num_layers = num_layers
        self.dropout_rate = dropout
        self.embedding = (keras.layers.Embedding(vocab_size, embed_dim, name="embedding")
                          if vocab_size else None)
        self.layers_ = [
            keras.layers.Bidirectional(
                keras.layers.LSTM(units, return_sequences=True, return_state=True),
                name=f"bilstm_{i}")
            for i in range(num_layers)]

    @property
    def output_dim(self):
        return 2 * self.units

    def call(self, inputs, mask, training=False, seed=None):
        x = self.embedding(inputs) if self.embedding is not None else inputs
        x = tf.cast(x, self.compute_dtype)  # features arrive in float32 (Keras' autocast)
        impl, _ = choose_lstm_impl(self.lstm_impl)
        finals = []
        for i, layer in enumerate(self.layers_):
            if seed is not None:
                x = dropout(x, self.dropout_rate, seed, training, salts=(101, i))
            x, (fh, fc), (bh, bc) = run_bidirectional(layer, x, mask, impl)
            finals.append((tf.concat([fh, bh], -1), tf.concat([fc, bc], -1)))
        if seed is not None:
            x = dropout(x, self.dropout_rate, seed, training, salts=(102,))
        # Both implementations zero masked outputs already; keep it explicit for the
        # features path.
        x = x * tf.cast(mask, x.dtype)[:, :, None]
        return x, finals

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "embed_dim": self.embed_dim, "units": self.units,
                "num_layers": self.num_layers, "dropout": self.dropout_rate,
                "lstm_impl": self.lstm_impl}


class Bridge(CompositeLayer):
    """Maps the encoder's final (h, c) of each layer to the decoder's initial state.

    As See et al.'s ``_reduce_states``: a ReLU layer per h and c. Decoder layer l
    takes encoder layer min(l, L_enc - 1). With ``cell="gru"`` the decoder state is
    h alone, so only h is reduced (s_0 from the encoder's final h, as Bahdanau et al.
    initialise the GRU decoder VRNMT uses, with See et al.'s ReLU layer); each layer's
    state is then a 1-tuple (h,).
    """

    def __init__(self, units, num_layers, cell="lstm", **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.num_layers = num_layers
        self.cell = cell
        self.reduce_h = [keras.layers.Dense(units, activation="relu", name=f"reduce_h_{i}")
                         for i in range(num_layers)]
        self.reduce_c = ([keras.layers.Dense(units, activation="relu", name=f"reduce_c_{i}")
                          for i in range(num_layers)] if cell == "lstm" else [])

    def call(self, finals):
        out = []
        for i in range(self.num_layers):
            h, c = finals[min(i, len(finals) - 1)]
            if self.reduce_c:
                out.append((self.reduce_h[i](h), self.reduce_c[i](c)))
            else:
                out.append((self.reduce_h[i](h),))
        return out

    def get_config(self):
        return {**super().get_config(), "units": self.units, "num_layers": self.num_layers,
                "cell": self.cell}
