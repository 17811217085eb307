"""acvi_tf.utils.ops: the stateless random ops draw what TensorFlow's defaults draw."""

import pytest
import tensorflow as tf

from acvi_tf.utils import ops


def _draws(alg, x, seed):
    """Every stateless random op of the package: ops' helpers with ``alg`` (None: the
    helpers as they are), else TensorFlow's calls with their default algorithm."""
    if alg is None:
        folded = ops.fold_seed(seed, 5)
        return (folded, ops.fold_seed(seed, 5, -7), ops.stateless_normal([3, 7], folded),
                ops.stateless_uniform([3, 7], seed, minval=1e-20),
                ops.stateless_uniform([4], seed), ops.stateless_uniform([4], seed, 2.0, 5.0),
                ops.stateless_normal([2, 5], seed, tf.float64),
                ops.stateless_normal([2, 5], seed, tf.bfloat16), ops.dropout(x, 0.3, seed, True),
                ops.dropout(tf.cast(x, tf.bfloat16), 0.5, folded, True))
    folded = tf.random.experimental.stateless_fold_in(seed, 5)
    return (folded, tf.random.experimental.stateless_fold_in(folded, -7),
            tf.random.stateless_normal([3, 7], seed=folded),
            tf.random.stateless_uniform([3, 7], seed=seed, minval=1e-20, maxval=1.0),
            tf.random.stateless_uniform([4], seed=seed),
            tf.random.stateless_uniform([4], seed=seed, minval=2.0, maxval=5.0),
            tf.random.stateless_normal([2, 5], seed=seed, dtype=tf.float64),
            tf.random.stateless_normal([2, 5], seed=seed, dtype=tf.bfloat16),
            tf.nn.experimental.stateless_dropout(x, rate=0.3, seed=seed),
            tf.nn.experimental.stateless_dropout(tf.cast(x, tf.bfloat16), rate=0.5, seed=folded))


@pytest.mark.parametrize("jit", [None, False, True], ids=["eager", "graph", "xla"])
def test_named_algorithm_draws_the_default_numbers(jit):
    """ops names its algorithm (RNG_ALG) and scrambles the Philox seed in its own few ops
    only because XLA compiles "auto_select" to a much slower generator and TensorFlow's
    scrambling costs 40 graph ops per draw: the numbers must be TensorFlow's defaults',
    eagerly, in a graph and under XLA, so that a run resumed or decoded across the change
    draws the noise it drew before."""
    x = tf.reshape(tf.range(1.0, 22.0), [3, 7])
    seed = ops.fold_seed(tf.constant(11), 3)
    if jit is None:
        ours, default = _draws(None, x, seed), _draws("default", x, seed)
    else:
        ours = tf.function(lambda: _draws(None, x, seed), jit_compile=jit)()
        default = tf.function(lambda: _draws("default", x, seed), jit_compile=jit)()
    for a, b in zip(ours, default):
        assert a.dtype == b.dtype
        assert tf.reduce_all(a == b), (a, b)
    # and the draws are draws: not constant, uniforms inside (minval, 1)
    normal, uniform = ours[2], ours[3]
    assert float(tf.math.reduce_std(normal)) > 0.3
    assert float(tf.reduce_min(uniform)) > 0.0 and float(tf.reduce_max(uniform)) < 1.0


@pytest.mark.parametrize("graph", [False, True])
def test_dropout_calls_a_seed_function_only_when_it_draws(graph):
    """A seed function gives the mask of the seed it returns, and is not called (no
    folding ops built) at rate 0 or outside training."""
    x = tf.reshape(tf.range(1.0, 41.0), [4, 10])
    seed = tf.constant([3, 4])
    calls = []

    def seed_fn():
        calls.append(1)
        return ops.fold_seed(seed, 7)

    def run():
        return (ops.dropout(x, 0.4, seed_fn, True), ops.dropout(x, 0.4, ops.fold_seed(seed, 7), True),
                ops.dropout(x, 0.0, seed_fn, True), ops.dropout(x, 0.4, seed_fn, False))
    lazy, eager, rate0, not_training = (tf.function(run, autograph=False) if graph else run)()
    assert len(calls) == 1
    assert tf.reduce_all(lazy == eager) and tf.reduce_any(lazy == 0.0)
    assert tf.reduce_all(rate0 == x) and tf.reduce_all(not_training == x)


def test_dropout_salts_fold_the_seed_it_draws_from():
    """``salts`` give the mask of ``fold_seed(seed, *salts)``, from a seed or a seed
    function alike."""
    x = tf.reshape(tf.range(1.0, 41.0), [4, 10])
    seed = tf.constant([3, 4])
    want = ops.dropout(x, 0.4, ops.fold_seed(seed, 1, 2), True)
    assert tf.reduce_all(ops.dropout(x, 0.4, seed, True, salts=(1, 2)) == want)
    assert tf.reduce_all(ops.dropout(x, 0.4, lambda: seed, True, salts=(1, 2)) == want)
    assert not tf.reduce_all(ops.dropout(x, 0.4, seed, True, salts=(1, 3)) == want)


@pytest.mark.parametrize("graph", [False, True])
def test_part_seeds_depend_on_the_index_and_the_kind_of_part(graph):
    """part 0 keeps the seed; parts 1-3 of one kind differ from each other and from the
    same parts of another kind (replica 1 and batch shard 1 must not draw alike), for a
    scalar seed (whose first element alone is kept) and a [2] seed, and a tensor index
    gives what the Python index gives."""
    run = tf.function(ops.part_seed, autograph=False) if graph else ops.part_seed
    for seed in (tf.constant(9), tf.constant([9, 4])):
        seeds = {(salt, k): tuple(tf.reshape(run(seed, k, salt), [-1]).numpy().tolist())
                 for salt in (11, 12) for k in (1, 2, 3)}
        assert len(set(seeds.values())) == 6
        assert tuple(tf.reshape(seed, [-1]).numpy().tolist()) not in seeds.values()
        assert ops.part_seed(seed, 0, 11) is seed
        for k in (0, 2):
            as_tensor = run(seed, tf.constant(k), 11)
            expected = seed if k == 0 else run(seed, k, 11)
            assert as_tensor.numpy().tolist() == expected.numpy().tolist()
