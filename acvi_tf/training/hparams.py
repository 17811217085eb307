"""TensorBoard HParams: one session per run, so that the HParams dashboard puts the
runs of a table (or of the ACVI study) side by side, one row each.

A finished run writes, into ``<model_dir>/hparams/``, its resolved configuration as
the session's hyperparameters (every flag of ``run_config.json``, the attention and
latent options with their defaults filled in, the task and system) and its final
val/test metrics as scalars next to them: TensorBoard takes a session's metrics from
the scalars of its run directory. ``tensorboard --logdir runs/`` then lists one
session per run. The values are what the plugin accepts: str, float, int or bool
(lists and dicts become strings, None the string "none").

:mod:`acvi_tf.run.results` calls :func:`write_session` when a run's results are finished.
"""

import datetime
import glob
import json
import math
import os

import tensorflow as tf
from tensorboard.plugins.hparams import api as hp

from acvi_tf.attention import ATTENTION
from acvi_tf.latent import LATENTS
from acvi_tf.registry import constructor_options

HPARAMS_DIR = "hparams"  # the session's run directory, inside model_dir


def scalar_value(value):
    """``value`` as an hparam value: bools, ints, floats and strings stay; None is
    "none" (an unset option, not an empty cell); a list of scalars is its items
    joined by commas (``--attention_option=a=1 --attention_option=b=2`` -> "a=1,b=2");
    anything else (dicts, nested lists) is its JSON."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, (bool, int, float, str)) for v in value):
        return ",".join(str(v) for v in value)
    return json.dumps(value, sort_keys=True)


def constructor_defaults(cls):
    """The options of ``cls`` (:func:`acvi_tf.registry.constructor_options`) whose
    default is a plain value: a context variant's or a latent's options as it runs
    when none is given."""
    return {k: v for k, v in constructor_options(cls).items()
            if isinstance(v, (bool, int, float, str))}


def resolved_options(registry, name, given):
    """The options a variant ran with: its constructor's defaults, overridden by the
    ``given`` ones (``model_config.json``'s ``attention_options``). Only the given
    ones when ``name`` is empty or no longer in the ``registry``."""
    defaults = constructor_defaults(registry.get(name)) if name and name in registry else {}
    return {**defaults, **(given or {})}


def run_hparams(results, run_config=None, model_config=None):
    """The hyperparameters of a run, name -> scalar: every flag of ``run_config.json``
    (after the profile), ``profile``, ``task`` and ``system`` (results.json), and
    ``attention.<option>`` / ``latent.<option>`` for the options the context variant
    and the latent ran with (e.g. ``attention.kl_weight``, the KL weight)."""
    out = {}
    for name, value in sorted(((run_config or {}).get("flags") or {}).items()):
        out[name] = scalar_value(value)
    for name in ("profile", "task", "system"):
        value = (run_config or {}).get(name, results.get(name))
        if value is not None:
            out[name] = scalar_value(value)
    model_config = model_config or {}
    for prefix, registry in (("attention", ATTENTION), ("latent", LATENTS)):
        options = resolved_options(registry, model_config.get(prefix),
                                   model_config.get(f"{prefix}_options"))
        for key, value in sorted(options.items()):
            out[f"{prefix}.{key}"] = scalar_value(value)
    return out


def metric_name(name):
    """A results key as a TensorBoard tag, as the tasks name their eval scalars
    ("CIDEr-D" -> "CIDEr_D")."""
    return name.replace("-", "_").replace(" ", "_")


def _numbers(pairs):
    """The finite numbers (not bools) of ``(name, value)`` pairs, as floats."""
    return {name: float(v) for name, v in pairs
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def final_metrics(results):
    """The final val/test metrics of a run's ``results.json``, tag -> float, named as
    the eval curves are:

    - translation: ``dev_bleu``, ``test_bleu`` (every split of ``bleu``);
    - summarization: ``test_rouge_1/2/l`` (F1), ``test_rouge_*_no_coverage``,
      ``duc2004_rouge_*`` (recall) when evaluated;
    - captioning: ``val_CIDEr_D``, ``test_ROUGE_L``, ... (every split of ``scores``);
    - every task: the dev diagnostics of the final evaluation (``dev_nll``,
      ``dev_ppl``, ``kl``, ...; summarization's ``val_rouge_*``), without timings.
    """
    # The diagnostics first: a final score of the same name (captioning's val_CIDEr_D)
    # is the final evaluation's own and wins.
    pairs = [(metric_name(name), value) for name, value in
             (results.get("diagnostics") or {}).items() if not name.endswith("_seconds")]
    for split, value in (results.get("bleu") or {}).items():
        pairs.append((f"{split}_bleu", value))
    for split, scores in (results.get("scores") or {}).items():
        for name, value in (scores or {}).items():
            pairs.append((f"{split}_{metric_name(name)}", value))
    rouge_sets = (("test_{}", results.get("rouge")),
                  ("test_{}_no_coverage", (results.get("no_coverage") or {}).get("rouge")),
                  ("duc2004_{}", results.get("duc2004")))
    for pattern, rouge in rouge_sets:
        for key in ("rouge_1", "rouge_2", "rouge_l"):
            if isinstance(rouge, dict) and key in rouge:
                pairs.append((pattern.format(key), rouge[key]))
    return _numbers(pairs)


def _start_time(results):
    """The run's first start (results.json's provenance, UTC) as epoch seconds; None
    when unknown (the plugin then takes the time of writing)."""
    start = (results.get("provenance") or {}).get("start")
    try:
        return datetime.datetime.strptime(start, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except (TypeError, ValueError):
        return None


def write_session(model_dir, results, run_config=None, model_config=None):
    """Writes the run's HParams session into ``<model_dir>/hparams/`` (replacing an
    earlier one, e.g. of the training's evaluation before a ``--mode=eval``): its
    hyperparameters (:func:`run_hparams`) and its final metrics (:func:`final_metrics`)
    as scalars at the run's last step. The group is the run directory, so that two
    runs with the same settings (a rerun) stay two rows. Returns the directory."""
    logdir = os.path.join(model_dir, HPARAMS_DIR)
    os.makedirs(logdir, exist_ok=True)
    for old in glob.glob(os.path.join(logdir, "events.out.tfevents.*")):
        os.remove(old)  # one session per run: TensorBoard would read both files
    hparams = run_hparams(results, run_config, model_config)
    writer = tf.summary.create_file_writer(logdir)
    try:
        with writer.as_default(step=int(results.get("steps") or 0)):
            hp.hparams(hparams, trial_id=os.path.abspath(model_dir),
                       start_time_secs=_start_time(results))
            for tag, value in sorted(final_metrics(results).items()):
                tf.summary.scalar(tag, value)
    finally:
        writer.close()
    return logdir
