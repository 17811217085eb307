"""Whether a checkpoint can be restored, checked before it is used: each checkpoint is
verified when written (:func:`seal_checkpoint`: every tensor reads back, then each file's
size and crc32 go into ``checksums-N.json`` beside it), and every later resume, eval and
decode checks its files against them (:func:`checkpoint_problem`), so a truncated or
garbled ``.data`` or ``.index`` file is found before the restore.
"""

import errno
import glob
import json
import os
import zlib

import tensorflow as tf

_PROBED = {}  # (prefix, files' sizes and times) -> problem: each checkpoint is read once


class ignored:
    """``with ignored(OSError): ...``: the listed exceptions are swallowed."""

    def __init__(self, *types):
        self.types = types

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is not None and issubclass(kind, self.types)


CHECKSUMS = "checksums-{step}.json"  # beside ckpt-N: each file's size and crc32


def checksums_path(prefix):
    return os.path.join(os.path.dirname(prefix),
                        CHECKSUMS.format(step=os.path.basename(prefix).rsplit("-", 1)[-1]))


def _checkpoint_file_paths(prefix):
    return sorted(glob.glob(prefix + ".index") + glob.glob(prefix + ".data-*"))


def _file_sums(path):
    crc = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            crc = zlib.crc32(chunk, crc)
    return {"size": os.path.getsize(path), "crc32": crc}


def seal_checkpoint(prefix):
    """Verifies a checkpoint just written, before the state file ``ckpt/checkpoint`` may
    point at it (:meth:`RunCheckpoints.save` runs this as the write's callback,
    ahead of the ``CheckpointManager``'s): every tensor reads back with the checksum its index records,
    then each file's size and crc32 go into ``checksums-N.json`` beside it, which
    :func:`checkpoint_problem` checks on every later resume, eval and decode. A checkpoint
    that does not read back is an ``OSError`` (the write failed)."""
    prefix = prefix.decode() if isinstance(prefix, bytes) else str(prefix)
    problem = _tensors_problem(prefix)
    if problem:
        raise OSError(errno.EIO, f"the written checkpoint does not read back: {problem}",
                      prefix)
    sums = {os.path.basename(path): _file_sums(path)
            for path in _checkpoint_file_paths(prefix)}
    path = checksums_path(prefix)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"checkpoint": os.path.basename(prefix), "files": sums}, f, indent=1,
                  sort_keys=True)
    os.replace(path + ".tmp", path)


def _tensors_problem(prefix):
    """None when every tensor of ``prefix`` reads back (the index parses, and the
    ``.data`` files hold every byte it points to with the checksum it records), else why
    not."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except Exception as e:  # noqa: BLE001 - any failure to read makes it unreadable
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"truncated or garbled: {first[:160]}"
    return None


def _sums_problem(prefix, recorded):
    """Why the files of ``prefix`` differ from ``checksums-N.json`` (None if they do not)."""
    where = os.path.basename(checksums_path(prefix))
    for name, want in sorted(recorded.items()):
        path = os.path.join(os.path.dirname(prefix), name)
        try:
            size = os.path.getsize(path)
            if size != want["size"]:
                return f"{name} has {size} bytes, {where} records {want['size']}"
            if _file_sums(path)["crc32"] != want["crc32"]:
                return f"{name} does not match its crc32 in {where} (garbled)"
        except OSError:
            return f"{name} is missing; {where} records it"
    return None


def checkpoint_problem(prefix):
    """None when checkpoint ``prefix`` can be restored, else a short reason. A checkpoint
    with ``checksums-N.json`` (:func:`seal_checkpoint`) must match each recorded file's
    size and crc32 (those bytes read back when written); one without it (written before
    the checksums, or by another tool) must read back tensor by tensor. Each version of
    the files is checked once per process."""
    files = _checkpoint_file_paths(prefix)
    sums_path = checksums_path(prefix)
    try:
        key = (prefix, tuple((f, os.path.getsize(f), os.path.getmtime(f))
                             for f in files + [p for p in [sums_path] if os.path.exists(p)]))
    except OSError:  # removed while listed (a training run rotating its checkpoints)
        return "its files were removed while it was read"
    if key not in _PROBED:
        recorded = None
        with ignored(OSError, ValueError, KeyError, TypeError):
            with open(sums_path, encoding="utf-8") as f:
                recorded = dict(json.load(f)["files"])
        if not files or not any(f.endswith(".index") for f in files):
            _PROBED[key] = "its .index file is missing"
        elif recorded:
            _PROBED[key] = _sums_problem(prefix, recorded)
        else:
            _PROBED[key] = _tensors_problem(prefix)
    return _PROBED[key]


def checkpoint_is_readable(prefix):
    """Whether checkpoint ``prefix`` can be restored (:func:`checkpoint_problem`): a
    truncated or garbled ``.data`` file fails here, not in the restore."""
    return checkpoint_problem(prefix) is None
