r"""Video captioning on MSVD / Youtube2Text (Section 4.2, Appendix B, Table 3).

    python -m experiments.caption --flagfile=experiments/configs/table3_acvi.flags \
        --model_dir=runs/table3/acvi
    python -m experiments.caption --profile=smoke --synthetic_features --attention=soft \
        --model_dir=runs/caption_smoke          # no videos needed; numbers mean nothing
    python -m experiments.caption --model_dir=runs/table3/acvi --mode=eval
    python -m experiments.caption --model_dir=runs/table3/acvi --mode=decode \
        --input=clips.txt --output=captions.tsv      # clip ids (vidN), one per line
    python -m experiments.caption --model_dir=runs/table3/acvi --mode=export \
        --export_dir=exports/table3_acvi     # a SavedModel: features [B, frames, dim] in
    python -m experiments.caption --mode=extract_features --videos=data/msvd/YouTubeClips \
        --cnn_weights=bvlc_googlenet.npz --features=data/msvd/googlenet_pool5

The model is the one seq2seq machine (Section 2.2): a BiLSTM encoder over the 24
GoogLeNet ``pool5/7x7_s1`` frame features of a clip (``src`` [B, 24, 1024] with
``src_len``), an LSTM decoder with additive attention (Eq. 1), the softmax head
(Eq. 4) and any context variant of the registry (``--attention``). Every
(clip, caption) pair is a training example; evaluation decodes one caption per
clip (beam search) and scores it against ALL the clip's references with
pycocoevalcap over the whole split (``acvi_tf.metrics.caption``): ROUGE-L and
CIDEr-D as in Table 3, plus BLEU-4 and METEOR (when java is present). Scores
are stored and printed raw (0-1), as Table 3 prints them.

Features: ``--features`` is a feature store (``acvi_tf.data.video_features.FeatureStore``,
one [24, 1024] array per clip) made by ``--mode=extract_features`` from the MSVD
videos and the BVLC GoogLeNet weights, which the user supplies. No videos or
features exist on the development machines: ``--synthetic_features`` uses
deterministic random features per clip instead, so the whole path runs, and
every output (log, results.json, tables) says loudly that the numbers are from
SYNTHETIC features and say nothing about the paper.

Profiles (``--profile``; explicit flags win): ``paper`` (Section 4.2 and Appendix
B: 1000-d LSTM states, 100-d W_h/W_s, 256-d word embeddings, dropout 0.5, Adam
with default settings, beam 5; the training length is not given in the paper:
15K steps of 64 pairs, about 20 epochs, is our choice), ``cpu`` (reduced sizes
for 2 CPU cores), ``smoke`` (seconds; tests).

Everything a run needs lives in ``--model_dir``: ``model_config.json``,
``run_config.json``, ``flags.txt``, ``vocab.txt``, ``ckpt/``, TensorBoard logs
(``train/``, ``eval/``: val CIDEr-D / ROUGE-L, sample captions, an attention
heat-map over the frames), ``decode_{val,test}.tsv`` and ``results.json``.
``--mode=export`` writes a SavedModel whose ``serving_default`` takes the
features of a batch of clips and returns their captions
(:mod:`acvi_tf.export.captioning`).
"""

import logging

from absl import app, flags

from acvi_tf.tasks.caption_features import DEFAULT_VIDEOS, FeaturesMissing, extract_features
from acvi_tf.tasks.captioning import CaptioningConfig
from experiments import flags as xflags
from experiments import run_modes

FLAGS = flags.FLAGS
MODULE = "experiments.caption"

PROFILES = {
    # Section 4.2 / Appendix B. Not in the paper (our choices): head_units (the
    # hidden size of Eq. 4's V, taken = the LSTM size), clip_norm, batch size,
    # train_steps, max caption length (30 tokens keeps 99.99% of the captions).
    "paper": dict(
        embed_dim=256, encoder_units=1000, encoder_layers=1, decoder_units=1000,
        decoder_layers=1, attention_units=100, head_units=1000, dropout=0.5, score="additive",
        optimizer="adam", learning_rate=1e-3, lr_decay="none", clip_norm=5.0,
        train_steps=15_000, batch_size=64, max_length=30, overlong="filter", beam_width=5,
        decode_max_length=30, length_normalization="none", eval_every=1000, eval_subset=0,
        eval_beam_width=1, checkpoint_every=1000, log_every=100, min_count=1,
        allow_partial_data=False,
        # with --xla: captions of 8, 16, 24 or 32 steps (<s> + 30 tokens); the frames fixed
        pad_multiple=8),
    "cpu": dict(
        embed_dim=128, encoder_units=128, encoder_layers=1, decoder_units=256,
        decoder_layers=1, attention_units=100, head_units=256, dropout=0.5, score="additive",
        optimizer="adam", learning_rate=1e-3, lr_decay="none", clip_norm=5.0,
        train_steps=3000, batch_size=64, max_length=30, overlong="filter", beam_width=5,
        decode_max_length=30, length_normalization="none", eval_every=500, eval_subset=0,
        eval_beam_width=1, checkpoint_every=500,
        checkpoint_minutes=xflags.CPU_CHECKPOINT_MINUTES, log_every=50, min_count=2,
        allow_partial_data=False),
    "smoke": dict(
        embed_dim=16, encoder_units=16, encoder_layers=1, decoder_units=16, decoder_layers=1,
        attention_units=16, head_units=16, dropout=0.1, score="additive", optimizer="adam",
        learning_rate=1e-2, lr_decay="none", clip_norm=5.0, train_steps=6, batch_size=8,
        max_length=20, overlong="filter", beam_width=2, decode_max_length=12,
        length_normalization="none", eval_every=6, eval_subset=8, eval_beam_width=1,
        checkpoint_every=3, log_every=2, min_count=1, progress=False, meteor=False,
        allow_partial_data=True, decode_batch_size=64),
}


def check_flags(fv=FLAGS):
    xflags.check_run_flags(fv)
    if fv.diversity_samples:
        raise xflags.FlagError("diversity_samples", "only experiments.translate and "
                               "experiments.summarize run the sampled diversity protocol "
                               "so far")
    if fv.head != "softmax":
        raise xflags.FlagError("head", f"{fv.head!r}: captioning has no source words to copy; "
                               f"use softmax")


CLI = run_modes.Cli(MODULE, "caption", PROFILES, check_flags,
                    errors=((FeaturesMissing, ""),))
# --mode=extract_features makes a feature store, outside any run directory
MODES = CLI.modes("extract_features")


def define_flags(fv=FLAGS):
    """The shared flags (experiments.flags) and the captioning flags, in ``fv``.

    Called when the module runs as a program (not at import), so that importing it
    next to another task CLI (tables, tests) does not define the shared flags twice.
    """
    xflags.define_flags(PROFILES, default_profile="cpu", modes=MODES, flag_values=fv)
    kw = {"flag_values": fv}
    xflags.define_config_flags(CaptioningConfig, fv)
    flags.DEFINE_string("input", None, "--mode=decode: file of clip ids (vidN), one per "
                        "line (default: stdin).", **kw)
    flags.DEFINE_string("output", None, "--mode=decode: where to write 'vidN<TAB>caption' "
                        "lines (default: stdout).", **kw)
    flags.DEFINE_string("videos", DEFAULT_VIDEOS, "--mode=extract_features: the unpacked "
                        "YouTubeClips.tar (<YouTubeID>_<start>_<end>.avi).", **kw)
    flags.DEFINE_string("cnn_weights", None, "--mode=extract_features: BVLC GoogLeNet "
                        "weights (.npz/.npy Caffe-named arrays or a converted .weights.h5).",
                        **kw)
    flags.DEFINE_bool("allow_random_cnn", False, "--mode=extract_features without "
                      "--cnn_weights: a randomly initialised GoogLeNet (tests only; the "
                      "store is marked random-init).", **kw)


def main(argv):
    logging.getLogger("absl").setLevel(logging.WARNING)
    fv = FLAGS
    if fv.mode == "extract_features":
        run_modes.no_arguments(argv)
        return xflags.run_guarded(lambda: extract_features(
            fv.features, fv.videos, fv.cnn_weights, fv.allow_random_cnn, fv.progress),
            CLI.errors)
    return run_modes.main(CLI, argv, fv)


if __name__ == "__main__":
    define_flags()
    app.run(xflags.cli_main(main))
