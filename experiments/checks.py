"""The cross-flag checks every task CLI runs before anything is written; errors name the flag
(:class:`~experiments.config_flags.FlagError`)."""

import os

from absl import flags

from acvi_tf import attention as attention_lib
from acvi_tf.training.trainer import CheckpointError, check_resume
from experiments.config_flags import FlagError
from experiments.run_settings import (check_schedule_flags, latent_class,
                                      model_config_from_flags, parse_attention_options,
                                      parse_latent_options)

FLAGS = flags.FLAGS


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
            latent_class(fv.latent)(**latent_options)
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
    if fv.checkpoint_minutes and fv.strategy == "multiworker":
        # (the Trainer refuses it too, for library callers)
        raise FlagError("checkpoint_minutes", f"{fv.checkpoint_minutes:g} needs one worker: "
                        "each worker's clock would pick its own step, and a checkpoint is "
                        "collective: pass --checkpoint_minutes=0 (the cpu profiles set it) and rely on "
                        "--checkpoint_every")
    if fv.xla and fv.strategy != "default" and fv.mode in ("train", "train_eval"):
        from acvi_tf.training.trainer import XLA_REPLICAS_MESSAGE, xla_replicas_supported
        if not xla_replicas_supported():
            raise FlagError("xla", XLA_REPLICAS_MESSAGE.format(strategy=fv.strategy))


def require_model_dir(flag_values=FLAGS):
    if not flag_values.model_dir:
        raise FlagError("model_dir", "is required (where the checkpoints and results go)")
    return os.path.abspath(flag_values.model_dir)
