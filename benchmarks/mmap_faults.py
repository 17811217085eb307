"""What ``Dataset.from_generator`` did to our training steps: glibc's mmap threshold.

Under Python 3.11, constructing the ``GeneratorDataset`` kernel calls
``mallopt(M_MMAP_THRESHOLD, 128 KiB)`` (TensorFlow's ``ApplyPython311MemoryPatch``), which
pins the threshold for the rest of the process: glibc then maps every allocation above
128 KiB afresh and unmaps it when freed, and the kernel faults its pages in (zeroed) each
time, instead of reusing freed heap memory once the threshold has adapted. Our training
pipeline (``acvi_tf.data.batching.Batches.dataset``) used ``from_generator`` until this
benchmark found it; OpenNMT-tf's does not.

``python -m benchmarks.mmap_faults --out bench_results/mmap_faults.json`` times the peer
benchmark's training step (``benchmarks.peers.ours``: 2x256 BiLSTM, 2x256 LSTM decoder,
Luong attention, SGD; batch 128, 15 tokens each side, vocabularies 5,921 / 7,859 as on
Multi30k) in a fresh process per row, after that process first iterated:

* ``nothing``;
* ``from_generator``: a 10-element ``tf.data.Dataset.from_generator``;
* ``Batches.dataset``: our training pipeline as it is now, over a toy corpus.

Each child reports its seconds and minor page faults (``getrusage``) per step; the rows
alternate for ``--rounds`` rounds. Writes JSON and a markdown table beside it, with the
load and the CPU other processes used (``benchmarks.load``).
"""

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks import record
from benchmarks.load import OtherLoad, load_average
from benchmarks.peers import common
from benchmarks.peers.run import REPO_ROOT, worker_env

ROWS = ("nothing", "from_generator", "Batches.dataset")
SIZE = dataclasses.replace(common.SIZES["full"], src_len=15, tgt_len=15, src_vocab=5921,
                           tgt_vocab=7859, warmup=2, steps=8)


def before(row):
    """What the child process iterates before it builds the model."""
    import numpy as np
    import tensorflow as tf
    if row == "from_generator":
        def rows():
            for i in range(10):
                yield [i]
        for _ in tf.data.Dataset.from_generator(
                rows, output_signature=tf.TensorSpec([None], tf.int64)):
            pass
    elif row == "Batches.dataset":
        from acvi_tf.data.batching import Batches
        rng = np.random.default_rng(0)
        corpus = [rng.integers(4, 50, rng.integers(1, 20)).tolist() for _ in range(200)]
        for _ in Batches(corpus, corpus[::-1], 16, seed=0).dataset(0, 0, 1):
            pass
    elif row != "nothing":
        raise ValueError(f"unknown row {row!r}; choose from {ROWS}")


def _minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def faults_per_allocation(nbytes=1 << 20, count=20):
    """Minor page faults per allocation of ``nbytes`` that is written and freed, ``count``
    times: about ``nbytes / 4096`` while the mmap threshold is pinned below ``nbytes``
    (each allocation is a fresh mapping), near 0 once glibc's dynamic threshold has
    risen past it (the freed block is reused)."""
    import numpy as np
    faults = _minor_faults()
    for _ in range(count):
        np.ones(nbytes // 4, np.float32)
    return (_minor_faults() - faults) / count


def child(row, batches_path):
    """Runs in the fresh process: ``before(row)``, then the timed steps; prints one JSON line."""
    before(row)
    from benchmarks.peers import ours
    info, ops = ours.setup(batches_path)
    seconds, faults = [], []
    for _ in range(SIZE.steps):
        f0, t0 = _minor_faults(), time.perf_counter()
        ops["train"]()
        seconds.append(time.perf_counter() - t0)
        faults.append(_minor_faults() - f0)
    print(json.dumps({"row": row, "seconds": seconds, "minor_faults": faults}))


def markdown(result):
    lines = record.preamble(result, "Training steps after Dataset.from_generator: page faults")
    lines += [f"Command: `{result['command']}`. One fresh process per row and round (rows "
              f"alternate, {result['rounds']} rounds), each timing {SIZE.steps} steps of "
              "`benchmarks.peers.ours` (batch 128, 15 tokens each side, vocabularies "
              "5,921 / 7,859) after its warm-up; medians over all timed steps.", "",
              "| iterated first | s / step | minor page faults / step | step time / nothing's |",
              "|---|---:|---:|---:|"]
    base = result["rows"]["nothing"]["s_per_step"]
    for row, r in result["rows"].items():
        lines.append(f"| {row} | {r['s_per_step']:.3f} | {r['faults_per_step']:,.0f} | "
                     f"{r['s_per_step'] / base:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.mmap_faults",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", default="bench_results/mmap_faults.json")
    p.add_argument("--child", choices=ROWS, help=argparse.SUPPRESS)
    p.add_argument("--batches", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args.child, args.batches)
    if args.rounds < 1:
        p.error(f"--rounds: {args.rounds} must be at least 1")
    load_start = load_average()
    times = {row: {"seconds": [], "minor_faults": []} for row in ROWS}
    with tempfile.TemporaryDirectory(prefix="mmap_faults_") as work:
        path = os.path.join(work, "batches.npz")
        common.save_batches(path, common.make_batches(SIZE, seed=0), SIZE, seed=0)
        others = OtherLoad().start()
        for i in range(args.rounds):
            for row in ROWS:
                proc = subprocess.run(
                    [sys.executable, "-m", "benchmarks.mmap_faults", f"--child={row}",
                     f"--batches={path}"], capture_output=True, text=True, cwd=REPO_ROOT,
                    env=dict(worker_env(), TF_CPP_MIN_LOG_LEVEL="2"))
                if proc.returncode != 0:
                    raise SystemExit(f"row {row!r} failed:\n{proc.stderr[-3000:]}")
                out = json.loads(proc.stdout.strip().splitlines()[-1])
                for key in ("seconds", "minor_faults"):
                    times[row][key] += out[key]
                print(f"round {i + 1}/{args.rounds} {row}: "
                      f"{statistics.median(out['seconds']):.3f} s/step, "
                      f"{statistics.median(out['minor_faults']):,.0f} faults/step",
                      file=sys.stderr, flush=True)
        others_cores = others.stop()
    result = {"rounds": args.rounds, "size": dataclasses.asdict(SIZE),
              **record.header("benchmarks.mmap_faults", argv, load_start, others_cores),
              "rows": {row: {"s_per_step": statistics.median(t["seconds"]),
                             "faults_per_step": statistics.median(t["minor_faults"]),
                             **t} for row, t in times.items()}}
    record.write(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
