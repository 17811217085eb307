"""Which code produced an artefact (:func:`code_version`: the git commit and whether the
tree was dirty), and when, on which code and under what machine load a run ran: the
run's provenance.

A result is only comparable with another when both came from known code on a machine
in a known state: a BLEU score is reproducible from its commit, and a wall time from a
machine with two busy cores is not the time of an idle one. A run can be started
several times (resumed after a kill, evaluated later), possibly on different commits,
so :mod:`acvi_tf.run.directory` keeps one *segment* per start in
``model_dir/provenance.json``::

    [{"command": "python -m ...", "mode": "train_eval",
      "start": snapshot(), "end": snapshot() or null}, ...]

and ``results.json`` gets their :func:`summary`. This module takes the snapshots and
reasons about segments (and :func:`command_line` spells the command that ran); reading
and writing the run directory is :mod:`acvi_tf.run.directory`'s job. Collecting
provenance never raises: a machine without git, or a package installed outside a
checkout, records None where it cannot tell.
"""

import datetime
import os
import shlex
import socket
import subprocess
import sys

# The checkout holding this package (None-valued commits outside one).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The tables and archives that runs themselves write (a table run renders its markdown
# into the tree it trains from): a change there is output, not a change to the code.
GENERATED = "results"


def code_version(repo=REPO_ROOT):
    """``{"commit": sha, "dirty": bool}`` of the checkout at ``repo``, or None outside
    git (an installed package, no git binary). ``dirty``: a tracked file outside
    ``results/`` differs from HEAD."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
    try:
        return {"commit": git("rev-parse", "HEAD"),
                "dirty": bool(git("status", "--porcelain", "--untracked-files=no", "--",
                                  ".", f":(exclude){GENERATED}"))}
    except (OSError, subprocess.SubprocessError):
        return None


def snapshot(repo_dir=None):
    """The state of the code and the machine now: ``commit`` (git HEAD of ``repo_dir``,
    by default the repository of the imported ``acvi_tf``; None outside git), ``clean``
    (no uncommitted change to a tracked file; None when unknown), ``time`` (UTC,
    ISO-8601 to the second), ``load`` (the 1/5/15-minute load averages), ``cpus``,
    ``host``, ``cpu`` (:func:`cpu_description`) and ``tensorflow`` (:func:`tf_settings`)."""
    version = code_version(repo_dir or REPO_ROOT)
    return {"commit": version["commit"] if version else None,
            "clean": (not version["dirty"]) if version else None,
            "time": utc_now(), "load": load_average(), "cpus": os.cpu_count(),
            "host": _hostname(), "cpu": cpu_description(), "tensorflow": tf_settings()}


# The environment variables that decide TensorFlow's CPU kernels and thread pools: fixed
# when TensorFlow is imported, they change a run's speed and its float round-off.
TF_ENV = ("TF_ENABLE_ONEDNN_OPTS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
          "OMP_NUM_THREADS")


def tf_settings():
    """``{"onednn": bool, "env": {name: value}, "batch_shards": {...}}``: whether
    TensorFlow runs oneDNN's kernels (asked of the imported TensorFlow; None before it is
    imported, or where it cannot tell), the :data:`TF_ENV` variables that are set, and the
    process's batch shards (:func:`acvi_tf.utils.shards.describe`, once that is imported)."""
    onednn = None
    if "tensorflow" in sys.modules:
        try:
            from tensorflow.python.util import _pywrap_util_port
            onednn = bool(_pywrap_util_port.IsMklEnabled())
        except (ImportError, AttributeError):  # a TensorFlow that moved it
            onednn = None
    out = {"onednn": onednn, "env": {k: os.environ[k] for k in TF_ENV if k in os.environ}}
    shards = sys.modules.get("acvi_tf.utils.shards")
    if shards is not None:  # how the process runs its batches (one thread per op or not)
        out["batch_shards"] = shards.describe()
    return out


# The vector extensions that decide a CPU's float32 / bfloat16 kernels: runs on machines
# that differ in them differ in speed (the test suite took 1.76x the CPU on an AVX2-only
# machine, 2026-11-27) and in float round-off, so a run's results say which it had.
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni",
             "amx_tile", "amx_bf16")


def cpu_description(cpuinfo="/proc/cpuinfo"):
    """``"<model name> [<flags of ISA_FLAGS it has>]"``, e.g. ``"AMD EPYC [avx2 fma]"``,
    from the first processor of ``cpuinfo``; None where that file cannot be read."""
    model, flags = None, None
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model is None:
                    model = value.strip()
                elif key == "flags" and flags is None:
                    flags = set(value.split())
                if model is not None and flags is not None:
                    break
    except OSError:
        return None
    if model is None and flags is None:
        return None
    isa = " ".join(f for f in ISA_FLAGS if f in (flags or ()))
    return f"{model or 'unknown CPU'} [{isa}]"


def utc_now():
    """The current UTC time as ``2026-11-26T12:41:01Z``."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_average():
    """``os.getloadavg()`` rounded to 2 decimals; None where the OS has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):  # AttributeError: Windows has no getloadavg
        return None


def _hostname():
    try:
        return socket.gethostname()
    except OSError:
        return None


def command_line(module, argv=None):
    """The exact command that ran, as a shell-quoted string."""
    argv = sys.argv[1:] if argv is None else list(argv)
    return " ".join(["python", "-m", module] + [shlex.quote(a) for a in argv])


def new_segment(command, mode, start=None):
    """The segment a start of a run appends: its command, mode and start snapshot."""
    return {"command": command, "mode": mode, "start": start or snapshot(), "end": None}


def close_last(segments, end):
    """Sets ``end`` on the last segment if it is still open; True when it did. Only
    the last: an earlier open segment is a start that never finished (killed, failed),
    and must keep saying so."""
    if segments and segments[-1].get("end") is None:
        segments[-1]["end"] = end
        return True
    return False


def summary(segments, end):
    """The ``provenance`` entry of ``results.json`` for a run of ``segments`` that
    finished at the snapshot ``end``.

    ``commit`` is the last start's (the code that wrote these results), ``commits``
    every distinct commit the starts ran, in order, so that a run resumed across a
    code change shows it; ``clean`` is False when any start had uncommitted changes
    to tracked files, True when all were clean, None when unknown. ``start`` and
    ``load.start`` are the first start's, ``end`` and ``load.end`` the finish's;
    ``cpu_models`` every distinct :func:`cpu_description` of the starts and the finish, in
    order (a run resumed on another machine shows both), and ``onednn`` every distinct
    oneDNN setting of the starts (:func:`tf_settings`; [] where none recorded it).
    Without segments (a run directory older than ``provenance.json``) the end
    snapshot stands alone: its commit, no start, ``segments`` 0."""
    starts = [s["start"] for s in segments if isinstance(s.get("start"), dict)]
    known = starts or [end]
    commits = _distinct(snap.get("commit") for snap in known)
    cleans = [snap.get("clean") for snap in known]
    clean = False if False in cleans else (None if None in cleans else True)
    first = starts[0] if starts else {}
    return {"commit": known[-1].get("commit"), "clean": clean, "commits": commits,
            "start": first.get("time"), "end": end.get("time"),
            "load": {"start": first.get("load"), "end": end.get("load")},
            "cpu_models": _distinct(snap.get("cpu") for snap in known + [end]),
            "onednn": _distinct(((snap.get("tensorflow") or {}).get("onednn") for snap in known),
                                keep=(False,)),
            "segments": len(segments)}


def _distinct(values, keep=()):
    """The set values (not None / empty, except those in ``keep``), each once, in order
    of first appearance."""
    out = []
    for value in values:
        if (value or any(value is k for k in keep)) and value not in out:
            out.append(value)
    return out

