"""``make bench-peers``: our training step and beam search timed beside OpenNMT-tf's.

Usage::

    python -m benchmarks.peers            # full size (our paper MT model), ~4 min on 2 cores
    python -m benchmarks.peers --quick    # toy sizes, 2 timed steps: checks the harness only

What is measured. Both sides build the same model: a 2-layer bidirectional LSTM encoder
(256 units per direction, concatenated), a 2 x 256 LSTM decoder with Luong's
multiplicative attention and input feeding, embeddings 256, vocabularies 17,191 / 7,709,
dropout 0.2, SGD (learning rate 1) with global-norm clipping at 5; ours is
``Seq2Seq(ModelConfig(attention="soft", score="multiplicative"))``, the peer OpenNMT-tf
2.32's ``SequenceToSequence`` (``RNNEncoder``, ``AttentionalRNNDecoder`` with
``LuongAttention`` and ``DenseBridge``; see ``benchmarks/peers/opennmt_tf.py``).
The known differences are in the JSON's ``model_notes``.

1. Random batches (batch 128, 50 source / 50 target tokens, no padding) are made from
   one seed by ``benchmarks.workload.random_batch`` and saved to a ``.npz``; both sides
   read that file, so they train on the same shapes and token ids.
2. Each side runs in a subprocess of its own (ours: this Python; the peer: the
   ``.venv-peers`` Python, TF 2.13), builds its model, makes its first (tracing) call
   and ``warmup`` more steps, untimed.
3. The driver then asks the two workers for one training step at a time, alternately
   (ours, peer, ours, peer, ...; ``steps`` each), so both see the same background
   load; each step is timed inside its worker (wall clock, ``float(loss)`` waits for
   it). Then beam search (width 10, 32 sentences, 50 steps, the end token forbidden
   until the last step so every call decodes the full length), alternately as well.
4. Reported: median and minimum ms/step, target tokens/s (tokens of one batch over the
   median step), beam-search sentences/s, and ours over the peer. ``os.getloadavg()``
   is recorded before and after; numbers are results only from an idle machine.

XLA is off on both sides (fp32, each framework's default ``tf.function``); ``--xla``
compiles our training step with XLA (not our beam search, not the peer). ``--precision``
sets our side's ``ModelConfig.precision`` (mixed_bfloat16, mixed_float16; the peer stays
fp32, and the report and the final line say so).
End-to-end training with each side's own data pipeline is not measured.
"""

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from acvi_tf.utils.precision import PRECISIONS
from acvi_tf.utils.provenance import code_version, cpu_description
from benchmarks import REPO_ROOT
from benchmarks.load import OtherLoad, load_average
from benchmarks.load import is_idle as load_is_idle
from benchmarks.peers import common

SIDES = ("ours", "opennmt-tf")
DEFAULT_PEER_PYTHON = os.path.join(REPO_ROOT, ".venv-peers", "bin", "python")
# PeerSize fields the command line may override
SIZE_OVERRIDES = ("steps", "warmup", "beam_reps", "src_len", "tgt_len", "src_vocab",
                  "tgt_vocab", "batch")


def worker_env():
    """The environment of a process of either side: the repository importable first, and
    this process's TF_ENABLE_ONEDNN_OPTS (``import acvi_tf`` sets it on unless the user
    chose), so both sides run the same CPU kernels; each side's result records whether
    its TensorFlow ran oneDNN's (``onednn``)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))


MODEL_NOTES = [
    "Bridge: ours maps each encoder layer's final (h, c) to the same decoder layer with a "
    "ReLU dense layer per h and c; OpenNMT-tf's DenseBridge maps all final states, "
    "concatenated, with one linear layer (run once per batch; at the full size 2,048 -> "
    "1,024, 1.57M parameters more than ours).",
    "Input feeding: ours feeds the previous context vector (2 x units) to the decoder's "
    "first layer; OpenNMT-tf (AttentionWrapper) the previous attentional hidden state "
    "(units): ours has 0.26M parameters more there. Full size in all: ours 13.41M, "
    "OpenNMT-tf 14.72M.",
    "Encoder 'layerwise' (default): layer 2 of both directions reads the concatenated "
    "layer-1 outputs, as ours; 'stacked' (--encoder=stacked) is OpenNMT-tf's single "
    "RNNEncoder(num_layers=2, bidirectional=True).",
    "Recurrence: ours the weights of Keras 3 LSTM layers run by acvi_tf.utils.lstm in the "
    "encoder (the input projection of all steps in one product, backpropagation through "
    "time written out) and LSTM cells in a tf.while_loop in the decoder; OpenNMT-tf "
    "tf.keras LSTMCell in keras RNN layers (encoder) and tfa's dynamic decoding loop "
    "(decoder).",
    "Threads: ours runs each batch (training step and beam search) as one shard of rows per "
    "core with one TensorFlow thread per op (the task CLIs' default, --cpu_shards auto; "
    "acvi_tf.utils.shards); OpenNMT-tf runs TensorFlow's default threads (every op split "
    "across the cores). ACVI_CPU_SHARDS=1 gives ours the default threads too.",
    "Loss normalisation: ours per target token, OpenNMT-tf per sentence (its default); "
    "the cost of a step does not depend on it.",
]


class WorkerError(RuntimeError):
    pass


class Worker:
    """One side's worker process (see the protocol in ``benchmarks.peers.common``)."""

    def __init__(self, side, argv, timeout):
        self.side, self.timeout = side, timeout
        env = worker_env()
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env.setdefault("PYTHONWARNINGS", "ignore")
        self.proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.info = self._read()
        if not self.info.get("ready"):
            raise WorkerError(f"{side} could not start:\n{self.info.get('error')}")

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait(timeout=self.timeout)
            raise WorkerError(f"the {self.side} worker exited ({code}) without an answer")
        return json.loads(line)

    def run(self, op):
        """Seconds of one ``op`` ("train" or "beam"), timed inside the worker."""
        self.proc.stdin.write(op + "\n")
        self.proc.stdin.flush()
        answer = self._read()
        if "error" in answer:
            raise WorkerError(f"{self.side} {op}:\n{answer['error']}")
        return answer["seconds"]

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=self.timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def is_idle(load, cpus):
    """:func:`benchmarks.load.is_idle` of what other processes used while the steps were
    timed. The load averages are recorded too but decide nothing: they lag by minutes (a
    benchmark just before raises the next one's start) and our own workers' warm-up
    raises them."""
    return load_is_idle(load.get("others_cores_during_timing"), cpus)


def summarize(train_s, beam_s, tokens, beam_batch):
    """The per-side numbers of the JSON from its step and beam-call times (seconds)."""
    out = {"steps_timed": len(train_s), "ms_per_step_all": [round(1e3 * t, 3) for t in train_s],
           "tokens_per_step": tokens, "beam_calls_timed": len(beam_s),
           "ms_per_beam_call_all": [round(1e3 * t, 3) for t in beam_s]}
    if train_s:
        median = statistics.median(train_s)
        out.update(ms_per_step_median=1e3 * median, ms_per_step_min=1e3 * min(train_s),
                   tokens_per_s=tokens / median)
    if beam_s:
        median = statistics.median(beam_s)
        out.update(ms_per_beam_call_median=1e3 * median, sentences_per_s=beam_batch / median)
    return out


def ratio(result, key):
    """Ours over the peer for ``key`` (None if either side lacks it)."""
    a, b = (result["sides"][s].get(key) for s in SIDES)
    return a / b if a and b else None


def precision_label(ours_precision, xla=False):
    """The precision of the comparison: fp32 on both sides, or each side's; and ", ours
    XLA" when our training step was XLA-compiled."""
    label = ("fp32" if ours_precision == "float32"
             else f"ours {ours_precision}, opennmt-tf fp32")
    return label + (", ours XLA" if xla else "")


FINAL_RATIOS = (("tokens/s", "tokens_per_s"), ("beam sentences/s", "sentences_per_s"))


def final_line(result):
    """The ratios a reader compares, printed last, one line each: training tokens/s and
    beam-search sentences/s, ours over OpenNMT-tf's, with the precision of each side."""
    lines = []
    for label, key in FINAL_RATIOS:
        value = result["ratios"].get(key)
        lines.append(f"ours/opennmt-tf {label}: "
                     f"{'n/a' if value is None else format(value, '.2f')} "
                     f"({result['settings']['precision']})")
    return "\n".join(lines)


def _on_off(value):
    return "-" if value is None else ("on" if value else "off")


def _fmt(value, spec):
    return "-" if value is None else format(value, spec)


def markdown(result):
    """A markdown report: settings, load, one table of both sides, the notes."""
    s, sides, load = result["settings"], result["sides"], result["load_average"]
    ours, peer = sides["ours"], sides["opennmt-tf"]
    lines = [
        f"# Peer benchmark: ours vs OpenNMT-tf ({result['profile']})", "",
        f"{result['date']}; {result['machine']['cpu_count']} CPUs"
        f"{' (' + result['machine']['cpu_model'] + ')' if result['machine'].get('cpu_model') else ''}"
        f"; load average "
        f"(1/5/15 min) {load.get('start')} at the start, {load.get('before_timing')} before "
        f"timing, {load.get('after_timing')} after; other processes used "
        f"{load.get('others_cores_during_timing')} cores while the steps were timed.", ""]
    if not result["idle"]:
        lines += ["**The machine was not idle: these timings are not results.**", ""]
    lines += [
        f"Batch {s['batch']} x {s['src_len']}/{s['tgt_len']} tokens, vocabularies "
        f"{s['src_vocab']}/{s['tgt_vocab']}, embeddings {s['embed']}, {s['layers']} x "
        f"{s['units']} BiLSTM / LSTM, dropout {s['dropout']}, SGD, clip {s['clip_norm']}; "
        f"{s['steps']} timed steps each after {s['warmup']} warm-up, alternating; beam "
        f"{s['beam_width']} x {s['beam_batch']} sentences x {s['beam_max_length']} steps. "
        f"{s['precision']}, "
        f"{'our training step XLA-compiled' if s.get('xla') else 'no XLA'}.", "",
        "| | ours | OpenNMT-tf | ours/OpenNMT-tf |", "|---|---:|---:|---:|",
        f"| framework | TF {ours.get('tensorflow', '?')} | OpenNMT-tf "
        f"{peer.get('opennmt_tf', '?')}, TF {peer.get('tensorflow', '?')} | |",
        f"| parameters | {_fmt(ours.get('parameters'), ',')} | "
        f"{_fmt(peer.get('parameters'), ',')} | |",
        f"| oneDNN CPU kernels | {_on_off(ours.get('onednn'))} | "
        f"{_on_off(peer.get('onednn'))} | |",
        f"| threads | {_threads(ours)} | {_threads(peer)} | |"]
    rows = [("train ms/step (median)", "ms_per_step_median", ".1f"),
            ("train ms/step (min)", "ms_per_step_min", ".1f"),
            ("target tokens/s", "tokens_per_s", ".0f"),
            ("first call s (trace + 1 step)", "first_call_s", ".1f"),
            ("beam ms/call (median)", "ms_per_beam_call_median", ".1f"),
            ("beam sentences/s", "sentences_per_s", ".2f")]
    for label, key, spec in rows:
        lines.append(f"| {label} | {_fmt(ours.get(key), spec)} | {_fmt(peer.get(key), spec)} "
                     f"| {_fmt(result['ratios'].get(key), '.2f')} |")
    errors = [f"- {side}: {sides[side][k]}" for side in SIDES for k in ("error", "beam_error")
              if sides[side].get(k)]
    if errors:
        lines += ["", "Errors:", ""] + [e.strip().splitlines()[-1] for e in errors]
    lines += ["", "Model differences:", ""] + [f"- {n}" for n in result["model_notes"]]
    return "\n".join(lines) + "\n"


def _threads(side):
    """How a side ran its ops: our batch shards (acvi_tf.utils.shards) or TensorFlow's
    default threads."""
    shards = side.get("batch_shards")
    if not shards or shards.get("cpu_shards", 1) <= 1:
        return "TensorFlow's default"
    return f"{shards['cpu_shards']} batch shards ({shards['reason']})"


def build_result(profile, argv, size, load, sides, wall_seconds, code=None,
                 ours_precision="float32", xla=False, **settings):
    """The JSON record: settings, load averages, both sides' numbers and ours/peer ratios."""
    cpus = os.cpu_count() or 1
    result = {
        "profile": profile,
        "argv": list(sys.argv[1:] if argv is None else argv),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu_count": cpus, "cpu_model": cpu_description(),
                    "python": platform.python_version(),
                    "platform": platform.platform()},
        "code": code or code_version(),  # the commit measured (taken at the start)
        "load_average": load,
        "idle": is_idle(load, cpus),
        "note": ("Times are results only when measured on an otherwise idle machine; see "
                 "load_average (os.getloadavg() 1/5/15 min) and idle."),
        "settings": {**dataclasses.asdict(size), **settings,
                     "precision": precision_label(ours_precision, xla),
                     "xla": xla, "order": "alternating, ours first in each round"},
        "model_notes": MODEL_NOTES,
        "sides": sides,
        "ratios": {},
        "wall_seconds": wall_seconds,
    }
    for key in ("ms_per_step_median", "ms_per_step_min", "tokens_per_s", "first_call_s",
                "ms_per_beam_call_median", "sentences_per_s"):
        result["ratios"][key] = ratio(result, key)
    return result


def write_outputs(result, json_path):
    """Writes the JSON and, beside it, the markdown table (same name, ``.md``)."""
    md_path = os.path.splitext(json_path)[0] + ".md"
    os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
    with open(json_path, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    with open(md_path, "w") as f:
        f.write(markdown(result))
    return md_path


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=(
        "Training-step and beam-search speed of our Seq2Seq (soft, multiplicative) beside "
        "OpenNMT-tf's SequenceToSequence at the same size, alternating steps. See the "
        "module docstring of benchmarks/peers/run.py."))
    p.add_argument("--quick", action="store_true",
                   help="toy sizes and 2 timed steps: checks the harness, measures nothing")
    p.add_argument("--steps", type=int, default=None, help="timed training steps per side")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps after the first")
    p.add_argument("--beam_reps", type=int, default=None,
                   help="timed beam-search calls per side (0: no beam search)")
    for name in SIZE_OVERRIDES[3:]:  # steps, warmup and beam_reps are defined above
        p.add_argument(f"--{name}", type=int, default=None,
                       help=f"override the size's {name} (e.g. Multi30k's short sentences)")
    p.add_argument("--encoder", choices=("layerwise", "stacked"), default="layerwise",
                   help="OpenNMT-tf encoder layout (see benchmarks/peers/opennmt_tf.py)")
    p.add_argument("--precision", choices=PRECISIONS, default="float32",
                   help="our model's dtype policy (ModelConfig.precision); OpenNMT-tf stays fp32")
    p.add_argument("--xla", action="store_true",
                   help="XLA-compile our training step (the peer's and our beam search stay off)")
    p.add_argument("--peer_python", default=DEFAULT_PEER_PYTHON,
                   help="the Python of the OpenNMT-tf environment (make bench-peers makes it)")
    p.add_argument("--seed", type=int, default=0, help="batches and parameters")
    p.add_argument("--out", default=None, help="JSON path (default bench_results/"
                   "bench_peers.json, --quick: bench_peers_quick.json); the .md goes beside it")
    p.add_argument("--timeout", type=float, default=600,
                   help="seconds to wait for a worker to exit")
    args = p.parse_args(argv)
    args.peer_python = os.path.abspath(args.peer_python)
    if args.out is None:
        args.out = os.path.join("bench_results",
                                "bench_peers_quick.json" if args.quick else "bench_peers.json")
    return args


def size_of(args):
    """The ``PeerSize`` the arguments ask for: the full (or --quick) size with the given
    overrides (steps, lengths, vocabularies, batch)."""
    overrides = {k: getattr(args, k) for k in SIZE_OVERRIDES if getattr(args, k) is not None}
    return dataclasses.replace(common.SIZES[profile_of(args)], **overrides)


def profile_of(args):
    return "quick" if args.quick else "full"


def main(argv=None):
    args = parse_args(argv)
    if not os.path.exists(args.peer_python):
        raise SystemExit(f"no OpenNMT-tf environment at {args.peer_python}: run "
                         "`make bench-peers` (it creates .venv-peers) or pass --peer_python")
    size = size_of(args)
    batches_path = os.path.splitext(args.out)[0] + "_batches.npz"
    batches = common.make_batches(size, args.seed)
    common.save_batches(batches_path, batches, size, args.seed)
    tokens = common.target_tokens(batches["tgt_out"][0])
    start, load, code = time.perf_counter(), {"start": load_average()}, code_version()
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    argvs = {"ours": [sys.executable, "-m", "benchmarks.peers.ours", batches_path,
                      args.precision, "on" if args.xla else "off"],
             "opennmt-tf": [args.peer_python, "-m", "benchmarks.peers.opennmt_tf",
                            batches_path, "--encoder", args.encoder]}
    workers, sides = {}, {side: {"error": None} for side in SIDES}
    times = {side: {"train": [], "beam": []} for side in SIDES}
    try:
        for side in SIDES:  # one at a time: the first calls are not timed against each other
            log(f"bench-peers: starting {side}")
            try:
                workers[side] = Worker(side, argvs[side], args.timeout)
                sides[side].update(workers[side].info)
            except WorkerError as e:
                sides[side]["error"] = str(e)
                log(str(e))
        load["before_timing"] = load_average()
        others = OtherLoad([w.proc.pid for w in workers.values()]).start()
        plan = [("train", size.steps)]
        if all(w.info.get("beam_first_call_s") is not None for w in workers.values()):
            plan.append(("beam", size.beam_reps))
        for op, count in plan:
            for i in range(count):
                for side, worker in workers.items():
                    if sides[side]["error"] is None:
                        try:
                            times[side][op].append(worker.run(op))
                        except WorkerError as e:
                            sides[side]["error"] = str(e)
                            log(str(e))
                log(f"bench-peers: {op} round {i + 1}/{count}: " + ", ".join(
                    f"{s} {1e3 * t[op][-1]:.1f} ms" for s, t in times.items() if t[op]))
        load["after_timing"] = load_average()
        load["others_cores_during_timing"] = others.stop()
    finally:
        for worker in workers.values():
            worker.close()
    for side in SIDES:
        sides[side].pop("ready", None)
        sides[side].update(summarize(times[side]["train"], times[side]["beam"], tokens,
                                     size.beam_batch))
    result = build_result(profile_of(args), argv, size, load, sides,
                          time.perf_counter() - start, code=code, ours_precision=args.precision, xla=args.xla,
                          seed=args.seed,
                          encoder=args.encoder,
                          batches=os.path.relpath(batches_path))
    md_path = write_outputs(result, args.out)
    print(markdown(result))
    print(f"wrote {args.out} and {md_path} ({result['wall_seconds']:.0f} s)")
    print(final_line(result))
    return 0 if result["ratios"]["tokens_per_s"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
