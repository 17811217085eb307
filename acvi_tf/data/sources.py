"""The data-source registry: each dataset's official files, URLs and sizes.

A dataset is read from, in order of preference:

1. ``$ACVI_DATA_MIRROR/<name>/`` -- a local mirror laid out as the official
   distribution (default: ``../shared/data`` beside the repository, if present);
2. ``<data_dir>/<name>/`` -- the download location (``data/`` in the repository,
   git-ignored), filled by :func:`download`.

Partial copies are reported against the official sizes, e.g.
``iwslt15_en_vi/train.en: 999 of 133,317 lines (partial copy)``.
"""

import dataclasses
import os
import shutil
import urllib.request

from acvi_tf.utils.manifest import file_sha256

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DATA_DIR = os.path.join(REPO_ROOT, "data")
_SHARED_MIRROR = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data")


class DataError(RuntimeError):
    """A dataset file is missing or malformed; the message names the file."""


@dataclasses.dataclass(frozen=True)
class DataFile:
    """One file of a dataset.

    path: relative to the dataset folder, as in the official distribution.
    url: where the official file can be downloaded (None: by agreement only).
    lines: the official line count (None: not line-based or unknown).
    sha256: checksum of the official file, verified after download if given.
    """
    path: str
    url: str | None = None
    lines: int | None = None
    sha256: str | None = None


@dataclasses.dataclass(frozen=True)
class DataSource:
    name: str
    description: str
    files: tuple
    homepage: str = ""
    how_to_get: str = ""  # shown when files are missing and cannot be downloaded

    def file(self, path):
        for f in self.files:
            if f.path == path:
                return f
        raise KeyError(f"{self.name} has no registered file {path!r}")


_REGISTRY = {}


def register(source):
    """Adds a :class:`DataSource`; task modules call this at import time."""
    if source.name in _REGISTRY and _REGISTRY[source.name] != source:
        raise ValueError(f"data source {source.name!r} is registered twice")
    _REGISTRY[source.name] = source
    return source


def get(name):
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown data source {name!r}; known: {sorted(_REGISTRY)}") from None


def names():
    return sorted(_REGISTRY)


def mirror_dir():
    """The local mirror root: ``$ACVI_DATA_MIRROR``, else ``../shared/data`` if it exists."""
    env = os.environ.get("ACVI_DATA_MIRROR")
    if env:
        return env
    return _SHARED_MIRROR if os.path.isdir(_SHARED_MIRROR) else None


def data_dir():
    return os.environ.get("ACVI_DATA_DIR", DEFAULT_DATA_DIR)


def locate(name, path, required=True):
    """The local path of ``path`` in dataset ``name`` (mirror first, then data dir).

    Raises :class:`DataError` naming the file and how to get it when it is absent
    and ``required``; returns None otherwise.
    """
    src = get(name)
    candidates = []
    mirror = mirror_dir()
    if mirror:
        candidates.append(os.path.join(mirror, name, path))
    candidates.append(os.path.join(data_dir(), name, path))
    for c in candidates:
        if os.path.exists(c):
            return c
    if not required:
        return None
    hint = src.how_to_get or "run the download step for this dataset"
    raise DataError(f"{name}/{path} not found (looked in: {', '.join(candidates)}). {hint}")


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def completeness(name, path, local_path=None):
    """A one-line report of a file's size against the official count.

    Returns (message, is_partial). ``is_partial`` is False when the official count
    is unknown.
    """
    f = get(name).file(path)
    local_path = local_path or locate(name, path)
    n = count_lines(local_path)
    if f.lines is None:
        return f"{name}/{path}: {n:,} lines", False
    if n < f.lines:
        return f"{name}/{path}: {n:,} of {f.lines:,} lines (partial copy)", True
    return f"{name}/{path}: {n:,} lines (complete)", False


def download(name, paths=None, progress=print):
    """Downloads the registered files of ``name`` into ``data_dir()`` and verifies them.

    Files already present in the mirror or the data dir are skipped. A download
    goes to ``<file>.part`` and is renamed only after it is complete and verified,
    so an interrupted download never leaves a truncated file behind.
    """
    src = get(name)
    for f in src.files:
        if paths is not None and f.path not in paths:
            continue
        if locate(name, f.path, required=False):
            continue
        if not f.url:
            raise DataError(f"{name}/{f.path} cannot be downloaded automatically. {src.how_to_get}")
        dest = os.path.join(data_dir(), name, f.path)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        progress(f"downloading {f.url} -> {dest}")
        tmp = dest + ".part"
        try:
            with urllib.request.urlopen(f.url, timeout=60) as r, open(tmp, "wb") as out:
                shutil.copyfileobj(r, out)
        except OSError as e:
            raise DataError(f"could not download {name}/{f.path} from {f.url}: {e}. "
                            f"Set ACVI_DATA_MIRROR to a folder holding {name}/{f.path}, "
                            f"or {src.how_to_get}") from e
        if f.sha256 and file_sha256(tmp) != f.sha256:
            os.remove(tmp)
            raise DataError(f"{name}/{f.path}: checksum mismatch after download from {f.url}")
        os.replace(tmp, dest)
