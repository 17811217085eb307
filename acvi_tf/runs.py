"""The run directory (``model_dir``): configs, checkpoints, ``results.json``.

Everything a run needs to be rebuilt lives in its directory: ``model_config.json``
(the architecture), ``train_config.json`` (the Trainer's), ``run_config.json`` and
``flags.txt`` (the resolved settings of the CLI that made it), the Trainer's
checkpoints (``ckpt/``), ``provenance.json`` (the commit, time and machine load of
each start: :mod:`acvi_tf.utils.provenance`) and ``results.json``. This module reads and
writes them; it knows no flags and raises ordinary exceptions (:class:`ConfigError`
names the setting at fault, so a CLI can report it as a flag error).
"""

import contextlib
import dataclasses
import fcntl
import glob
import json
import os
import shlex
import shutil
import sys
import time

import numpy as np
import tensorflow as tf

from acvi_tf.utils import provenance
from acvi_tf.metrics import diversity
from acvi_tf.models import build_model
from acvi_tf.models.seq2seq import ModelConfig
from acvi_tf.training import hparams
from acvi_tf.training.trainer import (TrainConfig, checkpoint_files, is_chief,
                                      make_optimizer)
from acvi_tf.training.warm_start import copy_matching
from acvi_tf.utils import manifest


class ConfigError(ValueError):
    """A bad setting; ``field`` names it (the CLI flag of the same name)."""

    def __init__(self, field, message):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


class RunError(RuntimeError):
    """A run cannot go on (e.g. no usable data was read); the message says why."""


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


def log(message):
    """Progress and diagnostics go to stderr (stdout carries scores and decodes)."""
    print(message, file=sys.stderr, flush=True)


class Stopwatch:
    def __init__(self):
        self.start = time.time()

    def seconds(self):
        return time.time() - self.start


def command_line(module, argv=None):
    """The exact command that ran, as a shell-quoted string."""
    argv = sys.argv[1:] if argv is None else list(argv)
    return " ".join(["python", "-m", module] + [shlex.quote(a) for a in argv])


# ---------------------------------------------------------------------------
# JSON and text files
# ---------------------------------------------------------------------------

def save_json(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True, ensure_ascii=False, default=_jsonable)
        f.write("\n")
    os.replace(tmp, path)


def load_json(path):
    """The JSON object in ``path``; a file that does not parse is a :class:`RunError`
    naming it (a stored config garbled by hand or by a full disk)."""
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except ValueError as e:
            raise RunError(f"{path} is not valid JSON ({e}); restore it or use a new "
                           f"--model_dir") from None


def _jsonable(obj):
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    if hasattr(obj, "item"):
        return obj.item()
    return str(obj)


def write_text(path, text):
    """Writes ``text`` (with a final newline) atomically: a temporary file renamed into place."""
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text if text.endswith("\n") else text + "\n")
    os.replace(tmp, path)


NOTES_MARKER = ("<!-- Notes below this line are written by hand and kept when the report is "
                "regenerated. -->")


def write_report(path, text):
    """Writes a generated markdown report (:func:`write_text`), keeping whatever an existing
    ``path`` holds below :data:`NOTES_MARKER` (notes by hand) under the new text."""
    notes = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
        if NOTES_MARKER in old:
            notes = old.split(NOTES_MARKER, 1)[1].lstrip("\n")
    write_text(path, "\n".join([text.rstrip(), "", NOTES_MARKER, "", notes]).rstrip())


def write_lines(path, lines):
    """One line per item, each ending in a newline, atomically: an empty last item (an
    empty hypothesis) keeps its line, so the file lines up with its references."""
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(f"{line}\n" for line in lines))
    os.replace(tmp, path)


def load_results(model_dir):
    """``model_dir/results.json`` ({} when there is none)."""
    path = os.path.join(model_dir, "results.json")
    return load_json(path) if os.path.exists(path) else {}


def update_results(model_dir, **fields):
    """Merges ``fields`` into ``model_dir/results.json`` (created if absent). Only the
    chief of a multi-worker run writes (the others return what they would have written)."""
    path = os.path.join(model_dir, "results.json")
    if not is_chief():
        return dict(fields)
    results = load_json(path) if os.path.exists(path) else {}
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(results.get(key), dict):
            results[key] = {**results[key], **value}
        else:
            results[key] = value
    save_json(path, results)
    return results


def add_diversity(data, log=None):
    """Puts ``diversity`` (entropy, distinct-1/2 of Bahuleyan et al. 2018:
    :mod:`acvi_tf.metrics.diversity`) next to every ``decode_file`` in a results
    dict (at any depth) that has none yet, computed over the file's lines (the
    text after the first tab in a ``.tsv``: caption decodes are ``clip<TAB>text``),
    whitespace-tokenized. Every task's results get it this way."""
    def visit(node, where):
        if not isinstance(node, dict):
            return
        path = node.get("decode_file")
        if isinstance(path, str) and "diversity" not in node and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                lines = [line.rstrip("\n") for line in f]
            if path.endswith(".tsv"):
                lines = [line.split("\t", 1)[-1] for line in lines]
            node["diversity"] = diversity.diversity(lines)
            if log:
                log(f"{where or 'decode'} diversity: "
                    f"{diversity.format_diversity(node['diversity'])}")
        for key, value in node.items():
            visit(value, f"{where}.{key}" if where else key)

    visit(data, "")
    return data


def finish_results(model_dir, data, log=None):
    """Merges a run's results into ``results.json``, adding the total wall time, the
    diversity of every decode (:func:`add_diversity`) and the run's ``provenance``
    (:func:`acvi_tf.utils.provenance.summary`; this ends the run's open segment), then
    writes the run's TensorBoard HParams session (:func:`write_hparams`)."""
    path = os.path.join(model_dir, "results.json")
    previous = load_json(path) if os.path.exists(path) else {}
    train_seconds = data.get("train_wall_time_sec", previous.get("train_wall_time_sec", 0.0))
    segments, end = end_segment(model_dir)
    data = dict(data, wall_time_sec=train_seconds + data.get("eval_wall_time_sec", 0.0),
                provenance=provenance.summary(segments, end))
    add_diversity(data, log)
    results = update_results(model_dir, **data)
    if log:
        log(f"results: {path}")
    if is_chief():
        write_hparams(model_dir, results)
    return results


def write_hparams(model_dir, results):
    """The run's row of TensorBoard's HParams dashboard (:mod:`acvi_tf.training.hparams`):
    its settings from ``run_config.json`` and ``model_config.json`` (either may be
    missing, e.g. for the copy-the-source baseline) and its final metrics from
    ``results``, into ``<model_dir>/hparams/``."""
    model_config_path = os.path.join(model_dir, "model_config.json")
    model_config = load_json(model_config_path) if os.path.exists(model_config_path) else None
    return hparams.write_session(model_dir, results, load_run_config(model_dir), model_config)


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
    ended on a normal exit, unless :func:`finish_results` ended it already (a mode
    that writes no results, e.g. ``--mode=train``, ends here). A start that raises
    keeps ``"end": null``: it did not finish."""
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


def load_run_config(model_dir):
    """The saved ``run_config.json`` of ``model_dir``, or None."""
    path = os.path.join(model_dir, "run_config.json")
    return load_json(path) if os.path.exists(path) else None


def check_model_config(model_dir, config):
    """Saves ``model_config.json``; a resumed run must not change the model."""
    path = os.path.join(model_dir, "model_config.json")
    if os.path.exists(path):
        saved = ModelConfig.from_dict(load_json(path))
        if saved != config:
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


# ---------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------

def latest_checkpoint(model_dir):
    return tf.train.latest_checkpoint(os.path.join(model_dir, "ckpt"))


def checkpoint_to_evaluate(model_dir):
    """The checkpoint a trained run is evaluated with: the best evaluation's (``best.json``,
    written when it trained with ``--select_best``), else the one a resume would use
    (:func:`acvi_tf.training.trainer.resume_checkpoint`: the latest, or, when it cannot be
    read, the newest one that can, said in one line). When none can be read, the newest
    (whose restore then fails naming it)."""
    from acvi_tf.training.trainer import (CheckpointError, listed_checkpoints, read_best,
                                          resume_checkpoint)
    best = read_best(model_dir)
    if best is not None:
        return os.path.join(model_dir, best["checkpoint"])
    try:
        return resume_checkpoint(model_dir, log)
    except CheckpointError:
        listed = listed_checkpoints(model_dir)
        return listed[0][1] if listed else None


def restore_model(model, model_dir, build_batch):
    """Builds ``model`` on ``build_batch`` and restores the Trainer's latest checkpoint (the
    best evaluation's, for a run trained with ``--select_best``).

    The Trainer saves ``tf.train.Checkpoint(model=..., optimizer=..., step=...)``;
    Keras 3 models are reached through the optimizer's variable list in that
    object graph (a ``Checkpoint(model=model)`` alone restores nothing), so the
    optimizer is rebuilt as in training (``train_config.json``) over the model's
    trainable variables, and every restored weight is checked against the file.
    Returns the step stored with the checkpoint. Raises ``FileNotFoundError``
    naming the directory when there is no checkpoint.
    """
    path = checkpoint_to_evaluate(model_dir)
    if path is None:
        raise FileNotFoundError(f"no checkpoint in {os.path.join(model_dir, 'ckpt')}; train "
                                f"first (--mode=train or the default --mode=train_eval)")
    model.build_for_checkpoint({k: tf.convert_to_tensor(v) for k, v in build_batch.items()})
    config_path = os.path.join(model_dir, "train_config.json")
    saved = load_json(config_path) if os.path.exists(config_path) else {}
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    train_config = TrainConfig(**{k: v for k, v in saved.items() if k in known
                                  and k != "model_dir"}, model_dir=model_dir)
    optimizer = make_optimizer(train_config, model.config.precision)
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    for attempt in range(RESTORE_ATTEMPTS):
        try:
            _restore_and_verify(model, optimizer, step, path)
            return int(step.numpy())
        except Exception as e:  # noqa: BLE001 - re-raised with the file named
            newest = checkpoint_to_evaluate(model_dir)
            if attempt + 1 < RESTORE_ATTEMPTS and newest and (
                    newest != path or not os.path.exists(path + ".index")):
                # a run training in model_dir rotated the checkpoint away while it was
                # read (--keep_checkpoints): read the newest one instead
                log(f"{path} was replaced while it was read (a run is training in "
                    f"{model_dir}); reading the newest checkpoint {newest}")
                path = newest
                continue
            first = str(e).splitlines()[0] if str(e) else ""
            if isinstance(e, RunError):
                raise
            raise RunError(f"cannot restore checkpoint {path} ({type(e).__name__}: {first}); "
                           f"the file may be truncated. Move ckpt/ aside or use an older "
                           f"checkpoint (edit {os.path.join(model_dir, 'ckpt', 'checkpoint')})"
                           ) from None


RESTORE_ATTEMPTS = 5  # a checkpoint rotated away while read: read the newest, this often


def _restore_and_verify(model, optimizer, step, path):
    """Restores checkpoint ``path`` into ``model``, ``optimizer`` and ``step``, and checks
    that every trainable weight holds the file's value."""
    status = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step).restore(path)
    status.expect_partial()
    status.assert_existing_objects_matched()
    reader = tf.train.load_checkpoint(path)
    keys = set(reader.get_variable_to_shape_map())
    for i, v in enumerate(model.trainable_variables):
        key = f"optimizer/_trainable_variables/{i}/.ATTRIBUTES/VARIABLE_VALUE"
        if key in keys and not np.array_equal(reader.get_tensor(key), v.numpy()):
            raise RunError(f"{path}: weight {v.path} was not restored; the checkpoint "
                           f"does not match this model")


def load_model(model_dir, build_batch):
    """Rebuilds the model saved in ``model_dir`` and restores its latest checkpoint;
    returns ``(model, step)``."""
    model = build_model(load_model_config(model_dir))
    step = restore_model(model, model_dir, build_batch)
    return model, step


def warm_start_fn(init_from, model_dir, build_batch, log=log):
    """The Trainer's ``warm_start`` for ``init_from`` (None without it): loads the run
    in ``init_from`` and copies every variable whose name and shape match
    (:mod:`acvi_tf.training.warm_start`). Vocabulary files present in both run
    directories must be identical, so that the copied embeddings mean the same words."""
    if not init_from:
        return None
    for name in sorted(os.listdir(model_dir)):
        theirs = os.path.join(init_from, name)
        if name.startswith("vocab") and os.path.isfile(theirs):
            with open(os.path.join(model_dir, name), "rb") as a, open(theirs, "rb") as b:
                if a.read() != b.read():
                    raise ConfigError("init_from", f"{theirs} differs from {model_dir}/{name}: "
                                      f"the runs do not share a vocabulary")

    def warm_start(model):
        try:
            source, step = load_model(init_from, build_batch)
        except (RunError, FileNotFoundError, manifest.StoredFileError):
            raise  # (their messages name the file)
        except Exception as e:  # noqa: BLE001 - a run this task's batch cannot rebuild
            first = str(e).splitlines()[0] if str(e) else ""
            raise ConfigError("init_from", f"cannot rebuild the run in {init_from} for this "
                              f"task ({type(e).__name__}: {first}); warm-start from a run "
                              f"of the same task") from None
        loaded, skipped = copy_matching(source, model)
        log(f"warm start from {init_from} (step {step}): {len(loaded)} variables loaded, "
            f"{len(skipped)} kept fresh" + (f" ({', '.join(sorted(skipped))})" if skipped
                                             else ""))
        return {"init_from": init_from, "init_from_step": step, "loaded": len(loaded),
                "kept_fresh": sorted(skipped)}
    return warm_start
