"""Video captioning on MSVD / Youtube2Text (Section 4.2, Appendix B, Table 3) as a task.

The model is the one seq2seq machine over the 24 GoogLeNet frame features of a clip
(``src`` [B, 24, 1024] with ``src_len``). :class:`CaptioningTask` owns the captions,
the vocabulary and the feature store (or labelled SYNTHETIC features:
:mod:`acvi_tf.tasks.caption_features`), the batching
(:mod:`acvi_tf.data.batching`), and the evaluation: one beam-search caption per clip
scored against all its references with pycocoevalcap (:class:`CaptioningEvaluator`).
It takes a :class:`CaptioningConfig`, a :class:`~acvi_tf.tasks.base.DecodeConfig` and a
:class:`~acvi_tf.tasks.base.RunInfo`.
"""

import dataclasses
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from acvi_tf.data import msvd, sources
from acvi_tf.data.batching import Batches
from acvi_tf.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab
from acvi_tf.errors import ConfigError
from acvi_tf.metrics.caption import ALL_METRICS, format_scores, score_captions
from acvi_tf.run.directory import check_vocab_size, save_vocab
from acvi_tf.tasks.base import (Evaluator, Task, TrainingData, pad_to_multiple,
                                register_task, resumable_train_data, system_name)
from acvi_tf.tasks.caption_features import (CLI, DEFAULT_FEATURES,  # noqa: F401
                                            SYNTHETIC_BANNER, check_coverage,
                                            features_status, how_to_make_features,
                                            open_features)
from acvi_tf.tasks.decode_batches import BatchedDecoder
from acvi_tf.training import summaries
from acvi_tf.training.diagnostics import DevDiagnostics
from acvi_tf.utils.files import load_json, write_text
from acvi_tf.utils.progress import Stopwatch, log
from acvi_tf.utils.settings import ADOPTED, SAVED, setting

SPLITS = ("val", "test")  # evaluated splits, in print order


@dataclasses.dataclass
class CaptioningConfig:
    """The data of a captioning run, one declaration per setting (a field with help is a
    flag of experiments.caption; ``batch_size``, ``seed``, ``pad_multiple`` are the shared
    flags of those names). The feature store is adopted from a trained run (it may have
    moved: an explicit one wins), the evaluation's settings only saved with it."""
    features: Optional[str] = setting(None, "Feature store of the clips (--mode="
                                      "extract_features writes one); required unless "
                                      "--synthetic_features.", restore=ADOPTED)
    synthetic_features: bool = setting(False, "Use deterministic RANDOM features per clip (no "
                                       "videos needed). For testing the pipeline only: the "
                                       "results are labelled SYNTHETIC and are not results.",
                                       restore=ADOPTED)
    split_scheme: str = setting("paper", "Clip split: paper (1,200 / 100 / last 600) or s2vt "
                                "(1,200 / 100 / 670).", choices=("paper", "s2vt"))
    caption_source: str = setting("s2vt", "Caption files: the S2VT sents_*.txt, or "
                                  "AllVideoDescriptions.txt.",
                                  choices=("s2vt", "all_descriptions"))
    min_count: int = setting(1, "Caption words seen fewer times in training become <unk>.",
                             lower_bound=1)
    max_vocab_size: Optional[int] = setting(None, "Cap on the vocabulary (specials included).",
                                            lower_bound=5)
    max_length: int = setting(30, "Training captions longer than this (tokens).",
                              lower_bound=1)
    overlong: str = setting("filter", "Training captions beyond --max_length: drop or cut "
                            "them.", choices=("filter", "truncate"))
    num_buckets: int = setting(5, "Caption-length buckets of the training batches.",
                               lower_bound=1)
    max_eval_clips: Optional[int] = setting(
        None, "Evaluate on the first N val/test clips only (quick runs; results say so, and "
        "CIDEr-D on a subset is not comparable with the split's).", lower_bound=1,
        restore=SAVED)
    meteor: bool = setting(True, "Score METEOR 1.5 too (when java is present); its jar takes "
                           "~15 s to start, so the smoke profile skips it.", restore=SAVED)
    batch_size: int = 64                 # training pairs per batch
    seed: int = 0                        # data order
    pad_multiple: int = 0                # pad caption lengths to a multiple (XLA shapes)


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

    def batches(self, split, batch_size, config, shuffle=True):
        """Bucketed, resumable batches of (clip, caption) pairs
        (:class:`acvi_tf.data.batching.Batches`):
        the source "sequence" is the clip's row, swapped for its features by
        :meth:`with_features`."""
        src, tgt = self.encode_pairs(split)
        return Batches(src, tgt, batch_size, seed=config.seed, shuffle=shuffle, bucketing=shuffle,
                       num_buckets=config.num_buckets, max_src_len=None,
                       max_tgt_len=config.max_length if shuffle else None,
                       overlong=config.overlong, prefetch=shuffle)

    def with_features(self, split):
        """batch with ``src`` = clip rows -> ``src`` [B, N, F] features, ``src_len`` [B]."""
        feats = self.arrays(split)

        def transform(batch):
            rows = np.asarray(batch["src"])[:, 0] - 1
            return {"src": feats[rows], "src_len": np.full(len(rows), self.num_frames, np.int32),
                    "tgt_in": batch["tgt_in"], "tgt_out": batch["tgt_out"]}
        return transform

    def feature_batch(self, split, rows):
        return {"src": self.arrays(split)[rows],
                "src_len": np.full(len(rows), self.num_frames, np.int32)}


def train_transform(with_features, pad_multiple=0):
    """A training batch of clip rows -> the model's batch: the clips' features (a fixed
    number of frames), and the captions padded up to ``pad_multiple``."""
    def transform(batch):
        return pad_to_multiple(with_features(batch), pad_multiple, keys=("tgt_in", "tgt_out"))
    return transform


def caption_files(source):
    """``(partial, lines)``: the S2VT caption files against their official line counts
    (AllVideoDescriptions.txt has none to check)."""
    partial, lines = False, []
    if source == "s2vt":
        for fname in msvd.SPLIT_FILES.values():
            message, is_partial = sources.completeness(msvd.NAME, fname)
            partial |= bool(is_partial)
            lines.append(message)
    return partial, lines


def load_data(model_dir, config, log=print, store=None, check_features=True):
    """Captions, splits and the vocabulary (from ``model_dir`` if saved there).

    ``check_features``: every clip of every split must have features (training and
    evaluation); decoding checks only the clips it is asked for.
    """
    store = store or open_features(config.features, config.synthetic_features, log)
    partial, lines = caption_files(config.caption_source)
    splits = msvd.load_splits(config.split_scheme, config.caption_source)
    for split in ("val", "test"):
        if config.max_eval_clips:
            s = splits[split]
            clips = s.clips[:config.max_eval_clips]
            splits[split] = msvd.CaptionSplit(s.name, clips, {c: s.captions[c] for c in clips})
    for split, s in splits.items():
        if check_features:
            check_coverage(store, s.clips, f"{config.split_scheme} {split}")
    path = os.path.join(model_dir, "vocab.txt")
    if os.path.exists(path):
        vocab = Vocab.load(path)
        check_vocab_size(model_dir, "vocab.txt", len(vocab), "tgt_vocab_size")
    else:
        vocab = msvd.build_vocab(splits["train"], min_count=config.min_count,
                                 max_size=config.max_vocab_size)
        os.makedirs(model_dir, exist_ok=True)
        save_vocab(vocab, model_dir, "vocab.txt")
    lines.append(f"msvd {config.split_scheme} split: " + ", ".join(
        f"{k} {len(s.clips):,} clips / {s.num_captions:,} captions" for k, s in splits.items())
        + f"; vocabulary {len(vocab):,}")
    return CaptionData(splits, vocab, store, partial, "\n".join(lines))


class Captioner:
    """One caption per clip (greedy or beam search), batched, in clip order."""

    def __init__(self, model, data, batch_size=64, **opts):
        self.model, self.data, self.opts = model, data, opts
        self._decoder = BatchedDecoder({"src": tf.TensorSpec([None, None, data.dim], tf.float32),
                                        "src_len": tf.TensorSpec([None], tf.int32)}, batch_size)

    def caption(self, split, rows, attention_for=()):
        """Captions (token strings) of the clips at ``rows`` of ``split``."""
        hyp_ids, attention = self._decoder.decode(
            self.model, self.opts, [self.data.num_frames] * len(rows),
            lambda idx: self.data.feature_batch(split, [rows[i] for i in idx]), attention_for)
        return [" ".join(self.data.vocab.decode(ids)) for ids in hyp_ids], attention


class CaptioningEvaluator(Evaluator):
    """Val/test decoding, the coco-caption scores and the Trainer's ``eval_fn``."""

    def __init__(self, data, config, decode, train_steps=0, log=log):
        self.data, self.config, self.decode = data, config, decode
        self.train_steps = train_steps
        self.log = log
        self._captioners = {}
        self._loss = None
        self.final_val = None  # (step, hyps, scores) of the end-of-training val decode
        self.final_diagnostics = None  # the scalars of that evaluation

    def captioner(self, model, final):
        opts = self.decode.options(final=final)
        key = (id(model), tuple(sorted(opts.items())))
        if key not in self._captioners:
            self._captioners[key] = Captioner(model, self.data,
                                              batch_size=self.decode.decode_batch_size, **opts)
        return self._captioners[key]

    def score(self, model, split, final=True, subset=0, meteor=None, attention_for=()):
        """``({clip: caption}, scores, attention)``; scores raw (0-1), over the clips
        decoded (the whole split unless ``subset``): BLEU, ROUGE-L, CIDEr-D and METEOR if
        ``meteor`` (default: the config's ``meteor``)."""
        meteor = self.config.meteor if meteor is None else meteor
        metrics = ("BLEU", "ROUGE-L", "CIDEr-D") + (("METEOR",) if meteor else ())
        s = self.data.splits[split]
        clips = s.clips[:subset] if subset else s.clips
        hyps, attention = self.captioner(model, final).caption(split, list(range(len(clips))),
                                                               attention_for)
        hyps = dict(zip(clips, hyps))
        refs = {c: [" ".join(t) for t in s.captions[c]] for c in clips}
        return hyps, score_captions(hyps, refs, metrics=metrics, scale=1.0), attention

    def dev_diagnostics(self, model):
        """Per-token val NLL and the run diagnostics (acvi_tf.training.diagnostics: KL per
        token, attention entropy, ||h||, sigma, context use) over every val caption."""
        if self._loss is None:
            batches = self.data.batches("val", self.decode.decode_batch_size, self.config,
                                        shuffle=False)
            self._loss = (batches, self.data.with_features("val"), DevDiagnostics())
        batches, transform, diagnostics = self._loss
        return diagnostics(model, ({k: tf.convert_to_tensor(v) for k, v in
                                    transform(batch).items()} for batch in batches.dataset()))

    def eval_fn(self, model, step, final=None):
        final = step >= self.train_steps if final is None else final
        subset = 0 if final else self.decode.eval_subset
        watch = Stopwatch()
        # METEOR's jar costs ~15 s to start: the final evaluation only.
        hyps, scores, attention = self.score(model, "val", final=final, subset=subset,
                                             meteor=False, attention_for=(0,))
        if final:
            self.final_val = (step, hyps, scores)
        diag = self.dev_diagnostics(model)
        scalars = {f"val_{k.replace('-', '_')}": v for k, v in scores.items()}
        # The diagnostics keep their names (dev_nll, dev_ppl, ...): val is the dev split.
        scalars.update(**diag, val_decode_seconds=watch.seconds())
        if final:
            self.final_diagnostics = scalars
        s = self.data.splits["val"]
        texts = {f"sample_{i}": f"**clip:** {c}\n\n**refs:** {' / '.join(' '.join(t) for t in s.captions[c][:3])}"
                 f"\n\n**hyp:** {hyps[c]}" for i, c in enumerate(list(hyps)[:2])}
        if not self.data.features.pretrained:
            texts["WARNING"] = "features are SYNTHETIC or from a random CNN: not results"
        return summaries.eval_output(scalars, texts, attention=attention)

    def evaluate(self, model, step, model_dir):
        """Beam-decodes val and test, scores them, writes ``decode_{split}.tsv``; returns
        ``(split results, seconds)``."""
        watch = Stopwatch()
        out = {}
        for split in SPLITS:
            if split == "val" and self.final_val and self.final_val[0] == step:
                # Reuse the end-of-training decode; only METEOR is still missing.
                hyps, scores = self.final_val[1], dict(self.final_val[2])
                s = self.data.splits[split]
                if self.config.meteor:
                    scores.update(score_captions(
                        hyps, {c: [" ".join(t) for t in s.captions[c]] for c in hyps},
                        metrics=("METEOR",), scale=1.0))
                scores = {k: scores[k] for k in ALL_METRICS if k in scores}
            else:
                hyps, scores, _ = self.score(model, split, final=True)
            path = os.path.join(model_dir, f"decode_{split}.tsv")
            write_text(path, "\n".join(f"{c}\t{h}" for c, h in hyps.items()))
            out[split] = {"scores": scores, "clips": len(hyps), "decode_file": path}
            warning = "" if self.data.features.pretrained else (
                "  [SYNTHETIC features: not results]" if self.data.features.synthetic
                else "  [random-CNN features: not results]")
            print(f"{split} ({len(hyps)} clips, raw 0-1) {format_scores(scores, digits=4)}{warning}",
                  flush=True)
        return out, watch.seconds()


def model_config(arch, data):
    """``arch`` (a ModelConfig of the architecture) over ``data``'s features and vocabulary."""
    return dataclasses.replace(arch, src_vocab_size=None, feature_dim=data.dim,
                               tgt_vocab_size=len(data.vocab), pad_id=PAD_ID, unk_id=UNK_ID,
                               bos_id=BOS_ID, eos_id=EOS_ID)


def build_batch(model_dir):
    """A one-example batch of the trained model's feature size (to build it for restore)."""
    dim = load_json(os.path.join(model_dir, "model_config.json"))["feature_dim"]
    return {"src": np.zeros([1, 2, dim], np.float32), "src_len": np.asarray([2], np.int32),
            "tgt_in": np.asarray([[2, 4]], np.int32), "tgt_out": np.asarray([[4, 3]], np.int32)}


@register_task("caption")
class CaptioningTask(Task):
    """Captioning: captions, vocabulary and features, training on (clip, caption) pairs,
    coco-caption evaluation and decoding of clips."""

    CONFIG = CaptioningConfig
    DATASET = "msvd"
    OUTPUTS = "captions"

    def __init__(self, config, decode=None, run=None, log=log):
        super().__init__(config, decode, run, log)
        self.data = None

    def describe(self):
        return f"msvd {self.config.split_scheme} split"

    def data_status(self):
        """``(complete, lines)``: the caption files and the features of every clip (with
        the recipe for features when they are missing)."""
        c = self.config
        partial, _ = caption_files(c.caption_source)
        lines = [f"  {line}" for line in msvd.counts_report(c.caption_source,
                                                            scheme=c.split_scheme)]
        ok, feature_lines = features_status(c.features, c.synthetic_features, c.split_scheme)
        recipe = [] if ok else [how_to_make_features(c.features or DEFAULT_FEATURES)]
        return ok and not partial, lines + feature_lines + recipe

    def how_to_get(self):
        return f"{super().how_to_get()}; features: python -m {CLI} --mode=extract_features"

    def load_data(self, model_dir, read_only=False):
        """Captions, splits, vocabulary and features (:func:`load_data`); decode and export
        check the features of the clips they read only."""
        self.data = load_data(model_dir, self.config, self.log, check_features=not read_only)
        self.log(self.data.report)
        return self.data

    def model_config(self, arch):
        return model_config(arch, self.data)

    def build_batch(self, model_dir=None, model_config=None):
        return build_batch(model_dir)

    def evaluator(self, model_config=None, train_steps=0):
        return CaptioningEvaluator(self.data, self.config, self.decode_config, train_steps,
                                   self.log)

    def training_data(self, model_dir, model_config, train_config):
        """Bucketed, resumable batches of (clip, caption) pairs, the clips' features in."""
        c, data, steps = self.config, self.data, train_config.train_steps
        batches = data.batches("train", c.batch_size, c)
        epochs = steps / batches.num_batches()
        self.log(f"train: {batches.num_examples:,} (clip, caption) pairs "
                 f"({batches.num_filtered:,} longer than {c.max_length} tokens "
                 f"{'dropped' if c.overlong == 'filter' else 'cut'}), "
                 f"{batches.num_batches():,} batches per epoch ({epochs:.2f} epochs)")
        return TrainingData(
            resumable_train_data(batches.iterator, train_transform(data.with_features("train"),
                                                                   c.pad_multiple)),
            {"train_pairs": batches.num_examples, "epochs": epochs,
             "train_data_partial": data.partial})

    def results(self, evaluation, model_config=None, step=0, extra=None, system=None):
        """The fields of results.json of an evaluation (``(split results, seconds)``)."""
        split_results, eval_seconds = evaluation
        provenance = self.data.features.provenance()
        result = {
            "task": "caption", "dataset": "msvd",
            "system": system or self.run.system or system_name(model_config),
            "attention": model_config.attention, "profile": self.run.profile, "steps": step,
            "split_scheme": self.config.split_scheme,
            "scores": {s: r["scores"] for s, r in split_results.items()},
            "score_scale": "raw (0-1)", "splits": split_results, "features": provenance,
            "synthetic_features": bool(provenance["synthetic"]),
            "pretrained_features": bool(provenance["pretrained"]),
            "command": self.run.command, "argv": self.run.argv,
            "eval_wall_time_sec": eval_seconds,
            "decode": self.decode_config.options(final=True),
            "partial_eval": bool(self.config.max_eval_clips), "data_report": self.data.report}
        if provenance["synthetic"]:
            result["WARNING"] = ("SYNTHETIC features: these scores test the pipeline and say "
                                 "nothing about the paper")
        result.update(extra or {})
        return result

    def finish(self, model_dir, results):
        out = super().finish(model_dir, results)
        if results.get("synthetic_features"):
            self.log(SYNTHETIC_BANNER)
        return out

    def export(self, trained, model_dir, export_dir):
        """A SavedModel (:mod:`acvi_tf.export.captioning`): features [batch, frames, dim]
        in, captions out, with the final decoding settings."""
        from acvi_tf.export import captioning as export_lib
        return export_lib.export(trained.model, self.data.vocab, self.data.dim,
                                 self.data.num_frames, self.decode_config.options(final=True),
                                 model_dir, export_dir, trained.step, self.log)

    def decode(self, trained, lines, attention_plots=None, plot_count=0):
        """Clip ids (vidN), one a line -> ``vidN<TAB>caption`` lines."""
        clips = [c.strip() for c in lines if c.strip()]
        for c in clips:
            try:
                msvd.vid_number(c)
            except ValueError as e:
                raise ConfigError("input", str(e)) from None
        check_coverage(self.data.features, clips, "requested")
        self.data.splits["decode"] = msvd.CaptionSplit("decode", clips, {c: [] for c in clips})
        hyps, _ = Captioner(trained.model, self.data,
                            batch_size=self.decode_config.decode_batch_size,
                            **self.decode_config.options(final=True)).caption(
            "decode", list(range(len(clips))))
        return [f"{c}\t{h}" for c, h in zip(clips, hyps)]
