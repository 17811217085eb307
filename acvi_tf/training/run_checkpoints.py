"""The checkpoints a training run writes and resumes from: ``ckpt/ckpt-N`` (the model,
the optimiser and the step), beside it ``position-N.json`` (the data position and the
training seconds so far: a checkpoint never exists without it) and ``checksums-N.json``
(:func:`~acvi_tf.training.checkpoint_checks.seal_checkpoint`, run before the state file
``ckpt/checkpoint`` may name it), rotated by ``--keep_checkpoints``. A write that fails
(a full disk) leaves nothing of its checkpoint behind.
"""

import glob
import json
import os
import re
import shutil
import time

import tensorflow as tf

from acvi_tf.training.checkpoint_checks import checksums_path, ignored, seal_checkpoint
from acvi_tf.training.checkpoints import (
    TEMP_SUFFIX, CheckpointError, listed_checkpoints, restore_checkpoint, stated_checkpoint)


class RunCheckpoints:
    """The checkpoints of ``ckpt`` (a ``tf.train.Checkpoint``) in ``write_dir/ckpt``
    (``model_dir`` for the chief; every worker resumes from ``model_dir``'s)."""

    def __init__(self, ckpt, model_dir, write_dir, keep, log):
        self.ckpt, self.model_dir, self.write_dir = ckpt, model_dir, write_dir
        self.keep, self.log = keep, log
        self.manager = tf.train.CheckpointManager(ckpt, os.path.join(write_dir, "ckpt"),
                                                  max_to_keep=keep)
        self.saved_step = None  # the step of this session's last checkpoint

    def position_path(self, step, write=False):
        root = self.write_dir if write else self.model_dir
        return os.path.join(root, "ckpt", f"position-{int(step)}.json")

    def restore(self, path):
        """Restores checkpoint ``path``; one that fails to load names its file."""
        restore_checkpoint(self.ckpt, path)

    def saved_position(self, step):
        """``(data position, training seconds)`` saved with the checkpoint of ``step``
        (None, 0.0 without its position file)."""
        path = self.position_path(step)
        if not os.path.exists(path):
            return None, 0.0
        with open(path) as f:
            saved = json.load(f)
        return saved["position"], float(saved.get("train_seconds", 0.0))

    def save(self, step, position, train_seconds):
        """Writes the checkpoint of ``step``: its position file first, then the
        checkpoint, verified and its checksums recorded before the state file names it.
        A failed write is a :class:`CheckpointError` naming the last good checkpoint."""
        # The position file first: a checkpoint never exists without its position.
        tmp = self.position_path(step, write=True) + ".tmp"
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        with open(tmp, "w") as f:
            json.dump({"step": step, "position": position, "train_seconds": train_seconds}, f)
        try:
            os.replace(tmp, self.position_path(step, write=True))
            self.manager.save(checkpoint_number=step, options=tf.train.CheckpointOptions(
                experimental_write_callbacks=[seal_checkpoint]))
            self.saved_step = step
            self._prune_positions(step)
        except (OSError, tf.errors.OpError) as e:
            # A full disk: nothing of this checkpoint stays (its temp directory would
            # block the rerun), and the state file still names the last good one.
            self._remove_files(step)
            reason = (e.strerror if isinstance(e, OSError) and e.strerror
                      else re.sub(r"\s*\[Op:\w+\]", "", str(getattr(e, "message", e))
                                  ).rsplit(";", 1)[-1].strip())
            raise CheckpointError(
                f"cannot write the checkpoint of step {step} in "
                f"{os.path.join(self.write_dir, 'ckpt')} ({reason}); its partial files were "
                f"removed, the last good checkpoint is "
                f"{self.manager.latest_checkpoint or '(none yet)'}. Free space, then run the "
                f"same command again to resume") from None

    def _prune_positions(self, step):
        """Removes the ``position-N.json`` and ``checksums-N.json`` of every older
        checkpoint the rotation removed (``--keep_checkpoints``): they are kept as long as
        their checkpoint is."""
        ckpt_dir = os.path.join(self.write_dir, "ckpt")
        kept = {os.path.basename(p)[len("ckpt-"):-len(".index")]
                for p in glob.glob(os.path.join(ckpt_dir, "ckpt-*.index"))}
        for kind in ("position", "checksums"):
            for path in glob.glob(os.path.join(ckpt_dir, f"{kind}-*.json")):
                number = os.path.basename(path)[len(kind) + 1:-len(".json")]
                if number.isdigit() and int(number) < step and number not in kept:
                    with ignored(OSError):
                        os.remove(path)

    def repair_state(self, latest):
        """A state file ``ckpt/checkpoint`` that does not name the checkpoint this run
        resumes from (garbled, missing, or naming an unreadable one) is rewritten from the
        directory listing, so every checkpoint stays in the ``--keep_checkpoints``
        rotation (with the garbled file the manager knew none, and kept them forever)."""
        ckpt_dir = os.path.join(self.model_dir, "ckpt")
        if not latest or stated_checkpoint(self.model_dir) == latest:
            return
        # oldest first, the one resumed from last (the state file's order: an unreadable
        # newer one rotates out first)
        paths = [p for _, p in reversed(listed_checkpoints(self.model_dir))
                 if p != latest] + [latest]
        # (the manager rotates only checkpoints younger than the last preserved time)
        times = [os.path.getmtime(p + ".index") for p in paths]
        tf.compat.v1.train.update_checkpoint_state(
            ckpt_dir, latest, all_model_checkpoint_paths=paths,
            all_model_checkpoint_timestamps=times,
            last_preserved_timestamp=min(times, default=time.time()) - 1.0)
        self.manager = tf.train.CheckpointManager(self.ckpt, ckpt_dir, max_to_keep=self.keep)
        self.log(f"{os.path.join(ckpt_dir, 'checkpoint')} rewritten from the checkpoints in "
                 f"{ckpt_dir} (it names {latest})")

    def _remove_files(self, step):
        ckpt_dir = os.path.join(self.write_dir, "ckpt")
        prefix = os.path.join(ckpt_dir, f"ckpt-{int(step)}")
        shutil.rmtree(prefix + TEMP_SUFFIX, ignore_errors=True)
        position = self.position_path(step, write=True)
        sums = checksums_path(prefix)
        for path in (glob.glob(prefix + ".index") + glob.glob(prefix + ".data-*")
                     + [position, position + ".tmp", sums, sums + ".tmp"]):
            with ignored(OSError):
                os.remove(path)
