"""Each batch run as concurrent shards, one per CPU core, with one thread per op.

On a CPU TensorFlow splits every op across its intra-op threads. The recurrent models'
ops are small ([B, 4u] gates, [B, u] x [u, 4u] products, 50-100 of them per step in
sequence), so splitting each one costs a synchronisation per op that the op's work does
not repay: on 2 cores a training step of the paper's MT model runs only 1.1-1.4x faster
with 2 threads than with 1. Splitting the *batch* instead gives each core a chain of
whole ops of its own: the step runs ``shards`` copies of the model's graph on
``batch / shards`` rows each, which TensorFlow's inter-op threads run side by side, each
op on one thread (``results/bench_profile.md``, 2026-12-03: 1.35x the step, 1.2x a
beam search at the peer benchmark's size).

What changes for the model: nothing in the objective, which is a sum over rows (the
shards' sums add up to the batch's; tested equal in values and gradients), and the
random draws (dropout, ACVI's noise), which each shard makes from its own seed
(:func:`shard_seed`): a run's trajectory depends on its shard count, which the run
records, as it depends on its seed.

:func:`configure` sets the threads; it must run before TensorFlow executes its first op
(the task CLIs call it first thing), and it leaves alone a process whose TensorFlow
threads the user set (``TF_NUM_INTRAOP_THREADS`` / ``TF_NUM_INTEROP_THREADS``, as the
table lanes of ``make table*-cpu PARALLEL=2`` do), one with a GPU, one that XLA-compiles
its step, and a machine with a single core: those run one shard.
"""

import logging
import os

import tensorflow as tf

from acvi_tf.utils.ops import part_seed

log = logging.getLogger(__name__)

THREAD_VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
_state = {"shards": 1, "reason": "not configured (one shard)"}


def usable_cores():
    """The CPU cores this process may run on (its affinity mask, else the CPU count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - no sched_getaffinity (macOS)
        return os.cpu_count() or 1


def _set_threads(shards):
    """One thread per op, ``shards`` ops at a time; False if TensorFlow has started."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(shards)
    except RuntimeError:  # "... cannot be modified after initialization"
        return False
    return True


def configure(requested=0, environ=None, cores=None, gpu=None, xla=False):
    """Chooses this process's shard count and sets TensorFlow's threads for it.

    ``requested``: 0 (auto) or a count (``--cpu_shards``). Auto gives one shard per
    usable core when TensorFlow's threads are still ours to set: not after its first op,
    not when the user set a thread variable, not with a GPU (whose kernels are large), and
    not with ``xla`` (an XLA-compiled step is one program that runs its ops one after
    another: with one thread per op it would run on one core; measured 1.5x slower).
    An explicit count > 1 shards the batch whatever the threads (one thread per op where
    they can still be set). Returns ``(shards, reason)``, also kept for :func:`shards`."""
    environ = os.environ if environ is None else environ
    cores = usable_cores() if cores is None else cores
    if requested < 0:
        raise ValueError(f"cpu_shards must be >= 0 (0: auto), got {requested}")
    if gpu is None:
        gpu = bool(tf.config.list_physical_devices("GPU"))
    user_threads = [v for v in THREAD_VARIABLES if v in environ]
    if requested == 1:
        count, reason = 1, "--cpu_shards=1"
    elif requested == 0 and user_threads:
        count, reason = 1, f"auto: {', '.join(user_threads)} set by the user"
    elif requested == 0 and xla:
        count, reason = 1, "auto: --xla (an XLA program runs its ops in sequence)"
    elif requested == 0 and gpu:
        count, reason = 1, "auto: a GPU is visible"
    elif requested == 0 and cores < 2:
        count, reason = 1, "auto: one usable core"
    else:
        count = requested or cores
        how = f"--cpu_shards={requested}" if requested else f"auto: {cores} usable cores"
        if user_threads:
            reason = f"{how} (threads as the user set them: {', '.join(user_threads)})"
        elif _set_threads(count):
            reason = f"{how}, 1 thread per op, {count} ops at a time"
        elif requested:
            reason = f"{how} (TensorFlow had started: its threads are unchanged)"
        else:
            count, reason = 1, "auto: TensorFlow had started before its threads could be set"
    _state.update(shards=count, reason=reason)
    log.debug("batch shards: %d (%s)", count, reason)  # the Trainer says it in its log
    return count, reason


def shards():
    """This process's shard count (:func:`configure`; 1 until it ran)."""
    return _state["shards"]


def describe(requested=0):
    """``{"cpu_shards": n, "reason": ...}`` for a run's records: of ``requested`` (a
    ``--cpu_shards`` > 0) as :func:`resolve` takes it, else of this process's count."""
    if requested and requested > 0:
        return {"cpu_shards": requested, "reason": f"--cpu_shards={requested}"}
    return {"cpu_shards": _state["shards"], "reason": _state["reason"]}


def resolve(requested):
    """The shard count a step uses: ``requested`` if set, else this process's."""
    return describe(requested)["cpu_shards"]


def split_rows(batch, count):
    """``batch`` (a dict of tensors) as ``count`` dicts of consecutive rows: every tensor of
    rank >= 1 cut along its first axis at ``k * B // count`` (shard sizes differ by at most
    one; a shard is empty when B < count); scalars (``max_oovs``) go to every shard."""
    batch = {k: tf.convert_to_tensor(v) for k, v in batch.items()}
    rows = next((tf.shape(v)[0] for v in batch.values() if v.shape.rank), None)
    if count <= 1 or rows is None:
        return [batch]
    bounds = [(k * rows) // count for k in range(count + 1)]
    return [{k: (v[bounds[i]:bounds[i + 1]] if v.shape.rank else v) for k, v in batch.items()}
            for i in range(count)]


SHARD_SALT = 0x5A4D


def shard_seed(seed, index):
    """The seed of shard ``index`` (:func:`acvi_tf.utils.ops.part_seed`): shard 0 keeps
    ``seed`` (one shard is the unsharded step, draw for draw)."""
    return part_seed(seed, index, SHARD_SALT)


def concat_rows(parts):
    """The shards' outputs (dicts of [rows, ...] tensors) joined along the rows. Axes past
    the first that differ between shards (a decode's steps) are zero-padded to the
    longest; scalars must agree and are taken from the first shard."""
    if len(parts) == 1:
        return parts[0]
    out = {}
    for key in parts[0]:
        values = [tf.convert_to_tensor(p[key]) for p in parts]
        if values[0].shape.rank == 0:
            out[key] = values[0]
            continue
        longest = tf.reduce_max(tf.stack([tf.shape(v) for v in values]), axis=0)

        def padded(v):
            short = longest - tf.shape(v)
            after = tf.concat([[0], short[1:]], 0)  # never the rows
            return tf.pad(v, tf.stack([tf.zeros_like(after), after], 1))
        out[key] = tf.concat([padded(v) for v in values], 0)
    return out


def _per_shard(fn, batch, count):
    """``[fn(part, index)]`` over the shards of ``batch`` (count None: :func:`shards`)."""
    parts = split_rows(batch, shards() if count is None else count)
    return [fn(part, i) for i, part in enumerate(parts)]


def sharded(fn, batch, count=None):
    """``fn(batch)`` computed as ``concat_rows([fn(shard) for shard in split_rows(batch)])``:
    for a function whose output rows depend only on the same input rows (decoding).
    ``count``: the shard count (default :func:`shards`); fn gets ``(part, index)``."""
    return concat_rows(_per_shard(fn, batch, count))


def summed(fn, batch, count=None):
    """``fn(batch)`` for a function whose outputs (a dict of tensors) are sums over rows
    (a loss's terms): the sum of ``fn(part, index)`` over the shards of ``batch``.
    ``count``: the shard count (default :func:`shards`)."""
    outs = _per_shard(fn, batch, count)
    if len(outs) == 1:
        return outs[0]
    return {name: tf.add_n([out[name] for out in outs]) for name in outs[0]}
