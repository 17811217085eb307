"""What a training run reports: the progress line and TensorBoard scalars of each
``log_every`` window, the evaluations' scalars, texts and images, and ``history.jsonl``
(one JSON line per window and evaluation: the curves the results scripts plot)."""

import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

from acvi_tf.training import summaries


def fmt(d):
    return " ".join(f"{k}={v:.4g}" for k, v in d.items())


def progress_bar(enabled, total, initial):
    """A tqdm bar on stderr (None when off or tqdm is missing)."""
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, file=sys.stderr, dynamic_ncols=True, leave=False)


class TrainLog:
    """The reports of one run: TensorBoard writers under ``write_dir`` (``train/``,
    ``eval/``), ``history.jsonl`` in ``model_dir`` (the chief's only) and ``log``."""

    def __init__(self, model_dir, write_dir, is_chief, log):
        self.model_dir, self.is_chief, self.log = model_dir, is_chief, log
        self._writer = tf.summary.create_file_writer(os.path.join(write_dir, "train"))
        self._eval_writer = tf.summary.create_file_writer(os.path.join(write_dir, "eval"))

    def history(self, record):
        """Appends one JSON line to ``history.jsonl`` (train windows, evaluations): the
        curves the results scripts plot. A resumed run may repeat a step; the last
        line of a step wins."""
        if not self.is_chief:
            return
        path = os.path.join(self.model_dir, "history.jsonl")
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"time": time.time(), **record}) + "\n")

    def window(self, window, step, seconds, learning_rate, read_modes, bar):
        """Reports the metrics of the steps of ``window`` (their means; the last step's
        KL factor) and returns them. ``read_modes``: the schedule modes the model reads."""
        means = {k: float(np.mean([float(m[k]) for m in window])) for k in window[0]}
        tokens = sum(float(m["tokens"]) for m in window)
        means.pop("finite", None)
        means.pop("tokens", None)
        if "kl_scale" in window[-1]:  # the factor of the window's last step, not the mean
            means["kl_scale"] = float(window[-1]["kl_scale"])
        means["learning_rate"] = learning_rate
        means["tokens_per_sec"] = tokens / max(seconds, 1e-9)
        summaries.write_scalars(self._writer, step, means)
        self.history({"step": step, "train": means})
        # Only the modes this model reads: soft attention has no ACVI mixing to report.
        msg = f"step {step}: " + fmt(means) + (
            f" [{','.join(f'{k}={v}' for k, v in read_modes.items())}]" if read_modes else "")
        if bar:
            bar.set_postfix_str(fmt({k: means[k] for k in ("loss", "nll") if k in means}))
            bar.write(msg, file=sys.stderr)
        else:
            self.log(msg)
        return means

    def evaluation(self, step, out):
        """Reports an ``eval_fn`` output (``scalars``, ``texts``, ``images``); returns its
        scalars that are not None."""
        scalars = {k: v for k, v in out.get("scalars", {}).items() if v is not None}
        self.history({"step": step, "eval": scalars})
        with self._eval_writer.as_default(step=step):
            for k, v in scalars.items():
                tf.summary.scalar(k, float(v))
            for k, v in out.get("texts", {}).items():
                tf.summary.text(k, v)
            for k, v in out.get("images", {}).items():
                tf.summary.image(k, v)
        self._eval_writer.flush()
        if scalars:
            self.log(f"eval @ step {step}: {fmt(scalars)}")
        return scalars
