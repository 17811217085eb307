"""The flags every task CLI has (translation, summarization, captioning), and flags -> configs.

A task CLI calls :func:`define_flags` with its profiles (``{name: {flag: value}}``),
then, in ``main``, :func:`apply_profile` (profile values become the defaults of
the flags not given explicitly -- on the command line or in a ``--flagfile`` --
so any explicit flag wins), and builds its configs with
:func:`model_config_from_flags` / :func:`train_config_from_flags` /
:func:`config_from_flags` (any config dataclass whose fields are flag names). The
configs go to a task (:mod:`acvi_tf.tasks`), which never sees a flag.

Every flag error names the flag: absl reports bad enum/number values itself
(``flag --score=foo: value should be one of ...``); the checks here raise
:class:`FlagError` (an ``app.UsageError``) whose message starts with ``--name``.
"""

import ast
import dataclasses
import functools
import os
import sys

from absl import app, flags

from acvi_tf import attention as attention_lib
from acvi_tf import latent as latent_lib
from acvi_tf.attention.scores import SCORES as SCORE_REGISTRY
from acvi_tf.data.sources import DataError
from acvi_tf.errors import ConfigError, RunError
from acvi_tf.models import model_names
from acvi_tf.models.decoder import CELLS
from acvi_tf.models.seq2seq import ModelConfig
from acvi_tf.registry import constructor_options
from acvi_tf.run.directory import load_run_config, locked_run_dir, run_segment, save_run_config
from acvi_tf.run.results import update_results
from acvi_tf.tasks.base import DecodeConfig, RunInfo
from acvi_tf.utils import manifest
from acvi_tf.utils.lstm_impl import LSTM_IMPLS
from acvi_tf.utils.precision import PRECISIONS
from acvi_tf.utils.provenance import command_line
from acvi_tf.training.schedules import KL_ANNEALING
from acvi_tf.training.trainer import (CheckpointError, TrainConfig, TrainingDiverged,
                                      check_resume)
from acvi_tf.training.trainer import is_chief
from acvi_tf.training.trainer import make_strategy as _make_strategy

FLAGS = flags.FLAGS

MODES = ("train_eval", "train", "eval", "decode", "export")
# Modes that rebuild a trained model_dir and write nothing into it.
READ_ONLY_MODES = ("decode", "export")
SCORES = tuple(SCORE_REGISTRY.names())
HEADS = ("softmax", "pointer")
OPTIMIZERS = ("adam", "sgd")
LR_DECAYS = ("none", "luong", "cosine")
STRATEGIES = ("default", "mirrored", "multiworker")
LENGTH_NORMALIZATIONS = ("none", "average", "gnmt")

# Flags that describe the trained model (and so are restored from model_dir in
# eval/decode modes) versus flags that only steer one run.
MODEL_FLAGS = ("embed_dim", "encoder_units", "encoder_layers", "decoder_units", "decoder_layers",
               "attention_units", "head_units", "score", "attention", "attention_option", "head",
               "coverage", "coverage_weight", "dropout", "num_samples", "model", "num_heads",
               "ff_units", "transformer_layers", "latent", "latent_option", "word_dropout",
               "decoder_cell", "system", "precision")
TRAIN_FLAGS = ("train_steps", "optimizer", "learning_rate", "lr_decay", "warmup_steps",
               "clip_norm",
               "batch_size", "log_every", "eval_every", "checkpoint_every", "keep_checkpoints",
               "gumbel_fraction", "progress", "seed", "xla", "strategy", "num_devices",
               "kl_anneal_steps", "kl_anneal", "noise_warmup_steps", "init_from",
               "select_best", "lstm_impl", "deterministic")
DECODE_FLAGS = ("beam_width", "decode_max_length", "min_length", "length_normalization",
                "alpha", "eval_beam_width", "eval_subset", "decode_batch_size",
                "diversity_samples", "diversity_sources")


class FlagError(app.UsageError):
    """A bad flag value; the message starts with the flag's name."""

    def __init__(self, name, message):
        super().__init__(f"--{name}: {message}")
        self.flag = name


def model_choices():
    """The ``--model`` choices: the model registry."""
    return list(model_names())


def latent_choices():
    """The ``--latent`` choices: the latent registry."""
    return list(latent_lib.available())


def attention_choices():
    """The ``--attention`` choices: the registry, never a hand-written list."""
    return list(attention_lib.available())


def define_flags(profiles, default_profile, modes=MODES, flag_values=FLAGS):
    """Defines the shared flags in ``flag_values``.

    ``profiles`` maps a profile name to ``{flag_name: value}``; the values are
    applied by :func:`apply_profile` as defaults of the flags not set explicitly.
    ``modes`` are the ``--mode`` choices (the shared :data:`MODES` plus any of the task's).
    """
    fv = flag_values
    d = _model_defaults()
    # -- run --------------------------------------------------------------------------
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
    flags.DEFINE_integer("seed", 0, "Run seed: parameters, data order, dropout, ACVI noise.",
                         lower_bound=0, flag_values=fv)
    flags.DEFINE_bool("xla", False, "XLA-compile the training step (batches are padded to "
                      "--pad_multiple so few shapes are compiled).", flag_values=fv)
    flags.DEFINE_integer("pad_multiple", 0, "Pad each training batch's lengths up to a "
                         "multiple of this (translation: source and target; summarization: "
                         "article and summary, at most the phase's truncation; captioning: "
                         "the captions), so --xla compiles a bounded number of shapes; "
                         "padding is masked. 0: each batch's longest. A profile's value "
                         "applies under --xla only.", lower_bound=0, flag_values=fv)
    flags.DEFINE_enum("strategy", "default", STRATEGIES, "tf.distribute strategy.",
                      flag_values=fv)
    flags.DEFINE_integer("num_devices", 0, "mirrored: use this many local devices (0: all; "
                         "on a machine without GPUs, N > 1 splits the CPU into N logical "
                         "devices).", lower_bound=0, flag_values=fv)
    flags.DEFINE_bool("deterministic", False, "tf.config.experimental.enable_op_determinism: "
                      "the same weights from the same command (bit-exact reruns and resumes "
                      "on GPU), at some speed.", flag_values=fv)
    flags.DEFINE_bool("dry_run", False, "Print the resolved command and check the data files "
                      "of every split; exit 3 if any is missing or partial.", flag_values=fv)
    flags.DEFINE_bool("allow_partial_data", False,
                      "Train even when a dataset file is a partial copy (the results then "
                      "say so); the paper profile refuses by default.", flag_values=fv)
    flags.DEFINE_bool("allow_cpu", False, "Train --profile=paper although TensorFlow sees no "
                      "GPU (refused by default: weeks on a CPU; pip install -e \".[gpu]\").",
                      flag_values=fv)
    # -- model ----------------------------------------------------------------------
    flags.DEFINE_string("system", "", "The table row this run fills (results.json's "
                        "`system`), e.g. acvi_paper_elbo for ACVI with the paper's ELBO; "
                        "empty (default): named after --model/--attention/--latent.",
                        flag_values=fv)
    flags.DEFINE_enum("model", d.model, model_choices(),
                      "Architecture (from the model registry): seq2seq, the attentional "
                      "LSTM machine whose context variant --attention picks; transformer, "
                      "the Transformer baseline (--embed_dim, --transformer_layers, "
                      "--num_heads, --ff_units, --dropout).", flag_values=fv)
    flags.DEFINE_integer("num_heads", d.num_heads, "Transformer attention heads.",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("ff_units", d.ff_units, "Transformer feed-forward inner size.",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("transformer_layers", d.transformer_layers,
                         "Transformer encoder layers and decoder layers (each).",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_enum("latent", d.latent, [""] + latent_choices(),
                      "A latent variable outside attention (from the latent registry): "
                      "'' (none), ved (Bahuleyan et al.'s sentence latent) or vrnmt (Su et "
                      "al.'s per-step latent; the paper's decoder is --decoder_cell=gru).",
                      flag_values=fv)
    flags.DEFINE_multi_string("latent_option", [], "key=value passed to the latent "
                              "(repeatable), e.g. latent_dim=64, feed=output.", flag_values=fv)
    flags.DEFINE_enum("attention", d.attention, attention_choices(),
                      "Context variant (from the attention registry).", flag_values=fv)
    flags.DEFINE_multi_string("attention_option", [],
                              "key=value passed to the attention variant (repeatable); "
                              "values are Python literals, e.g. kl_weight=0.5, "
                              "kl_estimator='bound' (bare words are strings).",
                              flag_values=fv)
    flags.DEFINE_enum("score", d.score, SCORES, "Attention score: additive (Eq. 1), "
                      "multiplicative (Eq. 10) or scaled_multiplicative (Eq. 10 / sqrt(d)).",
                      flag_values=fv)
    flags.DEFINE_enum("head", d.head, HEADS, "Output head.", flag_values=fv)
    flags.DEFINE_integer("embed_dim", d.embed_dim, "Word embedding size.", lower_bound=1,
                         flag_values=fv)
    flags.DEFINE_integer("encoder_units", d.encoder_units, "BiLSTM units per direction.",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("encoder_layers", d.encoder_layers, "Stacked BiLSTM layers.",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("decoder_units", d.decoder_units, "Decoder LSTM units.", lower_bound=1,
                         flag_values=fv)
    flags.DEFINE_integer("decoder_layers", d.decoder_layers, "Stacked decoder LSTM layers.",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_enum("decoder_cell", d.decoder_cell, CELLS, "Decoder recurrent cell: lstm, "
                      "or gru (Cho et al.'s, as VRNMT's Eqs. 22-25).", flag_values=fv)
    flags.DEFINE_integer("attention_units", d.attention_units, "Additive score size.",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("head_units", d.head_units, "Hidden size of the output head (Eq. 4).",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_bool("coverage", d.coverage, "Coverage (Eqs. 8-9).", flag_values=fv)
    flags.DEFINE_float("coverage_weight", d.coverage_weight, "lambda of Eq. 9.", lower_bound=0,
                       flag_values=fv)
    flags.DEFINE_float("dropout", d.dropout, "Dropout rate.", lower_bound=0.0, upper_bound=0.99,
                       flag_values=fv)
    flags.DEFINE_integer("num_samples", d.num_samples, "Monte-Carlo samples of the ELBO.",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_enum("precision", d.precision, PRECISIONS,
                      "Keras dtype policy of the model's layers: float32; mixed_bfloat16 or "
                      "mixed_float16 (float32 variables, layers computing in bfloat16 / "
                      "float16; softmax, attention probabilities, log-probabilities, KL "
                      "terms, losses and beam scores stay float32; mixed_float16 trains "
                      "with dynamic loss scaling). Restored from model_dir in eval, decode "
                      "and export.", flag_values=fv)
    flags.DEFINE_enum("lstm_impl", d.lstm_impl, LSTM_IMPLS, "What runs the encoder's "
                      "BiLSTM (the same weights either way): scan, the hand-written "
                      "recurrence (faster on CPU; compiles under --xla); keras, Keras' "
                      "LSTM (cuDNN on a GPU); auto: keras on a GPU without --xla, else "
                      "scan. The choice is logged. A resumed run may change it; eval, "
                      "decode and export use the trained run's.", flag_values=fv)
    flags.DEFINE_float("word_dropout", d.word_dropout, "Word dropout (Bowman et al. 2016): in "
                       "training, each decoder input word (not <bos>, not padding) becomes "
                       "UNK with this probability.", lower_bound=0.0, upper_bound=0.99,
                       flag_values=fv)
    # -- training ---------------------------------------------------------------------
    t = _train_defaults()
    flags.DEFINE_integer("train_steps", t.train_steps, "Optimiser steps.", lower_bound=0,
                         flag_values=fv)
    flags.DEFINE_enum("optimizer", t.optimizer, OPTIMIZERS, "Optimiser.", flag_values=fv)
    flags.DEFINE_float("learning_rate", t.learning_rate, "Initial learning rate.",
                       lower_bound=0.0, flag_values=fv)
    flags.DEFINE_enum("lr_decay", t.lr_decay, LR_DECAYS,
                      "luong: halve the SGD rate 4 times in the last third; cosine (any "
                      "optimizer): linear warm-up over --warmup_steps, then cosine decay to "
                      "10% of --learning_rate at --train_steps.", flag_values=fv)
    flags.DEFINE_integer("warmup_steps", t.warmup_steps, "--lr_decay=cosine: steps of linear "
                         "warm-up from 0.", lower_bound=0, flag_values=fv)
    flags.DEFINE_float("clip_norm", t.clip_norm, "Global-norm gradient clipping (0: off).",
                       lower_bound=0.0, flag_values=fv)
    flags.DEFINE_integer("batch_size", 64, "Training examples per batch.", lower_bound=1,
                         flag_values=fv)
    flags.DEFINE_integer("log_every", t.log_every, "Progress line / scalars every N steps.",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("eval_every", t.eval_every, "Validation every N steps (0: at the "
                         "end only).", lower_bound=0, flag_values=fv)
    flags.DEFINE_integer("checkpoint_every", t.checkpoint_every, "Checkpoint every N steps.",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("keep_checkpoints", t.keep_checkpoints, "Checkpoints kept.",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_float("gumbel_fraction", t.gumbel_fraction, "ACVI: Gumbel-Softmax mixing "
                       "(Eq. 23) for this last fraction of training.", lower_bound=0.0,
                       upper_bound=1.0, flag_values=fv)
    flags.DEFINE_integer("kl_anneal_steps", t.kl_anneal_steps, "KL cost annealing (Bowman "
                         "et al. 2016): every KL term's weight is scaled by a factor rising "
                         "from 0 to 1 over these first steps (0: off).", lower_bound=0,
                         flag_values=fv)
    flags.DEFINE_enum("kl_anneal", t.kl_anneal, KL_ANNEALING, "The KL annealing curve.",
                      flag_values=fv)
    flags.DEFINE_integer("noise_warmup_steps", t.noise_warmup_steps, "ACVI: the noise "
                         "sigma * eps of the sampled context (Eq. 24) is scaled by a factor "
                         "rising linearly from 0 to 1 over these first steps, so the decoder "
                         "learns to read c_t before the noise arrives (0: off). The KL "
                         "terms are those of the unscaled posterior.", lower_bound=0,
                         flag_values=fv)
    flags.DEFINE_bool("progress", t.progress, "A progress bar on stderr.", flag_values=fv)
    flags.DEFINE_string("select_best", t.select_best or None, "Best-validation checkpoint "
                        "selection: keep the checkpoint whose evaluation during training "
                        "scored best on this eval scalar (dev_bleu, val_rouge_1, ...; a "
                        "leading '-' keeps the lowest, e.g. -dev_nll), and evaluate it on "
                        "dev/test at the end instead of the last one (best.json names its "
                        "step; results.json records it). Empty: the last checkpoint.",
                        flag_values=fv)
    flags.DEFINE_string("init_from", t.init_from or None, "Warm start: before the first "
                        "step of a new run, copy every variable whose name and shape match "
                        "from the latest checkpoint of this run directory (e.g. ACVI from a "
                        "soft-attention run; ACVI's sigma-network stays freshly "
                        "initialised). The vocabularies must be the same files.",
                        flag_values=fv)
    # -- decoding -----------------------------------------------------------------------
    flags.DEFINE_integer("beam_width", 10, "Beam width of the final dev/test decode and of "
                         "--mode=decode (1: greedy).", lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("decode_max_length", 50, "Most output tokens per hypothesis.",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("min_length", 0, "Fewest output tokens before the end token.",
                         lower_bound=0, flag_values=fv)
    flags.DEFINE_enum("length_normalization", "none", LENGTH_NORMALIZATIONS,
                      "Beam score length normalization.", flag_values=fv)
    flags.DEFINE_float("alpha", 0.6, "GNMT length penalty exponent.", lower_bound=0.0,
                       flag_values=fv)
    flags.DEFINE_integer("eval_beam_width", 1, "Beam width of the validation during "
                         "training (1: greedy).", lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("eval_subset", 0, "Validation during training decodes the first N "
                         "dev examples (0: all); the end of training always uses all.",
                         lower_bound=0, flag_values=fv)
    flags.DEFINE_integer("decode_batch_size", 64, "Sentences per decoding batch.",
                         lower_bound=1, flag_values=fv)
    flags.DEFINE_integer("diversity_samples", 0, "Translation and summarization evaluation: "
                         "also decode the first --diversity_sources test sources this many "
                         "times each, greedy, "
                         "with the latent sampled (Bahuleyan et al.'s diversity protocol: "
                         "entropy and distinct-1/2 per source, averaged; 10 in their paper). "
                         "For ACVI, the Gaussian attention, VED and VRNMT. 0: off.",
                         lower_bound=0, flag_values=fv)
    flags.DEFINE_integer("diversity_sources", 100, "How many test sources "
                         "--diversity_samples decodes.", lower_bound=1, flag_values=fv)


def define_attention_plot_flags(flag_values=FLAGS):
    """``--attention_plots`` and ``--attention_plots_count`` of a CLI's decode mode."""
    flags.DEFINE_string("attention_plots", None, "--mode=decode: draw the attention of the "
                        "first --attention_plots_count inputs as PNG heat-maps in this "
                        "directory (source tokens against output tokens; ACVI adds its mean "
                        "sigma per source position).", flag_values=flag_values)
    flags.DEFINE_integer("attention_plots_count", 5, "How many inputs --attention_plots draws.",
                         lower_bound=1, flag_values=flag_values)


def _model_defaults():
    return ModelConfig()


def _train_defaults():
    return TrainConfig(model_dir="")


# ---------------------------------------------------------------------------
# Profiles and validation
# ---------------------------------------------------------------------------

def explicit(name, flag_values=FLAGS):
    """True when ``--name`` was given on the command line or in a flagfile."""
    return bool(flag_values[name].present)


def apply_profile(profiles, flag_values=FLAGS):
    """Sets the profile's values as the defaults of the flags not set explicitly
    (a profile's ``pad_multiple`` only with ``--xla``).

    Returns the dict of values that were applied. Values are parsed by the flag
    (so a bad profile entry fails like a bad command-line value).
    """
    fv = flag_values
    profile = profiles[fv.profile]
    applied = {}
    for name, value in profile.items():
        if name not in fv:
            raise KeyError(f"profile {fv.profile!r} sets unknown flag --{name}")
        if not explicit(name, fv):
            fv.set_default(name, value)
            applied[name] = value
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


def parse_attention_options(values, attention=None):
    """``--attention_option`` values -> dict (see :func:`parse_options`)."""
    allowed = variant_options(attention) if attention is not None else None
    return parse_options(values, "attention_option", allowed, f"--attention={attention}")


def parse_latent_options(values, latent=""):
    """``--latent_option`` values -> dict (see :func:`parse_options`)."""
    if values and not latent:
        raise FlagError("latent_option", "given without --latent")
    allowed = _constructor_options(_latent_class(latent)) if latent else None
    return parse_options(values, "latent_option", allowed, f"--latent={latent}")


def parse_options(values, flag, allowed=None, owner=""):
    """``["k=v", ...]`` -> dict of Python literals (bare words stay strings).

    With ``allowed``, every key must be one of them (the named parameters of the
    class the options go to). Errors are :class:`FlagError` naming ``--flag``.
    """
    out = {}
    for item in values or []:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or not key.isidentifier():
            raise FlagError(flag, f"{item!r} is not key=value (e.g. kl_weight=0.5)")
        raw = raw.strip()
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        if key in out:
            raise FlagError(flag, f"{key!r} is given twice")
        out[key] = value
    if allowed is not None and out:
        unknown = sorted(set(out) - set(allowed))
        if unknown:
            raise FlagError(flag, f"{', '.join(unknown)} not an option of {owner}; its "
                            f"options are: {', '.join(allowed) or '(none)'}")
    return out


def _latent_class(latent):
    if latent not in latent_lib.available():
        raise FlagError("latent", f"{latent!r}: choose one of {', '.join(latent_lib.available())}")
    return latent_lib.LATENTS.get(latent)


def _constructor_options(cls):
    return list(constructor_options(cls))


def variant_options(attention):
    """The named constructor parameters of an attention variant (its options)."""
    return _constructor_options(attention_lib.get_attention(attention))


def model_config_from_flags(flag_values=FLAGS, **task_fields):
    """A :class:`ModelConfig` from the model flags plus task fields (vocab sizes...)."""
    fv = flag_values
    options = parse_attention_options(fv.attention_option, fv.attention)
    if fv.dropout >= 1.0:
        raise FlagError("dropout", f"{fv.dropout} must be below 1")
    return ModelConfig(
        embed_dim=fv.embed_dim, encoder_units=fv.encoder_units, encoder_layers=fv.encoder_layers,
        decoder_units=fv.decoder_units, decoder_layers=fv.decoder_layers,
        decoder_cell=fv.decoder_cell, score=fv.score,
        attention_units=fv.attention_units, attention=fv.attention, attention_options=options,
        head=fv.head, head_units=fv.head_units, coverage=fv.coverage,
        coverage_weight=fv.coverage_weight, dropout=fv.dropout, num_samples=fv.num_samples,
        word_dropout=fv.word_dropout, model=fv.model, num_heads=fv.num_heads,
        ff_units=fv.ff_units, transformer_layers=fv.transformer_layers, latent=fv.latent,
        latent_options=parse_latent_options(fv.latent_option, fv.latent),
        precision=fv.precision, lstm_impl=fv.lstm_impl, **task_fields)


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
    fv = flag_values
    check_schedule_flags(fv)
    return TrainConfig(
        model_dir=model_dir, train_steps=fv.train_steps, optimizer=fv.optimizer,
        learning_rate=fv.learning_rate, lr_decay=fv.lr_decay, warmup_steps=fv.warmup_steps,
        clip_norm=fv.clip_norm,
        seed=fv.seed, jit_compile=fv.xla, log_every=fv.log_every, eval_every=fv.eval_every,
        checkpoint_every=fv.checkpoint_every, keep_checkpoints=fv.keep_checkpoints,
        gumbel_fraction=fv.gumbel_fraction, progress=fv.progress,
        kl_anneal_steps=fv.kl_anneal_steps, kl_anneal=fv.kl_anneal,
        noise_warmup_steps=fv.noise_warmup_steps, init_from=fv.init_from or "",
        select_best=fv.select_best or "", deterministic=fv.deterministic)


_STRATEGIES = {}  # (strategy, num_devices) -> the strategy this process made


def make_strategy(flag_values=FLAGS):
    """The ``--strategy`` of this process, made once: :func:`resolve_run_flags` makes it
    before anything starts TensorFlow (a multi-worker strategy and logical CPU devices
    can only be set up then), and the training reuses it."""
    key = (flag_values.strategy, flag_values.num_devices or None)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = _make_strategy(*key)
    return _STRATEGIES[key]


def config_from_flags(cls, flag_values=FLAGS, **overrides):
    """A config dataclass whose fields are flag names, from the flags (and ``overrides``)."""
    values = {f.name: flag_values[f.name].value for f in dataclasses.fields(cls)
              if f.name in flag_values and f.name not in overrides}
    return cls(**values, **overrides)


def decode_config_from_flags(flag_values=FLAGS):
    return config_from_flags(DecodeConfig, flag_values)


def run_info(module, flag_values=FLAGS):
    """What results.json records of this run: profile, command line, argv."""
    return RunInfo(profile=flag_values.profile, command=command_line(module), argv=sys.argv,
                   system=flag_values.system)


def check_option_values(flag_values=FLAGS):
    """Builds the attention variant and the latent with their options once, at a tiny size,
    so that a bad option value (``kl_estimator=bogus``, ``temperature=0``) is a flag error
    before anything is written into the run directory."""
    fv = flag_values
    options = parse_attention_options(fv.attention_option, fv.attention)
    cls = attention_lib.get_attention(fv.attention)
    if cls.uses_target_vocab:
        options = {"target_vocab_size": 8, "pad_id": 0, "unk_id": 1, **options}
    try:
        cls(8, **options)
    except (ValueError, TypeError) as e:
        raise FlagError("attention_option", f"--attention={fv.attention}: {e}") from None
    latent_options = parse_latent_options(fv.latent_option, fv.latent)
    if fv.latent:
        try:
            _latent_class(fv.latent)(**latent_options)
        except (ValueError, TypeError) as e:
            raise FlagError("latent_option", f"--latent={fv.latent}: {e}") from None


def check_model_values(flag_values=FLAGS):
    """Builds the model of the model flags once, at a tiny vocabulary, so that flags the
    architecture refuses (``--model=transformer --attention=acvi``, an ``--embed_dim``
    that ``--num_heads`` does not divide) are a flag error before anything is written.
    The rules are the model's own (its constructor's checks)."""
    from acvi_tf.models import build_model
    config = model_config_from_flags(flag_values, src_vocab_size=8, tgt_vocab_size=8)
    try:
        build_model(config)
    except ValueError as e:
        raise FlagError("model", f"{flag_values.model}: {e}".replace(
            f"{flag_values.model}: {flag_values.model}: ", f"{flag_values.model}: ")) from None


def check_run_flags(flag_values=FLAGS):
    """The cross-flag checks every task CLI shares; errors name the flag."""
    fv = flag_values
    if fv.mode in ("train", "train_eval") and fv.train_steps < 1:
        raise FlagError("train_steps", "must be at least 1 to train")
    if fv.mode != "decode" and (fv.input or fv.output):
        raise FlagError("input" if fv.input else "output", "is only used with --mode=decode")
    if fv.mode != "decode" and getattr(fv, "attention_plots", None):
        raise FlagError("attention_plots", "is only used with --mode=decode")
    if (fv.mode == "export") != bool(fv.export_dir):
        raise FlagError("export_dir", "is required by --mode=export" if fv.mode == "export"
                        else "is only used with --mode=export")
    if fv.input and not os.path.exists(fv.input):
        raise FlagError("input", f"file not found: {fv.input}")
    check_option_values(fv)
    if fv.mode in ("train", "train_eval"):  # (eval and decode rebuild the stored model)
        check_model_values(fv)
    if fv.init_from:
        for name in ("model_config.json", "ckpt/checkpoint"):
            if not os.path.isfile(os.path.join(fv.init_from, name)):
                raise FlagError("init_from", f"{fv.init_from} holds no trained run "
                                f"({name} is missing)")
    if fv.noise_warmup_steps and (fv.attention != "acvi" or fv.model != "seq2seq"):
        raise FlagError("noise_warmup_steps", f"scales ACVI's sampled context noise; it "
                        f"needs --attention=acvi and --model=seq2seq (got --attention="
                        f"{fv.attention}, --model={fv.model})")
    if fv.word_dropout and fv.model != "seq2seq":
        raise FlagError("word_dropout", f"is implemented in the seq2seq decoder only "
                        f"(got --model={fv.model})")
    if fv.decoder_cell != "lstm" and fv.model != "seq2seq":
        raise FlagError("decoder_cell", f"chooses the seq2seq decoder's recurrent cell; "
                        f"--model={fv.model} has none")
    check_schedule_flags(fv)
    if fv.mode in ("train", "train_eval") and fv.model_dir and os.path.isdir(fv.model_dir):
        # a resume that cannot go on is refused before anything of the run is written
        # (the Trainer checks again, under the run directory's lock)
        try:
            check_resume(os.path.abspath(fv.model_dir), fv.train_steps, log=lambda m: None)
        except CheckpointError as e:
            raise SystemExit(f"error: {e}") from None
    if fv.xla and fv.strategy != "default" and fv.mode in ("train", "train_eval"):
        from acvi_tf.training.trainer import XLA_REPLICAS_MESSAGE, xla_replicas_supported
        if not xla_replicas_supported():
            raise FlagError("xla", XLA_REPLICAS_MESSAGE.format(strategy=fv.strategy))


def require_model_dir(flag_values=FLAGS):
    if not flag_values.model_dir:
        raise FlagError("model_dir", "is required (where the checkpoints and results go)")
    return os.path.abspath(flag_values.model_dir)


# ---------------------------------------------------------------------------
# Saved run settings (so eval/decode rebuild exactly the trained model)
# ---------------------------------------------------------------------------

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
    after the profile was applied) into ``model_dir``."""
    fv = flag_values
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


def resolve_run_flags(model_dir, mode, profiles, restored_names, flag_values=FLAGS,
                      module=None):
    """Profile + saved settings, in the order every task CLI needs them.

    The saved run of ``model_dir`` fixes its profile and the flags in
    ``restored_names`` (data and model: eval/decode must rebuild the trained
    model); in eval/decode modes the run's decoding flags too, unless given now.
    Returns the saved run config (None for a new directory). ``module`` (the CLI's)
    refuses a run directory that another CLI made.
    """
    fv = flag_values
    saved = None
    if model_dir and mode in ("eval", "train", "train_eval") + READ_ONLY_MODES:
        saved = restore_run_config(model_dir, fv)
    made_by = _made_by(saved)
    if module and made_by and made_by != module:
        raise FlagError("model_dir", f"{model_dir} holds a run of {made_by}, not of "
                        f"{module}; use python -m {made_by} with it")
    if module and mode in ("train", "train_eval") and fv.init_from:
        # a warm start copies the weights of a run of the same task (its batches, head
        # and vocabulary); another CLI's run is refused before anything is written
        try:
            theirs = _made_by(load_run_config(os.path.abspath(fv.init_from)))
        except RunError as e:
            raise FlagError("init_from", str(e)) from None
        if theirs and theirs != module:
            raise FlagError("init_from", f"{fv.init_from} holds a run of {theirs}, not of "
                            f"{module}; a warm start needs a run of the same task")
    apply_profile(profiles, fv)
    if saved:
        restore_saved_flags(saved["flags"], restored_names, fv)
        if mode in ("eval",) + READ_ONLY_MODES:
            for name in DECODE_FLAGS:
                if name in saved["flags"] and not explicit(name, fv):
                    fv.set_default(name, saved["flags"][name])
    if saved is None and mode in ("eval",) + READ_ONLY_MODES:
        raise FlagError("model_dir", f"{model_dir} holds no trained model (run_config.json "
                        f"is missing); train first")
    if mode in ("train", "train_eval") and not getattr(fv, "dry_run", False):
        check_device(fv)  # lists devices only: TensorFlow's context is not started
        # Before the flag checks build layers (which starts TensorFlow): issue 42.
        from acvi_tf.training.distribute import StrategyError
        try:
            make_strategy(fv)
        except StrategyError as e:
            raise SystemExit(f"error: {e}") from None
    return saved


def check_device(flag_values=FLAGS):
    """Refuses, in one line, to train a GPU-sized profile where TensorFlow sees no GPU,
    unless --allow_cpu (:func:`acvi_tf.utils.gpus.cpu_only_problem`)."""
    from acvi_tf.utils import gpus  # only training asks TensorFlow for its devices
    problem = gpus.cpu_only_problem(flag_values.profile, flag_values.allow_cpu)
    if problem:
        raise SystemExit(f"error: {problem}")


TRACEBACK_ENV = "ACVI_TRACEBACK"  # =1: a failure's full traceback above its one line


def tracebacks_wanted(flag_values=FLAGS):
    """Whether a failure prints its full traceback as well as its one line: with
    ``--verbosity=1`` (absl's, or more) or the environment variable ``ACVI_TRACEBACK=1``."""
    if os.environ.get(TRACEBACK_ENV, "").strip().lower() not in ("", "0", "false", "no"):
        return True
    try:
        return flag_values.is_parsed() and int(flag_values["verbosity"].value or 0) >= 1
    except (KeyError, TypeError, ValueError, AttributeError):
        return False


def _print_traceback(error):
    """The full traceback of ``error``, the exception it was turned from included (a
    one-line error is raised ``from None``)."""
    import traceback
    error.__suppress_context__ = False
    print(f"(the traceback, since --verbosity>=1 or {TRACEBACK_ENV}=1:)", file=sys.stderr)
    traceback.print_exception(error, file=sys.stderr)
    sys.stderr.flush()


def cli_main(main):
    """``main`` for ``app.run``: a flag error (:class:`FlagError`, any ``app.UsageError``)
    ends in its one line, ``error: --flag: ...``, and exit code 1, not in the module's
    help with the error below it (``--helpshort`` still prints the help). Every failure
    ends in its one line (:func:`run_guarded`); with ``--verbosity=1`` or
    ``ACVI_TRACEBACK=1`` (:func:`tracebacks_wanted`) its full traceback is printed above
    that line as well."""
    @functools.wraps(main)
    def run(argv):
        try:
            return main(argv)
        except app.UsageError as e:
            if tracebacks_wanted():
                _print_traceback(e)
            print(f"error: {e}", file=sys.stderr, flush=True)
            raise SystemExit(e.exitcode or 1) from None
        except SystemExit as e:
            if e.code not in (None, 0) and tracebacks_wanted():
                _print_traceback(e)
            raise
    return run


def _made_by(saved):
    """The CLI module that made a saved run config (``experiments.translate``), or ''."""
    return ((saved or {}).get("command", "").split(" ")[2:3] or [""])[0]


def run_guarded(body, errors=(), model_dir=None, mode=None, module=None):
    """Runs a CLI's mode, turning the package's exceptions into the CLI's: a bad
    setting (:class:`ConfigError`) into a :class:`FlagError` naming the flag, missing
    data or files into ``error: ...`` exits. ``errors`` adds (exception types, prefix).
    A ``mode`` that writes into ``model_dir`` (every mode but decode and export) holds
    the run directory's lock (:func:`acvi_tf.run.directory.locked_run_dir`) while it
    runs, and records this start of the run, with the command of the CLI ``module``, in
    ``provenance.json`` (:func:`acvi_tf.run.directory.run_segment`)."""
    try:
        if model_dir and mode and mode not in READ_ONLY_MODES and is_chief():
            # (the other workers of a multi-worker run share the chief's model_dir and
            # write nothing into it)
            with locked_run_dir(model_dir):
                manifest.verify(model_dir)
                with run_segment(model_dir, command_line(module) if module else None, mode):
                    return body()
        if model_dir:
            manifest.verify(model_dir)
        return body()
    except ConfigError as e:
        raise FlagError(e.field, e.detail) from None
    except DataError as e:
        raise SystemExit(f"error: data missing or malformed: {e}") from None
    except (FileNotFoundError, RunError, manifest.StoredFileError, TrainingDiverged,
            CheckpointError) as e:
        raise SystemExit(f"error: {e}") from None
    except OSError as e:
        if not e.filename:  # an OS error about no file in particular keeps its traceback
            raise
        raise SystemExit(f"error: {e.filename}: {e.strerror}") from None
    except Exception as e:  # noqa: BLE001  (only the types the CLI named)
        for types, prefix in errors:
            if isinstance(e, types):
                raise SystemExit(f"error: {prefix}{e}") from None
        raise


def check_partial_data(complete, lines, what, how_to_get, flag_values=FLAGS, extra=""):
    """Stops training on missing or partial data unless --allow_partial_data."""
    fv = flag_values
    if not complete and not fv.allow_partial_data:
        print("\n".join(lines), file=sys.stderr, flush=True)
        raise SystemExit(
            f"error: the {what} files above are missing or partial copies, and "
            f"--profile={fv.profile} needs the full data (the results would not be "
            f"comparable). Get them: {how_to_get}.{extra}")


def train(task, model_dir, save, flag_values=FLAGS):
    """Trains ``task`` with the model, training and strategy flags; ``save()`` writes the
    run's settings once the model config is checked. --mode=train stops there (its
    training info goes to results.json) and gives None; otherwise ``(model, evaluator,
    info, model config)`` for the evaluation."""
    fv = flag_values
    config = task.model_config(model_config_from_flags(fv))
    model, evaluator, info = task.train(model_dir, config,
                                        train_config_from_flags(model_dir, fv),
                                        make_strategy(fv), before_training=save)
    if fv.mode == "train" or not is_chief():  # the chief alone evaluates and writes results
        update_results(model_dir, **info)
        return None
    return model, evaluator, info, config
