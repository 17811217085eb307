"""What both sides of the peer benchmark share: sizes, the batches file, the worker protocol.

This module needs numpy and the standard library only: it is imported by our worker (the
main environment, TF 2.21 / Keras 3) and by the OpenNMT-tf worker (``.venv-peers``,
TF 2.13 / tf.keras 2).
"""

import dataclasses
import json
import os
import sys
import time
import traceback
from types import SimpleNamespace

import numpy as np

from benchmarks.workload import random_batch

# Our token ids (ModelConfig defaults): 0 pad, 1 unk, 2 bos, 3 eos, words from 4.
PAD, UNK, BOS, EOS = 0, 1, 2, 3
# OpenNMT-tf's (opennmt.constants): 0 <blank>, 1 <s>, 2 </s>; <unk> is the OOV bucket
# (the last id); word ids are the same on both sides.
ONMT_BOS, ONMT_EOS = 1, 2


def onednn_enabled():
    """Whether this worker's (imported) TensorFlow runs oneDNN's CPU kernels, as
    :func:`acvi_tf.utils.provenance.tf_settings` asks it (standard library only, so the
    OpenNMT-tf worker imports it too); a result says which ran on each side."""
    from acvi_tf.utils.provenance import tf_settings
    return tf_settings()["onednn"]


@dataclasses.dataclass(frozen=True)
class PeerSize:
    """One benchmark size: the model (both sides), the training batch, beam search, counts."""
    src_vocab: int
    tgt_vocab: int
    embed: int
    units: int            # per direction in the encoder; the decoder's LSTM size
    layers: int           # encoder layers (bidirectional) and decoder layers
    dropout: float
    batch: int
    src_len: int
    tgt_len: int          # decoder steps, end token included
    beam_width: int
    beam_batch: int
    beam_max_length: int
    warmup: int           # untimed steps after the first (tracing) call
    steps: int            # timed training steps per side
    beam_reps: int        # timed beam-search calls per side
    learning_rate: float = 1.0  # SGD (Luong et al.)
    clip_norm: float = 5.0      # global-norm clipping


SIZES = {
    # Our paper MT model (benchmarks.profiles.TRANSLATION_MODEL) with dropout 0.2 and SGD.
    "full": PeerSize(src_vocab=17191, tgt_vocab=7709, embed=256, units=256, layers=2,
                     dropout=0.2, batch=128, src_len=50, tgt_len=50, beam_width=10,
                     beam_batch=32, beam_max_length=50, warmup=2, steps=5, beam_reps=3),
    # Checks the harness end to end in a minute or two; not a measurement.
    "quick": PeerSize(src_vocab=300, tgt_vocab=200, embed=32, units=32, layers=2,
                      dropout=0.2, batch=8, src_len=10, tgt_len=10, beam_width=3,
                      beam_batch=2, beam_max_length=6, warmup=1, steps=2, beam_reps=2),
}


def make_batches(size, seed):
    """The training batches (``warmup + 1 + steps`` of them) and the beam-search sources.

    Built by ``benchmarks.workload.random_batch`` (as ``make bench`` builds its batches),
    one ``np.random.default_rng(seed)`` for all of them: the same seed gives the same
    arrays. Returns a dict of stacked int32 arrays in our id convention: ``src``
    [K, B, N], ``tgt_in`` and ``tgt_out`` [K, B, T], ``beam_src`` [beam batch, N].
    """
    rng = np.random.default_rng(seed)
    config = SimpleNamespace(src_vocab_size=size.src_vocab, tgt_vocab_size=size.tgt_vocab,
                             pad_id=PAD, bos_id=BOS, eos_id=EOS)
    batches = [random_batch(config, size.batch, size.src_len, size.tgt_len, rng)
               for _ in range(size.warmup + 1 + size.steps)]
    out = {k: np.stack([b[k] for b in batches]) for k in ("src", "tgt_in", "tgt_out")}
    first_word = max(BOS, EOS) + 1
    out["beam_src"] = rng.integers(first_word, size.src_vocab,
                                   (size.beam_batch, size.src_len)).astype(np.int32)
    return out


def save_batches(path, batches, size, seed):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    meta = json.dumps({"size": dataclasses.asdict(size), "seed": seed})
    np.savez(path, meta=np.array(meta), **batches)


def load_batches(path):
    """``(arrays, size, seed)`` from a file written by :func:`save_batches`."""
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files if k != "meta"}
        meta = json.loads(str(f["meta"]))
    return arrays, PeerSize(**meta["size"]), meta["seed"]


def to_opennmt_ids(ids):
    """Our ids in OpenNMT-tf's convention: bos 2 -> 1, eos 3 -> 2; pad and words unchanged."""
    ids = np.asarray(ids)
    return np.where(ids == BOS, ONMT_BOS, np.where(ids == EOS, ONMT_EOS, ids))


def target_tokens(tgt_out):
    """Target tokens of one batch (end tokens included, pads not): the tokens/s numerator."""
    return int((np.asarray(tgt_out) != PAD).sum())


# -- the worker protocol ------------------------------------------------------------------
#
# A worker builds its model, makes the first (tracing) call and the warm-up steps, then
# writes {"ready": true, ...} on one line and waits. Each line it reads ("train" or
# "beam") runs one step, timed inside the worker, answered by {"op", "seconds"}; "quit"
# ends it. Anything else the libraries print goes to stderr, so stdout carries the
# protocol only.

def serve(setup):
    """Runs a worker: ``setup()`` returns ``(info dict, {op: callable})``."""
    proto = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def send(message):
        proto.write(json.dumps(message) + "\n")

    try:
        info, ops = setup()
    except Exception:
        send({"ready": False, "error": traceback.format_exc()[-3000:]})
        return 1
    send({"ready": True, **info})
    for line in sys.stdin:
        op = line.strip()
        if op == "quit":
            break
        try:
            t0 = time.perf_counter()
            ops[op]()
            send({"op": op, "seconds": time.perf_counter() - t0})
        except Exception:
            send({"op": op, "error": traceback.format_exc()[-3000:]})
    return 0


def timed(fn):
    """Seconds of one call of ``fn`` (which must block until its work is done)."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def warm_up(info, train, beam, warmup):
    """First (tracing) calls and warm-up steps; returns ``(info, ops)`` for :func:`serve`.

    A beam search that fails is reported in ``info["beam_error"]``; training is still timed.
    """
    info["first_call_s"] = timed(train)
    for _ in range(warmup):
        train()
    ops = {"train": train}
    try:
        info["beam_first_call_s"] = timed(beam)
        ops["beam"] = beam
    except Exception:
        info["beam_error"] = traceback.format_exc()[-3000:]
    return info, ops
