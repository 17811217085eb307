"""A run's settings in its ``model_dir``: saved when it trains, restored when it is
evaluated, decoded or exported (so those rebuild exactly the trained model).

Which flags are saved and which restored is derived from the config dataclasses: the
shared ones (:func:`experiments.run_settings.shared_flags`) and the task's config.
"""

import os

from absl import flags

from acvi_tf.errors import RunError
from acvi_tf.run.directory import save_run_config
from acvi_tf.run.records import load_run_config, made_by
from acvi_tf.utils import manifest
from acvi_tf.utils.provenance import command_line
from experiments.config_flags import FlagError, explicit
from experiments.run_settings import (ADOPTED, DECODING, READ_ONLY_MODES, RESTORED, SAVED,
                                      apply_profile, shared_flags, task_flags)

FLAGS = flags.FLAGS


def flag_dict(names, flag_values=FLAGS):
    return {n: flag_values[n].value for n in names}


def restore_saved_flags(saved, names, flag_values=FLAGS):
    """Sets saved values for the flags in ``names`` not given explicitly.

    An explicit value that differs from the saved one is an error naming the flag
    (eval/decode must rebuild the trained model, not a different one).
    """
    fv = flag_values
    for name in names:
        if name not in saved:
            continue
        if explicit(name, fv):
            if fv[name].value != saved[name]:
                raise FlagError(name, f"{fv[name].value!r} differs from the trained model's "
                                f"{saved[name]!r} (saved in the model_dir); drop the flag")
            continue
        fv.set_default(name, saved[name])


def save_flags(model_dir, module, names, extra=None, flag_values=FLAGS):
    """Writes ``run_config.json`` and ``flags.txt`` (a flagfile that reproduces the run,
    after the profile was applied) into ``model_dir``: the flags in ``names`` (the task
    CLI's) and every shared setting."""
    fv = flag_values
    names = tuple(dict.fromkeys(tuple(names) + shared_flags(RESTORED, ADOPTED, DECODING,
                                                            SAVED)))
    resolved = flag_dict(names, fv)
    resolved.update(extra or {})
    lines = [line for name in names for line in fv[name].serialize().split("\n") if line]
    save_run_config(model_dir, resolved, fv.profile, command_line(module), lines)


def restore_run_config(model_dir, flag_values=FLAGS):
    """Adopts the saved profile of ``model_dir``; returns the saved run config or None.
    A changed or unreadable stored file of the run is a ``--model_dir`` error."""
    try:
        manifest.verify(model_dir)
        saved = load_run_config(model_dir)
    except (manifest.StoredFileError, RunError) as e:
        raise FlagError("model_dir", str(e)) from None
    if saved and not explicit("profile", flag_values) and saved.get("profile"):
        flag_values.set_default("profile", saved["profile"])
    return saved


def resolve_run_flags(model_dir, mode, profiles, task_config, flag_values=FLAGS,
                      module=None, adopted=()):
    """Profile + saved settings, in the order every task CLI needs them.

    The saved run of ``model_dir`` fixes its profile and the settings that describe the
    trained model and its data (eval/decode must rebuild the trained model); the
    settings it adopts become defaults, and in eval/decode/export modes its decoding
    settings too (:mod:`acvi_tf.utils.settings`; ``task_config``: the task's config
    class, whose fields are its data flags).
    Returns the saved run config (None for a new directory). ``module`` (the CLI's)
    refuses a run directory that another CLI made. ``adopted``: the CLI's own flags that
    are adopted as well (a CLI's ``Cli.adopted``).
    """
    fv = flag_values
    saved = None
    if model_dir and mode in ("eval", "train", "train_eval") + READ_ONLY_MODES:
        saved = restore_run_config(model_dir, fv)
    ours = made_by(saved)
    if module and ours and ours != module:
        raise FlagError("model_dir", f"{model_dir} holds a run of {ours}, not of "
                        f"{module}; use python -m {ours} with it")
    if module and mode in ("train", "train_eval") and fv.init_from:
        # a warm start copies the weights of a run of the same task (its batches, head
        # and vocabulary); another CLI's run is refused before anything is written
        try:
            theirs = made_by(load_run_config(os.path.abspath(fv.init_from)))
        except RunError as e:
            raise FlagError("init_from", str(e)) from None
        if theirs and theirs != module:
            raise FlagError("init_from", f"{fv.init_from} holds a run of {theirs}, not of "
                            f"{module}; a warm start needs a run of the same task")
    apply_profile(profiles, fv)
    if saved:
        restore_saved_flags(saved["flags"], task_flags(task_config, RESTORED)
                            + shared_flags(RESTORED), fv)
        kept = (ADOPTED, DECODING) if mode in ("eval",) + READ_ONLY_MODES else (ADOPTED,)
        for name in (*task_flags(task_config, *kept), *shared_flags(*kept), *adopted):
            if name in saved["flags"] and not explicit(name, fv):
                fv.set_default(name, saved["flags"][name])
    if saved is None and mode in ("eval",) + READ_ONLY_MODES:
        raise FlagError("model_dir", f"{model_dir} holds no trained model (run_config.json "
                        f"is missing); train first")
    if mode in ("train", "train_eval") and not fv.dry_run:
        check_device(fv)  # lists devices only: TensorFlow's context is not started
        # Before the flag checks build layers (which starts TensorFlow): issue 42. (A
        # StrategyError is a RunError: the CLI's run_guarded makes it one line.)
        make_strategy(fv)
    return saved


_STRATEGIES = {}  # (strategy, num_devices) -> the strategy this process made


def make_strategy(flag_values=FLAGS):
    """The ``--strategy`` of this process, made once: :func:`resolve_run_flags` makes it
    before anything starts TensorFlow (a multi-worker strategy and logical CPU devices
    can only be set up then), and the training reuses it."""
    from acvi_tf.training import distribute
    key = (flag_values.strategy, flag_values.num_devices or None)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = distribute.make_strategy(*key)
    return _STRATEGIES[key]


def check_device(flag_values=FLAGS):
    """Refuses, in one line, to train a GPU-sized profile where TensorFlow sees no GPU,
    unless --allow_cpu (:func:`acvi_tf.utils.gpus.cpu_only_problem`)."""
    from acvi_tf.utils import gpus  # only training asks TensorFlow for its devices
    problem = gpus.cpu_only_problem(flag_values.profile, flag_values.allow_cpu)
    if problem:
        raise SystemExit(f"error: {problem}")
