"""End-to-end training on Multi30k, each system with its own data pipeline: our
``experiments.translate --mode=train`` against OpenNMT-tf's ``onmt-main train``.

``python -m benchmarks.peers.train_e2e --steps=200`` (after ``make bench-peers`` made
``.venv-peers``) trains the peer benchmark's model (2-layer BiLSTM encoder, 256 units per
direction, 2 x 256 LSTM decoder with Luong attention, embeddings 256, dropout 0.2, SGD at
1.0, batch 128 sentences, length 50 at most) on Multi30k's tokenized English-German
training set, one system after the other, from the same files (the data-source registry,
``ACVI_DATA_MIRROR``). OpenNMT-tf gets our run's vocabularies (the same words, so the
same embedding and softmax sizes) and the model of :func:`benchmarks.peers.opennmt_tf.
build_model`, written to a model file ``onmt-main --model`` reads.

Each side's rate is taken from its own training log after its first logged interval
(startup, data loading, tracing and the first ``--log_every`` steps left out): steps/s
and target tokens/s (ours: ``history.jsonl``; OpenNMT-tf: its "Step = N ; steps/s = ...,
tokens/s = ... (S source, T target)" lines; padding not counted on either side). The wall time of the
whole command (start to exit) is recorded too. The CPU that other processes used while
each side ran is recorded (``benchmarks.load``); only an idle run is a result. Writes
JSON and a markdown table beside it.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from benchmarks import record
from benchmarks.load import OtherLoad, load_average
from benchmarks.peers import common
from benchmarks.peers.run import DEFAULT_PEER_PYTHON, REPO_ROOT, worker_env
OURS_FLAGS = ["--profile=paper", "--dataset=multi30k", "--src=en", "--tgt=de", "--variant=tok",
              "--min_count=2", "--max_length=50", "--overlong=filter", "--attention=soft",
              "--score=multiplicative", "--optimizer=sgd", "--learning_rate=1.0",
              "--lr_decay=none", "--clip_norm=5.0", "--batch_size=128", "--dropout=0.2",
              "--mode=train", "--eval_every=0", "--noprogress",
              # the paper's sizes on this CPU on purpose (the peer runs them there too)
              "--allow_cpu",
              "--max_eval_lines=8"]  # the final evaluation --mode=train ends with: short
# Our runs: our default length buckets (25 up to --max_length 50: width 2, OpenNMT-tf's
# default, train: length_bucket_width: 2), and the earlier default, 5 (width 10), which
# pads a batch far more.
OUR_RUNS = {"ours": [], "ours, buckets of width 10": ["--num_buckets=5"]}  # flags shown by markdown()
# OpenNMT-tf 2.32 (opennmt/training.py): "Step = 100 ; steps/s = 0.45, tokens/s = 2345
# (1200 source, 1145 target) ; Learning rate = ... ; Loss = ..."
ONMT_LINE = re.compile(r"Step = (\d+) ; steps/s = ([\d.]+), tokens/s = \d+ \(([^)]*)\)")
MODEL_FILE = """\
import dataclasses
from benchmarks.peers import common
from benchmarks.peers.opennmt_tf import build_model


def model():
    return build_model(dataclasses.replace(common.SIZES["full"], **{size!r}), "layerwise")
"""


def onmt_rates(log_text):
    """[(step, steps/s, target words/s)] of OpenNMT-tf's training log."""
    out = []
    for m in ONMT_LINE.finditer(log_text):
        per_side = dict(reversed(part.split()) for part in m[3].split(", "))
        out.append((int(m[1]), float(m[2]), float(per_side["target"])))
    return out


def our_rates(history_path):
    """[(step, steps/s, target tokens/s)] of our history.jsonl: each logged interval's
    steps over the time since the previous log, and the tokens/s the trainer logged."""
    rows, out = [], []
    with open(history_path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if "train" in r:
                rows.append(r)
    for a, b in zip(rows, rows[1:]):
        out.append((b["step"], (b["step"] - a["step"]) / (b["time"] - a["time"]),
                    b["train"]["tokens_per_sec"]))
    return out


def summary(rates, first_step):
    """Mean steps/s and target tokens/s over the intervals that end after ``first_step``."""
    kept = [r for r in rates if r[0] > first_step]
    if not kept:
        return {"intervals": 0, "steps_per_s": None, "target_tokens_per_s": None}
    return {"intervals": len(kept), "steps_per_s": sum(r[1] for r in kept) / len(kept),
            "target_tokens_per_s": sum(r[2] for r in kept) / len(kept)}


def onmt_vocab(our_vocab_path, out_path):
    """OpenNMT-tf's vocabulary file for one of our vocabularies: ``<blank> <s> </s>`` and
    our words in our order (OpenNMT-tf adds its OOV bucket for our ``<unk>``), so both
    embedding and softmax sizes equal ours. Returns the size OpenNMT-tf will use."""
    with open(our_vocab_path, encoding="utf-8") as f:
        tokens = [line.rstrip("\n") for line in f]
    words = tokens[4:]  # <pad> <unk> <s> </s> first (acvi_tf.data.vocab)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(["<blank>", "<s>", "</s>"] + words) + "\n")
    return len(words) + 4


def batch_shards(run_dir):
    """The batch shards our run recorded (``provenance.json``'s last start,
    ``tensorflow.batch_shards``), or None where it recorded none."""
    from acvi_tf.run.directory import load_provenance
    segments = load_provenance(run_dir)
    return segments[-1]["start"].get("tensorflow", {}).get("batch_shards") if segments else None


def timed(argv, env, log_path, cwd=REPO_ROOT):
    """Runs ``argv``; its wall seconds and the cores other processes used meanwhile (a
    waited-for child's CPU is this process's, so ``OtherLoad`` leaves it out)."""
    others = OtherLoad().start()
    start = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.run(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    wall = time.monotonic() - start
    others_cores = others.stop()
    if proc.returncode != 0:
        with open(log_path) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"{' '.join(argv[:4])} ... exited {proc.returncode}:\n{tail}")
    return {"wall_s": round(wall, 2), "others_cores": others_cores}


def run(args, work):
    env = dict(worker_env(), TF_CPP_MIN_LOG_LEVEL="1")
    sides = {}
    for i, (name, flags) in enumerate(OUR_RUNS.items()):
        run_dir = os.path.join(work, f"ours{i}")
        sides[name] = timed([sys.executable, "-m", "experiments.translate", *OURS_FLAGS,
                             *flags, f"--model_dir={run_dir}", f"--train_steps={args.steps}",
                             f"--log_every={args.log_every}",
                             f"--checkpoint_every={args.steps}"],
                            env, os.path.join(work, f"ours{i}.log"))
        sides[name]["flags"] = flags
        sides[name]["batch_shards"] = batch_shards(run_dir)
        sides[name].update(summary(our_rates(os.path.join(run_dir, "history.jsonl")),
                                   args.log_every))
    ours_dir = os.path.join(work, "ours0")

    from acvi_tf.data import sources
    from acvi_tf.data.translation import MULTI30K
    files = {lang: sources.locate(MULTI30K, f"tok/train.lc.norm.tok.{lang}")
             for lang in ("en", "de")}
    sizes = {"src_vocab": onmt_vocab(os.path.join(ours_dir, "vocab.en.txt"),
                                     os.path.join(work, "src.vocab")),
             "tgt_vocab": onmt_vocab(os.path.join(ours_dir, "vocab.de.txt"),
                                     os.path.join(work, "tgt.vocab"))}
    with open(os.path.join(work, "model.py"), "w") as f:
        f.write(MODEL_FILE.format(size=sizes))
    full = common.SIZES["full"]
    config = {
        "model_dir": os.path.join(work, "onmt"),
        "data": {"train_features_file": files["en"], "train_labels_file": files["de"],
                 "source_vocabulary": os.path.join(work, "src.vocab"),
                 "target_vocabulary": os.path.join(work, "tgt.vocab")},
        "params": {"optimizer": "SGD", "learning_rate": full.learning_rate},
        "train": {"batch_size": full.batch, "batch_type": "examples",
                  "max_step": args.steps, "save_checkpoints_steps": args.steps,
                  "save_summary_steps": args.log_every, "keep_checkpoint_max": 1,
                  "maximum_features_length": 50, "maximum_labels_length": 50}}
    config_path = os.path.join(work, "onmt.yml")
    with open(config_path, "w") as f:
        json.dump(config, f)  # JSON is YAML
    peer = timed([args.peer_python, "-m", "opennmt.bin.main", "--model",
                  os.path.join(work, "model.py"), "--config", config_path, "train"],
                 env, os.path.join(work, "onmt.log"))
    with open(os.path.join(work, "onmt.log")) as f:
        peer.update(summary(onmt_rates(f.read()), args.log_every))
    sides["opennmt-tf"] = peer
    return sides, sizes


def markdown(result):
    lines = record.preamble(result, "End-to-end training on Multi30k: ours vs OpenNMT-tf")
    sides = result["sides"]
    peer = sides["opennmt-tf"]
    lines += [f"Command: `{result['command']}`. {result['steps']} steps each, one after the "
              "other in the order below; rates are the means over the logged intervals "
              f"after step {result['log_every']} (each side's own log); vocabularies "
              f"{result['vocab']['src_vocab']} / {result['vocab']['tgt_vocab']}.", "",
              "| run | steps/s | target tokens/s | tokens/s / OpenNMT-tf's | wall s (start "
              "to exit) | other processes' cores |", "|---|---:|---:|---:|---:|---:|"]
    for name, r in sides.items():
        ratio = (f"**{r['target_tokens_per_s'] / peer['target_tokens_per_s']:.2f}**"
                 if name != "opennmt-tf" else "1.00")
        flags = f" (`{' '.join(r['flags'])}`)" if r.get("flags") else ""
        lines.append(f"| {name}{flags} | {r['steps_per_s']:.3f} | "
                     f"{r['target_tokens_per_s']:.0f} | {ratio} | {r['wall_s']:.1f} | "
                     f"{'-' if r['others_cores'] is None else format(r['others_cores'], '.3f')} |")
    lines += ["", "Our wall time includes the short dev evaluation `--mode=train` ends with "
              "(8 lines); OpenNMT-tf's does not evaluate. The pipelines are each system's "
              "own: ours plans each epoch's length-bucketed batches in numpy and gathers and "
              "pads them with tf.data, OpenNMT-tf uses tf.data throughout (length buckets "
              "of width 2, a 500,000-example shuffle buffer). OpenNMT-tf's "
              "config has no global-norm clip (ours clips at 5); the clip costs a few "
              "elementwise ops. Each side runs its own default threads: ours the batch "
              "shards of `--cpu_shards` auto (one shard of rows per core, one thread per op "
              "on a CPU-only machine whose TF_NUM_*_THREADS variables are unset: each run's "
              "`batch_shards`), OpenNMT-tf TensorFlow's default."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.peers.train_e2e",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--log_every", type=int, default=20)
    p.add_argument("--peer_python", default=DEFAULT_PEER_PYTHON)
    p.add_argument("--out", default="bench_results/bench_peers_train.json")
    args = p.parse_args(argv)
    if args.log_every < 1 or args.steps < 3 * args.log_every:
        p.error(f"--steps={args.steps} must be at least 3 x --log_every={args.log_every} "
                "(the first interval is left out)")
    if not os.path.exists(args.peer_python):
        p.error(f"--peer_python: {args.peer_python} not found (`make bench-peers` makes "
                ".venv-peers)")
    load_start = load_average()
    with tempfile.TemporaryDirectory(prefix="peers_e2e_") as work:
        sides, vocab = run(args, work)
    measured = [r["others_cores"] for r in sides.values()]
    others = None if None in measured else max(measured)
    result = {"steps": args.steps, "log_every": args.log_every, "vocab": vocab,
              **record.header("benchmarks.peers.train_e2e", argv, load_start, others),
              "sides": sides}
    record.write(args.out, result, markdown(result))


if __name__ == "__main__":
    main()
