"""Word dropout on the decoder's input words (Bowman et al. 2016, Section 3.2)."""

import tensorflow as tf

from acvi_tf.utils.ops import stateless_uniform


def word_dropout(ids, rate, seed, pad_id=0, unk_id=1):
    """Word dropout on decoder inputs (Bowman et al., "Generating Sentences from a
    Continuous Space", CoNLL 2016, Section 3.2; used by Bahuleyan et al., COLING 2018).

    Each token of ``ids`` [B, T] becomes ``unk_id`` with probability ``rate``,
    except position 0 (<bos>) and padding, so the decoder has to lean on the
    latent / attention context rather than on the previous word. ``seed`` is a
    stateless seed: the same seed gives the same mask.
    """
    ids = tf.convert_to_tensor(ids)
    drop = stateless_uniform(tf.shape(ids), seed) < rate
    not_first = tf.range(tf.shape(ids)[1])[None, :] > 0
    drop = drop & not_first & tf.not_equal(ids, pad_id)
    return tf.where(drop, tf.cast(unk_id, ids.dtype), ids)
