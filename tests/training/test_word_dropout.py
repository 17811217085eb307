"""Word dropout on decoder inputs (Bowman et al. 2016, as used by Bahuleyan et al. 2018)."""

import dataclasses

import numpy as np
import tensorflow as tf

from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from acvi_tf.models.word_dropout import word_dropout
from acvi_tf.utils.ops import fold_seed

PAD, UNK, BOS = 0, 1, 2


def _ids(batch=400, length=40, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(4, 50, size=[batch, length]).astype(np.int32)
    lengths = rng.integers(1, length + 1, size=batch)
    ids[np.arange(length)[None, :] >= lengths[:, None]] = PAD
    ids[:, 0] = BOS
    return ids


def test_rate_positions_and_determinism():
    ids = _ids()
    seed = fold_seed(tf.constant(7), 1403)
    out = word_dropout(ids, 0.3, seed, PAD, UNK).numpy()
    eligible = (ids != PAD) & (np.arange(ids.shape[1])[None, :] > 0)
    dropped = out != ids
    assert np.all(out[dropped] == UNK)
    assert not np.any(dropped & ~eligible)          # never <bos>, never padding
    assert np.all(out[:, 0] == BOS) and np.all(out[ids == PAD] == PAD)
    rate = dropped[eligible].mean()
    assert eligible.sum() > 5000 and abs(rate - 0.3) < 0.02, rate
    np.testing.assert_array_equal(out, word_dropout(ids, 0.3, seed, PAD, UNK).numpy())
    other = word_dropout(ids, 0.3, fold_seed(tf.constant(8), 1403), PAD, UNK).numpy()
    assert np.any(other != out)
    np.testing.assert_array_equal(word_dropout(ids, 0.0, seed, PAD, UNK).numpy(), ids)


def _model(rate):
    return Seq2Seq(ModelConfig(src_vocab_size=10, tgt_vocab_size=10, embed_dim=8,
                               encoder_units=8, decoder_units=8, attention_units=8,
                               head_units=8, word_dropout=rate))


def test_teacher_forcing_drops_words_in_training_only():
    task = ReverseTask(vocab_size=10, batch_size=8, seed=2)
    batch = {k: tf.constant(v) for k, v in task.batch_at(0).items()}
    model = _model(0.5)
    seed = tf.constant(11)

    def nll(b, training):
        return model.teacher_forced(b, training=training, seed=seed)["nll"].numpy()

    clean_eval = nll(batch, False)
    model.config.word_dropout = 0.0           # same weights, word dropout off
    clean_train_ref = nll(batch, True)
    np.testing.assert_allclose(nll(batch, False), clean_eval, rtol=1e-6)  # eval: unaffected
    dropped_in = word_dropout(batch["tgt_in"], 0.5, fold_seed(seed, 1403), 0, 1)
    assert np.any(dropped_in.numpy() != batch["tgt_in"].numpy())
    by_hand = nll(dict(batch, tgt_in=dropped_in), True)
    model.config.word_dropout = 0.5
    np.testing.assert_allclose(nll(batch, False), clean_eval, rtol=1e-6)  # eval: off
    train = nll(batch, True)
    np.testing.assert_allclose(train, by_hand, rtol=1e-5)  # UNK on the dropped inputs
    np.testing.assert_allclose(nll(batch, True), train, rtol=1e-6)  # same seed, same mask
    assert not np.allclose(train, clean_train_ref)


def test_old_configs_load_without_word_dropout():
    d = dataclasses.asdict(ModelConfig())
    d.pop("word_dropout")
    assert ModelConfig.from_dict(d).word_dropout == 0.0
