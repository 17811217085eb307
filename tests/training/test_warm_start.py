"""--init_from: copy every variable whose name and shape match (acvi_tf.training.warm_start)."""

import numpy as np
import tensorflow as tf

from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from acvi_tf.training.warm_start import canonical_names, copy_matching

BATCH = {"src": tf.constant([[4, 5, 6]]), "tgt_in": tf.constant([[2, 4]]),
         "tgt_out": tf.constant([[4, 3]])}


def _model(attention, vocab=10, **kw):
    m = Seq2Seq(ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, embed_dim=8,
                            encoder_units=4, decoder_units=8, attention_units=8, head_units=8,
                            score="multiplicative", attention=attention, **kw))
    m.build_for_checkpoint(BATCH)
    return m


def test_acvi_from_soft_loads_every_soft_weight_and_keeps_sigma_fresh():
    soft = _model("soft")
    acvi = _model("acvi")
    fresh = {n: v.numpy().copy() for n, v in zip(canonical_names(acvi.variables),
                                                  acvi.variables)}
    loaded, skipped = copy_matching(soft, acvi)
    assert len(loaded) == len(soft.variables)
    assert sorted(skipped) == sorted(n for n in fresh if "sigma_mlp" in n)
    by_name = dict(zip(canonical_names(soft.variables), soft.variables))
    for name, var in zip(canonical_names(acvi.variables), acvi.variables):
        if name in by_name:
            np.testing.assert_array_equal(var.numpy(), by_name[name].numpy())
        else:
            np.testing.assert_array_equal(var.numpy(), fresh[name])
    # without sampling (training=False: the posterior mean) it is the soft model exactly
    np.testing.assert_allclose(acvi.loss_terms(BATCH)["nll"], soft.loss_terms(BATCH)["nll"],
                               rtol=1e-6)


def test_shape_mismatch_is_skipped_with_the_reason():
    loaded, skipped = copy_matching(_model("soft", vocab=12), _model("soft", vocab=10))
    assert any("shape" in why for why in skipped.values())
    assert all("embedding" in n or "V_prime" in n for n in skipped)
    assert loaded
