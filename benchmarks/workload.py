"""What a benchmark runs: random token batches, a model with every variable built, and the
Trainer's training step (``make bench``, ``benchmarks.acvi_ablation`` and our side of
``benchmarks.peers`` share them).

The module itself needs numpy only (``benchmarks.peers.common`` imports it in the peer's
environment too); TensorFlow and the package are imported inside the functions.
"""

import numpy as np

# Token ids 0-3 are pad/unk/bos/eos (ModelConfig defaults); random words start here.
FIRST_WORD = 4


def random_batch(config, batch, src_len, tgt_len, rng, max_pad_fraction=0.0):
    """Random token batch; each row padded by up to ``max_pad_fraction`` of its length."""
    def lengths(full):
        most = int(max_pad_fraction * full)
        return full - rng.integers(0, most + 1, batch) if most else np.full(batch, full)

    src = rng.integers(FIRST_WORD, config.src_vocab_size, (batch, src_len)).astype(np.int32)
    src[np.arange(src_len)[None] >= lengths(src_len)[:, None]] = config.pad_id
    tgt_lengths = lengths(tgt_len)
    out = rng.integers(FIRST_WORD, config.tgt_vocab_size, (batch, tgt_len)).astype(np.int32)
    out[np.arange(batch), tgt_lengths - 1] = config.eos_id
    out[np.arange(tgt_len)[None] >= tgt_lengths[:, None]] = config.pad_id
    tgt_in = np.concatenate([np.full((batch, 1), config.bos_id, np.int32), out[:, :-1]], 1)
    tgt_in[out == config.pad_id] = config.pad_id
    return {"src": src, "tgt_in": tgt_in, "tgt_out": out}


def make_train_step(model, optimizer, clip_norm=5.0, shards=1):
    """The Trainer's step (:func:`acvi_tf.training.step.train_step`), single replica,
    returning the loss; ``shards`` as the Trainer's ``--cpu_shards`` resolves it."""
    from acvi_tf.training.step import train_step

    def step(batch, seed):
        return train_step(model, optimizer, batch, seed, clip_norm, shards=shards)["loss"]
    return step


def build_model(config, seed):
    """A Seq2Seq with every variable created (they do not depend on B, N, T)."""
    import keras
    import tensorflow as tf
    from acvi_tf.models import build_model as build
    keras.utils.set_random_seed(seed)
    model = build(config)
    tiny = random_batch(config, 2, 3, 3, np.random.default_rng(seed))
    model.build_for_checkpoint({k: tf.constant(v) for k, v in tiny.items()})
    return model

