"""Checksums of a run directory's stored settings (issue 12).

The vocabularies, the configs and the BPE model of a run are written once and read by
every later run in the same ``model_dir`` (resume, evaluation, decoding). A truncated
vocabulary would decode silently with the missing words as ``<unk>``; a garbled config
would fail with a JSON traceback. So each such file gets its size and sha256 recorded in
``model_dir/manifest.json`` as soon as it is written (:func:`record`), and a run first
checks every recorded file (:func:`verify`) and stops with a message naming the file
before it reads or writes anything else. Run directories made before the manifest
existed have none, and are not checked.
"""

import hashlib
import json
import os

MANIFEST = "manifest.json"


class StoredFileError(RuntimeError):
    """A stored file of a run directory is missing or differs from what was written."""


def file_sha256(path):
    """The sha256 of a file's bytes, read in 1 MiB blocks (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _load(model_dir):
    path = os.path.join(model_dir, MANIFEST)
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)["files"]
        if not isinstance(entries, dict):
            raise TypeError("'files' is not an object")
    except (ValueError, KeyError, TypeError) as e:
        raise StoredFileError(f"{path} is unreadable ({e}); it records the checksums of "
                              f"this run's stored files. Restore it, or delete it to stop "
                              f"checking them") from None
    return entries


def record(model_dir, *names):
    """Records the size and sha256 of ``model_dir/<name>`` for each name (a path
    relative to ``model_dir``), replacing earlier entries of the same names."""
    entries = _load(model_dir)
    for name in names:
        path = os.path.join(model_dir, name)
        entries[name] = {"bytes": os.path.getsize(path), "sha256": file_sha256(path)}
    path = os.path.join(model_dir, MANIFEST)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"files": entries}, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def verify(model_dir):
    """Raises :class:`StoredFileError` naming the first recorded file of ``model_dir``
    that is missing or whose size or sha256 differs from the recorded one."""
    if not os.path.isdir(model_dir):
        return
    for name, entry in sorted(_load(model_dir).items()):
        path = os.path.join(model_dir, name)
        if not os.path.exists(path):
            raise StoredFileError(f"{path} is missing; the run wrote it ({entry['bytes']:,} "
                                  f"bytes) and needs it. Restore it or use a new --model_dir")
        size = os.path.getsize(path)
        if size != entry["bytes"] or file_sha256(path) != entry["sha256"]:
            how = (f"{size:,} bytes instead of the {entry['bytes']:,} written" if size
                   != entry["bytes"] else "same size, different content")
            raise StoredFileError(f"{path} was changed since the run wrote it ({how}; "
                                  f"checksums in {os.path.join(model_dir, MANIFEST)}). "
                                  f"Restore it or use a new --model_dir")
