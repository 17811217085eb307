"""A disk cache for slow, deterministic results: the tables' bootstraps.

Rendering results/table4_cpu.md runs sacrebleu's paired bootstrap and the two-level
bootstrap (10,000 resamples each) for every row against soft attention: about six CPU
minutes, paid again at every render although only the rows with a new run changed.
:func:`cached` stores each result under a hash of everything it depends on: the inputs
themselves (hypotheses, references, statistics arrays, resample counts), the source code
of the functions that compute it, and any versions the caller names (sacrebleu's). A
changed input or a changed function gives a new key, so a stored result is never read
for other inputs or other code; the results are bit-identical to a fresh computation
(the bootstraps draw from fixed seeds).

Where: ``$ACVI_CACHE_DIR`` if set (empty: no cache), else ``$XDG_CACHE_HOME/acvi_tf``
(``~/.cache/acvi_tf``). A cache that cannot be written (a read-only home) only costs the
time; an unreadable entry is computed again and replaced.
"""

import hashlib
import inspect
import json
import os

import numpy as np

ENV = "ACVI_CACHE_DIR"


def cache_dir():
    """The cache's root directory, or None when ``$ACVI_CACHE_DIR`` is set empty."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return chosen or None
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(home, "acvi_tf")


def _feed(h, part):
    """Hashes ``part`` with its type and length, so that no two different key lists
    (["ab", "c"] and ["a", "bc"], a list and an array of the same numbers) collide."""
    if isinstance(part, np.ndarray):
        h.update(f"ndarray:{part.dtype.str}:{part.shape}:".encode())
        h.update(np.ascontiguousarray(part).tobytes())
    elif isinstance(part, (list, tuple)):
        h.update(f"seq:{len(part)}:".encode())
        for p in part:
            _feed(h, p)
    elif isinstance(part, str):
        data = part.encode("utf-8")
        h.update(f"str:{len(data)}:".encode() + data)
    elif callable(part):  # a function: its source code (a change in it is a new key)
        _feed(h, f"{part.__module__}.{part.__qualname__}\n{inspect.getsource(part)}")
    else:
        data = json.dumps(part, sort_keys=True).encode("utf-8")
        h.update(f"json:{len(data)}:".encode() + data)


def key_of(parts):
    """The hex SHA-256 of ``parts`` (see :func:`_feed` for what each kind contributes)."""
    h = hashlib.sha256()
    _feed(h, list(parts))
    return h.hexdigest()


def cached(namespace, parts, compute):
    """``compute()`` (a JSON-able result), stored under ``<cache>/<namespace>/<key of
    parts>.json`` and read from there the next time the same ``parts`` come. ``parts``
    must name everything the result depends on: inputs, the functions that compute it
    (hashed by their source) and versions of outside code."""
    root = cache_dir()
    if not root:
        return compute()
    try:
        key = key_of(parts)
    except (OSError, TypeError):  # a function without source (a builtin): no key, no cache
        return compute()
    path = os.path.join(root, namespace, key + ".json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        pass  # not stored yet, or unreadable: computed and (re)written below
    value = compute()
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f)
        os.replace(tmp, path)  # whole or absent: a reader never sees half an entry
    except OSError:
        try:
            os.remove(tmp)
        except OSError:
            pass
    return value
