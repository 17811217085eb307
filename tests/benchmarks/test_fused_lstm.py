import json

import pytest

from benchmarks import fused_lstm


def test_the_fused_cell_equals_keras_in_values_and_gradients():
    # The comparison is fair only if both sides compute the same LSTM from the same
    # weights: the outputs and the gradients of x and of every weight agree to round-off.
    ours, fused, x, variables = fused_lstm.decoder_pair(batch=3, steps=7, inputs=5, units=4)
    assert fused_lstm.max_difference(x, ours, fused, variables) < 1e-5


def test_the_cell_in_keras_gate_order_is_caught():
    # The check above can fail: the fused cell given Keras' gate order unchanged.
    import tensorflow as tf
    ours, _, x, variables = fused_lstm.decoder_pair(batch=3, steps=7, inputs=5, units=4)
    kernel, recurrent, bias = variables
    units = recurrent.shape[0]

    def unordered(x):
        xt = tf.transpose(x, [1, 0, 2])
        zeros = tf.zeros([tf.shape(x)[0], units])
        w = tf.concat([kernel, recurrent], 0)
        step = lambda carry, x_t: fused_lstm.block_cell(x_t, *carry, w,  # noqa: E731
                                                        tf.convert_to_tensor(bias))
        hs, _ = tf.scan(step, xt, initializer=(zeros, zeros))
        return tf.transpose(hs, [1, 0, 2])
    assert fused_lstm.max_difference(x, ours, unordered, variables) > 1e-2


def test_toy_run_times_both_sides_and_records_the_load(tmp_path):
    out = tmp_path / "fused.json"
    fused_lstm.main(["--tiny", "--rounds=1", "--calls=1", f"--out={out}"])
    result = json.loads(out.read_text())
    assert [r["size"] for r in result["rows"]] == ["tiny"]
    assert all(r["ours_ms"] > 0 and r["fused_ms"] > 0 for r in result["rows"])
    assert all(r["max_relative_difference"] < 1e-5 for r in result["rows"])
    assert "load_start" in result and "others_cores_during_timing" in result
    assert "| tiny | 3 × 5 × 4 → 6 |" in (tmp_path / "fused.md").read_text()


def test_rounds_below_one_is_a_flag_error(capsys):
    with pytest.raises(SystemExit):
        fused_lstm.main(["--rounds=0"])
    assert "--rounds (0)" in capsys.readouterr().err
