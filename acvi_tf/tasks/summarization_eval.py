"""Summaries decoded and scored: the model's inputs of a :func:`cnndm.make_batch` dict,
batched beam search over articles (:class:`Summarizer`, the pointer's OOVs mapped back
to the article's words), ROUGE and METEOR as Table 1 reports them, and
:class:`SummarizationEvaluator` (the validation during training and the final test
evaluation, with Table 2's novelty). The task itself is
:mod:`acvi_tf.tasks.summarization`."""

import os

import numpy as np
import tensorflow as tf

from acvi_tf.data import cnndm
from acvi_tf.metrics import diversity, meteor, novelty, rouge
from acvi_tf.tasks.base import Evaluator
from acvi_tf.tasks.decode_batches import BatchedDecoder, sampled_decodes
from acvi_tf.training import summaries
from acvi_tf.training.diagnostics import DevDiagnostics
from acvi_tf.utils.files import write_lines
from acvi_tf.utils.progress import Stopwatch, log


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

    One traced decoder per (search settings, coverage mode) (:class:`BatchedDecoder`,
    keyed by the coverage switch, which the decoder reads when it is traced).
    """

    def __init__(self, model, vocab, pointer, batch_size=16):
        self.model = model
        self.vocab = vocab
        self.pointer = pointer
        self.batch_size = batch_size
        self._decoder = BatchedDecoder(self._signature(), batch_size)

    def _signature(self):
        spec = {"src": tf.TensorSpec([None, None], tf.int32)}
        if self.pointer:
            spec.update(src_ext=tf.TensorSpec([None, None], tf.int32),
                        max_oovs=tf.TensorSpec([], tf.int32))
        return spec

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
        self.model.set_mode(coverage=coverage)  # read when the decoder is traced
        lengths, make_batch = self._batches(examples)
        hyp_ids, attention = self._decoder.decode(self.model, opts, lengths, make_batch,
                                                  attention_for, key=coverage)
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

    def eval_fn(self, model, step, final=None):
        # (one protocol at every step, the last included: ``final`` changes nothing)
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
        return summaries.eval_output(scalars, texts, attention=attention)

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

