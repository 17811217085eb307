"""What every task's SavedModel export shares.

An export is a ``tf.Module`` that tracks the model's variables, the lookup
tables (and tokenizers) its serving function reads, and asset files that record
how it was made: ``export.json`` (the commit, the decoding settings, the input
and output of the signature), the run's ``model_config.json`` /
``run_config.json`` and its vocabularies. ``serving_default`` is one
``tf.function`` with a fixed input signature; the search runs in the graph
(:meth:`acvi_tf.models.seq2seq.Seq2Seq.decode`, the same ``step`` as training).
The variables are tracked the way Keras' own ``ExportArchive`` tracks a layer's
(a list on the root object), so loading needs neither Keras nor ``acvi_tf``.
"""

import dataclasses
import datetime
import fcntl
import json
import os
import shutil
import tempfile
import time

import tensorflow as tf

from acvi_tf.errors import RunError
from acvi_tf.utils import lstm_impl
from acvi_tf.utils.provenance import code_version

EXPORT_INFO = "export.json"
EXPORT_FORMAT = "acvi_tf.saved_model/1"


def string_table(tokens, default_id):
    """A ``tf.lookup.StaticHashTable`` token -> int64 id (position in ``tokens``),
    ``default_id`` for anything else (the vocabulary's ``<unk>``)."""
    keys = tf.constant(list(tokens), tf.string)
    values = tf.range(len(tokens), dtype=tf.int64)
    return tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, values),
                                     default_value=tf.constant(default_id, tf.int64))


def pad_source(ragged_ids, pad_id):
    """Ragged int ids [B, None] -> ``(src [B, max(S, 1)] int32, lengths [B])``; a batch of
    empty lines still gets one (padding) column, so the encoder always sees a time axis."""
    ids = tf.cast(ragged_ids, tf.int32)
    src = ids.to_tensor(default_value=pad_id)
    width = tf.maximum(tf.shape(src)[1], 1)
    src = tf.pad(src, [[0, 0], [0, width - tf.shape(src)[1]]], constant_values=pad_id)
    return src, tf.cast(ids.row_lengths(), tf.int32)


def output_mask(ids, eos_id, drop_ids):
    """True where a decoded id is part of the output, as :meth:`Vocab.decode` reads
    it: everything before the first ``</s>``, without the ``drop_ids`` (pad, bos)."""
    ids = tf.convert_to_tensor(ids)
    is_eos = tf.equal(ids, eos_id)
    before_end = tf.equal(tf.cumsum(tf.cast(is_eos, tf.int32), axis=1, exclusive=True), 0)
    keep = tf.logical_and(before_end, tf.logical_not(is_eos))
    for i in drop_ids:
        keep = tf.logical_and(keep, tf.not_equal(ids, i))
    return keep


def join_tokens(tokens, ids, keep):
    """Decoded ids [B, T] -> one string per row: the kept tokens joined by spaces."""
    words = tf.gather(tf.constant(list(tokens), tf.string), ids)
    return tf.strings.reduce_join(tf.ragged.boolean_mask(words, keep), axis=1, separator=" ")


def blank_empty(texts, scores, lengths):
    """Rows whose input was empty decode to "" with score 0 (as the CLIs do: an
    empty line is never run through the model)."""
    empty = tf.equal(lengths, 0)
    return (tf.where(empty, tf.constant("", tf.string), texts),
            tf.where(empty, tf.zeros_like(scores), scores))


def run_files(model_dir):
    """The files of a run directory an export keeps as assets: its configs and its
    vocabularies (``vocab.*``)."""
    configs = ("model_config.json", "run_config.json", "train_config.json")
    return [os.path.join(model_dir, name) for name in sorted(os.listdir(model_dir))
            if name in configs or name.startswith("vocab.")]


class ServingModule(tf.Module):
    """The root object of an export: variables, resources, assets, one signature."""

    def __init__(self, model, resources, asset_paths):
        super().__init__(name="acvi_tf_export")
        # A list on the root, as keras.export.ExportArchive tracks a layer's variables:
        # the SavedModel then holds plain variables, loadable without Keras.
        self.model_variables = list(model.variables)
        self.resources = list(resources)
        self.assets = [tf.saved_model.Asset(p) for p in asset_paths]


def export_info(task, model_dir, model_config, decode_options, signature, step, extra=None):
    """The record written to the export's ``assets/export.json``."""
    info = {"format": EXPORT_FORMAT, "task": task,
            "model_dir": os.path.abspath(model_dir), "step": int(step),
            "model_config": dataclasses.asdict(model_config),
            "decode": dict(decode_options), "signature": signature,
            "code": code_version(),
            "exported_at": datetime.datetime.now(datetime.timezone.utc)
            .isoformat(timespec="seconds"),
            "tensorflow": tf.__version__}
    info.update(extra or {})
    return info


STAGING_PREFIX = ".export-"  # the sibling temporary directory an export is written into
STAGING_LOCK = ".lock"  # held (fcntl.flock) by the export writing into it
STAGING_GRACE_SECONDS = 60  # a staging directory without a lock file, younger: in progress


def _held(lock_path):
    """Whether another process holds the lock on ``lock_path`` (a SIGKILL frees it)."""
    try:
        with open(lock_path, "a", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(handle, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False


def clean_stale_staging(parent, log=print):
    """Removes the ``.export-*`` directories in ``parent`` that exports killed before they
    finished (SIGKILL, power loss) left behind: those whose lock no process holds. An
    export still writing holds its lock, and one just starting (no lock file yet, modified
    in the last minute) is left alone. Says what it removed; returns the paths."""
    removed = []
    for name in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        path = os.path.join(parent, name)
        if not name.startswith(STAGING_PREFIX) or not os.path.isdir(path) \
                or os.path.islink(path):
            continue
        lock = os.path.join(path, STAGING_LOCK)
        try:
            if os.path.exists(lock):
                if _held(lock):
                    continue
            elif time.time() - os.path.getmtime(path) < STAGING_GRACE_SECONDS:
                continue
        except OSError:  # removed meanwhile (its export finished)
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            removed.append(path)
            log(f"removed {path}, left by an export that did not finish")
    return removed


def save(export_dir, model, serve, input_signature, resources, run_files, info, log=print):
    """Writes the SavedModel of ``serve`` (a Python function of the signature's
    inputs) to ``export_dir``.

    ``run_files`` (paths in the run directory: :func:`run_files`) and
    ``export.json`` (``info``) become assets. The export is written into a sibling
    temporary directory and moved into place, so an interrupted export never leaves
    a half-written ``export_dir``; an existing non-empty ``export_dir`` is refused. The
    temporary directory goes on failure, and one a killed export left is removed by the
    next export into the same parent (:func:`clean_stale_staging`). Returns the path.
    """
    export_dir = os.path.abspath(export_dir)
    if os.path.exists(export_dir) and (not os.path.isdir(export_dir) or os.listdir(export_dir)):
        raise RunError(f"--export_dir={export_dir} exists and is not empty; choose a new "
                       f"directory (an export is never written over another)")
    parent = os.path.dirname(export_dir)
    os.makedirs(parent, exist_ok=True)
    clean_stale_staging(parent, log)
    staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=parent)
    lock = open(os.path.join(staging, STAGING_LOCK), "a", encoding="utf-8")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        asset_dir = os.path.join(staging, "_assets_in")
        os.makedirs(asset_dir)
        paths = []
        for path in run_files:
            target = os.path.join(asset_dir, os.path.basename(path))
            shutil.copy2(path, target)
            paths.append(target)
        info_path = os.path.join(asset_dir, EXPORT_INFO)
        with open(info_path, "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2, sort_keys=True)
        paths.append(info_path)
        root = ServingModule(model, resources, paths)
        root.serve = tf.function(serve, input_signature=input_signature, autograph=False)
        out = os.path.join(staging, "saved_model")
        with lstm_impl.portable():  # traced here; served anywhere (no cuDNN op saved)
            tf.saved_model.save(root, out, signatures={
                "serving_default": root.serve.get_concrete_function()})
        if os.path.isdir(export_dir):
            os.rmdir(export_dir)  # empty (checked above)
        os.replace(out, export_dir)
    finally:
        lock.close()  # (frees the lock)
        shutil.rmtree(staging, ignore_errors=True)
    log(f"exported a SavedModel to {export_dir} (signature serving_default; "
        f"assets/{EXPORT_INFO} records the run and the commit)")
    return export_dir
