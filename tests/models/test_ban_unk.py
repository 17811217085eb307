"""``ban_unk`` (DecodeConfig, --ban_unk): no decode emits <unk>, and otherwise the search
is the one without it."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models import build_model
from acvi_tf.models.seq2seq import ModelConfig
from acvi_tf.tasks.base import DecodeConfig

V = 12


def _model(kind):
    keras.utils.set_random_seed(0)
    common = dict(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8, head_units=8)
    config = (ModelConfig(model="transformer", num_heads=2, ff_units=8, transformer_layers=1,
                          **common) if kind == "transformer" else
              ModelConfig(encoder_units=4, decoder_units=8, attention_units=8,
                          score="multiplicative", attention=kind, **common))
    batch = {k: tf.constant(v) for k, v in ReverseTask(vocab_size=V, batch_size=4,
                                                       seed=1).batch_at(0).items()}
    model = build_model(config)
    model.build_for_checkpoint(batch)
    # <unk> (id 1) the most probable token of every step, by far: the output bias
    out = model.head if kind == "transformer" else model.decoder.head.V_prime
    bias = out.bias.numpy()
    bias[config.unk_id] = 30.0
    out.bias.assign(bias)
    return model, {"src": batch["src"]}, config


@pytest.mark.parametrize("kind", ["soft", "acvi", "transformer"])
@pytest.mark.parametrize("beam_width", [1, 3])
def test_ban_unk_never_emits_unk_and_is_the_search_over_the_other_tokens(kind, beam_width):
    model, batch, config = _model(kind)
    plain = model.decode(batch, beam_width=beam_width, max_length=6)
    banned = model.decode(batch, beam_width=beam_width, max_length=6, ban_unk=True)
    plain_ids = plain["ids"].numpy()
    ids, lengths = banned["ids"].numpy(), banned["lengths"].numpy()
    if beam_width > 1:  # [B, K, T]: every beam
        ids, lengths, plain_ids = ids.reshape(-1, ids.shape[-1]), lengths.reshape(-1), \
            plain_ids.reshape(-1, plain_ids.shape[-1])
    assert (plain_ids == config.unk_id).mean() > 0.5  # the bias works: <unk> everywhere
    for row, n in zip(ids, lengths):
        assert config.unk_id not in row[:n].tolist(), row
    if beam_width == 1:
        # greedy: the argmax of each step's log-probs with <unk> (and <pad>, <s>) masked,
        # checked by forcing the banned decode back through the model's own step
        memory_state, state = model.start(batch, training=False, **(
            {"max_length": 6} if kind == "transformer" else {}))
        inputs = tf.fill([ids.shape[0]], config.bos_id)
        for t in range(int(lengths.max())):
            log_probs, state, _ = model.step(inputs, state, memory_state, training=False)
            masked = log_probs.numpy().copy()
            masked[:, [config.pad_id, config.bos_id, config.unk_id]] = -np.inf
            live = lengths > t
            np.testing.assert_array_equal(ids[live, t], masked.argmax(-1)[live])
            inputs = tf.constant(ids[:, t])


def test_the_option_reaches_decode_only_when_set():
    assert "ban_unk" not in DecodeConfig().options()  # results.json of other runs unchanged
    assert DecodeConfig(ban_unk=True).options(final=False)["ban_unk"] is True
    assert DecodeConfig(ban_unk=True).options(final=True)["ban_unk"] is True


def test_the_tasks_batched_decoder_passes_it_on():
    from acvi_tf.tasks.decode_batches import BatchedDecoder
    model, batch, config = _model("soft")
    src = batch["src"].numpy()
    lengths = [int(n) for n in (src != config.pad_id).sum(1)]
    decoder = BatchedDecoder({"src": tf.TensorSpec([None, None], tf.int32)}, batch_size=2)
    for ban in (False, True):
        options = DecodeConfig(beam_width=3, decode_max_length=6, ban_unk=ban).options()
        ids, _ = decoder.decode(model, options, lengths,
                                lambda rows: {"src": tf.constant(src[rows])})
        tokens = [t for hyp in ids for t in hyp]
        assert (config.unk_id in tokens) is not ban, (ban, ids)


def test_the_translator_takes_every_decode_option():
    """--mode=decode and the evaluation build a Translator from DecodeConfig.options()."""
    from acvi_tf.tasks.translation import Translator

    class Data:
        @staticmethod
        def decode_batch(ids):
            return [" ".join(map(str, row)) for row in ids]

    model, batch, config = _model("soft")
    src = [row[row != config.pad_id].tolist() for row in batch["src"].numpy()]
    for ban in (False, True):
        options = DecodeConfig(beam_width=2, decode_max_length=6, ban_unk=ban).options()
        _, ids, _ = Translator(model, Data(), batch_size=2, **options).translate(src)
        assert (config.unk_id in [t for hyp in ids for t in hyp]) is not ban, (ban, ids)
