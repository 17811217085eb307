"""acvi_tf.training.adam.Adam: Keras' Adam, value for value, with fewer graph nodes."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.training.adam import Adam


def _run(optimizer_cls, mode, steps=4, loss_scale=False, **kwargs):
    """The variables after ``steps`` Adam steps on fixed gradients, and the graph's size."""
    rng = np.random.default_rng(0)
    variables = [keras.Variable(rng.standard_normal(s).astype(np.float32), name=f"w{i}")
                 for i, s in enumerate([(3, 4), (4,), (2, 2, 5)])]
    grads = [[tf.constant(rng.standard_normal(v.shape) * 10.0 ** rng.integers(-3, 3),
                          tf.float32) for v in variables] for _ in range(steps)]
    optimizer = optimizer_cls(learning_rate=0.01, **kwargs)
    if loss_scale:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    optimizer.build(variables)

    def apply(g):
        optimizer.apply(g, variables)

    nodes = None
    if mode != "eager":
        fn = tf.function(apply, autograph=False, jit_compile=mode == "xla")
        nodes = len(fn.get_concrete_function(grads[0]).graph.get_operations())
        apply = fn
    for g in grads:
        apply(g)
    return [v.numpy() for v in variables], [v.numpy() for v in optimizer.variables], nodes


@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_equals_keras_adam_bit_for_bit(mode):
    ours, ours_state, ours_nodes = _run(Adam, mode)
    keras_, keras_state, keras_nodes = _run(keras.optimizers.Adam, mode)
    for a, b in zip(ours + ours_state, keras_ + keras_state):
        np.testing.assert_array_equal(a, b)
    if mode == "graph":
        assert ours_nodes < keras_nodes


def test_equals_keras_adam_inside_loss_scaling_and_with_weight_decay():
    for kwargs in ({"loss_scale": True}, {"weight_decay": 0.1}):
        ours = _run(Adam, "graph", **kwargs)
        theirs = _run(keras.optimizers.Adam, "graph", **kwargs)
        for a, b in zip(ours[0] + ours[1], theirs[0] + theirs[1]):
            np.testing.assert_array_equal(a, b)


def test_amsgrad_is_keras_own_step_and_the_config_round_trips():
    ours, _, _ = _run(Adam, "graph", amsgrad=True)
    theirs, _, _ = _run(keras.optimizers.Adam, "graph", amsgrad=True)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)
    config = Adam(learning_rate=0.003, beta_2=0.98, name="adam").get_config()
    assert config == keras.optimizers.Adam(learning_rate=0.003, beta_2=0.98,
                                           name="adam").get_config()
    assert Adam.from_config(config).beta_2 == 0.98


def test_checkpoints_hold_what_keras_adams_hold(tmp_path):
    """Old runs' checkpoints (Keras' Adam) restore into this Adam and back: the same
    checkpoint entries after an apply."""
    def entries(cls, name):
        variables = [keras.Variable(np.ones((2, 2), np.float32))]
        optimizer = cls(0.01)
        optimizer.build(variables)
        tf.function(lambda g: optimizer.apply(g, variables), autograph=False)(
            [tf.ones((2, 2))])
        path = tf.train.Checkpoint(optimizer=optimizer).save(str(tmp_path / name / "ckpt"))
        return sorted(n for n, _ in tf.train.list_variables(path))
    assert entries(Adam, "ours") == entries(keras.optimizers.Adam, "keras")
