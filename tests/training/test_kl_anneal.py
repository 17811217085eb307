"""KL cost annealing (Bowman et al. 2016; Bahuleyan et al. 2018's lambda_KL schedule):
the factor, which aux terms it scales, and the trainer's logging and resume."""

import glob
import json
import math
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf import attention as attention_lib
from acvi_tf import latent as latent_lib
from acvi_tf.data.synthetic import ReverseTask
from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
from acvi_tf.training import schedules
from acvi_tf.training.trainer import Trainer, TrainConfig
from tests import cli

V = 10


def _sigmoid_by_hand(step, n, k=10.0):
    s = lambda x: 1.0 / (1.0 + math.exp(-k * (x - 0.5)))  # noqa: E731
    x = min(max(step / n, 0.0), 1.0)
    return 1.0 if x >= 1.0 else (s(x) - s(0.0)) / (s(1.0) - s(0.0))


@pytest.mark.parametrize("step", [0, 1, 3, 5, 9, 10, 11, 1000])
def test_anneal_scale_against_the_formula(step):
    n = 10
    linear = float(schedules.kl_anneal_scale(step, n, "linear"))
    assert linear == pytest.approx(min(1.0, step / n), abs=1e-7)
    sigmoid = float(schedules.kl_anneal_scale(tf.constant(step, tf.int64), n, "sigmoid"))
    assert sigmoid == pytest.approx(_sigmoid_by_hand(step, n), abs=1e-6)


def _bahuleyan_code(iterations):
    """Their training loop (tf-var-attention, ved_varAttn.py), step by step: lambda is 0
    for the first batch and updated after each batch while the count is <= 3000."""
    lam, out = 0.0, []
    for it in range(1, iterations + 1):
        out.append(lam)  # the lambda this batch trains with
        if it <= 3000:
            lam = np.round((np.tanh((it - 4500) / 1000) + 1) / 2, decimals=6)
    return out


def test_bahuleyan_annealing_is_their_loop_with_3000_steps():
    """Our step s trains with their lambda after s batches (their first batch uses 0)."""
    theirs = _bahuleyan_code(5001)
    for step in (1, 2, 100, 1500, 2999, 3000, 3001, 4000, 5000):
        ours = float(schedules.kl_anneal_scale(step, 3000, "bahuleyan"))
        assert ours == pytest.approx(theirs[step], abs=1e-6), step
    assert theirs[3001] == pytest.approx(0.047426, abs=1e-6)  # frozen there for good
    assert float(schedules.kl_anneal_scale(6000, 3000, "bahuleyan")) == pytest.approx(0.047426,
                                                                                       abs=1e-6)


def test_anneal_scale_shape_and_off():
    values = [float(schedules.kl_anneal_scale(s, 100, "sigmoid")) for s in range(0, 101)]
    assert values[0] == 0.0 and values[-1] == 1.0
    assert values[50] == pytest.approx(0.5, abs=1e-6)  # symmetric around the middle
    assert all(b > a for a, b in zip(values, values[1:]))  # strictly increasing
    assert float(schedules.kl_anneal_scale(0, 0)) == 1.0  # 0 steps: off
    with pytest.raises(ValueError, match="kl_anneal='cosine'"):
        schedules.kl_anneal_scale(0, 10, "cosine")


def test_every_registered_kl_term_is_declared_and_nothing_else():
    """Each variant / latent declares its KL aux names; no coverage/REINFORCE among them."""
    for name in attention_lib.available():
        cls = attention_lib.get_attention(name)
        assert set(cls.kl_names) <= set(cls.aux_loss_names), name
        assert {n for n in cls.aux_loss_names if n.startswith("kl")} <= set(cls.kl_names), name
        assert not {"coverage", "reinforce", "nll_soft", "reward"} & set(cls.kl_names), name
    for name in latent_lib.available():
        cls = latent_lib.get_latent(name)
        names = set(cls.sequence_aux_names) | set(cls.step_aux_names)
        assert set(cls.kl_names) <= names, name
        assert {n for n in names if n.startswith("kl")} <= set(cls.kl_names), name
    assert attention_lib.get_attention("acvi").kl_names == ("kl", "kl_mc", "kl_bound")
    assert attention_lib.get_attention("gaussian").kl_names == ("kl",)
    assert attention_lib.get_attention("variational").kl_names == ("kl",)
    assert attention_lib.get_attention("soft").kl_names == ()
    assert latent_lib.get_latent("ved").kl_names == ("kl_z",)


def _cfg(**kw):
    return ModelConfig(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8, encoder_units=8,
                       decoder_units=8, attention_units=8, head_units=8, **kw)


def _batch(seed=0):
    task = ReverseTask(vocab_size=V, batch_size=4, seed=seed)
    batch, _ = next(iter(task(None)))
    return {k: tf.convert_to_tensor(v) for k, v in batch.items()}


def test_annealed_objective_by_hand_gaussian_ved_coverage():
    """objective = nll + s*gamma*KL_a + s*lambda*KL_z + coverage_weight*coverage."""
    model = Seq2Seq(_cfg(attention="gaussian", attention_options={"kl_weight": 0.5},
                         latent="ved", latent_options={"latent_dim": 4, "kl_weight": 2.0},
                         coverage=True, coverage_weight=1.5))
    batch = _batch()
    assert sorted(model.kl_loss_names()) == ["kl", "kl_z"]
    seed = tf.constant(17)
    forced = {k: float(tf.reduce_sum(v)) for k, v in
              model.teacher_forced(batch, training=True, seed=seed).items()}
    assert forced["coverage"] > 0 and forced["kl"] > 0 and forced["kl_z"] > 0
    for scale in (0.0, 0.3, 1.0):
        terms = model.loss_terms(batch, training=True, seed=seed,
                                 kl_scale=tf.constant(scale))
        expected = (forced["nll"] + scale * 0.5 * forced["kl"] + scale * 2.0 * forced["kl_z"]
                    + 1.5 * forced["coverage"])
        np.testing.assert_allclose(float(terms["objective"]), expected, rtol=1e-5)
        for name in ("nll", "kl", "kl_z", "coverage"):  # the logged terms stay unscaled
            np.testing.assert_allclose(float(terms[name]), forced[name], rtol=1e-5)
    # No kl_scale: the plain objective (scale 1).
    plain = model.loss_terms(batch, training=True, seed=seed)
    np.testing.assert_allclose(
        float(plain["objective"]),
        forced["nll"] + 0.5 * forced["kl"] + 2.0 * forced["kl_z"] + 1.5 * forced["coverage"],
        rtol=1e-5)


def test_annealing_leaves_reinforce_and_the_baseline_alone():
    model = Seq2Seq(_cfg(attention="variational",
                         attention_options={"kl_weight": 0.7, "baseline_weight": 0.4}))
    batch = _batch(1)
    seed = tf.constant(5)
    forced = {k: float(tf.reduce_sum(v)) for k, v in
              model.teacher_forced(batch, training=True, seed=seed).items()}
    terms = model.loss_terms(batch, training=True, seed=seed, kl_scale=tf.constant(0.25))
    expected = (forced["nll"] + 0.25 * 0.7 * forced["kl"] + 1.0 * forced["reinforce"]
                + 0.4 * forced["nll_soft"])
    np.testing.assert_allclose(float(terms["objective"]), expected, rtol=1e-5)
    # The gradient of the REINFORCE surrogate is not scaled either: at scale 0 the
    # inference network still gets a gradient (from reinforce), not just from KL.
    with tf.GradientTape() as tape:
        zero = model.loss_terms(batch, training=True, seed=seed, kl_scale=tf.constant(0.0))
    q_vars = [v for v in model.trainable_variables if "q_" in v.path]
    grads = tape.gradient(zero["objective"], q_vars)
    assert q_vars and any(g is not None and float(tf.reduce_max(tf.abs(g))) > 0 for g in grads)


def _trainer(model_dir, steps, log, **kw):
    task = ReverseTask(vocab_size=V, batch_size=8, seed=3)
    cfg = TrainConfig(model_dir=str(model_dir), train_steps=steps, learning_rate=0.01,
                      log_every=1, eval_every=0, checkpoint_every=100, progress=False,
                      kl_anneal_steps=6, gumbel_fraction=0.0, **kw)
    model_cfg = _cfg(attention="gaussian", latent="ved", latent_options={"latent_dim": 4},
                     dropout=0.1)
    return Trainer(lambda: Seq2Seq(model_cfg), cfg, task, log=log)


def _logged(model_dir, tag):
    values = {}
    for path in glob.glob(str(model_dir / "train" / "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                if v.tag == tag:
                    values[event.step] = float(tf.make_ndarray(v.tensor))
    return values


def test_trainer_logs_kl_scale_and_a_resumed_run_continues_the_schedule(tmp_path):
    """8 steps, annealed over 6: stop at 4, resume to 8. The logged factor of step s
    (the s-th update, 0-based step s - 1) is min(1, (s - 1) / 6) across the resume,
    the weights equal an uninterrupted run's, and a new step value does not retrace."""
    lines = []
    full = _trainer(tmp_path / "full", 8, lines.append)
    full.train()
    assert any("kl_scale=" in line for line in lines), lines
    part = _trainer(tmp_path / "part", 8, lambda m: None)
    part.train(stop_at=4)
    resumed = _trainer(tmp_path / "part", 8, lambda m: None)
    resumed.train()
    logged = _logged(tmp_path / "part", "kl_scale")
    assert sorted(logged) == list(range(1, 9))
    for step, value in logged.items():
        assert value == pytest.approx(min(1.0, (step - 1) / 6), abs=1e-6), (step, value)
    assert _logged(tmp_path / "full", "kl_scale") == logged
    for a, b in zip(full.model.trainable_variables, resumed.model.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    _assert_no_retrace_per_step(resumed)


def _assert_no_retrace_per_step(trainer):
    """The scale is a tensor of the step: new step values reuse the traced function."""
    (fn,) = trainer._train_fns.values()
    batch = trainer._distribute(trainer.train_data(0).__next__()[0])
    fn(batch, tf.constant(100, tf.int64))
    traces = fn.experimental_get_tracing_count()
    for step in (101, 2, 3):
        fn(batch, tf.constant(step, tf.int64))
    assert fn.experimental_get_tracing_count() == traces


def test_annealing_changes_the_update(tmp_path):
    """At step 0 the linear factor is 0: the KL gradient is off, so the first update
    differs from an unannealed run's (catches a trainer that never passes the scale)."""
    def first_update(kl_anneal_steps, tmp):
        task = ReverseTask(vocab_size=V, batch_size=8, seed=3)
        cfg = TrainConfig(model_dir=str(tmp), train_steps=1, learning_rate=0.01, log_every=1,
                          eval_every=0, progress=False, kl_anneal_steps=kl_anneal_steps)
        t = Trainer(lambda: Seq2Seq(_cfg(attention="gaussian")), cfg, task, log=lambda m: None)
        metrics = t.train()
        return metrics, [v.numpy() for v in t.model.trainable_variables]
    annealed, w_annealed = first_update(5, tmp_path / "annealed")
    plain, w_plain = first_update(0, tmp_path / "plain")
    assert annealed["kl_scale"] == 0.0 and "kl_scale" not in plain
    assert annealed["loss"] < plain["loss"]  # the KL term is out of the objective
    assert any(not np.allclose(a, b) for a, b in zip(w_annealed, w_plain))


def test_bad_curve_is_rejected(tmp_path):
    cfg = TrainConfig(model_dir=str(tmp_path), kl_anneal="cosine")
    with pytest.raises(ValueError, match="--kl_anneal='cosine'"):
        Trainer(lambda: Seq2Seq(_cfg()), cfg, ReverseTask(vocab_size=V, batch_size=8))


DISTRIBUTED = textwrap.dedent("""
    import os, sys, json
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from acvi_tf.data.synthetic import ReverseTask
    from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
    from acvi_tf.training.trainer import Trainer, TrainConfig, make_strategy
    cfg = ModelConfig(src_vocab_size=10, tgt_vocab_size=10, embed_dim=8, encoder_units=8,
                      decoder_units=8, attention_units=8, head_units=8, attention="gaussian",
                      word_dropout=0.3)
    out = {}
    # XLA with the default strategy, and two mirrored replicas (XLA off: jit-compiling
    # the cross-replica step fails on CPU whether or not annealing is on).
    for name, xla in (("default", True), ("mirrored", False)):
        strategy = make_strategy(name, num_devices=2)
        tc = TrainConfig(model_dir=os.path.join(sys.argv[1], name), train_steps=3,
                         learning_rate=0.01, progress=False, eval_every=0, log_every=1,
                         jit_compile=xla, kl_anneal_steps=4, kl_anneal="sigmoid",
                         gumbel_fraction=0.0)
        lines = []
        # One sequence length: XLA compiles once per input shape (3 shapes cost 2x CPU)
        data = ReverseTask(vocab_size=10, min_len=8, batch_size=8, seed=1)
        t = Trainer(lambda: Seq2Seq(cfg), tc, data, strategy=strategy, log=lines.append)
        t.train()
        (fn,) = t._train_fns.values()
        batch = t._distribute(next(t.train_data(0))[0])
        fn(batch, tf.constant(100, tf.int64))
        traces = fn.experimental_get_tracing_count()
        for step in (101, 2):
            fn(batch, tf.constant(step, tf.int64))
        out[name] = {"replicas": strategy.num_replicas_in_sync, "lines": lines,
                     "retraced": fn.experimental_get_tracing_count() - traces}
    json.dump(out, open(os.path.join(sys.argv[1], "out.json"), "w"))
""")


def test_annealing_and_word_dropout_under_xla_and_on_two_mirrored_devices(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(DISTRIBUTED)
    r = cli.run(str(script), [str(tmp_path)], timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.load(open(tmp_path / "out.json"))
    assert out["mirrored"]["replicas"] == 2
    expected = [_sigmoid_by_hand(s, 4) for s in range(3)]
    for name in ("default", "mirrored"):
        assert out[name]["retraced"] == 0, name
        scales = [float(line.split("kl_scale=")[1].split()[0]) for line in out[name]["lines"]
                  if line.startswith("step ")]
        np.testing.assert_allclose(scales, expected, atol=1e-3, err_msg=name)


def test_noise_warmup_ramps_the_acvi_noise_and_starts_at_the_soft_context(tmp_path):
    """--noise_warmup_steps: the trainer logs noise_scale = min(1, step / N), and at step 0
    (scale 0) ACVI's training loss at KL weight 0 is the noiseless one (the same model's
    loss_terms with noise_scale=0), not the noisy one."""
    def trainer(sub, warmup):
        task = ReverseTask(vocab_size=V, batch_size=8, seed=3)
        cfg = TrainConfig(model_dir=str(tmp_path / sub), train_steps=1, learning_rate=0.0,
                          log_every=1, eval_every=0, progress=False, gumbel_fraction=0.0,
                          noise_warmup_steps=warmup, seed=5)
        model_cfg = _cfg(attention="acvi", attention_options={"kl_weight": 0.0,
                                                              "log_sigma_sq_init": 2.0})
        return Trainer(lambda: Seq2Seq(model_cfg), cfg, task, log=lambda m: None)
    warm = trainer("warm", 4)
    metrics = warm.train()
    assert metrics["noise_scale"] == 0.0
    plain = trainer("plain", 0)
    plain_metrics = plain.train()
    assert "noise_scale" not in plain_metrics
    batch = {k: tf.convert_to_tensor(v)
             for k, v in next(iter(ReverseTask(vocab_size=V, batch_size=8, seed=3)(None)))[0]
             .items()}
    quiet = warm.model.loss_terms(batch, training=True, seed=1, noise_scale=tf.constant(0.0))
    quiet_eval = warm.model.loss_terms(batch, training=False, seed=1)
    noisy = warm.model.loss_terms(batch, training=True, seed=1)
    # dropout is 0: with no noise the training context is the decode-time posterior mean
    np.testing.assert_allclose(float(quiet["nll"]), float(quiet_eval["nll"]), rtol=1e-5)
    assert abs(float(noisy["nll"]) - float(quiet["nll"])) > 1e-3
    assert metrics["loss"] != pytest.approx(plain_metrics["loss"], rel=1e-4)
    for step in (1, 2, 4, 9):
        assert float(schedules.kl_anneal_scale(step, 4, "linear")) == min(1.0, step / 4)
