"""A run's ``results.json``: read, merged into (only by the chief of a multi-worker
run), finished (wall time, the diversity of every decode, the run's provenance) and
mirrored as the run's row of TensorBoard's HParams dashboard."""

import os

from acvi_tf.metrics import diversity
from acvi_tf.run.directory import end_segment
from acvi_tf.run.records import load_run_config
from acvi_tf.training import hparams
from acvi_tf.training.trainer import is_chief
from acvi_tf.utils import provenance
from acvi_tf.utils.files import load_json, save_json


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


def run_provenance(model_dir):
    """The ``provenance`` entry of ``results.json`` (:func:`acvi_tf.utils.provenance.summary`)
    over the run's segments so far; this ends the run's open segment, so it is called by
    the last step of a mode that writes results."""
    return provenance.summary(*end_segment(model_dir))


def record_results(model_dir, **fields):
    """:func:`update_results` with the run's :func:`run_provenance`: what a mode that adds
    sections to ``results.json`` without finishing the run writes (``--mode=train``,
    ``--mode=val``, ``--mode=duc2004``), so that every results.json names its commit."""
    return update_results(model_dir, **fields, provenance=run_provenance(model_dir))


def finish_results(model_dir, data, log=None):
    """Merges a run's results into ``results.json``, adding the total wall time, the
    diversity of every decode (:func:`add_diversity`) and the run's ``provenance``
    (:func:`acvi_tf.utils.provenance.summary`; this ends the run's open segment), then
    writes the run's TensorBoard HParams session (:func:`write_hparams`)."""
    path = os.path.join(model_dir, "results.json")
    previous = load_json(path) if os.path.exists(path) else {}
    train_seconds = data.get("train_wall_time_sec", previous.get("train_wall_time_sec", 0.0))
    data = dict(data, wall_time_sec=train_seconds + data.get("eval_wall_time_sec", 0.0),
                provenance=run_provenance(model_dir))
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

