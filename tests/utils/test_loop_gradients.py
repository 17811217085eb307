"""Loop-invariant gradients summed after the loop equal TensorFlow's per-step accumulation."""

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.utils.loop_gradients import LOOP_KEY, LoopGradients, adjoint, contract


def test_adjoint_sums_the_weights_and_the_output_gradient_over_a_step_axis():
    assert adjoint("bn,bnd->bd") == "tbn,tbd->bnd"
    assert adjoint("bd,bnd->bn") == "tbd,tbn->bnd"
    for bad in ("bn,bnd->bk", "bt,btd->bd", "b,bnd->bd"):
        with pytest.raises(ValueError):
            adjoint(bad)


def _loop(memory, keys, query0, length, loop=None):
    """A decoder-like loop: e_t = keys . s_t, a_t = softmax(e_t), c_t = a_t . memory, and
    s_{t+1} = tanh(s_t + c_t W): every step reads memory and keys linearly, and the next
    step depends on the context (as with input feeding)."""
    w = tf.constant(np.random.default_rng(3).normal(size=(6, 4)), tf.float32)
    state = {LOOP_KEY: loop} if loop is not None else {}
    arrays = loop.initial_arrays() if loop is not None else {}

    def body(t, s, total, arrays):
        if loop is not None:
            loop.begin(t)
        e = contract(state, "keys", "bd,bnd->bn", s, keys)
        a = tf.nn.softmax(e)
        c = contract(state, "memory", "bn,bnd->bd", a, memory)
        if loop is not None:
            arrays = loop.write(t, arrays)
        s = tf.tanh(s + tf.matmul(c, w))
        return t + 1, s, total + tf.reduce_sum(c * c) + tf.reduce_sum(s), arrays

    _, _, total, arrays = tf.while_loop(lambda t, *_: t < length, body,
                                        (tf.constant(0), query0, tf.constant(0.0), arrays),
                                        maximum_iterations=length)  # XLA needs the bound
    if loop is not None:
        loop.finish(arrays)
    return total


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
def test_a_toy_loop_has_the_same_value_and_gradients_both_ways(mode):
    rng = np.random.default_rng(0)
    memory = tf.constant(rng.normal(size=(3, 5, 6)), tf.float32)
    keys = tf.constant(rng.normal(size=(3, 5, 4)), tf.float32)
    query0 = tf.constant(rng.normal(size=(3, 4)), tf.float32)

    def grads(defer):
        with tf.GradientTape() as tape:
            tape.watch([memory, keys, query0])
            loop = None
            if defer:
                loop = LoopGradients(7)
                loop.declare("memory", "bn,bnd->bd", memory)
                loop.declare("keys", "bd,bnd->bn", keys)
                # declared, never contracted (a variant whose step reads h_i otherwise)
                loop.declare("unused", "bn,bnd->bd", memory)
            total = _loop(memory, keys, query0, 7, loop)
        return [total] + tape.gradient(total, [memory, keys, query0])

    run = {"eager": lambda f: f(), "function": lambda f: tf.function(f)(),
           "xla": lambda f: tf.function(f, jit_compile=True)()}[mode]
    plain, deferred = run(lambda: grads(False)), run(lambda: grads(True))
    for p, d in zip(plain, deferred):
        np.testing.assert_allclose(d.numpy(), p.numpy(), rtol=1e-5, atol=1e-6)
    assert np.abs(plain[1].numpy()).max() > 0.1  # the gradients compared are not trivial


def test_misuse_is_refused():
    loop = LoopGradients(2)
    memory = tf.ones([1, 2, 3])
    loop.declare("memory", "bn,bnd->bd", memory)
    with pytest.raises(ValueError, match="twice"):
        loop.declare("memory", "bn,bnd->bd", memory)
    with pytest.raises(RuntimeError, match="outside begin"):
        loop.contract("memory", tf.ones([1, 2]))
    # A gradient taken without finish() (the stacked weights) is an error, not zeros.
    with tf.GradientTape() as tape:
        tape.watch(memory)
        loop = LoopGradients(1)
        loop.declare("memory", "bn,bnd->bd", memory)
        arrays = loop.initial_arrays()
        loop.begin(0)
        c = contract({LOOP_KEY: loop}, "memory", "bn,bnd->bd", tf.ones([1, 2]), memory)
        loop.write(0, arrays)
    with pytest.raises(RuntimeError, match="finish"):
        tape.gradient(c, memory)
    # Without a LoopGradients in memory_state, contract is the plain product.
    np.testing.assert_allclose(contract({}, "memory", "bn,bnd->bd", tf.ones([1, 2]), memory),
                               [[2.0, 2.0, 2.0]])


@pytest.mark.parametrize("equation,weights_shape", [("bd,bnd->bn", [6, 4]),
                                                    ("bn,bnd->bd", [6, 5])])
def test_shared_rows_equal_the_product_over_the_tiled_copies(equation, weights_shape):
    """Beam search's tiled memory (row b*K + k a copy of row b, K = 3): the grouped
    product over the untiled tensor equals einsum over the tiled one; a tensor that is not
    the tiled one under its name, or an unnamed product, is left to the caller (None)."""
    from acvi_tf.decoding import tile_beam
    from acvi_tf.utils.loop_gradients import SHARED_ROWS_KEY, SharedRows, contract
    rng = np.random.default_rng(0)
    untiled = {"memory": tf.constant(rng.normal(size=[2, 5, 4]), tf.float32)}
    tiled = tile_beam(untiled, 3)
    shared = SharedRows(3, untiled, tiled)
    weights = tf.constant(rng.normal(size=weights_shape), tf.float32)
    want = tf.einsum(equation, weights, tiled["memory"])
    got = shared.contract("memory", equation, weights, tiled["memory"])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    state = {**tiled, SHARED_ROWS_KEY: shared}
    np.testing.assert_allclose(contract(state, "memory", equation, weights, tiled["memory"]),
                               want.numpy(), rtol=1e-6, atol=1e-6)
    other = tf.identity(tiled["memory"])
    assert shared.contract("memory", equation, weights, other) is None
    assert shared.contract(None, equation, weights, tiled["memory"]) is None
