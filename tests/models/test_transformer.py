"""The Transformer baseline: one causal pass for training, the same numbers step by step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from acvi_tf import decoding
from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models import MODELS, build_model, model_names
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from acvi_tf.models.transformer import Transformer, sinusoidal_positions

V = 12


def tiny_config(**overrides):
    cfg = dict(model="transformer", src_vocab_size=V, tgt_vocab_size=V, embed_dim=16,
               num_heads=2, ff_units=16, transformer_layers=2, head_units=8)
    cfg.update(overrides)
    return ModelConfig(**cfg)


def tensors(batch):
    return {k: tf.constant(v) for k, v in batch.items()}


def reverse_batch(batch_size=4, position=0, seed=1):
    return tensors(ReverseTask(vocab_size=V, batch_size=batch_size, seed=seed).batch_at(position))


def pointer_batch():
    """A batch whose sources hold two OOVs (extended ids V, V+1) that the targets copy."""
    batch = ReverseTask(vocab_size=V, batch_size=3, seed=4).batch_at(0)
    src_ext = batch["src"].copy()
    src_ext[0, 0], src_ext[1, 1] = V, V + 1
    tgt_out = batch["tgt_out"].copy()
    tgt_out[0, 0], tgt_out[1, 0] = V, V + 1
    tgt_in = batch["tgt_in"].copy()
    tgt_in[0, 1] = V  # the copied OOV is fed back (as UNK) at the next step
    return tensors(dict(batch, src_ext=src_ext, tgt_out=tgt_out, tgt_in=tgt_in,
                        max_oovs=np.int32(2)))


def as_references(ids, lengths, bos_id=2):
    """Decoded hypotheses ids [B, T] with lengths [B] as ``tgt_in``/``tgt_out`` (pad 0)."""
    real = np.arange(ids.shape[1])[None, :] < lengths[:, None]
    shifted = np.concatenate([np.full_like(ids[:, :1], bos_id), ids[:, :-1]], axis=1)
    return {"tgt_in": tf.constant(np.where(real, shifted, 0)),
            "tgt_out": tf.constant(np.where(real, ids, 0))}


def stepwise(model, batch):
    """Runs ``step`` over the reference: summed target NLL [B] and attention [B, T, N]."""
    memory_state, state = model.start(batch, max_length=int(batch["tgt_in"].shape[1]))
    nll, attention = 0.0, []
    for t in range(batch["tgt_in"].shape[1]):
        log_probs, state, extras = model.step(batch["tgt_in"][:, t], state, memory_state)
        target = tf.gather(log_probs, batch["tgt_out"][:, t], batch_dims=1).numpy()
        nll = nll - target * (batch["tgt_out"][:, t].numpy() != 0)
        attention.append(extras["attention"].numpy())
        assert extras["aux"] == {}
    return nll, np.stack(attention, axis=1)


def test_sinusoidal_positions_follow_section_3_5():
    pe = sinusoidal_positions(tf.range(7), 6).numpy()
    pos, i = np.arange(7)[:, None], np.arange(3)[None, :]
    angle = pos / 10000.0 ** (2 * i / 6)
    np.testing.assert_allclose(pe[:, 0::2], np.sin(angle), atol=1e-6)
    np.testing.assert_allclose(pe[:, 1::2], np.cos(angle), atol=1e-6)


@pytest.mark.parametrize("head", ["softmax", "pointer"])
def test_step_by_step_equals_the_parallel_causal_pass(head):
    """What guarantees that decoding scores tokens as training did."""
    keras.utils.set_random_seed(0)
    model = Transformer(tiny_config(head=head, dropout=0.2))
    batch = pointer_batch() if head == "pointer" else reverse_batch()
    forced = model.teacher_forced(batch, return_attention=True)
    nll, attention = stepwise(model, batch)
    assert np.all(forced["nll"].numpy() > 0)
    np.testing.assert_allclose(forced["nll"].numpy(), nll, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(forced["attention"].numpy(), attention, atol=1e-5)
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)


def test_decoder_is_causal():
    """Changing target input j changes no log-prob before position j, and does change j."""
    model = Transformer(tiny_config())
    batch = reverse_batch()
    j = 3
    changed_in = batch["tgt_in"].numpy().copy()
    changed_in[:, j] = np.where(changed_in[:, j] == 5, 6, 5)
    changed = dict(batch, tgt_in=tf.constant(changed_in))
    prefix_out = batch["tgt_out"].numpy().copy()
    prefix_out[:, j:] = 0

    def nll(b, tgt_out):
        return model.teacher_forced(dict(b, tgt_out=tf.constant(tgt_out)))["nll"].numpy()

    np.testing.assert_array_equal(nll(batch, prefix_out), nll(changed, prefix_out))
    full_out = batch["tgt_out"].numpy()
    assert np.all(np.abs(nll(batch, full_out) - nll(changed, full_out)) > 1e-6)


def test_source_padding_changes_nothing():
    model = Transformer(tiny_config())
    batch = reverse_batch()
    padded = dict(batch, src=tf.pad(batch["src"], [[0, 0], [0, 3]]))
    out = model.teacher_forced(batch, return_attention=True)
    out_padded = model.teacher_forced(padded, return_attention=True)
    n = batch["src"].shape[1]
    att = out_padded["attention"].numpy()
    src_pad = padded["src"].numpy() == 0
    assert np.abs(att * src_pad[:, None, :]).max() == 0.0
    np.testing.assert_allclose(out["nll"], out_padded["nll"], rtol=1e-5)
    np.testing.assert_allclose(att[:, :, :n], out["attention"], atol=1e-6)
    np.testing.assert_array_equal(model.decode(batch, max_length=6)["ids"],
                                  model.decode(padded, max_length=6)["ids"])


def test_beam_search_reorders_the_cache_correctly():
    """Beam width 1 is greedy; beam 3 is no worse, and its scores are the model's
    teacher-forced likelihoods (so each hypothesis kept its own key/value cache)."""
    keras.utils.set_random_seed(3)
    model = Transformer(tiny_config())
    batch = reverse_batch(batch_size=3, position=5)
    # With the end token forbidden, a width-1 beam keeps exactly greedy's choices
    # (otherwise it may also keep an ended hypothesis greedy passed over).
    forced_length = model.decode(batch, beam_width=1, max_length=6, min_length=6)
    memory_state, state = model.start(batch, max_length=6)
    banned = (model.config.pad_id, model.config.bos_id)  # as Transformer.decode
    one = decoding.beam_search(decoding.never_emit(
                                   lambda ids, s: model.step(ids, s, memory_state), banned),
                               state,
                               tf.fill([3], 2), model.config.eos_id, 1, 6, min_length=6)
    np.testing.assert_array_equal(one["ids"][:, 0], forced_length["ids"])
    np.testing.assert_allclose(one["log_probs"][:, 0], forced_length["log_prob"], atol=1e-5)

    greedy = model.decode(batch, beam_width=1, max_length=6)

    beam = model.decode(batch, beam_width=3, max_length=6)
    assert beam["attention"].shape[:3] == (3, 3, 6)
    assert np.all(beam["log_probs"].numpy()[:, 0] >= greedy["log_prob"].numpy() - 1e-5)
    for k in range(3):
        ids, lengths = beam["ids"].numpy()[:, k], beam["lengths"].numpy()[:, k]
        forced = model.teacher_forced(dict(batch, **as_references(ids, lengths)))
        # An untrained model may emit PAD (id 0), which teacher forcing masks out.
        clean = np.all((ids != 0) | (np.arange(ids.shape[1]) >= lengths[:, None]), axis=1)
        assert clean.any()
        np.testing.assert_allclose(-forced["nll"].numpy()[clean],
                                   beam["log_probs"].numpy()[clean, k], atol=1e-4)


def _train(model_fn, data, steps, tmp_path, lr):
    from acvi_tf.training.trainer import Trainer, TrainConfig
    logs = []
    cfg = TrainConfig(model_dir=str(tmp_path), train_steps=steps, learning_rate=lr,
                      log_every=10, eval_every=0, checkpoint_every=steps, progress=False)
    trainer = Trainer(model_fn, cfg, data, log=logs.append)
    trainer.train()
    nll = [float(m.split("nll=")[1].split()[0]) for m in logs if m.startswith("step ")]
    return trainer.model, nll


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_trainer_learns_the_reverse_task(tmp_path, label_smoothing):
    """With label smoothing too: the trainer takes the smoothed objective and the NLL it
    logs (the plain one) falls."""
    task = ReverseTask(vocab_size=V, batch_size=16, seed=0)
    _, nll = _train(lambda: Transformer(tiny_config(dropout=0.1,
                                                    label_smoothing=label_smoothing)),
                    task, 60, tmp_path, 3e-3)
    assert all(np.isfinite(nll))
    assert nll[-1] < nll[0] - 0.3, nll


def test_overfits_one_batch_and_the_cli_reloads_and_decodes_it(tmp_path):
    from acvi_tf.run.restore import restore_model
    from acvi_tf.tasks.decode_batches import best_hypothesis_decoder
    batch = ReverseTask(vocab_size=V, batch_size=8, seed=2).batch_at(0)

    def data(position):
        p = int(position or 0)
        while True:
            yield batch, p + 1
            p += 1

    _, nll = _train(lambda: Transformer(tiny_config()), data, 70, tmp_path, 1e-2)
    assert nll[-1] < 0.1, nll
    model = Transformer(tiny_config())  # as the CLI's decode mode: rebuild, restore
    assert restore_model(model, str(tmp_path), batch) == 70
    signature = {"src": tf.TensorSpec([None, None], tf.int32)}
    decode = best_hypothesis_decoder(model, signature, beam_width=2,
                                     max_length=batch["tgt_out"].shape[1])
    ids = decode({"src": tf.constant(batch["src"])})["ids"].numpy()
    for row, target in zip(ids, batch["tgt_out"]):
        n = int((target != 0).sum())
        np.testing.assert_array_equal(row[:n], target[:n])


def test_features_source_config_round_trip_and_checkpoint(tmp_path):
    cfg = tiny_config(src_vocab_size=None, feature_dim=6, num_samples=2)
    model = build_model(cfg)
    assert isinstance(model, Transformer)
    batch = {"src": tf.random.normal([2, 5, 6]), "src_len": tf.constant([5, 3]),
             "tgt_in": tf.constant([[2, 5, 6], [2, 7, 0]]),
             "tgt_out": tf.constant([[5, 6, 3], [7, 3, 0]])}
    terms = model.loss_terms(batch)
    assert set(terms) == {"nll", "num_tokens", "objective"}
    assert float(terms["num_tokens"]) == 5.0  # K samples are averaged, not summed
    assert float(terms["objective"]) == pytest.approx(float(terms["nll"]))
    # Frames past src_len are padding: changing them changes nothing.
    noisy = dict(batch, src=tf.concat([batch["src"][:1], tf.concat(
        [batch["src"][1:, :3], 100.0 + batch["src"][1:, 3:]], axis=1)], axis=0))
    np.testing.assert_allclose(model.teacher_forced(noisy)["nll"],
                               model.teacher_forced(batch)["nll"], rtol=1e-5)

    clone = Transformer.from_config(model.get_config())
    assert isinstance(clone, Transformer) and clone.config == cfg
    path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
    clone.build_for_checkpoint(batch)
    tf.train.Checkpoint(model=clone).restore(path).assert_existing_objects_matched()
    np.testing.assert_allclose(clone.teacher_forced(batch)["nll"],
                               model.teacher_forced(batch)["nll"], rtol=1e-6)


def test_registry_and_config_errors():
    assert model_names() == ["seq2seq", "transformer"]
    assert MODELS.get("seq2seq") is Seq2Seq
    assert isinstance(build_model(ModelConfig(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8,
                                              encoder_units=8, decoder_units=8,
                                              attention_units=8, head_units=8)), Seq2Seq)
    with pytest.raises(ValueError, match="unknown model 'lstm'"):
        build_model(tiny_config(model="lstm"))
    with pytest.raises(ValueError, match="embed_dim=16 is not divisible by num_heads=3"):
        Transformer(tiny_config(num_heads=3))
    with pytest.raises(ValueError, match="--attention, --coverage"):
        Transformer(tiny_config(attention="acvi", coverage=True))
    model = Transformer(tiny_config())
    model.set_mode(acvi_mixing="gumbel", coverage=False)
    with pytest.raises(ValueError, match="no coverage"):
        model.set_mode(coverage=True)


def test_label_smoothing_is_kerass_smoothed_cross_entropy_and_the_nll_stays_plain():
    """--label_smoothing=eps: the training objective is the label-smoothed cross-entropy
    of Keras' reference, summed over the real target tokens; the nll term is the plain one
    (the same as without smoothing); the other models and heads refuse it."""
    eps = 0.1
    batch = reverse_batch()
    plain = Transformer(tiny_config())
    plain.build_for_checkpoint(batch)
    smoothed = Transformer(tiny_config(label_smoothing=eps))
    smoothed.build_for_checkpoint(batch)
    smoothed.set_weights(plain.get_weights())
    terms = smoothed.loss_terms(batch, training=False)
    assert np.isclose(terms["nll"].numpy(), plain.loss_terms(batch, training=False)["nll"]
                      .numpy(), rtol=1e-6)
    memory_state = smoothed.encode(batch, training=False)
    log_probs = smoothed._decode(batch["tgt_in"], tf.range(batch["tgt_in"].shape[1]),
                                 memory_state, 0, False)[0]
    mask = (batch["tgt_out"].numpy() != 0)
    reference = keras.losses.categorical_crossentropy(
        tf.one_hot(batch["tgt_out"], V), tf.exp(log_probs), label_smoothing=eps).numpy()
    assert np.isclose(terms["objective"].numpy(), (reference * mask).sum(), rtol=1e-5)
    # the aux term is U - nll, U the cross-entropy to the uniform distribution (numpy)
    uniform = -(log_probs.numpy().mean(axis=-1) * mask).sum()
    assert np.isclose(terms["label_smoothing"].numpy(), uniform - terms["nll"].numpy(),
                      rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="label_smoothing=0.1 needs --head=softmax"):
        Transformer(tiny_config(label_smoothing=eps, head="pointer"))
    with pytest.raises(ValueError, match="implemented for --model=transformer"):
        Seq2Seq(ModelConfig(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8, encoder_units=8,
                            decoder_units=8, attention_units=8, head_units=8,
                            label_smoothing=eps))
