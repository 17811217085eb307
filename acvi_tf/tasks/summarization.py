"""Abstractive summarization on CNN/DailyMail (Section 4.1, Appendix A, Tables 1, 2, 5)
as a task.

The model is the one seq2seq machine with See et al.'s (2017) pointer-generator head
(batches carry the extended-vocabulary ids ``src_ext`` and ``max_oovs``) and coverage
switched on for the last ``coverage_steps`` only, as Appendix A does; training follows
Table 5's phases of growing truncation
(:class:`~acvi_tf.data.article_batches.ArticleBatches`). :class:`SummarizationTask`
owns the vocabulary, the data, the evaluation (ROUGE, METEOR, novelty:
:class:`~acvi_tf.tasks.summarization_eval.SummarizationEvaluator`, with the decoding and
the scores), lead-3 and DUC2004 decoding. It takes a
:class:`SummarizationConfig`, a :class:`~acvi_tf.tasks.base.DecodeConfig` and a
:class:`~acvi_tf.tasks.base.RunInfo`.
"""

import dataclasses
import os
from typing import Optional

import numpy as np

from acvi_tf.data import cnndm, sources
from acvi_tf.data.article_batches import ArticleBatches
from acvi_tf.data.vocab import Vocab
from acvi_tf.errors import ConfigError, RunError
from acvi_tf.metrics import novelty, rouge
from acvi_tf.run.directory import check_vocab_size, save_vocab
from acvi_tf.run.results import load_results, update_results
from acvi_tf.tasks.base import (Mode, Task, TrainingData, how_to_get,  # noqa: F401
                                register_task, resumable_train_data, system_name)
from acvi_tf.tasks.decode_batches import write_attention_plots
from acvi_tf.tasks.summarization_eval import (SummarizationEvaluator,  # noqa: F401
                                              Summarizer, model_inputs, percent_rouge,
                                              read_pairs, score_summaries,
                                              summary_sentences)
from acvi_tf.training.schedules import ModeSchedule, PhaseSchedule, milestones
from acvi_tf.utils.files import save_json, write_lines
from acvi_tf.utils.progress import Stopwatch, log
from acvi_tf.utils.settings import ADOPTED, SAVED, setting

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
    phase_steps: Optional[int] = setting(None, "--phases=table5 over the first N steps "
                                         "only; the final lengths from there to the "
                                         "coverage steps (default: every step before "
                                         "coverage). E.g. --train_steps=10000 "
                                         "--phase_steps=2000 continues a 2,000-step run's "
                                         "curriculum at the final lengths.", lower_bound=1,
                                         restore=ADOPTED)
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
    lead_sentences: int = setting(3, "--mode=lead3: the leading article sentences that make "
                                  "the summary (3: Table 1's lead-3 row; 1: lead-1, the "
                                  "first sentence alone).", lower_bound=1, restore=SAVED)
    lead_split: str = setting("test", "--mode=lead3: the split it summarizes (val: a "
                              "reference for runs scored with --mode=val).",
                              choices=("test", "val"), restore=SAVED)
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
        if self.phase_steps is not None:
            if self.phases != "table5":
                raise ConfigError("phase_steps", f"{self.phase_steps} lays out Table 5's "
                                  f"phases; --phases={self.phases} has none")
            body = None if train_steps is None else train_steps - (
                self.coverage_steps if coverage else 0)
            if body is not None and self.phase_steps > body:
                raise ConfigError("phase_steps", f"{self.phase_steps} is more than the "
                                  f"{body} steps before coverage (--train_steps="
                                  f"{train_steps})")
        if self.coverage_steps and not coverage:
            raise ConfigError("coverage_steps", f"{self.coverage_steps} coverage steps need a "
                              f"model built with --coverage (or set --coverage_steps=0)")

    def schedule(self, train_steps, coverage):
        """The :class:`PhaseSchedule` of the run (Table 5 laid over ``train_steps``)."""
        return PhaseSchedule.fit(train_steps, self.coverage_steps if coverage else 0,
                                 self.max_enc_steps, self.max_dec_steps,
                                 phases=self.phases == "table5",
                                 phase_steps=self.phase_steps)


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


@register_task("summarize")
class SummarizationTask(Task):
    """Summarization: the vocabulary in the run directory, phased training, ROUGE/METEOR/
    novelty evaluation, lead-3, DUC2004 and decoding of articles."""

    CONFIG = SummarizationConfig
    DATASET = "cnn_dailymail"
    OUTPUTS = "summaries"
    EXTRA_MODES = {"lead3": Mode("lead3", needs_model=False),
                   "duc2004": Mode("duc2004", needs_model=True),
                   "val": Mode("validate", needs_model=True)}

    def __init__(self, config, decode=None, run=None, log=log):
        super().__init__(config, decode, run, log)
        self.vocab = None

    def data_status(self):
        return data_status()

    def load_data(self, model_dir, read_only=False):
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

    def build_batch(self, model_dir=None, model_config=None):
        return build_batch(model_config.head == "pointer")

    def evaluator(self, model_config=None, train_steps=0):
        coverage = bool(model_config.coverage)
        return SummarizationEvaluator(self.vocab, self.config.schedule(train_steps, coverage),
                                      self.config, self.decode_config,
                                      pointer=model_config.head == "pointer",
                                      coverage=coverage, train_steps=train_steps, log=self.log)

    def training_data(self, model_dir, model_config, train_config):
        """The phased training batches (:class:`~acvi_tf.data.article_batches.ArticleBatches`)
        over the encoded pairs."""
        c, steps = self.config, train_config.train_steps
        vocab = self.vocab or self.load_data(model_dir)
        pairs, report = read_pairs("train", c.max_train_pairs, log=self.log)
        if not pairs:
            raise RunError("no usable training pair was read (see the report above)")
        store = cnndm.EncodedPairs(vocab, c.max_enc_steps, c.max_dec_steps)
        for p in pairs:
            store.add(p.article, p.abstract_sents)
        del pairs
        phases = c.schedule(steps, bool(model_config.coverage))
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
        pointer = model_config.head == "pointer"
        batches = ArticleBatches(store, c.batch_size, phases, c.seed, pointer, c.pad_multiple)
        return TrainingData(
            resumable_train_data(batches.iterator),
            {"train_pairs": len(store), "train_data_report": report,
             "train_data_partial": (cnndm.split_counts("train")[0]
                                    < cnndm.SPLIT_SIZES["train"]),
             "epochs": steps * c.batch_size / len(store),
             "phases": [list(p) for p in phases.phases],
             "coverage_steps": phases.coverage_steps},
            ModeSchedule(steps, train_config.gumbel_fraction, extra=phases.modes))

    def run_trainer(self, trainer, plan):
        """Trains to the end; with coverage and ``eval_before_coverage``, evaluates on test
        at the end of the last phase first (Table 1's rows without coverage)."""
        info, phases, model_dir = {}, plan.evaluator.schedule, plan.model_dir
        coverage_start = phases.phases[-1][0]
        if plan.model_config.coverage and phases.coverage_steps and \
                self.config.eval_before_coverage:
            trainer.train(stop_at=coverage_start)
            previous = load_results(model_dir).get("no_coverage", {})
            if previous.get("steps") == coverage_start:
                info["no_coverage"] = previous  # a resumed run keeps its earlier evaluation
            elif int(trainer.step.numpy()) == coverage_start and trainer.is_chief:
                info["no_coverage"] = plan.evaluator.evaluate(
                    trainer.model, coverage_start, model_dir, suffix="_no_coverage")
                update_results(model_dir, no_coverage=info["no_coverage"])
        return info, trainer.train()

    def results(self, evaluation, model_config=None, step=0, extra=None, system=None):
        """The fields of results.json of an evaluation (its scores)."""
        data = {"task": "summarize", "dataset": "cnn_dailymail",
                "system": system or self.run.system or system_of(model_config),
                "attention": None if system else model_config.attention,
                "head": model_config.head if model_config else None,
                "vocab_size": self.config.vocab_size, "profile": self.run.profile,
                "command": self.run.command, "argv": self.run.argv,
                "decode": self.decode_config.options(final=True),
                "partial_eval": bool(self.config.max_eval_pairs), **evaluation}
        data.update(extra or {})
        return data

    def lead3(self, model_dir):
        """``--mode=lead3``, Table 1's lead-3 row: the first ``lead_sentences`` (3) sentences
        of each article of ``lead_split`` (test); the fields of results.json. With
        ``lead_split=val`` the scores go to its ``val`` section, as ``--mode=val`` writes a
        model's."""
        watch = Stopwatch()
        n, split = self.config.lead_sentences, self.config.lead_split
        pairs, report = read_pairs(split, self.config.max_eval_pairs, log=self.log)
        hyps = [novelty.lead3(p.article, n) for p in pairs]
        write_lines(os.path.join(model_dir, f"decode_{split}.txt"),
                    [" ".join(h) for h in hyps])
        scores = score_summaries(hyps, [p.abstract_sents for p in pairs], self.config.meteor,
                                 self.log)
        scores.update({f"{split}_articles": len(pairs), f"{split}_data_report": report},
                      eval_wall_time_sec=watch.seconds())
        extra = {"head": None, "vocab_size": None, "decode": None, "lead_sentences": n}
        if split == "val":
            return self.results({"steps": 0}, system=f"lead-{n}", extra={**extra, "val": scores})
        return self.results({**scores, "steps": 0}, system=f"lead-{n}", extra=extra)

    def summaries(self, trained, texts, attention_for=()):
        """Article texts -> (word lists, attention) with the final search, in the coverage
        mode of the trained step (its run's phase schedule says)."""
        examples = [cnndm.make_example(text, [], self.vocab, self.config.max_enc_steps,
                                       self.config.max_dec_steps) for text in texts]
        evaluator = self.evaluator(trained.config, trained.train_steps)
        words, attention = evaluator.summarizer(trained.model).summarize(
            examples, self.decode_config.options(final=True),
            evaluator.coverage_at(trained.step), attention_for)
        return examples, words, attention

    def decode(self, trained, lines, attention_plots=None, plot_count=0):
        """Article lines -> summaries; empty articles give empty lines."""
        keep = [i for i, line in enumerate(lines) if cnndm.split_words(line)]
        wanted = range(min(plot_count, len(keep))) if attention_plots else ()
        examples, words, attention = self.summaries(trained, [lines[i] for i in keep], wanted)
        if attention_plots:
            paths = write_attention_plots(attention_plots, trained.model, attention, [
                (j, examples[j].enc_input,
                 [self.vocab.id_to_token(t) for t in examples[j].enc_input], words[j])
                for j in wanted])
            self.log(f"attention: {len(paths)} pictures in {attention_plots}")
        out = [""] * len(lines)
        for i, w in zip(keep, words):
            out[i] = " ".join(w)
        return out

    def export(self, trained, model_dir, export_dir):
        """A SavedModel (:mod:`acvi_tf.export.summarization`): articles in, summaries out,
        as :meth:`decode` decodes them."""
        from acvi_tf.export import summarization as export_lib
        coverage = self.evaluator(trained.config, trained.train_steps).coverage_at(trained.step)
        return export_lib.export(trained.model, self.vocab, self.decode_config.options(final=True),
                                 coverage, self.config.max_enc_steps, model_dir, export_dir,
                                 trained.step, self.log)

    def validate(self, trained, model_dir):
        """``--mode=val``: the test evaluation's decode and metrics on the first
        ``max_eval_pairs`` val articles, for choosing settings without the test set; the
        ``val`` section of results.json (the test fields are left as they are)."""
        scores = self.evaluator(trained.config, trained.train_steps).evaluate(
            trained.model, trained.step, model_dir, split="val")
        scores.update(command=self.run.command, decode=self.decode_config.options(final=True))
        return {"val": scores}

    def duc2004(self, trained, model_dir):
        """``--mode=duc2004``, Table 5: a CNN/DM model summarizes DUC2004's 500 inputs; ROUGE
        recall at 75 bytes, the ``duc2004`` section of results.json, and each summary's
        ROUGE-1 recall in :data:`acvi_tf.metrics.rouge.DUC2004_ITEMS`."""
        watch = Stopwatch()
        duc = cnndm.read_duc2004()
        _, words, _ = self.summaries(trained, duc.inputs)
        path = os.path.join(model_dir, "decode_duc2004.txt")
        write_lines(path, [" ".join(w) for w in words])
        result = rouge.rouge_duc2004([[" ".join(w)] for w in words], duc.references,
                                     per_item=True)
        # ROUGE-1.5.5's own per-summary ROUGE-1 recall, for a test that resamples the
        # summaries as well as the seeds (Table 5's comparison).
        save_json(os.path.join(model_dir, rouge.DUC2004_ITEMS),
                  [100 * r for r in result.pop("items")["rouge_1"]["r"]])
        scores = percent_rouge(result, measure="r")
        self.log(f"DUC2004 ROUGE-1/2/L recall (75 bytes): {scores['rouge_1']:.2f} / "
                 f"{scores['rouge_2']:.2f} / {scores['rouge_l']:.2f}")
        scores.update(command=self.run.command, decode_file=path, steps=trained.step,
                      decode=self.decode_config.options(final=True),
                      wall_time_sec=watch.seconds(), inputs=len(duc.inputs))
        return {"duc2004": scores}
