"""Two real workers under MultiWorkerMirroredStrategy (issue 12): two local processes with
TF_CONFIG on localhost ports train the global batch split between them and match a
one-worker run with the same global batch; only the chief writes into model_dir."""

import json
import os
import textwrap

import numpy as np

from tests import cli
from tests.train_helpers import free_ports

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORKER = textwrap.dedent("""
    import json, os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    out, model_dir, index, ports = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if ports:
        os.environ["TF_CONFIG"] = json.dumps({
            "cluster": {"worker": [f"localhost:{p}" for p in ports.split(",")]},
            "task": {"type": "worker", "index": index}})
    import numpy as np
    import tensorflow as tf
    from acvi_tf.data.synthetic import ReverseTask
    from acvi_tf.models.seq2seq import ModelConfig, Seq2Seq
    from acvi_tf.training.trainer import Trainer, TrainConfig, make_strategy
    strategy = make_strategy("multiworker" if ports else "default")
    cfg = ModelConfig(src_vocab_size=10, tgt_vocab_size=10, embed_dim=8, encoder_units=8,
                      decoder_units=8, attention_units=8, head_units=8, dropout=0.0,
                      attention="soft")
    lines = []
    tc = TrainConfig(model_dir=model_dir, train_steps=4, learning_rate=0.01, progress=False,
                     eval_every=0, log_every=1, checkpoint_every=2, gumbel_fraction=0.0)
    trainer = Trainer(lambda: Seq2Seq(cfg), tc, ReverseTask(vocab_size=10, batch_size=8, seed=1),
                      strategy=strategy, log=lines.append)
    trainer.train()
    losses = [float(l.split(" loss=")[1].split()[0]) for l in lines if l.startswith("step ")]
    np.savez(out, *[v.numpy() for v in trainer.model.trainable_variables])
    json.dump({"losses": losses, "replicas": strategy.num_replicas_in_sync,
               "chief": trainer.is_chief}, open(out + ".json", "w"))
""")


def _load(out):
    with np.load(out + ".npz") as f:
        weights = [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]
    return json.load(open(out + ".json")), weights


def test_two_workers_match_one_worker_and_only_the_chief_writes(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = dict(os.environ, PYTHONPATH=REPO, TF_NUM_INTRAOP_THREADS="1",
               TF_NUM_INTEROP_THREADS="1")
    env.pop("TF_CONFIG", None)
    ports = ",".join(str(p) for p in free_ports(2))
    shared = tmp_path / "run"
    runs = [[str(tmp_path / f"w{i}"), str(shared), str(i), ports] for i in range(2)]
    # Every process is forked from tests/cli.py's server (TensorFlow imported, its
    # runtime not started: each worker sets TF_CONFIG and starts its own), and the
    # single-worker reference runs beside the two workers, which spend much of their
    # time waiting on each other.
    workers = [cli.start(str(script), args, env=env) for args in runs]
    r = cli.run(str(script), [str(tmp_path / "one"), str(tmp_path / "one_run"), "0", ""],
                env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    for w in workers:
        done = w.wait(timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    one, one_weights = _load(str(tmp_path / "one"))
    for i in range(2):
        info, weights = _load(str(tmp_path / f"w{i}"))
        assert info["replicas"] == 2 and info["chief"] == (i == 0)
        assert len(info["losses"]) == 4
        np.testing.assert_allclose(info["losses"], one["losses"], rtol=1e-4)
        for a, b in zip(weights, one_weights):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # the chief's checkpoints and history, once; nothing of the other worker's
    names = sorted(os.listdir(shared / "ckpt"))
    assert [n for n in names if n.endswith(".index")] == ["ckpt-2.index", "ckpt-4.index"]
    steps = [json.loads(line)["step"] for line in open(shared / "history.jsonl")]
    assert steps == [1, 2, 3, 4]


def test_is_chief_reads_tf_config(monkeypatch, tmp_path):
    from acvi_tf.run.results import update_results
    from acvi_tf.training.trainer import is_chief

    def config(task_type, index, chief=False):
        cluster = {"worker": ["localhost:1", "localhost:2"]}
        if chief:
            cluster["chief"] = ["localhost:3"]
        monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster,
                                                    "task": {"type": task_type,
                                                             "index": index}}))

    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert is_chief()
    config("worker", 0)
    assert is_chief()
    config("worker", 0, chief=True)
    assert not is_chief()
    config("chief", 0, chief=True)
    assert is_chief()
    config("worker", 1)
    assert not is_chief()
    update_results(str(tmp_path), steps=3)  # a non-chief worker writes no results
    assert not (tmp_path / "results.json").exists()
