"""The settings every task CLI has, and the configs built from them.

Each setting is declared once, as a field of a config dataclass
(:func:`acvi_tf.utils.settings.setting`): the model's (:class:`ModelConfig`), the
training loop's (:class:`TrainConfig`), the decoding's (:class:`DecodeConfig`), the
results' (:class:`RunInfo`) and, for what no package config holds, this module's
:class:`RunSettings`. :func:`configs` lists those classes with what a trained run's
``model_dir`` does with their settings; the flags, the saved run config and the restore
of a trained run are all derived from it (:mod:`experiments.saved_runs`).
"""

import dataclasses
import sys

from absl import flags

from acvi_tf import attention as attention_lib
from acvi_tf import latent as latent_lib
from acvi_tf.models.seq2seq import ModelConfig
from acvi_tf.registry import constructor_options
from acvi_tf.tasks.base import DecodeConfig, RunInfo
from acvi_tf.training.trainer import TrainConfig
from acvi_tf.utils import settings
from acvi_tf.utils.provenance import command_line
from experiments import config_flags
from experiments.config_flags import FlagError, config_from_flags, parse_options

MODES = ("train_eval", "train", "eval", "decode", "export")
# Modes that rebuild a trained model_dir and write nothing into it.
READ_ONLY_MODES = ("decode", "export")
STRATEGIES = ("default", "mirrored", "multiworker")

# What a trained run's model_dir does with a setting (acvi_tf.utils.settings).
RESTORED, ADOPTED, DECODING, SAVED = (settings.RESTORED, settings.ADOPTED, settings.DECODING,
                                      settings.SAVED)
FLAGS = flags.FLAGS


@dataclasses.dataclass
class RunSettings:
    """The settings of a run that no config of the package holds (saved with the run,
    never restored from it)."""
    batch_size: int = settings.setting(64, "Training examples per batch.", lower_bound=1)
    strategy: str = settings.setting("default", "tf.distribute strategy.",
                                     choices=STRATEGIES)
    num_devices: int = settings.setting(0, "mirrored: use this many local devices (0: all; "
                                        "on a machine without GPUs, N > 1 splits the CPU "
                                        "into N logical devices).",
                                        lower_bound=0)
    pad_multiple: int = settings.setting(
        0, "Pad each training batch's lengths up to a multiple of this (translation: source "
        "and target; summarization: article and summary, at most the phase's truncation; "
        "captioning: the captions), so --xla compiles a bounded number of shapes; padding "
        "is masked. 0: each batch's longest. A profile's value applies under --xla only.",
        lower_bound=0)
    allow_partial_data: bool = settings.setting(
        False, "Train even when a dataset file is a partial copy (the results then say so); "
        "the paper profile refuses by default.")


def configs():
    """``(config class, what a trained run does with its settings)`` of every shared
    setting (:func:`acvi_tf.utils.settings.kept_flags`)."""
    return ((ModelConfig, RESTORED), (RunInfo, RESTORED), (TrainConfig, SAVED),
            (DecodeConfig, DECODING), (RunSettings, SAVED))


def shared_flags(*kept):
    """The flags of the shared settings that a trained run treats as one of ``kept``."""
    return settings.kept_flags(configs(), *kept)


def task_flags(task_config, *kept):
    """The flags of the settings of a task's config (its data: :data:`RESTORED` unless a
    field says otherwise) that a trained run treats as one of ``kept`` (default: all)."""
    return settings.kept_flags([(task_config, RESTORED)],
                               *(kept or (RESTORED, ADOPTED, DECODING, SAVED)))


def apply_profile(profiles, flag_values=FLAGS):
    """Sets the values of ``flag_values.profile``'s entry of ``profiles`` as the defaults of
    the flags not set explicitly (a profile's ``pad_multiple`` only with ``--xla``);
    returns the values applied."""
    fv = flag_values
    applied = config_flags.apply_profile(profiles[fv.profile], fv, fv.profile)
    if "pad_multiple" in applied and not fv["xla"].value:
        # A profile's --pad_multiple bounds the shapes --xla compiles. Without XLA the train
        # step's one trace takes every shape, and the padding would only add steps (8 adds
        # 16-28% to the mean source and target lengths of Multi30k's and Europarl's
        # bucketed batches), so the profile's value applies under --xla only; an explicit
        # --pad_multiple always does.
        fv.set_default("pad_multiple", 0)
        applied["pad_multiple"] = 0
    fv.validate_all_flags()
    return applied


def variant_options(attention):
    """The named constructor parameters of an attention variant (its options)."""
    return list(constructor_options(attention_lib.get_attention(attention)))


def latent_class(latent):
    if latent not in latent_lib.available():
        raise FlagError("latent", f"{latent!r}: choose one of {', '.join(latent_lib.available())}")
    return latent_lib.LATENTS.get(latent)


def parse_attention_options(values, attention=None):
    """``--attention_option`` values -> dict, keys checked against the variant's options."""
    allowed = variant_options(attention) if attention is not None else None
    return parse_options(values, "attention_option", allowed, f"--attention={attention}")


def parse_latent_options(values, latent=""):
    """``--latent_option`` values -> dict, keys checked against the latent's options."""
    if values and not latent:
        raise FlagError("latent_option", "given without --latent")
    allowed = list(constructor_options(latent_class(latent))) if latent else None
    return parse_options(values, "latent_option", allowed, f"--latent={latent}")


def model_config_from_flags(flag_values=FLAGS, **task_fields):
    """The model config of the flags plus task fields (vocab sizes...); the options of the
    attention variant and of the latent checked against their constructors."""
    config = config_from_flags(ModelConfig, flag_values, **task_fields)
    parse_attention_options(flag_values.attention_option, config.attention)
    parse_latent_options(flag_values.latent_option, config.latent)
    return config


def check_schedule_flags(fv):
    """The learning-rate schedule's flags fit together (checked at start-up, before a run
    directory is touched, and again when the train config is made)."""
    if fv.optimizer != "sgd" and fv.lr_decay == "luong":
        raise FlagError("lr_decay", f"{fv.lr_decay!r} is the SGD step decay; use it with "
                        f"--optimizer=sgd (got --optimizer={fv.optimizer})")
    if fv.warmup_steps and fv.lr_decay != "cosine":
        raise FlagError("warmup_steps", f"is the warm-up of --lr_decay=cosine (got "
                        f"--lr_decay={fv.lr_decay})")
    if fv.lr_decay == "cosine" and fv.warmup_steps >= fv.train_steps:
        raise FlagError("warmup_steps", f"{fv.warmup_steps} must be below --train_steps="
                        f"{fv.train_steps}")


def train_config_from_flags(model_dir, flag_values=FLAGS):
    check_schedule_flags(flag_values)
    return config_from_flags(TrainConfig, flag_values, model_dir=model_dir)


def decode_config_from_flags(flag_values=FLAGS):
    return config_from_flags(DecodeConfig, flag_values)


def run_info(module, flag_values=FLAGS):
    """What results.json records of this run: profile, command line, argv, system."""
    return config_from_flags(RunInfo, flag_values, profile=flag_values.profile,
                             command=command_line(module), argv=sys.argv)
