"""The OpenNMT-tf side of the peer benchmark (runs in ``.venv-peers``: OpenNMT-tf 2.32,
TF 2.13, tensorflow-addons 0.21): ``.venv-peers/bin/python -m benchmarks.peers.opennmt_tf BATCHES``.

The model is ``opennmt.models.SequenceToSequence`` at the sizes in the batches file:

* ``WordEmbedder`` source and target inputters (vocabulary files of ``V - 1`` lines
  ``<blank> <s> </s> w3 ...``; OpenNMT-tf adds one OOV bucket, so the embedding and
  softmax sizes are ``V``, as ours), embedding dropout as ours;
* encoder ``layerwise`` (the default): a ``SequentialEncoder`` of ``layers``
  one-layer bidirectional ``RNNEncoder``s (LSTM, ``units`` per direction,
  ``ConcatReducer``), so layer 2 reads the concatenated 2 x units outputs as our BiLSTM
  stack does; ``stacked``: one ``RNNEncoder(num_layers=layers, bidirectional=True)``,
  which runs the forward and backward multi-layer stacks independently and concatenates
  at the end (layer 2 reads ``units`` inputs: fewer parameters than ours);
* ``AttentionalRNNDecoder`` (``layers`` x ``units`` LSTM, ``tfa.seq2seq.LuongAttention``,
  input feeding, Luong's tanh attention layer) with a ``DenseBridge``; dropout as ours.

The training step is OpenNMT-tf's own ``Model.compute_gradients`` (forward, its
sequence cross-entropy, gradients) followed by ``tf.clip_by_global_norm`` and SGD, in
one ``tf.function``. (OpenNMT-tf's ``clip_gradients`` option would clip each gradient
separately; the global-norm clip keeps the step identical to ours.) The batches' token
ids are mapped to OpenNMT-tf's special ids (``common.to_opennmt_ids``); the shapes and
word ids are the ones our side reads. Beam search is the model called in inference mode
with ``beam_width``, ``maximum_decoding_length`` and ``minimum_decoding_length`` both
the maximum length (every call decodes the full length, as ours).
"""

import argparse
import os
import sys
import tempfile

import numpy as np

from benchmarks.peers import common


def _vocab_file(directory, name, size):
    """A vocabulary file giving OpenNMT-tf a vocabulary of ``size`` (OOV bucket included)."""
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write("\n".join(["<blank>", "<s>", "</s>"] + [f"w{i}" for i in range(3, size - 1)]))
        f.write("\n")
    return path


def build_model(size, encoder="layerwise"):
    import opennmt
    import tensorflow_addons as tfa

    def birnn(num_layers):
        return opennmt.encoders.RNNEncoder(
            num_layers, size.units, bidirectional=True, dropout=size.dropout,
            reducer=opennmt.layers.ConcatReducer())

    if encoder == "layerwise":
        enc = opennmt.encoders.SequentialEncoder([birnn(1) for _ in range(size.layers)])
    else:
        enc = birnn(size.layers)
    return opennmt.models.SequenceToSequence(
        source_inputter=opennmt.inputters.WordEmbedder(size.embed, dropout=size.dropout),
        target_inputter=opennmt.inputters.WordEmbedder(size.embed, dropout=size.dropout),
        encoder=enc,
        decoder=opennmt.decoders.AttentionalRNNDecoder(
            num_layers=size.layers, num_units=size.units,
            bridge_class=opennmt.layers.DenseBridge,
            attention_mechanism_class=tfa.seq2seq.LuongAttention,
            dropout=size.dropout))


def setup(path, encoder, vocab_dir):
    import opennmt
    import tensorflow as tf

    arrays, size, seed = common.load_batches(path)
    tf.random.set_seed(seed)
    model = build_model(size, encoder)
    model.initialize(
        {"source_vocabulary": _vocab_file(vocab_dir, "src.vocab", size.src_vocab),
         "target_vocabulary": _vocab_file(vocab_dir, "tgt.vocab", size.tgt_vocab)},
        params={"beam_width": size.beam_width,
                "maximum_decoding_length": size.beam_max_length,
                "minimum_decoding_length": size.beam_max_length})
    model.create_variables()
    for inputter, vocab in ((model.features_inputter, size.src_vocab),
                            (model.labels_inputter, size.tgt_vocab)):
        if inputter.vocabulary_size != vocab:
            raise RuntimeError(f"vocabulary {inputter.vocabulary_size}, expected {vocab}")
    optimizer = tf.keras.optimizers.SGD(learning_rate=size.learning_rate)

    @tf.function
    def step_fn(features, labels):
        loss, grads = model.compute_gradients(features, labels, optimizer)
        grads, _ = tf.clip_by_global_norm(grads, size.clip_norm)
        optimizer.apply_gradients(zip(grads, model.trainable_weights))
        return loss

    def lengths(ids):
        return tf.constant((ids != common.PAD).sum(axis=1).astype(np.int32))

    batches = []
    for i in range(len(arrays["src"])):
        src, tgt_in, tgt_out = (common.to_opennmt_ids(arrays[k][i]).astype(np.int64)
                                for k in ("src", "tgt_in", "tgt_out"))
        batches.append(({"ids": tf.constant(src), "length": lengths(src)},
                        {"ids": tf.constant(tgt_in), "ids_out": tf.constant(tgt_out),
                         "length": lengths(tgt_out)}))
    calls = [0]

    def train():
        features, labels = batches[calls[0] % len(batches)]
        calls[0] += 1
        float(step_fn(features, labels))  # waits for the step

    beam_src = arrays["beam_src"].astype(np.int64)
    beam_features = {"ids": tf.constant(beam_src), "length": lengths(beam_src)}
    beam_fn = tf.function(lambda features: model(features, training=False)[1])

    def beam():
        beam_fn(beam_features)["length"].numpy()

    info = {"side": "opennmt-tf", "opennmt_tf": opennmt.__version__,
            "tensorflow": tf.__version__, "encoder": encoder, "onednn": common.onednn_enabled(),
            "parameters": int(sum(v.shape.num_elements() for v in model.trainable_weights))}
    return common.warm_up(info, train, beam, size.warmup)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.peers.opennmt_tf")
    p.add_argument("batches")
    p.add_argument("--encoder", choices=("layerwise", "stacked"), default="layerwise")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="onmt_vocab_") as vocab_dir:
        return common.serve(lambda: setup(args.batches, args.encoder, vocab_dir))


if __name__ == "__main__":
    sys.exit(main())
