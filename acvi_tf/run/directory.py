"""The run directory itself: its lock (one writing run at a time), the provenance
segments of its starts (``provenance.json``), the run config (``run_config.json``,
``flags.txt``), the model config (``model_config.json``, checked against a resumed run)
and the vocabulary files. The package docstring (:mod:`acvi_tf.run`) lists its files."""

import contextlib
import dataclasses
import fcntl
import os
import shutil

from acvi_tf.errors import ConfigError, RunError
from acvi_tf.models.seq2seq import ModelConfig
from acvi_tf.training.trainer import checkpoint_files, is_chief
from acvi_tf.utils import manifest, provenance
from acvi_tf.utils.files import load_json, save_json, write_lines


LOCK_FILE = ".lock"
PROVENANCE_FILE = "provenance.json"


@contextlib.contextmanager
def locked_run_dir(model_dir):
    """Holds an OS lock (``fcntl.flock``) on ``model_dir/.lock`` for a run that writes
    into ``model_dir``: a second process is refused with a :class:`RunError` naming the
    holder's pid, instead of resuming from the first one's checkpoints and mixing files
    with it. The lock dies with its process (a SIGKILL frees it). A directory this call
    created is removed again if the run fails before its first checkpoint (a failed first
    run leaves nothing behind; a later failure leaves the directory as it was)."""
    if os.path.exists(model_dir) and not os.path.isdir(model_dir):
        raise RunError(f"--model_dir={model_dir} is a file, not a directory")
    created = not os.path.exists(model_dir)
    os.makedirs(model_dir, exist_ok=True)
    path = os.path.join(model_dir, LOCK_FILE)
    handle = open(path, "a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise RunError(f"{model_dir} is in use by another run (pid {holder}); wait for it "
                       f"to finish or use another --model_dir") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    ok = False
    try:
        yield
        ok = True
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
        if created and not ok and not _holds_a_trained_state(model_dir):
            # a first run that failed before its first checkpoint: nothing in it is worth
            # resuming, and its vocabulary or configs would only block the corrected rerun
            shutil.rmtree(model_dir, ignore_errors=True)


def _holds_a_trained_state(model_dir):
    """Whether ``model_dir`` holds a checkpoint or results (what a failed run keeps)."""
    return (os.path.exists(os.path.join(model_dir, "results.json"))
            or bool(checkpoint_files(model_dir)))


# ---------------------------------------------------------------------------
# Provenance: one segment per start of the run (acvi_tf.utils.provenance)
# ---------------------------------------------------------------------------

def load_provenance(model_dir):
    """The segments in ``model_dir/provenance.json`` ([] when there is none: a new run,
    or one older than the file); anything but a list of objects is a :class:`RunError`
    naming the file."""
    path = os.path.join(model_dir, PROVENANCE_FILE)
    if not os.path.exists(path):
        return []
    segments = load_json(path)
    if not isinstance(segments, list) or not all(isinstance(s, dict) for s in segments):
        raise RunError(f"{path} is not a JSON list of run segments; move it aside or use "
                       f"a new --model_dir")
    return segments


def start_segment(model_dir, command, mode):
    """Appends a segment for this start of the run (its ``command``, ``mode`` and the
    :func:`~acvi_tf.utils.provenance.snapshot` now, ``"end": null``) to ``provenance.json``.
    Only the chief of a multi-worker run writes."""
    if not is_chief():
        return
    segments = load_provenance(model_dir)
    segments.append(provenance.new_segment(command, mode))
    save_json(os.path.join(model_dir, PROVENANCE_FILE), segments)


def end_segment(model_dir):
    """Ends this start's segment (the last one, if still open) with a snapshot taken
    now; returns ``(segments, end snapshot)``. Only the chief writes (and reads: the
    other workers' results are not written)."""
    end = provenance.snapshot()
    if not is_chief():
        return [], end
    segments = load_provenance(model_dir)
    if provenance.close_last(segments, end):
        save_json(os.path.join(model_dir, PROVENANCE_FILE), segments)
    return segments, end


@contextlib.contextmanager
def run_segment(model_dir, command, mode):
    """One start of a run in ``provenance.json``: the segment is appended on entry and
    ended on a normal exit, unless :func:`~acvi_tf.run.results.finish_results` ended it
    already (a mode that writes no results, e.g. ``--mode=train``, ends here). A start
    that raises keeps ``"end": null``: it did not finish."""
    start_segment(model_dir, command, mode)
    yield
    end_segment(model_dir)


# ---------------------------------------------------------------------------
# Run settings
# ---------------------------------------------------------------------------

def save_run_config(model_dir, settings, profile, command, flagfile_lines):
    """Writes ``run_config.json`` (the resolved settings, the profile, the command) and
    ``flags.txt`` (a flagfile that reproduces the run, after the profile was applied).
    Only the chief of a multi-worker run writes them."""
    if not is_chief():
        return
    save_json(os.path.join(model_dir, "run_config.json"),
              {"flags": settings, "profile": profile, "command": command})
    write_lines(os.path.join(model_dir, "flags.txt"), [f"--profile={profile}"] + flagfile_lines)
    manifest.record(model_dir, "run_config.json", "flags.txt")


def save_vocab(vocab, model_dir, name):
    """Writes a vocabulary file of the run and records its checksum (:mod:`manifest`);
    only the chief of a multi-worker run writes it (the others build the same one)."""
    if not is_chief():
        return
    vocab.save(os.path.join(model_dir, name))
    manifest.record(model_dir, name)


def check_model_config(model_dir, config):
    """Saves ``model_config.json``; a resumed run must not change the model (it may
    change :attr:`ModelConfig.RUN_FIELDS`, how the model runs)."""
    path = os.path.join(model_dir, "model_config.json")
    if os.path.exists(path):
        saved = ModelConfig.from_dict(load_json(path))
        runtime = {name: getattr(config, name) for name in ModelConfig.RUN_FIELDS}
        if dataclasses.replace(saved, **runtime) != config:
            raise ConfigError("model_dir", f"{model_dir} holds a model with a different "
                              f"configuration ({path}); use a new --model_dir")
    if not is_chief():
        return
    save_json(path, config.__dict__)
    manifest.record(model_dir, "model_config.json")


def check_vocab_size(model_dir, name, size, *fields):
    """A stored vocabulary ``model_dir/name`` of ``size`` entries must fill the embedding
    and softmax the run's ``model_config.json`` records (``fields``: ``src_vocab_size``,
    ``tgt_vocab_size``): a truncated or swapped vocabulary is a :class:`RunError` naming
    the file, with or without ``manifest.json``. A run without a model config yet passes."""
    path = os.path.join(model_dir, "model_config.json")
    if not os.path.exists(path):
        return
    saved = load_json(path)
    for field in fields:
        want = saved.get(field)
        if want is not None and int(want) != int(size):
            raise RunError(f"{os.path.join(model_dir, name)} has {size:,} entries but the "
                           f"trained model's {field} is {int(want):,} ({path}); the file is "
                           f"truncated or not this run's. Restore it or use a new --model_dir")


def load_model_config(model_dir):
    manifest.verify(model_dir)
    path = os.path.join(model_dir, "model_config.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found: --model_dir={model_dir} holds no trained "
                                f"model (train it first)")
    return ModelConfig.from_dict(load_json(path))

