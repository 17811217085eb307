import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from acvi_tf.attention import acvi
from acvi_tf.utils import shards
from benchmarks import acvi_ablation, record


@pytest.fixture(autouse=True)
def _keep_shard_state(monkeypatch):
    """main() configures this process's batch shards: each test's stays its own."""
    monkeypatch.setattr(shards, "_state", dict(shards._state))


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


def test_the_bf16_variance_rows_keep_sigma_sq_in_bfloat16_and_sample_eq_25():
    """The _bf16_variance rows: sigma^2 cast to bfloat16 once per source, and the model's
    own sampler then draws Eq. 25's sample (same seed) to bfloat16's precision; acvi's
    functions are its own again after tracing the rows."""
    rng = np.random.default_rng(1)
    memory = tf.constant(rng.normal(size=[2, 6, 8]), tf.float32)
    log_sigma_sq = tf.constant(rng.normal(size=[2, 6, 8]), tf.float32)
    weights = tf.nn.softmax(tf.constant(rng.normal(size=[2, 6]), tf.float32))
    seed = tf.constant([3, 4])
    full = acvi.sample_mixed_context(weights, memory, tf.exp(log_sigma_sq), seed).numpy()
    unpatched = {"mixture_terms": acvi.mixture_terms, "_mix": acvi._mix,
                 "sample_mixed_context": acvi.sample_mixed_context}
    patches = acvi_ablation._bf16_variance(acvi)
    terms = patches["mixture_terms"](memory, log_sigma_sq)
    assert terms["sigma_sq"].dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(terms["sigma_sq"], tf.float32),
                               np.exp(log_sigma_sq.numpy()), rtol=1e-2)
    try:
        acvi._mix = patches["_mix"]
        ablated = acvi.sample_mixed_context(weights, memory, terms["sigma_sq"], seed).numpy()
    finally:
        acvi._mix = unpatched["_mix"]
    assert ablated.dtype == np.float32
    np.testing.assert_allclose(ablated, full, rtol=2e-2, atol=2e-2)
    assert np.abs(ablated - full).max() > 0  # the product did run in bfloat16
    acvi_ablation.build_steps("toy", ["acvi_kl0_bf16_variance"])
    assert {name: getattr(acvi, name) for name in unpatched} == unpatched


def test_rows_pick_a_subset_and_unknown_rows_are_refused(tmp_path, capsys):
    out = tmp_path / "ablation.json"
    acvi_ablation.main(["--size=toy", "--rounds=1", "--rows=soft,soft_block_lstm",
                        f"--out={out}"])
    assert list(json.loads(out.read_text())["rows"]) == ["soft", "soft_block_lstm"]
    assert acvi_ablation.row_config("toy", "soft_block_lstm").lstm_impl == "block"
    with pytest.raises(SystemExit):
        acvi_ablation.main(["--size=toy", "--rows=soft,nope", f"--out={out}"])
    assert "--rows: unknown nope" in capsys.readouterr().err


def test_the_table4_cpu_size_is_the_model_the_cpu_tables_train():
    """--size=table4_cpu prices what `make table4-cpu` trains: every model field of the
    translate CLI's "cpu" profile (which "cpu_converged" keeps), its batch, and the
    vocabulary sizes of Multi30k's vocabularies at that profile's min count of 2 (the sizes
    of an archived run's vocab.en.txt / vocab.de.txt)."""
    from acvi_tf.models.seq2seq import ModelConfig
    from experiments.translate import PROFILES
    model, batch, src_len, tgt_len = acvi_ablation.SIZES["table4_cpu"]
    cpu = PROFILES["cpu"]
    assert PROFILES["cpu_converged"]["batch_size"] == cpu["batch_size"] == batch
    shared = {k: cpu[k] for k in model if k in cpu}
    assert set(model) - set(shared) == {"src_vocab_size", "tgt_vocab_size"}
    assert {k: model[k] for k in shared} == shared
    assert (model["src_vocab_size"], model["tgt_vocab_size"]) == (5921, 7859)
    assert all(k in ModelConfig.__dataclass_fields__ for k in model)
    assert 10 <= src_len <= 20 and 10 <= tgt_len <= 20


def test_threads_are_set_and_recorded(tmp_path):
    """--threads=1 runs every row on one intra-op thread, as each table run trains, and the
    JSON and the markdown say so (a fresh process: TensorFlow's pools are fixed once made)."""
    out = tmp_path / "ablation.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.acvi_ablation", "--size=toy", "--rounds=1",
         "--rows=soft,acvi", "--threads=1", f"--out={out}"],
        cwd=record.REPO_ROOT, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=record.REPO_ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["intra_op_threads"] == 1 and list(result["rows"]) == ["soft", "acvi"]
    assert result["batch_shards"] == {"cpu_shards": 1, "reason": "--cpu_shards=1"}
    text = (tmp_path / "ablation.md").read_text()
    assert "1 intra-op thread(s)" in text and "(toy, not a paper size)" in text
    with pytest.raises(SystemExit):
        acvi_ablation.main(["--size=toy", "--threads=-1", f"--out={out}"])


def test_cpu_shards_run_each_row_in_shards_and_are_recorded(tmp_path, monkeypatch):
    """--cpu_shards=2 runs every row's step on two shards of rows (as the task CLIs train
    by default on 2 cores) and records it; a negative count is refused."""
    used = []
    make = acvi_ablation.make_train_step
    monkeypatch.setattr(acvi_ablation, "make_train_step",
                        lambda *a, **k: used.append(k["shards"]) or make(*a, **k))
    out = tmp_path / "ablation.json"
    acvi_ablation.main(["--size=toy", "--rounds=1", "--rows=soft,acvi", "--cpu_shards=2",
                        f"--out={out}"])
    result = json.loads(out.read_text())
    assert used == [2, 2]
    assert result["batch_shards"]["cpu_shards"] == 2
    assert result["batch_shards"]["reason"].startswith("--cpu_shards=2")
    assert "2 batch shards" in (tmp_path / "ablation.md").read_text()
    with pytest.raises(SystemExit):
        acvi_ablation.main(["--size=toy", "--cpu_shards=-1", f"--out={out}"])
