"""The run diagnostics (acvi_tf.training.diagnostics) against direct computations."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from acvi_tf.training.diagnostics import DevDiagnostics, summarise

V, E, U = 12, 8, 8


def _model(attention="soft", **options):
    keras.utils.set_random_seed(0)  # the same fresh model whatever ran before in the worker
    model = Seq2Seq(ModelConfig(src_vocab_size=V, tgt_vocab_size=V, embed_dim=E,
                                encoder_units=U // 2, decoder_units=U, attention_units=U,
                                head_units=U, score="multiplicative", attention=attention,
                                attention_options=options))
    model.build_for_checkpoint(_batches()[0])
    return model


def _batches():
    rng = np.random.default_rng(0)
    out = []
    for n, t in ((5, 4), (3, 6)):
        src = rng.integers(4, V, size=[3, n]).astype(np.int32)
        src[0, -1] = 0  # padding
        tgt = rng.integers(4, V, size=[3, t]).astype(np.int32)
        tgt[1, -2:] = 0
        tgt_in = np.concatenate([np.full([3, 1], 2, np.int32), tgt[:, :-1]], axis=1)
        out.append({"src": tf.constant(src), "tgt_in": tf.constant(tgt_in),
                    "tgt_out": tf.constant(tgt)})
    return out


def _ignore_context(model):
    """Zeroes every weight through which c_t reaches the output: the decoder input's
    context rows (input feeding) and the head's context rows."""
    cell = model.decoder.cells[0]
    kernel = cell.kernel.numpy()
    kernel[E:] = 0.0  # the input is [embedding(y); c_{t-1}]
    cell.kernel.assign(kernel)
    v = model.decoder.head.V.kernel.numpy()
    v[U:] = 0.0  # the head reads [s_t; c_t]
    model.decoder.head.V.kernel.assign(v)


def test_context_use_is_zero_for_a_decoder_that_ignores_the_context():
    model = _model()
    before = DevDiagnostics()(model, _batches())
    assert abs(before["context_use"]) > 1e-4  # a fresh model does read c_t
    _ignore_context(model)
    after = DevDiagnostics()(model, _batches())
    assert after["context_use"] == pytest.approx(0.0, abs=1e-6)


def test_diagnostics_against_direct_computation():
    model = _model("acvi", log_sigma_sq_init=-2.0)
    out = DevDiagnostics()(model, _batches())
    nll = zero_nll = tokens = entropy = norm = sigma = positions = 0.0
    for batch in _batches():
        terms = model.teacher_forced(batch, return_attention=True)
        nll += float(tf.reduce_sum(terms["nll"]))
        # the probe as a Python bool (eager), against the traced pass's scalar tensor
        zero_nll += float(tf.reduce_sum(model.teacher_forced(batch, zero_context=True)["nll"]))
        tmask = (batch["tgt_out"].numpy() != 0)
        tokens += tmask.sum()
        a = terms["attention"].numpy()
        h = -(a * np.log(np.maximum(a, 1e-30))).sum(-1)
        entropy += (h * tmask).sum()
        memory_state, _ = model.start(batch)
        smask = memory_state["mask"].numpy()
        norm += (np.linalg.norm(memory_state["memory"].numpy(), axis=-1) * smask).sum()
        s = np.exp(0.5 * memory_state["variant"]["log_sigma_sq"].numpy()).mean(-1)
        sigma += (s * smask).sum()
        positions += smask.sum()
    assert out["dev_nll"] == pytest.approx(nll / tokens, rel=1e-5)
    assert out["attention_entropy"] == pytest.approx(entropy / tokens, rel=1e-5)
    assert out["memory_norm"] == pytest.approx(norm / positions, rel=1e-5)
    assert out["sigma_mean"] == pytest.approx(sigma / positions, rel=1e-5)
    assert out["context_use"] == pytest.approx((zero_nll - nll) / tokens, rel=1e-4)
    assert abs(out["context_use"]) > 1e-4
    assert {"kl_mc", "kl_bound", "kl", "context_use"} <= set(out)


def test_summarise_divides_by_the_right_counts():
    out = summarise({"nll": 10.0, "num_tokens": 5.0, "kl_mc": 20.0, "memory_norm": 6.0,
                     "source_positions": 3.0}, zero_nll=15.0)
    assert out == pytest.approx({"dev_nll": 2.0, "kl_mc": 4.0, "memory_norm": 2.0,
                                 "dev_ppl": np.exp(2.0), "context_use": 1.0})
    assert summarise({"nll": 1.0, "num_tokens": 1.0})["context_use"] is None
