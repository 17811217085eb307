"""The checkpoints of a run directory (``model_dir/ckpt/ckpt-N``, numbered by step): listing
them, the one a run resumes from and eval, decode and export read (the newest that can be
restored: :mod:`acvi_tf.training.checkpoint_checks`), the refusal of a ``train_steps``
below it, and the leftovers of a write that did not finish.
"""

import glob
import os
import shutil
import sys

import tensorflow as tf

from acvi_tf.training.checkpoint_checks import checkpoint_problem, ignored


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read or written, or does not fit the run (a ``train_steps``
    below its step); the message names the file or the step and what to do."""


TEMP_SUFFIX = "_temp"  # TensorFlow writes ckpt-N_temp/, then merges it into ckpt-N.*


def _stderr(message):
    print(message, file=sys.stderr, flush=True)


def checkpoint_dir(model_dir):
    return os.path.join(model_dir, "ckpt")


def checkpoint_files(model_dir):
    """The ``ckpt/ckpt-N.index`` and ``.data-*`` files of ``model_dir`` (never the
    ``ckpt-N_temp`` directory of a write that did not finish)."""
    return sorted(p for p in glob.glob(os.path.join(checkpoint_dir(model_dir), "ckpt-*"))
                  if not p.endswith(TEMP_SUFFIX) and not os.path.isdir(p))


def clean_temp_checkpoints(model_dir, log=_stderr):
    """Removes what an unfinished checkpoint write leaves in ``model_dir/ckpt`` (its
    ``ckpt-N_temp`` directory, a ``position-N.json.tmp`` or ``checksums-N.json.tmp``); says
    what it removed."""
    for path in sorted(glob.glob(os.path.join(checkpoint_dir(model_dir), "*" + TEMP_SUFFIX))
                       + glob.glob(os.path.join(checkpoint_dir(model_dir), "*.json.tmp"))):
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with ignored(OSError):
                os.remove(path)
        log(f"removed {path}, left by a checkpoint write that did not finish")


def checkpoint_step(prefix):
    """The step of ``.../ckpt-N`` (the Trainer numbers its checkpoints by step)."""
    return int(prefix.rsplit("-", 1)[1])


def listed_checkpoints(model_dir):
    """``[(step, prefix)]`` of every ``ckpt/ckpt-N.index`` of ``model_dir``, newest first,
    readable or not. Found by listing the directory, so a garbled or missing
    ``ckpt/checkpoint`` state file hides none of them."""
    found = []
    for index in glob.glob(os.path.join(checkpoint_dir(model_dir), "ckpt-*.index")):
        prefix = index[:-len(".index")]
        with ignored(ValueError):
            found.append((checkpoint_step(prefix), prefix))
    return sorted(found, reverse=True)


def stated_checkpoint(model_dir):
    """The checkpoint ``ckpt/checkpoint`` (the state file) names, or None (none, or a
    garbled state file: the checkpoints are then found by listing)."""
    try:
        return tf.train.latest_checkpoint(checkpoint_dir(model_dir))
    except Exception:  # noqa: BLE001 - a garbled state file
        return None


def restore_checkpoint(ckpt, path, what="checkpoint"):
    """Restores ``path`` into ``ckpt`` (a ``tf.train.Checkpoint``), every saved object
    matched; one that fails to load is a RuntimeError naming the file (``what`` says which
    file it is)."""
    try:
        ckpt.restore(path).assert_existing_objects_matched()
    except Exception as e:  # noqa: BLE001 - re-raised with the file named
        raise RuntimeError(f"cannot restore {what} {path}: {type(e).__name__}: "
                           f"{str(e).splitlines()[0] if str(e) else ''}") from e


def _skipped(prefix, problem):
    return f"WARNING: {prefix} cannot be read ({problem}); skipped"


def readable_checkpoints(model_dir, log=_stderr):
    """``[(step, prefix)]`` of every ``ckpt/ckpt-N`` of ``model_dir`` that can be restored
    (:func:`checkpoint_problem`), newest first; each one skipped is said in one line."""
    found = []
    for step, prefix in listed_checkpoints(model_dir):
        problem = checkpoint_problem(prefix)
        if problem:
            log(_skipped(prefix, problem))
            continue
        found.append((step, prefix))
    return found


def resume_checkpoint(model_dir, log=_stderr):
    """The checkpoint a run in ``model_dir`` resumes from, and the one eval, decode and
    export read (:func:`acvi_tf.run.restore.restore_model`): the state file's, when it can
    be restored, else the newest one that can (said loudly, in one line: a truncated or
    garbled ``.data`` or ``.index``, a file that does not match its ``checksums-N.json``).
    None when no checkpoint file exists; checkpoint files none of which can be read are a
    :class:`CheckpointError`. Checkpoints are checked newest first, up to the one used."""
    ckpt_dir = checkpoint_dir(model_dir)
    stated = stated_checkpoint(model_dir)
    stated_problem = checkpoint_problem(stated) if stated else None
    if stated and not stated_problem:
        return stated
    state = os.path.join(ckpt_dir, "checkpoint")
    for _, prefix in listed_checkpoints(model_dir):
        if prefix == stated:
            continue
        problem = checkpoint_problem(prefix)
        if problem:
            log(_skipped(prefix, problem))
            continue
        why = (f"{stated} cannot be read ({stated_problem})" if stated else
               f"{state} is missing or unreadable")
        log(f"WARNING: {why}; using the newest readable checkpoint {prefix} instead")
        return prefix
    if checkpoint_files(model_dir):
        if stated:
            log(_skipped(stated, stated_problem))
        raise CheckpointError(
            f"{ckpt_dir} holds checkpoint files but none can be read; refusing to start "
            f"again from step 0 over them (move them away to start a new run)")
    return None


def check_resume(model_dir, train_steps, log=_stderr):
    """The checkpoint a run of ``train_steps`` steps resumes from in ``model_dir`` (None
    for a new run), checked before anything of the run is written: a ``train_steps``
    below the checkpoint's step is a :class:`CheckpointError` naming both steps."""
    latest = resume_checkpoint(model_dir, log)
    if latest and checkpoint_step(latest) > train_steps:
        step = checkpoint_step(latest)
        raise CheckpointError(
            f"--train_steps={train_steps} is below step {step} of the checkpoint {latest} "
            f"this run would resume from; nothing was changed. Train on with "
            f"--train_steps={step} or more, evaluate it with --mode=eval, or use a new "
            f"--model_dir")
    return latest
