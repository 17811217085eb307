"""Our side of the peer benchmark, in the main environment:
``python -m benchmarks.peers.ours BATCHES [PRECISION [on|off]]``.

The model is ``Seq2Seq(ModelConfig(...))`` with ``attention="soft"``,
``score="multiplicative"`` (Luong's general score) at the sizes in the batches file, built
and given its variables by ``benchmarks.workload.build_model``; the training step is
``benchmarks.workload.make_train_step`` (the Trainer's single-replica step: loss terms,
per-token loss, gradients, global-norm clip, update under a finiteness check) with the
Trainer's own SGD (``trainer.make_optimizer``). Beam search is ``Seq2Seq.decode`` with
``min_length = max_length`` (every call decodes the full length), as ``make bench`` times it.
``PRECISION`` is the model's ``ModelConfig.precision`` (default float32; mixed_float16
trains with the Trainer's loss scaling); ``on`` XLA-compiles the training step.

Batches run as the task CLIs run them by default (``--cpu_shards`` auto,
:mod:`acvi_tf.utils.shards`): on a CPU-only machine with TensorFlow's thread variables
unset, one shard of rows per core with one thread per op, for the training step and the
beam search alike; ``ACVI_CPU_SHARDS=1`` in the environment gives the unsharded step
(TensorFlow's default threads).
"""

import functools
import sys

from benchmarks.peers import common


def setup(path, precision="float32", xla="off"):
    import os

    from acvi_tf.utils import shards
    # first, before TensorFlow runs an op (the task CLIs' default: --cpu_shards=0, auto)
    count, _ = shards.configure(int(os.environ.get("ACVI_CPU_SHARDS", "0")), xla=xla == "on")

    import keras
    import tensorflow as tf

    from acvi_tf.models.seq2seq import ModelConfig
    from acvi_tf.training.trainer import TrainConfig, make_optimizer
    from benchmarks.workload import build_model, make_train_step

    arrays, size, seed = common.load_batches(path)
    config = ModelConfig(
        src_vocab_size=size.src_vocab, tgt_vocab_size=size.tgt_vocab, embed_dim=size.embed,
        encoder_units=size.units, encoder_layers=size.layers, decoder_units=size.units,
        decoder_layers=size.layers, score="multiplicative", attention="soft",
        head_units=size.units, dropout=size.dropout, precision=precision)
    model = build_model(config, seed)
    optimizer = make_optimizer(TrainConfig(model_dir="", optimizer="sgd",
                                           learning_rate=size.learning_rate), precision)
    optimizer.build(model.trainable_variables)
    step_fn = tf.function(make_train_step(model, optimizer, clip_norm=size.clip_norm,
                                          shards=count),
                          autograph=False, jit_compile=xla == "on")
    batches = [{k: tf.constant(arrays[k][i]) for k in ("src", "tgt_in", "tgt_out")}
               for i in range(len(arrays["src"]))]
    calls = [0]

    def train():
        i = calls[0]
        loss = step_fn(batches[i % len(batches)], tf.constant(seed + i, tf.int32))
        calls[0] += 1
        float(loss)  # waits for the step

    decode = functools.partial(model.decode, beam_width=size.beam_width,
                               max_length=size.beam_max_length,
                               min_length=size.beam_max_length)
    beam_fn = tf.function(lambda batch: shards.sharded(lambda part, _: decode(part), batch,
                                                       count), autograph=False)
    beam_src = {"src": tf.constant(arrays["beam_src"])}

    def beam():
        beam_fn(beam_src)["lengths"].numpy()

    info = {"side": "ours", "tensorflow": tf.__version__, "keras": keras.__version__,
            "precision": precision, "xla": xla == "on", "onednn": common.onednn_enabled(),
            "batch_shards": shards.describe(),
            "parameters": int(sum(v.shape.num_elements() for v in model.trainable_variables))}
    return common.warm_up(info, train, beam, size.warmup)


if __name__ == "__main__":
    sys.exit(common.serve(lambda: setup(*sys.argv[1:4])))
