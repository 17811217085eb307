import json

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.attention import acvi
from benchmarks import acvi_ablation


def test_toy_run_writes_every_row_and_leaves_acvi_unpatched(tmp_path):
    original = acvi.sample_mixed_context
    out = tmp_path / "ablation.json"
    acvi_ablation.main(["--size=toy", "--rounds=1", f"--out={out}"])
    result = json.loads(out.read_text())
    assert list(result["rows"]) == list(acvi_ablation.ROWS)
    assert result["rows"]["soft"]["over_soft"] == 1.0
    assert all(r["seconds_median"] > 0 for r in result["rows"].values())
    assert "| acvi_kl0_no_variance |" in (tmp_path / "ablation.md").read_text()
    assert result["xla"] is False and "XLA off" in (tmp_path / "ablation.md").read_text()
    assert acvi.sample_mixed_context is original


def test_the_no_grad_norm_row_traces_no_norm_and_leaves_tensorflow_unpatched():
    """soft has one L2Loss per gradient (tf.linalg.global_norm's); soft_no_grad_norm none,
    and the same model otherwise; tf.linalg.global_norm is TensorFlow's again after."""
    original = tf.linalg.global_norm
    steps, batch = acvi_ablation.build_steps("toy", ["soft", "soft_no_grad_norm"])
    assert tf.linalg.global_norm is original

    def op_types(fn):
        graph = fn.func.get_concrete_function(batch, seed=tf.constant(1)).graph
        types = [op.type for op in graph.get_operations()]
        for function in graph.as_graph_def().library.function:
            types += [node.op for node in function.node_def]
        return types
    soft, ablated = op_types(steps["soft"]), op_types(steps["soft_no_grad_norm"])
    assert soft.count("L2Loss") > 0 and ablated.count("L2Loss") == 0
    assert ablated.count("MatMul") == soft.count("MatMul")


def test_the_ablated_samplers_remove_what_they_say():
    """no_noise is the posterior mean (Eq. 25 without its noise); no_variance keeps a
    noise of constant scale 1e-3 instead of sqrt(sum_i a_i^2 sigma_i^2)."""
    rng = np.random.default_rng(0)
    weights = tf.nn.softmax(tf.constant(rng.normal(size=[3, 5]), tf.float32))
    memory = tf.constant(rng.normal(size=[3, 5, 4]), tf.float32)
    sigma_sq = tf.fill([3, 5, 4], 4.0)
    mean = np.einsum("bn,bnd->bd", weights.numpy(), memory.numpy())
    ablated = acvi_ablation._contexts()
    seed = tf.constant([1, 2])
    np.testing.assert_allclose(ablated["acvi_kl0_no_noise"](weights, memory, sigma_sq, seed),
                               mean, rtol=1e-6)
    noisy = ablated["acvi_kl0_no_variance"](weights, memory, sigma_sq, seed).numpy()
    assert 0 < np.abs(noisy - mean).max() < 1e-2
    full = acvi.sample_mixed_context(weights, memory, sigma_sq, seed).numpy()
    assert np.abs(full - mean).max() > 0.1  # sigma = 2: the real sampler is far noisier


def test_rows_pick_a_subset_and_unknown_rows_are_refused(tmp_path, capsys):
    out = tmp_path / "ablation.json"
    acvi_ablation.main(["--size=toy", "--rounds=1", "--rows=soft,soft_block_lstm",
                        f"--out={out}"])
    assert list(json.loads(out.read_text())["rows"]) == ["soft", "soft_block_lstm"]
    assert acvi_ablation.row_config("toy", "soft_block_lstm").lstm_impl == "block"
    with pytest.raises(SystemExit):
        acvi_ablation.main(["--size=toy", "--rows=soft,nope", f"--out={out}"])
    assert "--rows: unknown nope" in capsys.readouterr().err
