"""The flags every task CLI has (translation, summarization, captioning), and flags -> configs.

Every setting is declared once, as a field of a config dataclass with its type, default
and help (:func:`acvi_tf.utils.settings.setting`); :func:`define_flags` generates the
flags from those dataclasses (:func:`experiments.run_settings.configs`) and adds the few
flags of one start of a CLI (``--profile``, ``--model_dir``, ``--mode``, ...). A task
CLI calls :func:`define_flags` with its profiles (``{name: {flag: value}}``, overrides
of the dataclass defaults) and :func:`define_config_flags` with its task's config class;
its ``main`` is :func:`experiments.run_modes.main`, which calls :func:`resolve_run_flags`
(the profile and a trained run's saved settings become the defaults of the flags not
given explicitly -- on the command line or in a ``--flagfile`` -- so any explicit flag
wins) and builds the configs with :func:`model_config_from_flags` /
:func:`train_config_from_flags` / :func:`config_from_flags`. The configs go to a task
(:mod:`acvi_tf.tasks`), which never sees a flag.

This module is the CLIs' one entry: it gathers the generator
(:mod:`experiments.config_flags`), the shared settings (:mod:`experiments.run_settings`),
the checks (:mod:`experiments.checks`), the saved run settings
(:mod:`experiments.saved_runs`) and the failure handling (:mod:`experiments.guard`).
Every flag error names the flag: absl reports bad enum/number values itself (``flag
--score=foo: value should be one of ...``); the checks raise :class:`FlagError` (an
``app.UsageError``) whose message starts with ``--name``.
"""

from absl import flags

from experiments.checks import check_run_flags, require_model_dir  # noqa: F401
from experiments.config_flags import (FlagError, config_from_flags,  # noqa: F401
                                      define_config_flags, explicit)
from experiments.guard import (check_partial_data, cli_main, run_guarded,  # noqa: F401
                               tracebacks_wanted)
from experiments.run_settings import (ADOPTED, DECODING, MODES,  # noqa: F401
                                      READ_ONLY_MODES, RESTORED, SAVED, apply_profile,
                                      configs, decode_config_from_flags,
                                      model_config_from_flags, parse_attention_options,
                                      run_info, shared_flags, task_flags,
                                      train_config_from_flags)
from experiments.saved_runs import (check_device, make_strategy,  # noqa: F401
                                    resolve_run_flags, save_flags)

FLAGS = flags.FLAGS
# The cpu profiles' --checkpoint_minutes: a run that is killed without a SIGTERM (a shared
# machine reclaimed, a session's end) redoes at most ~15 minutes instead of up to
# --checkpoint_every steps (500 steps: 25-60 minutes of one core for the table runs).
CPU_CHECKPOINT_MINUTES = 15


def define_flags(profiles, default_profile, modes=MODES, flag_values=FLAGS):
    """Defines the shared flags in ``flag_values``: one per setting of the shared config
    dataclasses, and the flags of one start of a CLI.

    ``profiles`` maps a profile name to ``{flag_name: value}``; the values are
    applied by :func:`apply_profile` as defaults of the flags not set explicitly.
    ``modes`` are the ``--mode`` choices (the shared :data:`MODES` plus any of the task's).
    """
    fv = flag_values
    flags.DEFINE_enum("profile", default_profile, sorted(profiles),
                      "Hyper-parameter profile; any explicit flag overrides its values.",
                      flag_values=fv)
    flags.DEFINE_string("model_dir", None, "Checkpoints, TensorBoard logs, vocabularies, "
                        "decodes and results.json go here.", flag_values=fv)
    flags.DEFINE_enum("mode", "train_eval", modes,
                      "train_eval (default): train, then evaluate on dev and test; train; "
                      "eval: evaluate a trained model_dir; decode: decode --input; export: "
                      "write a SavedModel of a trained model_dir to --export_dir (task CLIs "
                      "may add modes).", flag_values=fv)
    flags.DEFINE_string("export_dir", None, "--mode=export: where the SavedModel goes (a "
                        "new or empty directory); its serving_default signature decodes "
                        "with the run's final decoding settings.", flag_values=fv)
    flags.DEFINE_bool("dry_run", False, "Print the resolved command and check the data files "
                      "of every split; exit 3 if any is missing or partial.", flag_values=fv)
    flags.DEFINE_bool("allow_cpu", False, "Train --profile=paper although TensorFlow sees no "
                      "GPU (refused by default: weeks on a CPU; pip install -e \".[gpu]\").",
                      flag_values=fv)
    for cls, _ in configs():
        define_config_flags(cls, fv, module_name=__name__)


def define_attention_plot_flags(flag_values=FLAGS):
    """``--attention_plots`` and ``--attention_plots_count`` of a CLI's decode mode."""
    flags.DEFINE_string("attention_plots", None, "--mode=decode: draw the attention of the "
                        "first --attention_plots_count inputs as PNG heat-maps in this "
                        "directory (source tokens against output tokens; ACVI adds its mean "
                        "sigma per source position).", flag_values=flag_values)
    flags.DEFINE_integer("attention_plots_count", 5, "How many inputs --attention_plots draws.",
                         lower_bound=1, flag_values=flag_values)
