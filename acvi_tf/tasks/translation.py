"""Machine translation (Section 4.3, Appendix C, Table 4) as a task.

:class:`TranslationTask` owns the data (vocabularies or the shared BPE model, saved in
the run directory), the batching, the dev/test decoding with BLEU and the Trainer's
validation (:class:`TranslationEvaluator`). It takes a :class:`TranslationConfig`, a
:class:`~acvi_tf.tasks.base.DecodeConfig` and a :class:`~acvi_tf.tasks.base.RunInfo`.
"""

import atexit
import dataclasses
import os
import shutil
import tempfile
from typing import Optional

import numpy as np
import tensorflow as tf

from acvi_tf.data import sources, subwords
from acvi_tf.data import translation as tr
from acvi_tf.data.batching import Batches
from acvi_tf.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab, split_tokens
from acvi_tf.errors import ConfigError
from acvi_tf.metrics import diversity, repetition
from acvi_tf.run.directory import check_vocab_size, save_vocab
from acvi_tf.tasks.base import (Evaluator, Mode, Task, TrainingData, how_to_get,  # noqa: F401
                                pad_to_multiple, register_task, resumable_train_data,
                                system_name)
from acvi_tf.tasks.decode_batches import (BatchedDecoder, sampled_decodes,
                                          write_attention_plots)
from acvi_tf.training import summaries
from acvi_tf.training.diagnostics import DevDiagnostics
from acvi_tf.training.trainer import is_chief
from acvi_tf.utils import manifest
from acvi_tf.utils.files import write_lines
from acvi_tf.utils.progress import Stopwatch, log
from acvi_tf.utils.settings import SAVED, setting

DATASETS = tr.DATASETS
LANGS = {"iwslt15_en_vi": ("en", "vi"), "wmt16_en_ro": ("en", "ro"), "multi30k": ("en", "de")}


@dataclasses.dataclass
class TranslationConfig:
    """The data of a translation run, one declaration per setting (a field with help is a
    flag of experiments.translate; ``batch_size``, ``seed``, ``pad_multiple`` are the
    shared flags of those names)."""
    dataset: str = setting("multi30k", "Translation dataset (data registry name).",
                           choices=DATASETS)
    src: str = setting("", "Source language (default: the dataset's first).",
                       flag_default=None)
    tgt: str = setting("", "Target language (default: the dataset's other one).",
                       flag_default=None)
    variant: str = setting("tok", "Multi30k files: tok (official lowercased, tokenized; "
                           "default) or raw.", choices=("tok", "raw"))
    min_count: int = setting(2, "Multi30k: words seen fewer times become <unk>.",
                             lower_bound=1)
    max_vocab_size: Optional[int] = setting(None, "Cap on the word vocabularies (specials "
                                            "included).", lower_bound=5)
    bpe_vocab_size: int = setting(32_000, "WMT'16: shared sentencepiece BPE size.",
                                  lower_bound=100)
    max_train_lines: Optional[int] = setting(None, "Read only the first N training pairs.",
                                             lower_bound=1)
    max_eval_lines: Optional[int] = setting(
        None, "Evaluate on the first N dev/test pairs only (quick runs; the results say so).",
        lower_bound=1, restore=SAVED)
    max_length: int = setting(50, "Training length limit in tokens (both sides).",
                              lower_bound=1)
    overlong: str = setting("filter", "Training pairs beyond --max_length: drop them, or cut "
                            "them (tensorflow/nmt).", choices=("filter", "truncate"))
    num_buckets: int = setting(
        25, "Length buckets of the training batches, of width ceil(--max_length / "
        "num_buckets) tokens: 25 over 50 is OpenNMT-tf's width 2, 1.29x the steps/s of 5 "
        "end to end (results/bench_peers_train.md).", lower_bound=1)
    pad_multiple: int = 0                # pad batch lengths to a multiple (fewer XLA shapes)
    batch_size: int = 64                 # training pairs per batch
    seed: int = 0                        # data order

    def languages(self):
        """``(src, tgt)``, defaults resolved; :class:`ConfigError` names a bad one."""
        langs = LANGS[self.dataset]
        src = self.src or langs[0]
        if src not in langs:
            raise ConfigError("src", f"{src!r} is not a language of --dataset={self.dataset} "
                              f"(choose {' or '.join(langs)})")
        tgt = self.tgt or next(lang for lang in langs if lang != src)
        if tgt not in langs:
            raise ConfigError("tgt", f"{tgt!r} is not a language of --dataset={self.dataset} "
                              f"(choose {' or '.join(langs)})")
        if tgt == src:
            raise ConfigError("tgt", f"equals --src={src}")
        return src, tgt

    def check(self):
        self.languages()
        if self.variant == "raw" and self.dataset != "multi30k":
            raise ConfigError("variant", f"'raw' exists for multi30k only, not "
                              f"--dataset={self.dataset}")


def data_status(dataset, src, tgt, variant="tok"):
    """``(complete, lines)``: one line per registered file of the dataset (both
    languages): missing, partial (against the official line count) or complete."""
    source = sources.get(dataset)
    complete, lines = True, []
    for f in source.files:
        if dataset == "multi30k" and not f.path.startswith(variant + "/"):
            continue
        local = sources.locate(dataset, f.path, required=False)
        if local is None:
            complete = False
            expected = f"{f.lines:,} lines expected" if f.lines else "expected"
            lines.append(f"  MISSING  {dataset}/{f.path} ({expected})")
            continue
        message, partial = sources.completeness(dataset, f.path, local)
        complete &= not partial
        lines.append(f"  {'PARTIAL ' if partial else 'ok      '} {message}  [{local}]")
    return complete, lines


def model_config(arch, data):
    """``arch`` (a ModelConfig of the architecture) with the vocabularies of ``data``."""
    return dataclasses.replace(arch, src_vocab_size=len(data.src_vocab),
                               tgt_vocab_size=len(data.tgt_vocab), pad_id=PAD_ID,
                               unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID)


def make_train_data(batches, pad_multiple=0):
    """The Trainer's data protocol over a resumable :class:`Batches` pipeline."""
    return resumable_train_data(batches.iterator, lambda b: pad_to_multiple(b, pad_multiple))


def source_batches(src_ids):
    """``make_batch(indices)`` of :func:`acvi_tf.tasks.decode_batches.decode_in_batches`: those
    source id lists, padded with 0 to the longest of them."""
    def make_batch(idx):
        src = np.zeros([len(idx), max(len(src_ids[i]) for i in idx)], np.int32)
        for row, i in enumerate(idx):
            src[row, :len(src_ids[i])] = src_ids[i]
        return {"src": src}
    return make_batch


class Translator:
    """Batched decoding of id sequences with one set of search settings.

    Sentences are decoded in length-sorted batches (less padding) and returned
    in input order. ``translate`` gives the hypothesis strings (through
    ``data.decode_batch``), their target ids, and optionally the attention of the
    requested sentences ([hyp_len, src_len]).
    """

    SIGNATURE = {"src": tf.TensorSpec([None, None], tf.int32)}

    def __init__(self, model, data, batch_size=64, **opts):
        """``opts``: ``model.decode``'s search settings (DecodeConfig.options)."""
        self.model, self.data = model, data
        self.opts = opts
        self._decoder = BatchedDecoder(self.SIGNATURE, batch_size)

    def translate(self, src_ids, attention_for=()):
        lengths = [len(s) for s in src_ids]
        hyp_ids, attention = self._decoder.decode(self.model, self.opts, lengths,
                                                  source_batches(src_ids), attention_for)
        return self.data.decode_batch(hyp_ids), hyp_ids, attention


class TranslationEvaluator(Evaluator):
    """Dev/test decoding, BLEU and the Trainer's ``eval_fn``."""

    def __init__(self, data, config, decode, train_steps=0, log=log):
        self.data, self.config, self.decode = data, config, decode
        self.train_steps = train_steps
        self.log = log
        self._splits = {}
        self._translators = {}
        self._loss_batches = {}
        self._diagnostics = DevDiagnostics()
        self.final_dev = None  # (step, hyps, BleuResult) of the end-of-training full dev
        self.final_diagnostics = None  # the run diagnostics of that evaluation

    def split(self, split):
        """(src ids, source strings, reference strings, report) of a split, cut to
        ``max_eval_lines``."""
        if split not in self._splits:
            src_ids, _, corpus = self.data.encode(split, max_lines=self.config.max_eval_lines)
            refs = self.data.references(split)[:len(src_ids)]
            sources_text = tr.references(self.data.dataset, split, self.data.src_lang,
                                         self.data.variant)[:len(src_ids)]
            self._splits[split] = (src_ids, sources_text, refs, corpus.report)
        return self._splits[split]

    def translator(self, model, final):
        opts = self.decode.options(final=final)
        key = (id(model), tuple(sorted(opts.items())))
        if key not in self._translators:
            self._translators[key] = Translator(model, self.data,
                                                batch_size=self.decode.decode_batch_size, **opts)
        return self._translators[key]

    def bleu(self, model, split, final=True, subset=0, attention_for=()):
        src_ids, sources_text, refs, _ = self.split(split)
        if subset:
            src_ids, sources_text, refs = src_ids[:subset], sources_text[:subset], refs[:subset]
        hyps, _, attention = self.translator(model, final).translate(src_ids, attention_for)
        return hyps, self.data.bleu(hyps, refs), attention, sources_text, refs

    def dev_diagnostics(self, model, subset):
        """Per-token dev NLL and the run diagnostics (acvi_tf.training.diagnostics:
        KL per token, attention entropy, ||h||, sigma, context use) on the first
        ``subset`` dev pairs, teacher forced."""
        limit = subset or self.config.max_eval_lines
        if limit not in self._loss_batches:
            src_ids, tgt_ids, _ = self.data.encode("dev", max_lines=limit)
            # The diagnostics are sums over tokens, whatever the order: batches of pairs
            # sorted by length pad about half as much as the file's order on Multi30k's
            # val, and the two teacher-forced passes take about half the time.
            order = sorted(range(len(src_ids)), key=lambda i: (len(tgt_ids[i]), len(src_ids[i])))
            src_ids, tgt_ids = [src_ids[i] for i in order], [tgt_ids[i] for i in order]
            self._loss_batches[limit] = Batches(
                src_ids, tgt_ids, self.decode.decode_batch_size, shuffle=False, bucketing=False,
                max_src_len=None, max_tgt_len=None, prefetch=False)
        return self._diagnostics(model, self._loss_batches[limit].dataset())

    def eval_fn(self, model, step, final=None):
        final = step >= self.train_steps if final is None else final
        subset = 0 if final else self.decode.eval_subset
        watch = Stopwatch()
        hyps, bleu, attention, srcs, refs = self.bleu(model, "dev", final=final, subset=subset,
                                                     attention_for=(0, 1))
        if final:
            self.final_dev = (step, hyps, bleu)
        diag = self.dev_diagnostics(model, subset)
        if final:
            self.final_diagnostics = diag
        n = len(hyps)
        div = diversity.diversity(hyps)
        scalars = {"dev_bleu": bleu.score, **diag,
                   "dev_entropy": div["entropy"], "dev_distinct_1": div["distinct_1"],
                   "dev_distinct_2": div["distinct_2"], "dev_decode_seconds": watch.seconds()}
        texts = {f"sample_{i}": f"**src:** {srcs[i]}\n\n**ref:** {refs[i]}\n\n**hyp:** {hyps[i]}"
                 for i in range(min(2, n))}
        # Its own tag: under "dev_bleu" the text would hide the scalar curve.
        texts["dev_bleu_signature"] = (f"{bleu} on {n} dev sentences, beam "
                                       f"{self.decode.options(final)['beam_width']}")
        return summaries.eval_output(scalars, texts, attention=attention)

    def evaluate(self, model, step, model_dir):
        """Decodes dev and test with the final settings; writes decodes, prints BLEU.
        Returns ``(split results, seconds)``."""
        watch = Stopwatch()
        results = {}
        for split in ("dev", "test"):
            if split == "dev" and self.final_dev and self.final_dev[0] == step:
                _, hyps, bleu = self.final_dev  # the end-of-training full dev decode
            else:
                hyps, bleu, _, _, _ = self.bleu(model, split, final=True)
            path = os.path.join(model_dir, f"decode_{split}.txt")
            write_lines(path, hyps)
            _, _, _, report = self.split(split)
            results[split] = {"bleu": bleu.score, "bleu_string": str(bleu),
                              "signature": bleu.signature, "diversity": diversity.diversity(hyps),
                              "repetition": repetition.repetition_table(hyps),
                              "decode_file": path, "sentences": len(hyps), "data_report": report}
            print(f"{split} ({len(hyps)} sentences) {bleu}", flush=True)
            print(f"{split} diversity: {diversity.format_diversity(results[split]['diversity'])}",
                  flush=True)
            print(f"{split} N-GRR (VRNMT Eq. 27), 1- to 4-grams: "
                  f"{repetition.format_table(results[split]['repetition'])}", flush=True)
        if self.decode.diversity_samples:
            results["test"]["sampled_diversity"] = scores = self.sampled_diversity(model, "test")
            print(diversity.format_per_source(scores), flush=True)
        return results, watch.seconds()

    def sampled_diversity(self, model, split):
        """Bahuleyan et al.'s diversity protocol on the first ``diversity_sources`` sources
        of ``split``: ``diversity_samples`` greedy decodes each, the latent sampled
        (:func:`acvi_tf.tasks.decode_batches.sampled_decodes`), entropy and distinct-1/2 per source,
        averaged (:func:`acvi_tf.metrics.diversity.per_source_diversity`)."""
        src_ids = self.split(split)[0][:self.decode.diversity_sources]
        groups = sampled_decodes(model, Translator.SIGNATURE, [len(s) for s in src_ids],
                                 source_batches(src_ids),
                                 self.decode.diversity_samples, self.decode.decode_batch_size,
                                 self.decode.decode_max_length)
        return diversity.per_source_diversity([self.data.decode_batch(g) for g in groups])



@register_task("translate")
class TranslationTask(Task):
    """Translation: data in the run directory, BLEU evaluation, decoding of text."""

    CONFIG = TranslationConfig
    OUTPUTS = "translations"
    EXTRA_MODES = {"copy_baseline": Mode("copy_baseline", needs_model=False),
                   "reselect": Mode("reselect", needs_model=True)}

    def __init__(self, config, decode=None, run=None, log=log):
        config.check()
        super().__init__(config, decode, run, log)
        self.src, self.tgt = config.languages()
        self.DATASET = config.dataset
        self.data = None

    # -- data ------------------------------------------------------------------------
    def describe(self):
        return f"{self.config.dataset} {self.src}->{self.tgt}"

    def resolved_settings(self):
        return {"src": self.src, "tgt": self.tgt}

    def data_status(self):
        return data_status(self.config.dataset, self.src, self.tgt, self.config.variant)

    def load_data(self, model_dir, read_only=False):
        """The :class:`TranslationData`, from ``model_dir`` if saved there, else built
        from the data (and then saved into ``model_dir``)."""
        c, src, tgt = self.config, self.src, self.tgt
        bpe_dir = os.path.join(model_dir, "bpe")
        if c.dataset == "wmt16_en_ro":
            spm_model = os.path.join(bpe_dir, subwords.SPM_MODEL)
            if not os.path.exists(spm_model) and not is_chief():
                # The chief trains the shared model and copies it into model_dir; another
                # worker reads the shared one once it is complete (spm.model is written
                # last), else trains the same model (same text and seed) in a directory
                # of its own: two processes writing the shared one at once race.
                shared = tr.default_bpe_dir(c.bpe_vocab_size)
                own = shared
                if not os.path.exists(os.path.join(shared, subwords.SPM_MODEL)):
                    own = tempfile.mkdtemp(prefix="acvi-worker-bpe-")
                    atexit.register(shutil.rmtree, own, True)
                spm_model = tr.train_bpe(own, c.bpe_vocab_size, seed=0)
            elif not os.path.exists(spm_model):
                shared = tr.default_bpe_dir(c.bpe_vocab_size)
                self.log(f"training/reusing the shared BPE model in {shared} ...")
                model = tr.train_bpe(shared, c.bpe_vocab_size, seed=0)
                os.makedirs(bpe_dir, exist_ok=True)
                for name in (subwords.SPM_MODEL, subwords.SPM_VOCAB, subwords.SPM_MANIFEST):
                    shutil.copy2(os.path.join(os.path.dirname(model), name),
                                 os.path.join(bpe_dir, name))
                    manifest.record(model_dir, os.path.join("bpe", name))
            codec = subwords.SentencePieceCodec(spm_model)
            self.data = tr.TranslationData(
                c.dataset, src, tgt, codec.vocab, codec.vocab, codec, c.variant,
                report=f"shared BPE model {spm_model} ({len(codec)} pieces)")
            return self.data
        paths = [os.path.join(model_dir, f"vocab.{lang}.txt") for lang in (src, tgt)]
        if all(os.path.exists(p) for p in paths):
            src_vocab, tgt_vocab = (Vocab.load(p) for p in paths)
            for p, vocab, field in zip(paths, (src_vocab, tgt_vocab),
                                       ("src_vocab_size", "tgt_vocab_size")):
                check_vocab_size(model_dir, os.path.basename(p), len(vocab), field)
            self.data = tr.TranslationData(c.dataset, src, tgt, src_vocab, tgt_vocab, None,
                                           c.variant, report=f"vocabularies from {model_dir}")
            return self.data
        data = tr.prepare(c.dataset, src, tgt, min_count=c.min_count,
                          max_vocab_size=c.max_vocab_size, variant=c.variant)
        os.makedirs(model_dir, exist_ok=True)
        save_vocab(data.src_vocab, model_dir, os.path.basename(paths[0]))
        save_vocab(data.tgt_vocab, model_dir, os.path.basename(paths[1]))
        self.data = data
        return data

    # -- model -----------------------------------------------------------------------
    def model_config(self, arch):
        """``arch`` (a ModelConfig of the architecture) with this task's vocabularies."""
        return model_config(arch, self.data)

    def build_batch(self, model_dir=None, model_config=None):
        """A one-example batch that builds a model of this task (to restore it)."""
        return {"src": np.full([1, 2], 4, np.int32), "tgt_in": np.asarray([[2, 4]], np.int32),
                "tgt_out": np.asarray([[4, 3]], np.int32)}

    def evaluator(self, model_config=None, train_steps=0):
        return TranslationEvaluator(self.data, self.config, self.decode_config, train_steps,
                                    self.log)

    # -- modes -----------------------------------------------------------------------
    def training_data(self, model_dir, model_config, train_config):
        """Bucketed, resumable batches of the training pairs (:class:`Batches`)."""
        c = self.config
        data = self.data or self.load_data(model_dir)
        self.log(f"data: {c.dataset} {self.src}->{self.tgt}; {data.report}")
        src_ids, tgt_ids, corpus = data.encode("train", max_lines=c.max_train_lines)
        self.log(corpus.report)
        batches = Batches(src_ids, tgt_ids, c.batch_size, seed=c.seed,
                          max_src_len=c.max_length, max_tgt_len=c.max_length,
                          overlong=c.overlong, num_buckets=c.num_buckets)
        if not batches.num_examples:
            raise ConfigError("max_length", f"{c.max_length} keeps none of the "
                              f"{batches.num_input_examples:,} training pairs (each has a "
                              f"side longer than that); raise it, or --overlong=truncate "
                              f"cuts them instead")
        steps = train_config.train_steps
        self.log(f"train: {batches.num_examples:,} pairs ({batches.num_filtered:,} filtered), "
                 f"{batches.num_batches():,} batches of <= {c.batch_size} per epoch "
                 f"({steps / batches.num_batches():.2f} epochs in {steps:,} steps)")
        return TrainingData(make_train_data(batches, c.pad_multiple), {
            "train_pairs": batches.num_examples, "epochs": steps / batches.num_batches(),
            "train_data_partial": corpus.partial, "train_data_report": corpus.report})

    def results(self, evaluation, model_config=None, step=0, extra=None, system=None):
        """The fields of results.json of an evaluation (``(split results, seconds)``)."""
        split_results, eval_seconds = evaluation
        data = {"task": "translate", "dataset": self.config.dataset, "src": self.src,
                "tgt": self.tgt, "direction": f"{self.src}->{self.tgt}",
                "system": system or self.run.system or system_name(model_config),
                "attention": None if system else model_config.attention,
                "profile": self.run.profile, "steps": step,
                "bleu": {s: r["bleu"] for s, r in split_results.items()},
                "diversity": {s: r["diversity"] for s, r in split_results.items()
                              if "diversity" in r},
                "repetition": {s: r["repetition"] for s, r in split_results.items()
                               if "repetition" in r},
                "signature": next(iter(split_results.values()))["signature"],
                "splits": split_results, "command": self.run.command,
                "argv": self.run.argv, "eval_wall_time_sec": eval_seconds,
                "decode": self.decode_config.options(final=True),
                "partial_eval": bool(self.config.max_eval_lines)}
        data.update(extra or {})
        return data

    def copy_baseline(self, model_dir):
        """``--mode=copy_baseline``: BLEU of the source sentence used as the translation (a
        sanity floor); the fields of results.json."""
        c = self.config
        watch = Stopwatch()
        results = {}
        for split in ("dev", "test"):
            hyps = tr.references(c.dataset, split, self.src, c.variant)
            refs = tr.references(c.dataset, split, self.tgt, c.variant)
            if c.max_eval_lines:
                hyps, refs = hyps[:c.max_eval_lines], refs[:c.max_eval_lines]
            bleu = tr.evaluate_bleu(c.dataset, hyps, refs)
            path = os.path.join(model_dir, f"decode_{split}.txt")
            write_lines(path, hyps)
            results[split] = {"bleu": bleu.score, "bleu_string": str(bleu),
                              "signature": bleu.signature, "decode_file": path,
                              "diversity": diversity.diversity(hyps),
                              "repetition": repetition.repetition_table(hyps),
                              "sentences": len(hyps)}
            print(f"{split} copy-the-source ({len(hyps)} sentences) {bleu}", flush=True)
        return self.results((results, watch.seconds()), system="copy-source")

    def export(self, trained, model_dir, export_dir):
        """A SavedModel (:mod:`acvi_tf.export.translation`): text in, translations out,
        with the final decoding settings."""
        from acvi_tf.export import translation as export_lib
        return export_lib.export(trained.model, self.data, self.decode_config.options(final=True),
                                 model_dir, export_dir, trained.step, self.log)

    def source_ids(self, lines):
        """Source lines in the dataset's form -> id lists (words or BPE pieces)."""
        data = self.data
        lines = [line.rstrip("\r") for line in lines]
        if data.codec is not None:
            texts = [tr.normalize_text(line, data.src_lang) for line in lines]
            return [ids.tolist() for ids in data.codec.encode(texts)] if texts else []
        return [data.src_vocab.encode(split_tokens(line)) for line in lines]

    def decode(self, trained, lines, attention_plots=None, plot_count=0):
        """Source lines in the dataset's form -> translations."""
        src_ids = self.source_ids(lines)
        wanted = range(min(plot_count, len(src_ids))) if attention_plots else ()
        hyps, hyp_ids, attention = Translator(
            trained.model, self.data, batch_size=self.decode_config.decode_batch_size,
            **self.decode_config.options(final=True)).translate(src_ids, attention_for=wanted)
        if attention_plots:
            data = self.data
            paths = write_attention_plots(attention_plots, trained.model, attention, [
                (i, src_ids[i], [data.src_vocab.id_to_token(t) for t in src_ids[i]],
                 [data.tgt_vocab.id_to_token(t) for t in hyp_ids[i]]) for i in wanted])
            self.log(f"attention: {len(paths)} pictures in {attention_plots}")
        return hyps
