r"""Video captioning on MSVD / Youtube2Text (Section 4.2, Appendix B, Table 3).

    python -m experiments.caption --flagfile=experiments/configs/table3_acvi.flags \
        --model_dir=runs/table3/acvi
    python -m experiments.caption --profile=smoke --synthetic_features --attention=soft \
        --model_dir=runs/caption_smoke          # no videos needed; numbers mean nothing
    python -m experiments.caption --model_dir=runs/table3/acvi --mode=eval
    python -m experiments.caption --model_dir=runs/table3/acvi --mode=decode \
        --input=clips.txt --output=captions.tsv      # clip ids (vidN), one per line
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
"""

import logging
import os
import sys

from absl import app, flags

from experiments import common
from experiments.common import FlagError
from acvi_tf.runs import ConfigError
from acvi_tf.tasks.captioning import (DEFAULT_FEATURES, DEFAULT_VIDEOS, SYNTHETIC_BANNER,  # noqa: F401
                                     FeaturesMissing, check_coverage, features_status,
                                     how_to_make_features, open_features)

FLAGS = flags.FLAGS
MODULE = "experiments.caption"
MODES = common.MODES + ("extract_features",)
SPLITS = ("val", "test")  # evaluated splits, in print order

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
        allow_partial_data=False),
    "cpu": dict(
        embed_dim=128, encoder_units=128, encoder_layers=1, decoder_units=256,
        decoder_layers=1, attention_units=100, head_units=256, dropout=0.5, score="additive",
        optimizer="adam", learning_rate=1e-3, lr_decay="none", clip_norm=5.0,
        train_steps=3000, batch_size=64, max_length=30, overlong="filter", beam_width=5,
        decode_max_length=30, length_normalization="none", eval_every=500, eval_subset=0,
        eval_beam_width=1, checkpoint_every=500, log_every=50, min_count=2,
        allow_partial_data=False),
    "smoke": dict(
        embed_dim=16, encoder_units=16, encoder_layers=1, decoder_units=16, decoder_layers=1,
        attention_units=16, head_units=16, dropout=0.1, score="additive", optimizer="adam",
        learning_rate=1e-2, lr_decay="none", clip_norm=5.0, train_steps=6, batch_size=8,
        max_length=20, overlong="filter", beam_width=2, decode_max_length=12,
        length_normalization="none", eval_every=3, eval_subset=8, eval_beam_width=1,
        checkpoint_every=3, log_every=2, min_count=1, progress=False,
        allow_partial_data=True, decode_batch_size=64),
}

DATA_FLAGS = ("split_scheme", "caption_source", "min_count", "max_vocab_size", "max_length",
              "overlong", "num_buckets")
# Saved with the run; eval/decode default to the saved values but may point elsewhere
# (a moved feature store).
FEATURE_FLAGS = ("features", "synthetic_features")
RUN_FLAGS = ("max_eval_clips", "allow_partial_data")

def define_flags(fv=FLAGS):
    """The shared flags (experiments.common) and the captioning flags, in ``fv``.

    Called when the module runs as a program (not at import), so that importing it
    next to another task CLI (tables, tests) does not define the shared flags twice.
    """
    common.define_flags(PROFILES, default_profile="cpu", modes=MODES, flag_values=fv)
    kw = {"flag_values": fv}
    flags.DEFINE_string("features", None, "Feature store of the clips (--mode="
                        "extract_features writes one); required unless --synthetic_features.",
                        **kw)
    flags.DEFINE_bool("synthetic_features", False, "Use deterministic RANDOM features per "
                      "clip (no videos needed). For testing the pipeline only: the results "
                      "are labelled SYNTHETIC and are not results.", **kw)
    flags.DEFINE_enum("split_scheme", "paper", ("paper", "s2vt"), "Clip split: paper "
                      "(1,200 / 100 / last 600) or s2vt (1,200 / 100 / 670).", **kw)
    flags.DEFINE_enum("caption_source", "s2vt", ("s2vt", "all_descriptions"), "Caption "
                      "files: the S2VT sents_*.txt, or AllVideoDescriptions.txt.", **kw)
    flags.DEFINE_integer("min_count", 1, "Caption words seen fewer times in training "
                         "become <unk>.", lower_bound=1, **kw)
    flags.DEFINE_integer("max_vocab_size", None, "Cap on the vocabulary (specials "
                         "included).", lower_bound=5, **kw)
    flags.DEFINE_integer("max_length", 30, "Training captions longer than this (tokens).",
                         lower_bound=1, **kw)
    flags.DEFINE_enum("overlong", "filter", ("filter", "truncate"), "Training captions "
                      "beyond --max_length: drop or cut them.", **kw)
    flags.DEFINE_integer("num_buckets", 5, "Caption-length buckets of the training "
                         "batches.", lower_bound=1, **kw)
    flags.DEFINE_integer("max_eval_clips", None, "Evaluate on the first N val/test clips "
                         "only (quick runs; results say so, and CIDEr-D on a subset is not "
                         "comparable with the split's).", lower_bound=1, **kw)
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


# ---------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

class CaptionData:
    """Splits, vocabulary and features of a run.

    ``splits``: {"train" | "val" | "test": msvd.CaptionSplit}, val/test cut to
    ``max_eval_clips``; ``features``: the store; ``arrays(split)``: its clips'
    features [num_clips, num_frames, dim], cached.
    """

    def __init__(self, splits, vocab, features, partial, report):
        self.splits, self.vocab, self.features = splits, vocab, features
        self.partial, self.report = partial, report
        self.num_frames = int(features.metadata["num_frames"])
        self.dim = int(features.metadata["dim"])
        self._arrays = {}

    def arrays(self, split):
        if split not in self._arrays:
            self._arrays[split] = self.features.get_batch(self.splits[split].clips)
        return self._arrays[split]

    def encode_pairs(self, split):
        """(clip row + 1 as a 1-token "source", caption ids) for :class:`Batches`."""
        s = self.splits[split]
        row = {c: i for i, c in enumerate(s.clips)}
        pairs = s.pairs()
        return ([[row[c] + 1] for c, _ in pairs], [self.vocab.encode(t) for _, t in pairs])

    def batches(self, split, batch_size, fv, shuffle=True):
        """Bucketed, resumable batches of (clip, caption) pairs (``translation.Batches``):
        the source "sequence" is the clip's row, swapped for its features by
        :meth:`with_features`."""
        from acvi_tf.data.translation import Batches
        src, tgt = self.encode_pairs(split)
        return Batches(src, tgt, batch_size, seed=fv.seed, shuffle=shuffle, bucketing=shuffle,
                       num_buckets=fv.num_buckets, max_src_len=None,
                       max_tgt_len=fv.max_length if shuffle else None,
                       overlong=fv.overlong, prefetch=shuffle)

    def with_features(self, split):
        """batch with ``src`` = clip rows -> ``src`` [B, N, F] features, ``src_len`` [B]."""
        import numpy as np
        feats = self.arrays(split)

        def transform(batch):
            rows = np.asarray(batch["src"])[:, 0] - 1
            return {"src": feats[rows], "src_len": np.full(len(rows), self.num_frames, np.int32),
                    "tgt_in": batch["tgt_in"], "tgt_out": batch["tgt_out"]}
        return transform

    def feature_batch(self, split, rows):
        import numpy as np
        return {"src": self.arrays(split)[rows],
                "src_len": np.full(len(rows), self.num_frames, np.int32)}


def load_data(model_dir, fv=FLAGS, log=print, store=None, check_features=True):
    """Captions, splits and the vocabulary (from ``model_dir`` if saved there).

    ``check_features``: every clip of every split must have features (training and
    evaluation); decoding checks only the clips it is asked for.
    """
    from acvi_tf.data import msvd, sources
    from acvi_tf.data.vocab import Vocab
    store = store or open_features(fv.features, fv.synthetic_features, log)
    partial, lines = False, []
    if fv.caption_source == "s2vt":
        for fname in msvd.SPLIT_FILES.values():
            message, is_partial = sources.completeness(msvd.NAME, fname)
            partial |= bool(is_partial)
            lines.append(message)
    splits = msvd.load_splits(fv.split_scheme, fv.caption_source)
    for split in ("val", "test"):
        if fv.max_eval_clips:
            s = splits[split]
            clips = s.clips[:fv.max_eval_clips]
            splits[split] = msvd.CaptionSplit(s.name, clips, {c: s.captions[c] for c in clips})
    for split, s in splits.items():
        if check_features:
            check_coverage(store, s.clips, f"{fv.split_scheme} {split}")
    path = os.path.join(model_dir, "vocab.txt")
    if os.path.exists(path):
        vocab = Vocab.load(path)
    else:
        vocab = msvd.build_vocab(splits["train"], min_count=fv.min_count,
                                 max_size=fv.max_vocab_size)
        os.makedirs(model_dir, exist_ok=True)
        vocab.save(path)
    lines.append(f"msvd {fv.split_scheme} split: " + ", ".join(
        f"{k} {len(s.clips):,} clips / {s.num_captions:,} captions" for k, s in splits.items())
        + f"; vocabulary {len(vocab):,}")
    return CaptionData(splits, vocab, store, partial, "\n".join(lines))


def model_config(data, fv=FLAGS):
    from acvi_tf.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID
    return common.model_config_from_flags(
        fv, src_vocab_size=None, feature_dim=data.dim, tgt_vocab_size=len(data.vocab),
        pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID)


# ---------------------------------------------------------------------------
# Decoding and evaluation
# ---------------------------------------------------------------------------

class Captioner:
    """One caption per clip (greedy or beam search), batched, in clip order."""

    def __init__(self, model, data, beam_width=1, max_length=30, min_length=0,
                 length_normalization="none", alpha=0.6, batch_size=64):
        import tensorflow as tf
        self.data, self.batch_size = data, batch_size
        self._decode = common.best_hypothesis_decoder(
            model, {"src": tf.TensorSpec([None, None, data.dim], tf.float32),
                    "src_len": tf.TensorSpec([None], tf.int32)},
            beam_width=beam_width, max_length=max_length, min_length=min_length,
            length_normalization=length_normalization, alpha=alpha)

    def caption(self, split, rows, attention_for=()):
        """Captions (token strings) of the clips at ``rows`` of ``split``."""
        lengths = [self.data.num_frames] * len(rows)
        hyp_ids, attention = common.decode_in_batches(
            self._decode, lengths, lambda idx: self.data.feature_batch(split, [rows[i] for i in idx]),
            self.batch_size, attention_for)
        return [" ".join(self.data.vocab.decode(ids)) for ids in hyp_ids], attention


class Evaluator:
    """Val/test decoding, the coco-caption scores and the Trainer's ``eval_fn``."""

    def __init__(self, data, fv=FLAGS, log=None):
        self.data, self.fv = data, fv
        self.log = log or _log
        self._captioners = {}
        self._loss = None
        self.final_val = None  # (step, hyps, scores) of the end-of-training val decode
        self.final_diagnostics = None  # the scalars of that evaluation

    def captioner(self, model, final):
        opts = common.decode_options(self.fv, final=final)
        key = (id(model), tuple(sorted(opts.items())))
        if key not in self._captioners:
            self._captioners[key] = Captioner(model, self.data,
                                              batch_size=self.fv.decode_batch_size, **opts)
        return self._captioners[key]

    def score(self, model, split, final=True, subset=0, metrics=("BLEU", "METEOR", "ROUGE-L",
                                                                  "CIDEr-D"),
              attention_for=()):
        """``({clip: caption}, scores, attention)``; scores raw (0-1), over the clips
        decoded (the whole split unless ``subset``)."""
        from acvi_tf.metrics.caption import score_captions
        s = self.data.splits[split]
        clips = s.clips[:subset] if subset else s.clips
        hyps, attention = self.captioner(model, final).caption(split, list(range(len(clips))),
                                                               attention_for)
        hyps = dict(zip(clips, hyps))
        refs = {c: [" ".join(t) for t in s.captions[c]] for c in clips}
        return hyps, score_captions(hyps, refs, metrics=metrics, scale=1.0), attention

    def val_diagnostics(self, model):
        """Per-token val NLL and the run diagnostics (acvi_tf.training.diagnostics: KL per
        token, attention entropy, ||h||, sigma, context use) over every val caption."""
        import tensorflow as tf
        from acvi_tf.training.diagnostics import DevDiagnostics
        if self._loss is None:
            batches = self.data.batches("val", self.fv.decode_batch_size, self.fv, shuffle=False)
            self._loss = (batches, self.data.with_features("val"), DevDiagnostics())
        batches, transform, diagnostics = self._loss
        return diagnostics(model, ({k: tf.convert_to_tensor(v) for k, v in
                                    transform(batch).items()} for batch in batches.dataset()))

    def eval_fn(self, model, step):
        from acvi_tf.training import summaries
        final = step >= self.fv.train_steps
        subset = 0 if final else self.fv.eval_subset
        watch = common.Stopwatch()
        # METEOR's jar costs ~15 s to start: the final evaluation only.
        hyps, scores, attention = self.score(model, "val", final=final, subset=subset,
                                             metrics=("BLEU", "ROUGE-L", "CIDEr-D"),
                                             attention_for=(0,))
        if final:
            self.final_val = (step, hyps, scores)
        diag = self.val_diagnostics(model)
        scalars = {f"val_{k.replace('-', '_')}": v for k, v in scores.items()}
        scalars.update(val_nll=diag.pop("dev_nll"), val_ppl=diag.pop("dev_ppl"), **diag,
                       val_decode_seconds=watch.seconds())
        if final:
            self.final_diagnostics = scalars
        s = self.data.splits["val"]
        texts = {f"sample_{i}": f"**clip:** {c}\n\n**refs:** {' / '.join(' '.join(t) for t in s.captions[c][:3])}"
                 f"\n\n**hyp:** {hyps[c]}" for i, c in enumerate(list(hyps)[:2])}
        if not self.data.features.pretrained:
            texts["WARNING"] = "features are SYNTHETIC or from a random CNN: not results"
        images = {}
        if 0 in attention and attention[0].size:
            images["attention_sample_0"] = summaries.attention_image(attention[0])
        return {"scalars": scalars, "texts": texts, "images": images}


# ---------------------------------------------------------------------------
# Modes
# ---------------------------------------------------------------------------

def _save_run_config(model_dir, fv=FLAGS):
    names = (DATA_FLAGS + FEATURE_FLAGS + common.MODEL_FLAGS + common.TRAIN_FLAGS
             + common.DECODE_FLAGS + RUN_FLAGS)
    common.save_run_config(model_dir, MODULE, names, None, fv)


def _build_batch(model_dir):
    """A one-example batch of the trained model's feature size (to build it for restore)."""
    import numpy as np
    dim = common.load_json(os.path.join(model_dir, "model_config.json"))["feature_dim"]
    return {"src": np.zeros([1, 2, dim], np.float32), "src_len": np.asarray([2], np.int32),
            "tgt_in": np.asarray([[2, 4]], np.int32), "tgt_out": np.asarray([[4, 3]], np.int32)}


def run_train(model_dir, data, fv=FLAGS):
    """Trains (resuming from model_dir if possible); returns (model, evaluator, info)."""
    from acvi_tf.training.trainer import Trainer
    watch = common.Stopwatch()
    batches = data.batches("train", fv.batch_size, fv)
    epochs = fv.train_steps / batches.num_batches()
    _log(f"train: {batches.num_examples:,} (clip, caption) pairs ({batches.num_filtered:,} "
         f"longer than {fv.max_length} tokens {'dropped' if fv.overlong == 'filter' else 'cut'}), "
         f"{batches.num_batches():,} batches per epoch ({epochs:.2f} epochs)")
    config = model_config(data, fv)
    common.check_model_config(model_dir, config)
    _save_run_config(model_dir, fv)
    evaluator = Evaluator(data, fv)
    trainer = Trainer(lambda: common.build_model(config),
                      common.train_config_from_flags(model_dir, fv),
                      common.resumable_train_data(batches.iterator, data.with_features("train")),
                      eval_fn=evaluator.eval_fn, strategy=common.make_strategy(fv), log=_log,
                      warm_start=common.warm_start_fn(
                          fv.init_from, model_dir,
                          _build_batch(fv.init_from) if fv.init_from else None, _log))
    metrics = trainer.train()
    info = {"steps": int(trainer.step.numpy()), "train_wall_time_sec": watch.seconds(),
            "train_metrics": {k: float(v) for k, v in metrics.items()},
            "train_pairs": batches.num_examples, "epochs": epochs,
            "train_data_partial": data.partial, "train_command": common.command_line(MODULE),
            "diagnostics": evaluator.final_diagnostics}
    return trainer.model, evaluator, info


def run_eval(model, evaluator, model_dir, step, fv=FLAGS):
    """Beam-decodes val and test, scores them, writes ``decode_{split}.tsv``."""
    from acvi_tf.metrics.caption import format_scores
    watch = common.Stopwatch()
    out = {}
    for split in SPLITS:
        if split == "val" and evaluator.final_val and evaluator.final_val[0] == step:
            # Reuse the end-of-training decode; only METEOR is still missing.
            hyps, scores = evaluator.final_val[1], dict(evaluator.final_val[2])
            from acvi_tf.metrics.caption import ALL_METRICS, score_captions
            s = evaluator.data.splits[split]
            scores.update(score_captions(hyps, {c: [" ".join(t) for t in s.captions[c]]
                                                for c in hyps}, metrics=("METEOR",), scale=1.0))
            scores = {k: scores[k] for k in ALL_METRICS if k in scores}
        else:
            hyps, scores, _ = evaluator.score(model, split, final=True)
        path = os.path.join(model_dir, f"decode_{split}.tsv")
        common.write_text(path, "\n".join(f"{c}\t{h}" for c, h in hyps.items()))
        out[split] = {"scores": scores, "clips": len(hyps), "decode_file": path}
        warning = "" if evaluator.data.features.pretrained else (
            "  [SYNTHETIC features: not results]" if evaluator.data.features.synthetic
            else "  [random-CNN features: not results]")
        print(f"{split} ({len(hyps)} clips, raw 0-1) {format_scores(scores, digits=4)}{warning}",
              flush=True)
    return out, watch.seconds()


def _finish(model_dir, data, split_results, eval_seconds, step, fv=FLAGS, extra=None):
    provenance = data.features.provenance()
    result = {
        "task": "caption", "dataset": "msvd", "system": common.system_name(fv), "attention": fv.attention,
        "profile": fv.profile, "steps": step, "split_scheme": fv.split_scheme,
        "scores": {s: r["scores"] for s, r in split_results.items()}, "score_scale": "raw (0-1)",
        "splits": split_results, "features": provenance,
        "synthetic_features": bool(provenance["synthetic"]),
        "pretrained_features": bool(provenance["pretrained"]),
        "command": common.command_line(MODULE), "argv": sys.argv,
        "eval_wall_time_sec": eval_seconds, "decode": common.decode_options(fv, final=True),
        "partial_eval": bool(fv.max_eval_clips), "data_report": data.report}
    if provenance["synthetic"]:
        result["WARNING"] = ("SYNTHETIC features: these scores test the pipeline and say "
                             "nothing about the paper")
    result.update(extra or {})
    out = common.finish_results(model_dir, result, _log)
    if provenance["synthetic"]:
        _log(SYNTHETIC_BANNER)
    return out


def run_decode(model, data, fv=FLAGS):
    """Clip ids (``--input`` or stdin) -> ``clip<TAB>caption`` (``--output`` or stdout)."""
    from acvi_tf.data import msvd
    if fv.input:
        with open(fv.input, encoding="utf-8") as f:
            clips = [line.strip() for line in f if line.strip()]
    else:
        clips = [line.strip() for line in sys.stdin if line.strip()]
    for c in clips:
        try:
            msvd.vid_number(c)
        except ValueError as e:
            raise FlagError("input", str(e)) from None
    check_coverage(data.features, clips, "requested")
    data.splits["decode"] = msvd.CaptionSplit("decode", clips, {c: [] for c in clips})
    opts = common.decode_options(fv, final=True)
    hyps, _ = Captioner(model, data, batch_size=fv.decode_batch_size, **opts).caption(
        "decode", list(range(len(clips))))
    text = "".join(f"{c}\t{h}\n" for c, h in zip(clips, hyps))
    if fv.output:
        with open(fv.output, "w", encoding="utf-8") as f:
            f.write(text)
        _log(f"wrote {len(hyps)} captions to {fv.output}")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def run_extract(fv=FLAGS):
    """Videos -> GoogLeNet pool5 features of 24 frames per clip -> the feature store."""
    from acvi_tf.data import msvd
    from acvi_tf.data import video_features as vf
    if not fv.features:
        raise FlagError("features", "is required: the feature store to write")
    if not fv.cnn_weights and not fv.allow_random_cnn:
        raise FlagError("cnn_weights", "is required: the BVLC GoogLeNet weights.\n"
                        + how_to_make_features(fv.features))
    if fv.cnn_weights and not os.path.exists(fv.cnn_weights):
        raise FlagError("cnn_weights", f"file not found: {fv.cnn_weights}")
    paths, missing = msvd.video_paths(fv.videos)
    if missing:
        _log(f"{fv.videos}: {len(missing)} of {len(missing) + len(paths)} clips have no video "
             f"file (e.g. {', '.join(missing[:5])}); they get no features")
    if not paths:
        raise SystemExit(f"error: no MSVD video found in {fv.videos}\n"
                         + how_to_make_features(fv.features))
    model = vf.GoogLeNetFeatures(fv.cnn_weights)
    store = vf.FeatureStore.create(fv.features, weights=model.weights_source)
    todo = [c for c in paths if c not in store]
    _log(f"extracting {len(todo)} clips ({len(paths) - len(todo)} already in {fv.features})")
    done = vf.extract_features(vf.iter_video_files({c: paths[c] for c in todo}), model, store,
                               progress=lambda c: _log(f"  {c}") if fv.progress else None)
    _log(f"{fv.features}: {done} clips extracted, {len(store)} in the store")
    return 0


def dry_run(model_dir, fv=FLAGS):
    """Prints the command, the caption and feature status; exit 3 if features are missing."""
    from acvi_tf.data import msvd
    command = common.command_line(MODULE, [a for a in sys.argv[1:] if a != "--dry_run"])
    print(f"command: {command}")
    print(f"profile: {fv.profile}; --attention={fv.attention}; model_dir: {model_dir}")
    for line in msvd.counts_report(fv.caption_source, scheme=fv.split_scheme):
        print(f"  {line}")
    ok, lines = features_status(fv.features, fv.synthetic_features, fv.split_scheme)
    print("\n".join(lines))
    if ok:
        return 0
    print(how_to_make_features(fv.features or DEFAULT_FEATURES))
    return 3


def check_flags(fv=FLAGS):
    common.check_run_flags(fv)
    if fv.head != "softmax":
        raise FlagError("head", f"{fv.head!r}: captioning has no source words to copy; use "
                        f"softmax")


_log = common.log


def main(argv):
    logging.getLogger("absl").setLevel(logging.WARNING)
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    fv = FLAGS
    if fv.mode == "extract_features":
        return run_extract(fv)
    model_dir = common.require_model_dir(fv) if not fv.dry_run or fv.model_dir else None
    saved = common.resolve_run_flags(model_dir, fv.mode, PROFILES,
                                     DATA_FLAGS + common.MODEL_FLAGS, fv)
    if saved:
        for name in FEATURE_FLAGS:
            if name in saved["flags"] and not common.explicit(name, fv):
                fv.set_default(name, saved["flags"][name])
    check_flags(fv)
    if fv.dry_run:
        return dry_run(model_dir, fv)

    from acvi_tf.data.sources import DataError
    try:
        data = load_data(model_dir, fv, log=_log, check_features=fv.mode != "decode")
        _log(data.report)
        if fv.mode in ("train", "train_eval"):
            if data.partial and not fv.allow_partial_data:
                raise SystemExit(
                    f"error: the msvd caption files are partial copies and --profile="
                    f"{fv.profile} needs them whole. Get them: {data_how_to_get()}. Or pass "
                    f"--allow_partial_data.")
            model, evaluator, info = run_train(model_dir, data, fv)
            if fv.mode == "train":
                common.update_results(model_dir, **info)
                return 0
            results, seconds = run_eval(model, evaluator, model_dir, info["steps"], fv)
            _finish(model_dir, data, results, seconds, info["steps"], fv, extra=info)
            return 0
        model, step = common.load_model(model_dir, _build_batch(model_dir))
        if fv.mode == "decode":
            run_decode(model, data, fv)
            return 0
        results, seconds = run_eval(model, Evaluator(data, fv), model_dir, step, fv)
        _finish(model_dir, data, results, seconds, step, fv)
        return 0
    except FeaturesMissing as e:
        raise SystemExit(f"error: {e}") from None
    except ConfigError as e:
        raise FlagError(e.field, e.detail) from None
    except DataError as e:
        raise SystemExit(f"error: data missing or malformed: {e}") from None
    except FileNotFoundError as e:
        raise SystemExit(f"error: {e}") from None


def data_how_to_get():
    from acvi_tf.data import sources
    s = sources.get("msvd")
    return f"{s.how_to_get} (local mirror: $ACVI_DATA_MIRROR/msvd/)"


if __name__ == "__main__":
    define_flags()
    app.run(main)
