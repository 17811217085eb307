"""attention "none" (acvi_tf/attention/none.py): the no-attention floor is exactly soft
attention's model with every context replaced by zeros (the decoder's zero_context probe,
an independent path), and its a_t is uniform over the real source positions."""

import numpy as np
import tensorflow as tf

from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models.seq2seq import Seq2Seq
from tests.models.test_seq2seq import V, tiny_config


def _copy_weights(src, dst):
    assert [v.shape for v in src.weights] == [v.shape for v in dst.weights]
    for a, b in zip(src.weights, dst.weights):
        b.assign(a)


def test_no_attention_is_soft_attention_with_a_zero_context():
    batch = {k: tf.constant(v) for k, v in
             ReverseTask(vocab_size=V, batch_size=4, seed=2).batch_at(0).items()}
    soft, none = Seq2Seq(tiny_config(attention="soft")), Seq2Seq(tiny_config(attention="none"))
    soft.build_for_checkpoint(batch)
    none.build_for_checkpoint(batch)
    _copy_weights(soft, none)
    zeroed = soft.teacher_forced(batch, zero_context=True)
    out = none.teacher_forced(batch, return_attention=True)
    np.testing.assert_allclose(out["nll"], zeroed["nll"], rtol=1e-6)
    # and it differs from soft attention itself: the context mattered there
    assert np.abs(out["nll"] - soft.teacher_forced(batch)["nll"]).max() > 1e-4
    att = out["attention"].numpy()  # [B, T, N]
    lengths = (batch["src"].numpy() != 0).sum(-1)
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(att[b, :, :n], 1.0 / n, rtol=1e-6)
        assert np.all(att[b, :, n:] == 0.0)
