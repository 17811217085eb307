r"""Machine translation (Section 4.3, Appendix C, Table 4): train, evaluate, decode.

    python -m experiments.translate --flagfile=experiments/configs/table4_envi_acvi.flags
    python -m experiments.translate --dataset=multi30k --src=en --tgt=de --profile=cpu \
        --attention=acvi --model_dir=runs/m30k_acvi
    python -m experiments.translate --model_dir=runs/m30k_acvi --mode=eval
    python -m experiments.translate --model_dir=runs/m30k_acvi --mode=decode \
        --input=sentences.en --output=sentences.de
    python -m experiments.translate --model_dir=runs/m30k_acvi --mode=export \
        --export_dir=exports/m30k_acvi

Modes: ``train_eval`` (default) trains, then decodes dev and test with
``--beam_width`` and prints BLEU with sacrebleu's signature and the diversity of
the translations (entropy, distinct-1/2 of Bahuleyan et al. 2018, over the
whitespace tokens of the decoded corpus: :mod:`acvi_tf.metrics.diversity`);
``train``; ``eval``
(a trained ``--model_dir``); ``decode`` (``--input`` or stdin to ``--output`` or
stdout; input in the dataset's form: Moses-tokenized for IWSLT/Multi30k ``tok``,
raw text for WMT); ``export`` (a SavedModel of the trained model in
``--export_dir``: source text in, translations and scores out, tokenization and
beam search in the graph; :mod:`acvi_tf.export.translation`); ``copy_baseline``
(the source sentence as the translation).

Everything a run needs to be rebuilt lives in ``--model_dir``: ``model_config.json``,
``run_config.json`` (the resolved flags), the vocabularies (``vocab.<lang>.txt``)
or the BPE model (``bpe/spm.model``), the Trainer's checkpoints (``ckpt/``),
TensorBoard logs (``train/``, ``eval/``: dev BLEU, sample translations, an
attention heat-map), ``decode_{dev,test}.txt`` and ``results.json``.

Profiles (``--profile``; any explicit flag overrides): ``paper`` (Section
4.3/Appendix C: 256-d embeddings, 2-layer BiLSTM encoder, 2-layer LSTM decoder,
256 units, dropout 0.2, SGD lr 1.0 with the luong step decay, 12K steps, batch
128, beam 10, max length 50), ``cpu`` (one Multi30k model in under ~30 minutes on
2 CPU cores), ``cpu_converged`` (the cpu sizes trained to soft attention's plateau, 8,000
steps, the best-val checkpoint evaluated), ``smoke`` (seconds; tests).
"""

import logging

from absl import app, flags

from acvi_tf.tasks.translation import TranslationConfig
from experiments import flags as xflags
from experiments import run_modes

FLAGS = flags.FLAGS
MODULE = "experiments.translate"

PROFILES = {
    # Section 4.3 and Appendix C; the rest as tensorflow/nmt's IWSLT'15 defaults.
    "paper": dict(
        embed_dim=256, encoder_units=256, encoder_layers=2, decoder_units=256, decoder_layers=2,
        attention_units=256, head_units=256, dropout=0.2, score="multiplicative",
        optimizer="sgd", learning_rate=1.0, lr_decay="luong", clip_norm=5.0,
        train_steps=12_000, batch_size=128, max_length=50, overlong="truncate",
        beam_width=10, decode_max_length=50, length_normalization="none",
        eval_every=1000, eval_subset=500, eval_beam_width=1, checkpoint_every=1000,
        log_every=100, bpe_vocab_size=32_000, min_count=2, allow_partial_data=False,
        # with --xla: lengths 8, 16, ..., 56, so at most 7 x 7 (src, tgt) shapes
        pad_multiple=8),
    # Measured on 2 CPU cores (see experiments/configs/table4cpu_multi30k_*.flags).
    "cpu": dict(
        embed_dim=256, encoder_units=128, encoder_layers=1, decoder_units=256,
        decoder_layers=1, attention_units=256, head_units=256, dropout=0.2,
        score="multiplicative", optimizer="adam", learning_rate=1e-3, lr_decay="none",
        clip_norm=5.0, train_steps=2500, batch_size=64, max_length=50, overlong="filter",
        beam_width=5, decode_max_length=50, length_normalization="none",
        eval_every=500, eval_subset=200, eval_beam_width=1, checkpoint_every=500,
        checkpoint_minutes=xflags.CPU_CHECKPOINT_MINUTES,
        log_every=50, min_count=2, bpe_vocab_size=8_000, allow_partial_data=False,
        # the batching of every archived 2,500-step run (results/table4_cpu_2500.md) and
        # of the demo: buckets of width 10
        num_buckets=5),
    "smoke": dict(
        embed_dim=16, encoder_units=16, encoder_layers=1, decoder_units=16, decoder_layers=1,
        attention_units=16, head_units=16, dropout=0.1, score="multiplicative",
        optimizer="adam", learning_rate=1e-2, lr_decay="none", train_steps=6, batch_size=8,
        max_length=30, overlong="filter", beam_width=2, decode_max_length=20,
        eval_every=6, eval_subset=8, eval_beam_width=1, checkpoint_every=3, log_every=2,
        min_count=1, bpe_vocab_size=200, progress=False, allow_partial_data=True,
        decode_batch_size=16),
}

# Issue 33's converged recipe: the cpu profile trained past soft attention's plateau (dev
# BLEU within 0.5 of its best from step ~7,500 on, 12 BLEU above step 2,500:
# results/convergence.md), the full val set evaluated every 500 steps and the best of
# those evaluations scored on test (--select_best). Length buckets of width 2 tokens
# (num_buckets=25 over max_length 50, the flag's default; the cpu profile keeps 5): the
# same 64-pair batches with less padding, 1.29x the steps/s of 5 buckets end to end
# (results/bench_peers_train.md, idle).
PROFILES["cpu_converged"] = dict(PROFILES["cpu"], train_steps=8000, eval_subset=0,
                                 select_best="dev_bleu", num_buckets=25)


def check_flags(fv=FLAGS):
    """Cross-flag checks that absl cannot express; errors name the flag."""
    xflags.run_guarded(lambda: xflags.config_from_flags(TranslationConfig, fv).check())
    xflags.check_run_flags(fv)


CLI = run_modes.Cli(MODULE, "translate", PROFILES, check_flags)
MODES = CLI.modes()


def define_flags(fv=FLAGS):
    """Defines the shared flags (experiments.flags) and the translation flags in ``fv``."""
    xflags.define_flags(PROFILES, default_profile="cpu", modes=MODES, flag_values=fv)
    kw = {"flag_values": fv}
    xflags.define_config_flags(TranslationConfig, fv)
    flags.DEFINE_string("input", None, "--mode=decode: the file to translate (default: "
                        "stdin).", **kw)
    flags.DEFINE_string("output", None, "--mode=decode: where to write (default: stdout).",
                        **kw)
    xflags.define_attention_plot_flags(fv)


define_flags()


def main(argv):
    # Tokenized BLEU (IWSLT, Multi30k) is intended; sacrebleu's "forgot to
    # detokenize?" warning would only be noise.
    logging.getLogger("sacrebleu").setLevel(logging.ERROR)
    return run_modes.main(CLI, argv, FLAGS)


if __name__ == "__main__":
    app.run(xflags.cli_main(main))
