"""A run directory's records, read without TensorFlow: ``run_config.json`` (the CLI's
resolved settings) and ``history.jsonl`` (one JSON line per log window and evaluation,
written by :class:`acvi_tf.training.train_log.TrainLog`).

Standard library only, so that tools which only read runs (``make status``, the
tables' curves, the convergence report) start in a fraction of a second.
"""

import json
import os

from acvi_tf.utils.files import load_json


def load_run_config(model_dir):
    """The saved ``run_config.json`` of ``model_dir``, or None."""
    path = os.path.join(model_dir, "run_config.json")
    return load_json(path) if os.path.exists(path) else None


def made_by(saved):
    """The CLI module that made a saved run config (``experiments.translate``), or ''."""
    return ((saved or {}).get("command", "").split(" ")[2:3] or [""])[0]


def read_history(model_dir):
    """The records of ``model_dir/history.jsonl`` ([] if there is none). A last line
    without its newline is one a running run is still writing, and is left out."""
    path = os.path.join(model_dir, "history.jsonl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    return [json.loads(line) for line in lines[:-1] if line.strip()]


def curve(history, kind, key):
    """(steps, values) of ``key`` in the ``kind`` ("train"/"eval") records of a
    :func:`read_history`; a step repeated by a resumed run keeps its last value."""
    points = {}
    for rec in history:
        if kind in rec and key in rec[kind]:
            points[rec["step"]] = rec[kind][key]
    steps = sorted(points)
    return steps, [points[s] for s in steps]
