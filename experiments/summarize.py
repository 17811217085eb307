r"""Abstractive summarization on CNN/DailyMail (Section 4.1, Appendix A, Tables 1, 2, 5).

    python -m experiments.summarize --flagfile=experiments/configs/table1_cpu_pg_acvi.flags \
        --model_dir=runs/table1_cpu/pg_acvi
    python -m experiments.summarize --mode=lead3 --model_dir=runs/lead3
    python -m experiments.summarize --mode=eval --model_dir=runs/table1_cpu/pg_acvi
    python -m experiments.summarize --mode=duc2004 --model_dir=runs/table1_cpu/pg_acvi
    python -m experiments.summarize --mode=val --model_dir=runs/table1_cpu/pg_acvi
    python -m experiments.summarize --mode=decode --model_dir=runs/table1_cpu/pg_acvi \
        --input=articles.txt --output=summaries.txt   # one tokenized article a line
    python -m experiments.summarize --mode=export --model_dir=runs/table1_cpu/pg_acvi \
        --export_dir=exports/pg_acvi

The model is the one seq2seq machine with See et al.'s (2017) pointer-generator
head (``--head=pointer``, Eqs. 5-6: batches carry the extended-vocabulary ids
``src_ext`` and ``max_oovs``), additive attention (Eq. 1) and coverage (Eqs. 7-9)
switched on for the last ``--coverage_steps`` only, as Appendix A does. Training
follows Table 5's five phases of growing truncation (``--phases``), laid over
``--train_steps`` in the paper's proportions and ending at ``--max_enc_steps`` /
``--max_dec_steps`` (:meth:`acvi_tf.training.schedules.PhaseSchedule.fit`: with the
paper profile it is Table 5 exactly). A resumed run continues mid-phase.

Evaluation decodes the test articles (``--max_eval_pairs`` of them, all by
default) with beam search ranked by the average log-probability (See et al.) and
a minimum length, maps extended ids back to the article's OOV words, and scores:
ROUGE-1/2/L F1 (official ROUGE-1.5.5, See et al.'s options, one sentence per
line), METEOR 1.5 in exact and full mode, and Table 2's novel-word and
OOV-adoption rates (``acvi_tf.metrics.novelty``). With coverage, the model is
also evaluated at the end of the last phase, before coverage (Table 1's rows
without "+ coverage"), under ``no_coverage`` in ``results.json``.

Other modes: ``lead3`` (the first three article sentences, same metrics; no
model), ``duc2004`` (Table 5: decode DUC2004's 500 inputs with a trained model,
ROUGE recall with Rush et al.'s 75-byte options and 4 references), ``val`` (the
test evaluation on the first ``--max_eval_pairs`` val articles, under ``val`` in
``results.json``: what settings are chosen by, never the test set), ``decode``,
``export`` (a SavedModel in ``--export_dir``: tokenized articles in, summaries out,
the pointer's copy of article OOVs and the beam search in the graph;
:mod:`acvi_tf.export.summarization`).

Profiles (``--profile``; explicit flags win): ``paper`` (Section 4.1 and See et
al.: 128-d embeddings, 256-d LSTMs, 50K vocabulary, 400/100 tokens, batch 16,
Adam with default settings, 250K + 3K steps, beam 5, 35-100 output tokens),
``cpu`` (real data on 2 cores; sizes in ``experiments/configs/table1_cpu_*.flags``),
``smoke`` (seconds; tests).

``--model_dir`` holds ``model_config.json``, ``run_config.json``, ``flags.txt``,
``vocab.txt``, ``ckpt/``, TensorBoard logs (``train/``, ``eval/``: val ROUGE,
sample summaries, an attention heat-map), ``decode_test.txt`` /
``reference_test.txt`` (one summary a line), ``decode_duc2004.txt`` and
``results.json``.
"""

import logging

from absl import app, flags

from acvi_tf.metrics.meteor import MeteorError
from acvi_tf.metrics.rouge import RougeError
from acvi_tf.tasks.summarization import SummarizationConfig
from experiments import flags as xflags
from experiments import run_modes

FLAGS = flags.FLAGS
MODULE = "experiments.summarize"

PROFILES = {
    # Section 4.1, Appendix A (Table 5) and See et al. (2017): 128-d embeddings, one
    # 256-d BiLSTM layer and a 256-d LSTM decoder, W_h h_i of size 2 x 256, the
    # 50K vocabulary, batch 16, max gradient norm 2, beam 5 (Sec. 3 of the paper),
    # decoding 35 to 100 tokens ranked by the average log-probability.
    "paper": dict(
        embed_dim=128, encoder_units=256, encoder_layers=1, decoder_units=256,
        decoder_layers=1, attention_units=512, head_units=256, dropout=0.0,
        score="additive", head="pointer", coverage=True, coverage_weight=1.0,
        optimizer="adam", learning_rate=1e-3, lr_decay="none", clip_norm=2.0,
        train_steps=253_000, coverage_steps=3_000, phases="table5", batch_size=16,
        vocab_size=50_000, max_enc_steps=400, max_dec_steps=100,
        beam_width=5, decode_max_length=100, min_length=35, length_normalization="average",
        eval_every=5_000, eval_subset=200, eval_beam_width=1, checkpoint_every=5_000,
        log_every=100, decode_batch_size=16, allow_partial_data=False,
        # with --xla: Table 5's lengths are 10 or multiples of 25, so at most 93 shapes
        # over the five phases; measured on 8,000 train pairs, 2 in the last phase (34
        # unpadded), summaries padded from 68 to 77 tokens on average, 1 in the others
        pad_multiple=25),
    # 2 CPU cores: half the lengths (200 / 50 tokens), a 20K vocabulary, 128-unit
    # LSTMs, 2,000 steps (Table 5's phases over the first 1,800, then 200 with
    # coverage), beam 4 on the first 500 test articles. Measured times are in
    # experiments/configs/table1_cpu_*.flags.
    "cpu": dict(
        embed_dim=64, encoder_units=128, encoder_layers=1, decoder_units=128,
        decoder_layers=1, attention_units=128, head_units=128, dropout=0.0,
        score="additive", head="pointer", coverage=True, coverage_weight=1.0,
        optimizer="adam", learning_rate=1e-3, lr_decay="none", clip_norm=2.0,
        train_steps=2_000, coverage_steps=200, phases="table5", batch_size=16,
        vocab_size=20_000, max_enc_steps=200, max_dec_steps=50,
        beam_width=4, decode_max_length=50, min_length=17, length_normalization="average",
        eval_every=500, eval_subset=50, eval_beam_width=1, checkpoint_every=500,
        checkpoint_minutes=xflags.CPU_CHECKPOINT_MINUTES,
        log_every=50, decode_batch_size=32, max_eval_pairs=500, allow_partial_data=True),
    "smoke": dict(
        embed_dim=8, encoder_units=8, encoder_layers=1, decoder_units=8, decoder_layers=1,
        attention_units=8, head_units=8, dropout=0.0, score="additive", head="pointer",
        coverage=True, optimizer="adam", learning_rate=1e-2, lr_decay="none",
        train_steps=8, coverage_steps=2, phases="table5", batch_size=4, vocab_size=40,
        max_enc_steps=24, max_dec_steps=8, beam_width=2, decode_max_length=8, min_length=2,
        length_normalization="average", eval_every=0, eval_subset=4, eval_beam_width=1,
        checkpoint_every=3, log_every=2, decode_batch_size=8, progress=False,
        allow_partial_data=True, meteor=False),
}


def check_flags(fv=FLAGS):
    """Cross-flag checks; errors name the flag."""
    xflags.check_run_flags(fv)
    config = xflags.config_from_flags(SummarizationConfig, fv)
    train_steps = fv.train_steps if fv.mode in ("train", "train_eval") else None
    xflags.run_guarded(lambda: config.check(train_steps, fv.coverage))


# A trained run's --train_steps is adopted in every mode: its phase schedule (when
# coverage is on) is laid over them.
CLI = run_modes.Cli(MODULE, "summarize", PROFILES, check_flags,
                    errors=(((RougeError, MeteorError), "metric could not run: "),),
                    adopted=("train_steps",))
MODES = CLI.modes()


def define_flags(fv=FLAGS):
    """Defines the shared flags (experiments.flags) and the summarization flags."""
    xflags.define_flags(PROFILES, default_profile="cpu", modes=MODES, flag_values=fv)
    kw = {"flag_values": fv}
    xflags.define_config_flags(SummarizationConfig, fv)
    flags.DEFINE_string("input", None, "--mode=decode: articles, one tokenized article a "
                        "line (default: stdin).", **kw)
    flags.DEFINE_string("output", None, "--mode=decode: where to write the summaries "
                        "(default: stdout).", **kw)
    xflags.define_attention_plot_flags(fv)


def schedule(fv=FLAGS):
    """The :class:`PhaseSchedule` of the run (Table 5 laid over --train_steps)."""
    return xflags.config_from_flags(SummarizationConfig, fv).schedule(fv.train_steps,
                                                                      fv.coverage)


def main(argv):
    logging.getLogger("absl").setLevel(logging.WARNING)
    return run_modes.main(CLI, argv, FLAGS)


if __name__ == "__main__":
    define_flags()
    app.run(xflags.cli_main(main))
