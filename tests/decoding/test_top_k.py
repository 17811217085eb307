"""row_top_k (acvi_tf/decoding/top_k.py) against tf.math.top_k itself: the same values and
the same indices, ties and -inf entries included, eagerly and under XLA."""

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.decoding.top_k import MIN_CHUNKS_PER_K, chunk_size, row_top_k


def _rows(rng, kind, shape):
    if kind == "normal":
        return rng.normal(size=shape).astype(np.float32)
    x = rng.integers(-3, 1, shape).astype(np.float32)  # coarse grid: ties everywhere
    if kind == "ties_and_inf":
        x[rng.random(shape) < 0.6] = -np.inf
        x[0, :] = -np.inf                              # a row with no finite entry
        x[1, :-3] = -np.inf                            # and one with 3
    return x


@pytest.mark.parametrize("kind", ["normal", "ties", "ties_and_inf"])
@pytest.mark.parametrize("width,k", [(7709, 22), (1024, 12), (1000, 7), (700, 3)])
def test_equals_tf_top_k(kind, width, k):
    assert chunk_size(width, k) is not None  # the chunked path, not the fallback
    rng = np.random.default_rng(width + k)
    x = tf.constant(_rows(rng, kind, (9, width)))
    want_values, want_indices = tf.math.top_k(x, k=k)
    values, indices = row_top_k(x, k)
    np.testing.assert_array_equal(values.numpy(), want_values.numpy())
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())


def test_equals_tf_top_k_under_xla_with_an_unknown_row_count():
    x = _rows(np.random.default_rng(3), "ties", (11, 3001))
    fn = tf.function(lambda x: row_top_k(x, 10), jit_compile=True,
                     input_signature=[tf.TensorSpec([None, 3001], tf.float32)])
    values, indices = fn(tf.constant(x))
    want_values, want_indices = tf.math.top_k(x, k=10)
    np.testing.assert_array_equal(values.numpy(), want_values.numpy())
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())


def test_chunk_size_and_the_fallback_for_narrow_rows():
    assert chunk_size(7709, 22) == 32  # the peer benchmark's beam (10 beams, 2K + 2)
    assert chunk_size(7859, 12) == 32  # table4-cpu's beam 5 on Multi30k's German
    c = chunk_size(7709, 22)
    assert 7709 >= MIN_CHUNKS_PER_K * 22 * c
    for width, k in ((50, 8), (9, 3), (200, 22)):
        assert chunk_size(width, k) is None
        x = tf.constant(_rows(np.random.default_rng(width), "ties", (4, width)))
        for got, want in zip(row_top_k(x, k), tf.math.top_k(x, k=k)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(ValueError, match="static row width"):
        tf.function(row_top_k, input_signature=[tf.TensorSpec([2, None], tf.float32),
                                                tf.TensorSpec([], tf.int32)]
                    ).get_concrete_function()
