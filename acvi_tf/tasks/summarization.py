"""Abstractive summarization on CNN/DailyMail (Section 4.1, Appendix A, Tables 1, 2, 5)
as a task.

The model is the one seq2seq machine with See et al.'s (2017) pointer-generator head
(batches carry the extended-vocabulary ids ``src_ext`` and ``max_oovs``) and coverage
switched on for the last ``coverage_steps`` only, as Appendix A does; training follows
Table 5's phases of growing truncation
(:class:`~acvi_tf.data.article_batches.ArticleBatches`). :class:`SummarizationTask`
owns the vocabulary, the data, the evaluation (ROUGE, METEOR, novelty:
:class:`SummarizationEvaluator`), lead-3 and DUC2004 decoding. It takes a
:class:`SummarizationConfig`, a :class:`~acvi_tf.tasks.base.DecodeConfig` and a
:class:`~acvi_tf.tasks.base.RunInfo`.
"""

import dataclasses
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from acvi_tf.data import cnndm, sources
from acvi_tf.data.article_batches import ArticleBatches
from acvi_tf.data.vocab import Vocab
from acvi_tf.errors import ConfigError, RunError
from acvi_tf.metrics import diversity, meteor, novelty, rouge
from acvi_tf.models import build_model
from acvi_tf.run.directory import check_model_config, check_vocab_size, save_vocab
from acvi_tf.run.restore import warm_start_fn
from acvi_tf.run.results import finish_results, load_results, update_results
from acvi_tf.tasks.base import (Evaluator, Task, best_hypothesis_decoder,
                                decode_in_batches, register_task, resumable_train_data,
                                sampled_decodes, system_name, write_attention_plots)
from acvi_tf.training import summaries
from acvi_tf.training.diagnostics import DevDiagnostics
from acvi_tf.training.schedules import ModeSchedule, PhaseSchedule, milestones
from acvi_tf.utils.settings import ADOPTED, SAVED, setting
from acvi_tf.training.trainer import Trainer
from acvi_tf.utils.files import write_lines
from acvi_tf.utils.progress import Stopwatch, log

SPLITS = ("train", "val", "test")
PHASES = ("table5", "none")


@dataclasses.dataclass
class SummarizationConfig:
    """The data, schedule and evaluation of a summarization run, one declaration per
    setting (a field with help is a flag of experiments.summarize; ``batch_size``,
    ``seed``, ``pad_multiple`` are the shared flags of those names). The schedule's
    settings are adopted from a trained run, the evaluation's only saved with it."""
    vocab_size: int = setting(50_000, "Vocabulary size, the 4 special tokens included (See "
                              "et al.'s 50K: the most frequent words of finished_files/vocab).",
                              lower_bound=5)
    max_enc_steps: int = setting(400, "Article tokens the encoder reads (the last phase's "
                                 "truncation).", lower_bound=1)
    max_dec_steps: int = setting(100, "Summary tokens trained on (the last phase's "
                                 "truncation).", lower_bound=1)
    phases: str = setting("table5", "table5: Table 5's five phases of growing truncation "
                          "over the steps before coverage; none: the final lengths "
                          "throughout.", choices=PHASES, restore=ADOPTED)
    coverage_steps: int = setting(3_000, "The last steps, with coverage on (w_k trained, Eq. 9 "
                                  "in the loss); needs --coverage.", lower_bound=0,
                                  restore=ADOPTED)
    max_train_pairs: Optional[int] = setting(None, "Train on the first N pairs only.",
                                             lower_bound=1, restore=ADOPTED)
    max_eval_pairs: Optional[int] = setting(None, "Evaluate on the first N test articles "
                                            "(default: all; the results say so).",
                                            lower_bound=1, restore=SAVED)
    meteor: bool = setting(True, "Score METEOR 1.5 (exact and full; needs java). Each mode "
                           "starts the jar (~15 s), so the smoke profile skips it.",
                           restore=SAVED)
    eval_before_coverage: bool = setting(True, "With --coverage_steps, also evaluate on test "
                                         "at the end of the last phase (Table 1's rows "
                                         "without coverage).", restore=SAVED)
    batch_size: int = 16                 # training pairs per batch
    seed: int = 0                        # data order
    pad_multiple: int = 0                # pad article/summary lengths to a multiple (XLA shapes)

    def check(self, train_steps=None, coverage=True):
        if self.pad_multiple < 0:
            raise ConfigError("pad_multiple", f"{self.pad_multiple} must be 0 (off) or more")
        if train_steps is not None and self.coverage_steps >= train_steps:
            raise ConfigError("coverage_steps", f"{self.coverage_steps} leaves no step of the "
                              f"{train_steps} (--train_steps) before coverage")
        if self.coverage_steps and not coverage:
            raise ConfigError("coverage_steps", f"{self.coverage_steps} coverage steps need a "
                              f"model built with --coverage (or set --coverage_steps=0)")

    def schedule(self, train_steps, coverage):
        """The :class:`PhaseSchedule` of the run (Table 5 laid over ``train_steps``)."""
        return PhaseSchedule.fit(train_steps, self.coverage_steps if coverage else 0,
                                 self.max_enc_steps, self.max_dec_steps,
                                 phases=self.phases == "table5")


def data_status(splits=SPLITS):
    """``(complete, lines)``: the vocab and each split against the official sizes."""
    vocab = sources.locate("cnn_dailymail", cnndm.VOCAB_PATH, required=False)
    lines = [f"  vocab: {'ok' if vocab else 'MISSING'}"]
    complete = vocab is not None
    for split in splits:
        n, total, _, _ = cnndm.split_counts(split)
        complete &= n >= total
        lines.append("  " + cnndm.counts_report((split,))[0])
    return complete, lines


def how_to_get(name="cnn_dailymail"):
    s = sources.get(name)
    return f"{s.how_to_get} (homepage: {s.homepage}; local mirror: $ACVI_DATA_MIRROR/{name}/)"


def system_of(model_config):
    """The row system of a summarization run: the variant, latent or architecture;
    softmax-head runs carry a "seq2seq-" prefix."""
    name = system_name(model_config)
    return name if model_config.head == "pointer" else f"seq2seq-{name}"


def model_config(arch, vocab):
    """``arch`` (a ModelConfig of the architecture) with the vocabulary's sizes and ids."""
    return dataclasses.replace(arch, src_vocab_size=len(vocab), tgt_vocab_size=len(vocab),
                               pad_id=vocab.pad_id, unk_id=vocab.unk_id, bos_id=vocab.bos_id,
                               eos_id=vocab.eos_id)


def build_batch(pointer):
    """A one-example batch that builds a model of this task (to restore it)."""
    batch = {"src": np.full([1, 3], 4, np.int32), "tgt_in": np.asarray([[2, 4]], np.int32),
             "tgt_out": np.asarray([[4, 3]], np.int32)}
    if pointer:
        batch.update(src_ext=np.asarray([[4, 4, 4]], np.int32), max_oovs=np.int32(0))
    return batch


def read_pairs(split, limit=None, log=None):
    """(pairs, report) of the local chunks of ``split``: counts against the official size."""
    stats = cnndm.ReadStats()
    pairs = list(cnndm.iter_pairs(split, limit=limit, stats=stats))
    report = f"{cnndm.counts_report((split,))[0]}; {stats.report()}"
    if log:
        log(f"cnn_dailymail {report}")
    return pairs, report


def model_inputs(batch, vocab, pointer, with_targets=False):
    """The tensors the model reads from a :func:`cnndm.make_batch` dict.

    The softmax head (Table 1's plain seq2seq rows) has no extended vocabulary:
    its targets see ``[UNK]`` for every OOV.
    """
    out = {"src": batch["src"]}
    if pointer:
        out["src_ext"] = batch["src_ext"]
        out["max_oovs"] = np.int32(batch["max_oovs"])
    if with_targets:
        out["tgt_in"] = batch["tgt_in"]
        tgt = batch["tgt_out"]
        out["tgt_out"] = tgt if pointer else np.where(tgt >= len(vocab), vocab.unk_id,
                                                      tgt).astype(np.int32)
    return out


class Summarizer:
    """Batched beam search over articles; summaries as word lists (OOVs from the article).

    One traced decoder per (search settings, coverage mode): the decoder reads
    the coverage switch when it is traced.
    """

    def __init__(self, model, vocab, pointer, batch_size=16):
        self.model = model
        self.vocab = vocab
        self.pointer = pointer
        self.batch_size = batch_size
        self._decoders = {}

    def _signature(self):
        spec = {"src": tf.TensorSpec([None, None], tf.int32)}
        if self.pointer:
            spec.update(src_ext=tf.TensorSpec([None, None], tf.int32),
                        max_oovs=tf.TensorSpec([], tf.int32))
        return spec

    def _decoder(self, opts, coverage):
        key = (tuple(sorted(opts.items())), coverage)
        if key not in self._decoders:
            self.model.set_mode(coverage=coverage)
            self._decoders[key] = best_hypothesis_decoder(self.model, self._signature(),
                                                          **opts)
        return self._decoders[key]

    def _batches(self, examples):
        """(article lengths, make_batch(indices)) of :func:`decode_in_batches`."""
        def make_batch(idx):
            batch = cnndm.make_batch([examples[i] for i in idx], self.vocab)
            return model_inputs(batch, self.vocab, self.pointer)
        return [len(e.enc_input) for e in examples], make_batch

    def _words(self, ids, example):
        return cnndm.strip_decoded(cnndm.outputids2words(
            ids, self.vocab, example.article_oovs if self.pointer else []))

    def summarize(self, examples, opts, coverage=False, attention_for=()):
        """Decodes :class:`cnndm.Example` s; returns (word lists, attention dict)."""
        decode = self._decoder(opts, coverage)
        lengths, make_batch = self._batches(examples)
        hyp_ids, attention = decode_in_batches(decode, lengths, make_batch,
                                                      self.batch_size, attention_for)
        return [self._words(ids, e) for ids, e in zip(hyp_ids, examples)], attention

    def sampled(self, examples, samples, max_length, coverage=False):
        """Bahuleyan et al.'s diversity protocol (:func:`sampled_decodes`): ``samples``
        greedy summaries of each article, the latent drawn afresh each time; one list of
        word lists per article."""
        self.model.set_mode(coverage=coverage)  # read when the sampler is traced
        lengths, make_batch = self._batches(examples)
        groups = sampled_decodes(self.model, self._signature(), lengths, make_batch, samples,
                                 self.batch_size, max_length)
        return [[self._words(ids, e) for ids in group] for group, e in zip(groups, examples)]


def summary_sentences(words):
    """A decoded word list -> sentences, one per ROUGE line (See et al. split at '.')."""
    return novelty.split_sentences(words)


def percent_rouge(result, measure="f"):
    """ROUGE result -> {"rouge_1": %, ..., "ci": {...}} for results.json."""
    keys = ("rouge_1", "rouge_2", "rouge_l")
    out = {k: 100 * result[k][measure] for k in keys}
    out["ci"] = {k: [100 * v for v in result[k][f"{measure}_ci"]] for k in keys}
    out["measure"] = {"f": "F1", "r": "recall", "p": "precision"}[measure]
    out["options"] = result["options"]
    out["count"] = result["count"]
    return out


def score_summaries(hyp_sents, ref_sents, with_meteor=True, log=log):
    """ROUGE-1/2/L F1 (See et al.'s options) and METEOR exact / full, in percent."""
    watch = Stopwatch()
    scores = {"rouge": percent_rouge(rouge.rouge_cnndm(hyp_sents, ref_sents))}
    log(f"ROUGE-1/2/L F1: {scores['rouge']['rouge_1']:.2f} / {scores['rouge']['rouge_2']:.2f} "
        f"/ {scores['rouge']['rouge_l']:.2f} ({len(hyp_sents)} summaries, "
        f"{watch.seconds():.0f} s)")
    if with_meteor:
        missing = meteor.missing_requirements()
        if missing:
            log(f"METEOR skipped: {missing}")
            scores["meteor"] = {"skipped": missing}
        else:
            hyps = [" ".join(s) for s in hyp_sents]
            refs = [" ".join(s) for s in ref_sents]
            scores["meteor"] = {}
            for mode in (meteor.EXACT, meteor.FULL):
                m = meteor.meteor(hyps, refs, mode=mode)
                scores["meteor"][mode] = 100 * m["score"]
                scores["meteor"][f"{mode}_modules"] = m["modules"]
                scores["meteor"][f"{mode}_command"] = m["command"]
            log(f"METEOR exact / full: {scores['meteor']['exact']:.2f} / "
                f"{scores['meteor']['full']:.2f} (modules: "
                f"{' '.join(scores['meteor']['full_modules'])})")
    return scores


class SummarizationEvaluator(Evaluator):
    """Validation during training (greedy, val subset) and the final test evaluation."""

    def __init__(self, vocab, phase_schedule, config, decode, pointer=True, coverage=False,
                 train_steps=0, log=log):
        self.vocab = vocab
        self.schedule = phase_schedule
        self.config, self.decode = config, decode
        self.coverage = coverage
        self.train_steps = train_steps
        self.log = log
        self.pointer = pointer
        self._diagnostics = DevDiagnostics()
        self._pairs = {}
        self._summarizers = {}
        self.final_diagnostics = None  # the run diagnostics of the end-of-training evaluation

    def examples(self, split, limit):
        """(pairs, examples at the final lengths, data report) of the first ``limit``."""
        if (split, limit) not in self._pairs:
            pairs, report = read_pairs(split, limit, log=self.log)
            examples = [cnndm.make_example(p.article, p.abstract_sents, self.vocab,
                                           self.config.max_enc_steps, self.config.max_dec_steps)
                        for p in pairs]
            self._pairs[(split, limit)] = (pairs, examples, report)
        return self._pairs[(split, limit)]

    def summarizer(self, model):
        if id(model) not in self._summarizers:
            self._summarizers[id(model)] = Summarizer(model, self.vocab, self.pointer,
                                                      self.decode.decode_batch_size)
        return self._summarizers[id(model)]

    def dev_diagnostics(self, model, examples, coverage):
        """The run diagnostics (acvi_tf.training.diagnostics: dev NLL, KL per token,
        attention entropy, ||h||, sigma, context use) on these val examples, teacher
        forced in the coverage mode of the evaluated model."""
        size = self.decode.decode_batch_size
        batches = (model_inputs(cnndm.make_batch(examples[i:i + size], self.vocab), self.vocab,
                                self.pointer, with_targets=True)
                   for i in range(0, len(examples), size))
        model.set_mode(coverage=coverage)
        return self._diagnostics(model, batches, mode_key=coverage)

    def coverage_at(self, step):
        """Whether the model of ``step`` trained steps decodes with coverage."""
        return bool(self.coverage) and self.schedule.phase(max(step - 1, 0))["coverage"]

    def eval_fn(self, model, step):
        pairs, examples, _ = self.examples("val", self.decode.eval_subset or None)
        watch = Stopwatch()
        words, attention = self.summarizer(model).summarize(
            examples, self.decode.options(final=False), self.coverage_at(step),
            attention_for=(0,))
        hyps = [summary_sentences(w) or ["."] for w in words]
        r = rouge.rouge_cnndm(hyps, [p.abstract_sents for p in pairs])
        scalars = {f"val_{k}": 100 * r[k]["f"] for k in ("rouge_1", "rouge_2", "rouge_l")}
        scalars["val_decode_seconds"] = watch.seconds()
        scalars.update(self.dev_diagnostics(model, examples, self.coverage_at(step)))
        if step >= self.train_steps:
            self.final_diagnostics = scalars
        texts = {f"sample_{i}": f"**article:** {' '.join(pairs[i].article.split()[:80])} ...\n\n"
                 f"**reference:** {' '.join(pairs[i].abstract_sents)}\n\n"
                 f"**summary:** {' '.join(words[i])}" for i in range(min(2, len(pairs)))}
        images = {}
        if 0 in attention and attention[0].size:
            images["attention_sample_0"] = summaries.attention_image(attention[0])
        return summaries.eval_output(scalars, texts, images)

    def evaluate(self, model, step, model_dir, suffix="", split="test"):
        """Decodes the first ``max_eval_pairs`` articles of ``split`` with the final
        search; writes ``decode_<split><suffix>.txt`` / ``reference_<split>.txt``; returns
        the scores (``<split>_articles``: how many)."""
        pairs, examples, report = self.examples(split, self.config.max_eval_pairs)
        watch = Stopwatch()
        coverage = self.coverage_at(step)
        words, _ = self.summarizer(model).summarize(
            examples, self.decode.options(final=True), coverage)
        decode_seconds = watch.seconds()
        self.log(f"decoded {len(words)} {split} articles at step {step} (coverage "
                 f"{'on' if coverage else 'off'}) in {decode_seconds:.0f} s")
        # An empty summary scores 0; "." keeps ROUGE's input files non-empty.
        hyp_sents = [summary_sentences(w) or ["."] for w in words]
        path = os.path.join(model_dir, f"decode_{split}{suffix}.txt")
        write_lines(path, [" ".join(w) for w in words])
        write_lines(os.path.join(model_dir, f"reference_{split}.txt"),
                    [" ".join(p.abstract_sents) for p in pairs])
        scores = score_summaries(hyp_sents, [p.abstract_sents for p in pairs],
                                 self.config.meteor, self.log)
        scores["novelty"] = novelty.novelty_stats(
            words, [p.article for p in pairs], [e.article_oovs for e in examples])
        self.log(f"novel words {scores['novelty']['novel_word_percent']:.2f}%, OOV adoption "
                 f"{scores['novelty']['oov_adoption_percent']:.2f}%")
        if self.decode.diversity_samples:
            scores["sampled_diversity"] = sampled = self.sampled_diversity(
                model, examples, coverage)
            self.log(diversity.format_per_source(sampled, "article", split))
        scores.update({f"{split}_articles": len(pairs), f"{split}_data_report": report})
        scores.update(steps=step, coverage=coverage, decode_file=path,
                      decode_seconds=decode_seconds, eval_wall_time_sec=watch.seconds())
        return scores

    def sampled_diversity(self, model, examples, coverage=False):
        """Entropy and distinct-1/2 of ``diversity_samples`` sampled summaries per article
        of the first ``diversity_sources`` ``examples``, averaged over the articles
        (:func:`acvi_tf.metrics.diversity.per_source_diversity`)."""
        groups = self.summarizer(model).sampled(
            examples[:self.decode.diversity_sources], self.decode.diversity_samples,
            self.decode.decode_max_length, coverage)
        return diversity.per_source_diversity([[" ".join(w) for w in g] for g in groups])


@register_task("summarize")
class SummarizationTask(Task):
    """Summarization: the vocabulary in the run directory, phased training, ROUGE/METEOR/
    novelty evaluation, lead-3, DUC2004 and decoding of articles."""

    def __init__(self, config, decode=None, run=None, log=log):
        super().__init__(config, decode, run, log)
        self.vocab = None

    def data_status(self):
        return data_status()

    def how_to_get(self):
        return how_to_get()

    def load_vocab(self, model_dir):
        """The run's vocabulary: ``model_dir/vocab.txt``, written from See et al.'s vocab
        file (its first ``vocab_size`` entries) on the first run."""
        path = os.path.join(model_dir, "vocab.txt")
        if os.path.exists(path):
            self.vocab = Vocab.load(path)
            check_vocab_size(model_dir, "vocab.txt", len(self.vocab), "src_vocab_size",
                             "tgt_vocab_size")
            return self.vocab
        vocab = cnndm.load_vocab(self.config.vocab_size)
        os.makedirs(model_dir, exist_ok=True)
        save_vocab(vocab, model_dir, "vocab.txt")
        self.vocab = vocab
        return vocab

    def model_config(self, arch):
        return model_config(arch, self.vocab)

    def evaluator(self, model_config, train_steps):
        coverage = bool(model_config.coverage)
        return SummarizationEvaluator(self.vocab, self.config.schedule(train_steps, coverage),
                                      self.config, self.decode,
                                      pointer=model_config.head == "pointer",
                                      coverage=coverage, train_steps=train_steps, log=self.log)

    def train(self, model_dir, model_config, train_config, strategy=None, before_training=None):
        """Trains (resuming if possible); evaluates on test before coverage when asked.

        Returns (model, evaluator, info).
        """
        c, steps = self.config, train_config.train_steps
        os.makedirs(model_dir, exist_ok=True)
        vocab = self.vocab or self.load_vocab(model_dir)
        pairs, report = read_pairs("train", c.max_train_pairs, log=self.log)
        if not pairs:
            raise RunError("no usable training pair was read (see the report above)")
        store = cnndm.EncodedPairs(vocab, c.max_enc_steps, c.max_dec_steps)
        for p in pairs:
            store.add(p.article, p.abstract_sents)
        del pairs
        evaluator = self.evaluator(model_config, steps)
        phases = evaluator.schedule
        self.log(f"train: {len(store):,} pairs, vocabulary {len(vocab):,}; {steps:,} steps of "
                 f"{c.batch_size} = {steps * c.batch_size / len(store):.2f} epochs; phases "
                 f"(end step, enc, dec): {list(phases.phases)}, then {phases.coverage_steps} "
                 f"with coverage")
        # The order of the schedule's changes, the Gumbel tail's against the coverage
        # phase's (schedules.ModeSchedule says why the tail contains coverage).
        gumbel = train_config.gumbel_fraction if model_config.attention == "acvi" else 0
        self.log("train schedule: " + "; ".join(
            f"{step:,}: {what}" for step, what in milestones(ModeSchedule(steps, gumbel),
                                                             phases)))
        check_model_config(model_dir, model_config)
        if before_training:
            before_training()
        pointer = model_config.head == "pointer"
        batches = ArticleBatches(store, c.batch_size, phases, c.seed, pointer, c.pad_multiple)
        trainer = Trainer(lambda: build_model(model_config), train_config,
                          resumable_train_data(batches.iterator),
                          eval_fn=evaluator.eval_fn,
                          mode_schedule=ModeSchedule(steps, train_config.gumbel_fraction,
                                                     extra=phases.modes),
                          strategy=strategy, log=self.log,
                          warm_start=warm_start_fn(train_config.init_from, model_dir,
                                                   build_batch(pointer), self.log))
        info = {}
        coverage_start = phases.phases[-1][0]
        if model_config.coverage and phases.coverage_steps and c.eval_before_coverage:
            trainer.train(stop_at=coverage_start)
            previous = load_results(model_dir).get("no_coverage", {})
            if previous.get("steps") == coverage_start:
                info["no_coverage"] = previous  # a resumed run keeps its earlier evaluation
            elif int(trainer.step.numpy()) == coverage_start and trainer.is_chief:
                info["no_coverage"] = evaluator.evaluate(trainer.model, coverage_start,
                                                         model_dir, suffix="_no_coverage")
                update_results(model_dir, no_coverage=info["no_coverage"])
        metrics = trainer.train()
        info.update({**trainer.run_info(metrics),
                     "train_pairs": len(store), "train_data_report": report,
                     "train_data_partial": (cnndm.split_counts("train")[0]
                                            < cnndm.SPLIT_SIZES["train"]),
                     "epochs": steps * c.batch_size / len(store),
                     "phases": [list(p) for p in phases.phases],
                     "coverage_steps": phases.coverage_steps,
                     "train_command": self.run.command,
                     "diagnostics": evaluator.final_diagnostics})
        return trainer.model, evaluator, info

    def results(self, scores, model_config=None, extra=None, system=None):
        """The fields of results.json of an evaluated run."""
        data = {"task": "summarize", "dataset": "cnn_dailymail",
                "system": system or self.run.system or system_of(model_config),
                "attention": None if system else model_config.attention,
                "head": model_config.head if model_config else None,
                "vocab_size": self.config.vocab_size, "profile": self.run.profile,
                "command": self.run.command, "argv": self.run.argv,
                "decode": self.decode.options(final=True),
                "partial_eval": bool(self.config.max_eval_pairs), **scores}
        data.update(extra or {})
        return data

    def lead3(self, model_dir):
        """Table 1's lead-3 row: the first three sentences of each test article."""
        watch = Stopwatch()
        pairs, report = read_pairs("test", self.config.max_eval_pairs, log=self.log)
        hyps = [novelty.lead3(p.article) for p in pairs]
        write_lines(os.path.join(model_dir, "decode_test.txt"),
                    [" ".join(h) for h in hyps])
        scores = score_summaries(hyps, [p.abstract_sents for p in pairs], self.config.meteor,
                                 self.log)
        scores.update(test_articles=len(pairs), test_data_report=report, steps=0,
                      eval_wall_time_sec=watch.seconds())
        return finish_results(model_dir, self.results(
            scores, system="lead-3", extra={"head": None, "vocab_size": None, "decode": None}),
            self.log)

    def summarize(self, model, step, model_config, train_steps, texts, attention_plots=None,
                  plot_count=0):
        """Article lines -> summaries (word lists); empty articles give empty lists.
        ``train_steps``: the run's (its phase schedule says when coverage is on). With
        ``attention_plots`` (a directory), the attention of the first ``plot_count``
        non-empty articles is drawn there (:func:`write_attention_plots`)."""
        keep = [i for i, line in enumerate(texts) if cnndm.split_words(line)]
        examples = [cnndm.make_example(texts[i], [], self.vocab, self.config.max_enc_steps,
                                       self.config.max_dec_steps) for i in keep]
        evaluator = self.evaluator(model_config, train_steps)
        wanted = range(min(plot_count, len(examples))) if attention_plots else ()
        words, attention = evaluator.summarizer(model).summarize(
            examples, self.decode.options(final=True), evaluator.coverage_at(step), wanted)
        if attention_plots:
            paths = write_attention_plots(attention_plots, model, attention, [
                (j, examples[j].enc_input,
                 [self.vocab.id_to_token(t) for t in examples[j].enc_input], words[j])
                for j in wanted])
            self.log(f"attention: {len(paths)} pictures in {attention_plots}")
        out = [[] for _ in texts]
        for i, w in zip(keep, words):
            out[i] = w
        return out

    def export(self, model, step, model_config, train_steps, model_dir, export_dir):
        """A SavedModel of ``model`` in ``export_dir`` (:mod:`acvi_tf.export.summarization`):
        articles in, summaries out, as :meth:`summarize` decodes them."""
        from acvi_tf.export import summarization as export_lib
        coverage = self.evaluator(model_config, train_steps).coverage_at(step)
        return export_lib.export(model, self.vocab, self.decode.options(final=True), coverage,
                                 self.config.max_enc_steps, model_dir, export_dir, step,
                                 self.log)

    def validate(self, model, step, model_config, train_steps, model_dir):
        """``--mode=val``: the test evaluation's decode and metrics on the first
        ``max_eval_pairs`` val articles, for choosing settings without the test set.
        Stored under ``val`` in results.json; the test fields are left as they are."""
        scores = self.evaluator(model_config, train_steps).evaluate(model, step, model_dir,
                                                                    split="val")
        scores.update(command=self.run.command, decode=self.decode.options(final=True))
        return update_results(model_dir, val=scores)

    def duc2004(self, model, step, model_config, train_steps, model_dir):
        """Table 5: a CNN/DM model summarizes DUC2004's 500 inputs; ROUGE recall at 75 bytes."""
        watch = Stopwatch()
        duc = cnndm.read_duc2004()
        evaluator = self.evaluator(model_config, train_steps)
        examples = [cnndm.make_example(text, [], self.vocab, self.config.max_enc_steps,
                                       self.config.max_dec_steps) for text in duc.inputs]
        words, _ = evaluator.summarizer(model).summarize(
            examples, self.decode.options(final=True), evaluator.coverage_at(step))
        path = os.path.join(model_dir, "decode_duc2004.txt")
        write_lines(path, [" ".join(w) for w in words])
        result = rouge.rouge_duc2004([[" ".join(w)] for w in words], duc.references)
        scores = percent_rouge(result, measure="r")
        self.log(f"DUC2004 ROUGE-1/2/L recall (75 bytes): {scores['rouge_1']:.2f} / "
                 f"{scores['rouge_2']:.2f} / {scores['rouge_l']:.2f}")
        scores.update(command=self.run.command, decode_file=path, steps=step,
                      decode=self.decode.options(final=True),
                      wall_time_sec=watch.seconds(), inputs=len(duc.inputs))
        return update_results(model_dir, duc2004=scores)
