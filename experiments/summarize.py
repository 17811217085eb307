r"""Abstractive summarization on CNN/DailyMail (Section 4.1, Appendix A, Tables 1, 2, 5).

    python -m experiments.summarize --flagfile=experiments/configs/table1_cpu_pg_acvi.flags \
        --model_dir=runs/table1_cpu/pg_acvi
    python -m experiments.summarize --mode=lead3 --model_dir=runs/lead3
    python -m experiments.summarize --mode=eval --model_dir=runs/table1_cpu/pg_acvi
    python -m experiments.summarize --mode=duc2004 --model_dir=runs/table1_cpu/pg_acvi
    python -m experiments.summarize --mode=decode --model_dir=runs/table1_cpu/pg_acvi \
        --input=articles.txt --output=summaries.txt   # one tokenized article a line

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
ROUGE recall with Rush et al.'s 75-byte options and 4 references), ``decode``.

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
import os
import sys

from absl import app, flags

from experiments import common
from experiments.common import FlagError
from acvi_tf.tasks.summarization import SPLITS, data_status, how_to_get  # noqa: F401

FLAGS = flags.FLAGS
MODULE = "experiments.summarize"
MODES = common.MODES + ("lead3", "duc2004")
PHASES = ("table5", "none")

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
        log_every=100, decode_batch_size=16, allow_partial_data=False),
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
        log_every=50, decode_batch_size=32, max_eval_pairs=500, allow_partial_data=True),
    "smoke": dict(
        embed_dim=8, encoder_units=8, encoder_layers=1, decoder_units=8, decoder_layers=1,
        attention_units=8, head_units=8, dropout=0.0, score="additive", head="pointer",
        coverage=True, optimizer="adam", learning_rate=1e-2, lr_decay="none",
        train_steps=8, coverage_steps=2, phases="table5", batch_size=4, vocab_size=40,
        max_enc_steps=24, max_dec_steps=8, beam_width=2, decode_max_length=8, min_length=2,
        length_normalization="average", eval_every=0, eval_subset=4, eval_beam_width=1,
        checkpoint_every=3, log_every=2, decode_batch_size=8, progress=False,
        allow_partial_data=True),
}

DATA_FLAGS = ("vocab_size", "max_enc_steps", "max_dec_steps")
SCHEDULE_FLAGS = ("phases", "coverage_steps", "max_train_pairs")
RUN_FLAGS = ("max_eval_pairs", "meteor", "eval_before_coverage", "allow_partial_data")


def define_flags(fv=FLAGS):
    """Defines the shared flags (experiments.common) and the summarization flags."""
    common.define_flags(PROFILES, default_profile="cpu", modes=MODES, flag_values=fv)
    kw = {"flag_values": fv}
    flags.DEFINE_integer("vocab_size", 50_000, "Vocabulary size, the 4 special tokens "
                         "included (See et al.'s 50K: the most frequent words of "
                         "finished_files/vocab).", lower_bound=5, **kw)
    flags.DEFINE_integer("max_enc_steps", 400, "Article tokens the encoder reads (the last "
                         "phase's truncation).", lower_bound=1, **kw)
    flags.DEFINE_integer("max_dec_steps", 100, "Summary tokens trained on (the last phase's "
                         "truncation).", lower_bound=1, **kw)
    flags.DEFINE_enum("phases", "table5", PHASES, "table5: Table 5's five phases of growing "
                      "truncation over the steps before coverage; none: the final lengths "
                      "throughout.", **kw)
    flags.DEFINE_integer("coverage_steps", 3_000, "The last steps, with coverage on (w_k "
                         "trained, Eq. 9 in the loss); needs --coverage.", lower_bound=0, **kw)
    flags.DEFINE_integer("max_train_pairs", None, "Train on the first N pairs only.",
                         lower_bound=1, **kw)
    flags.DEFINE_integer("max_eval_pairs", None, "Evaluate on the first N test articles "
                         "(default: all; the results say so).", lower_bound=1, **kw)
    flags.DEFINE_bool("meteor", True, "Score METEOR 1.5 (exact and full; needs java).", **kw)
    flags.DEFINE_bool("eval_before_coverage", True, "With --coverage_steps, also evaluate "
                      "on test at the end of the last phase (Table 1's rows without "
                      "coverage).", **kw)
    flags.DEFINE_string("input", None, "--mode=decode: articles, one tokenized article a "
                        "line (default: stdin).", **kw)
    flags.DEFINE_string("output", None, "--mode=decode: where to write the summaries "
                        "(default: stdout).", **kw)


def check_flags(fv=FLAGS):
    """Cross-flag checks; errors name the flag."""
    common.check_run_flags(fv)
    if fv.mode in ("train", "train_eval"):
        if fv.coverage_steps >= fv.train_steps:
            raise FlagError("coverage_steps", f"{fv.coverage_steps} leaves no step of the "
                            f"{fv.train_steps} (--train_steps) before coverage")
    if fv.coverage_steps and not fv.coverage:
        raise FlagError("coverage_steps", f"{fv.coverage_steps} coverage steps need a model "
                        f"built with --coverage (or set --coverage_steps=0)")


def schedule(fv=FLAGS):
    """The :class:`PhaseSchedule` of the run (Table 5 laid over --train_steps)."""
    from acvi_tf.training.schedules import PhaseSchedule
    return PhaseSchedule.fit(fv.train_steps, fv.coverage_steps if fv.coverage else 0,
                             fv.max_enc_steps, fv.max_dec_steps, phases=fv.phases == "table5")


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def load_vocab(model_dir, fv=FLAGS):
    """The run's vocabulary: ``model_dir/vocab.txt``, written from See et al.'s vocab
    file (its first --vocab_size entries) on the first run."""
    from acvi_tf.data import cnndm
    from acvi_tf.data.vocab import Vocab
    path = os.path.join(model_dir, "vocab.txt")
    if os.path.exists(path):
        return Vocab.load(path)
    vocab = cnndm.load_vocab(fv.vocab_size)
    os.makedirs(model_dir, exist_ok=True)
    vocab.save(path)
    return vocab


def read_pairs(split, limit=None, log=None):
    """(pairs, report) of the local chunks of ``split``: counts against the official size."""
    from acvi_tf.data import cnndm
    stats = cnndm.ReadStats()
    pairs = list(cnndm.iter_pairs(split, limit=limit, stats=stats))
    report = f"{cnndm.counts_report((split,))[0]}; {stats.report()}"
    if log:
        log(f"cnn_dailymail {report}")
    return pairs, report


class TrainStream:
    """Training batches whose truncation follows the phase schedule, resumably.

    Each batch is one optimiser step, so the stream counts steps itself and cuts
    the examples to ``schedule.phase(step)``'s lengths. Epochs are fresh
    permutations drawn from (seed, epoch); the position is (epoch, index, step).
    """

    def __init__(self, store, batch_size, phase_schedule, seed=0, pointer=True):
        self.store = store
        self.batch_size = min(batch_size, len(store))
        self.schedule = phase_schedule
        self.seed = seed
        self.pointer = pointer
        self.epoch = self.index = self.step = 0

    def state_dict(self):
        return {"epoch": self.epoch, "index": self.index, "step": self.step}

    def load_state_dict(self, state):
        self.epoch, self.index, self.step = state["epoch"], state["index"], state["step"]

    def __iter__(self):
        import numpy as np
        from acvi_tf.data import cnndm
        while True:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.store))
            while self.index + self.batch_size <= len(order):
                idx = order[self.index:self.index + self.batch_size]
                phase = self.schedule.phase(self.step)
                examples = [self.store.example(i, phase["max_enc_steps"], phase["max_dec_steps"])
                            for i in idx]
                batch = cnndm.make_batch(examples, self.store.vocab)
                self.index += self.batch_size
                self.step += 1
                yield model_inputs(batch, self.store.vocab, self.pointer, with_targets=True)
            self.epoch += 1
            self.index = 0


def model_inputs(batch, vocab, pointer, with_targets=False):
    """The tensors the model reads from a :func:`cnndm.make_batch` dict.

    The softmax head (Table 1's plain seq2seq rows) has no extended vocabulary:
    its targets see ``[UNK]`` for every OOV.
    """
    import numpy as np
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


# ---------------------------------------------------------------------------
# Decoding and scoring
# ---------------------------------------------------------------------------

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

    def _decoder(self, opts, coverage):
        import tensorflow as tf
        key = (tuple(sorted(opts.items())), coverage)
        if key not in self._decoders:
            self.model.set_mode(coverage=coverage)
            spec = {"src": tf.TensorSpec([None, None], tf.int32)}
            if self.pointer:
                spec.update(src_ext=tf.TensorSpec([None, None], tf.int32),
                            max_oovs=tf.TensorSpec([], tf.int32))
            self._decoders[key] = common.best_hypothesis_decoder(self.model, spec, **opts)
        return self._decoders[key]

    def summarize(self, examples, opts, coverage=False, attention_for=()):
        """Decodes :class:`cnndm.Example` s; returns (word lists, attention dict)."""
        from acvi_tf.data import cnndm
        decode = self._decoder(opts, coverage)

        def make_batch(idx):
            batch = cnndm.make_batch([examples[i] for i in idx], self.vocab)
            return model_inputs(batch, self.vocab, self.pointer)

        lengths = [len(e.enc_input) for e in examples]
        hyp_ids, attention = common.decode_in_batches(decode, lengths, make_batch,
                                                      self.batch_size, attention_for)
        words = [cnndm.strip_decoded(cnndm.outputids2words(ids, self.vocab,
                                                           e.article_oovs if self.pointer else []))
                 for ids, e in zip(hyp_ids, examples)]
        return words, attention


def summary_sentences(words):
    """A decoded word list -> sentences, one per ROUGE line (See et al. split at '.')."""
    from acvi_tf.metrics.novelty import split_sentences
    return split_sentences(words)


def percent_rouge(result, measure="f"):
    """ROUGE result -> {"rouge_1": %, ..., "ci": {...}} for results.json."""
    keys = ("rouge_1", "rouge_2", "rouge_l")
    out = {k: 100 * result[k][measure] for k in keys}
    out["ci"] = {k: [100 * v for v in result[k][f"{measure}_ci"]] for k in keys}
    out["measure"] = {"f": "F1", "r": "recall", "p": "precision"}[measure]
    out["options"] = result["options"]
    out["count"] = result["count"]
    return out


def score_summaries(hyp_sents, ref_sents, fv=FLAGS, log=None):
    """ROUGE-1/2/L F1 (See et al.'s options) and METEOR exact / full, in percent."""
    from acvi_tf.metrics import meteor, rouge
    log = log or _log
    watch = common.Stopwatch()
    scores = {"rouge": percent_rouge(rouge.rouge_cnndm(hyp_sents, ref_sents))}
    log(f"ROUGE-1/2/L F1: {scores['rouge']['rouge_1']:.2f} / {scores['rouge']['rouge_2']:.2f} "
        f"/ {scores['rouge']['rouge_l']:.2f} ({len(hyp_sents)} summaries, "
        f"{watch.seconds():.0f} s)")
    if fv.meteor:
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


class Evaluator:
    """Validation during training (greedy, val subset) and the final test evaluation."""

    def __init__(self, vocab, phase_schedule, fv=FLAGS, log=None):
        self.vocab = vocab
        self.schedule = phase_schedule
        self.fv = fv
        self.log = log or _log
        self.pointer = fv.head == "pointer"
        self._pairs = {}
        self._summarizers = {}
        self.final_diagnostics = None  # the run diagnostics of the end-of-training evaluation

    def examples(self, split, limit):
        """(pairs, examples at the final lengths, data report) of the first ``limit``."""
        from acvi_tf.data import cnndm
        if (split, limit) not in self._pairs:
            pairs, report = read_pairs(split, limit, log=self.log)
            examples = [cnndm.make_example(p.article, p.abstract_sents, self.vocab,
                                           self.fv.max_enc_steps, self.fv.max_dec_steps)
                        for p in pairs]
            self._pairs[(split, limit)] = (pairs, examples, report)
        return self._pairs[(split, limit)]

    def summarizer(self, model):
        if id(model) not in self._summarizers:
            self._summarizers[id(model)] = Summarizer(model, self.vocab, self.pointer,
                                                      self.fv.decode_batch_size)
        return self._summarizers[id(model)]

    def dev_diagnostics(self, model, examples, coverage):
        """The run diagnostics (acvi_tf.training.diagnostics: dev NLL, KL per token,
        attention entropy, ||h||, sigma, context use) on these val examples, teacher
        forced in the coverage mode of the evaluated model."""
        from acvi_tf.data import cnndm
        from acvi_tf.training.diagnostics import DevDiagnostics
        if not hasattr(self, "_diagnostics"):
            self._diagnostics = DevDiagnostics()
        size = self.fv.decode_batch_size
        batches = (model_inputs(cnndm.make_batch(examples[i:i + size], self.vocab), self.vocab,
                                self.pointer, with_targets=True)
                   for i in range(0, len(examples), size))
        model.set_mode(coverage=coverage)
        return self._diagnostics(model, batches, mode_key=coverage)

    def coverage_at(self, step):
        """Whether the model of ``step`` trained steps decodes with coverage."""
        return bool(self.fv.coverage) and self.schedule.phase(max(step - 1, 0))["coverage"]

    def eval_fn(self, model, step):
        from acvi_tf.metrics import rouge
        from acvi_tf.training import summaries
        pairs, examples, _ = self.examples("val", self.fv.eval_subset or None)
        watch = common.Stopwatch()
        words, attention = self.summarizer(model).summarize(
            examples, common.decode_options(self.fv, final=False), self.coverage_at(step),
            attention_for=(0,))
        hyps = [summary_sentences(w) or ["."] for w in words]
        r = rouge.rouge_cnndm(hyps, [p.abstract_sents for p in pairs])
        scalars = {f"val_{k}": 100 * r[k]["f"] for k in ("rouge_1", "rouge_2", "rouge_l")}
        scalars["val_decode_seconds"] = watch.seconds()
        scalars.update(self.dev_diagnostics(model, examples, self.coverage_at(step)))
        if step >= self.fv.train_steps:
            self.final_diagnostics = scalars
        texts = {f"sample_{i}": f"**article:** {' '.join(pairs[i].article.split()[:80])} ...\n\n"
                 f"**reference:** {' '.join(pairs[i].abstract_sents)}\n\n"
                 f"**summary:** {' '.join(words[i])}" for i in range(min(2, len(pairs)))}
        images = {}
        if 0 in attention and attention[0].size:
            images["attention_sample_0"] = summaries.attention_image(attention[0])
        return {"scalars": scalars, "texts": texts, "images": images}

    def evaluate(self, model, step, model_dir, suffix=""):
        """Decodes the test articles; writes decode/reference files; returns the scores."""
        from acvi_tf.metrics import novelty
        pairs, examples, report = self.examples("test", self.fv.max_eval_pairs)
        watch = common.Stopwatch()
        coverage = self.coverage_at(step)
        words, _ = self.summarizer(model).summarize(
            examples, common.decode_options(self.fv, final=True), coverage)
        decode_seconds = watch.seconds()
        self.log(f"decoded {len(words)} test articles at step {step} (coverage "
                 f"{'on' if coverage else 'off'}) in {decode_seconds:.0f} s")
        # An empty summary scores 0; "." keeps ROUGE's input files non-empty.
        hyp_sents = [summary_sentences(w) or ["."] for w in words]
        path = os.path.join(model_dir, f"decode_test{suffix}.txt")
        common.write_text(path, "\n".join(" ".join(w) for w in words))
        common.write_text(os.path.join(model_dir, "reference_test.txt"),
                          "\n".join(" ".join(p.abstract_sents) for p in pairs))
        scores = score_summaries(hyp_sents, [p.abstract_sents for p in pairs], self.fv,
                                 self.log)
        scores["novelty"] = novelty.novelty_stats(
            words, [p.article for p in pairs], [e.article_oovs for e in examples])
        self.log(f"novel words {scores['novelty']['novel_word_percent']:.2f}%, OOV adoption "
                 f"{scores['novelty']['oov_adoption_percent']:.2f}%")
        scores.update(steps=step, coverage=coverage, decode_file=path,
                      test_articles=len(pairs), test_data_report=report,
                      decode_seconds=decode_seconds, eval_wall_time_sec=watch.seconds())
        return scores


# ---------------------------------------------------------------------------
# Modes
# ---------------------------------------------------------------------------

def _save_run_config(model_dir, fv=FLAGS):
    names = (DATA_FLAGS + SCHEDULE_FLAGS + common.MODEL_FLAGS + common.TRAIN_FLAGS
             + common.DECODE_FLAGS + RUN_FLAGS)
    common.save_run_config(model_dir, MODULE, names, None, fv)


def model_config(vocab, fv=FLAGS):
    return common.model_config_from_flags(
        fv, src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), pad_id=vocab.pad_id,
        unk_id=vocab.unk_id, bos_id=vocab.bos_id, eos_id=vocab.eos_id)


def _dummy_batch(pointer):
    import numpy as np
    batch = {"src": np.full([1, 3], 4, np.int32), "tgt_in": np.asarray([[2, 4]], np.int32),
             "tgt_out": np.asarray([[4, 3]], np.int32)}
    if pointer:
        batch.update(src_ext=np.asarray([[4, 4, 4]], np.int32), max_oovs=np.int32(0))
    return batch


def run_train(model_dir, fv=FLAGS):
    """Trains (resuming if possible); evaluates on test before coverage when asked.

    Returns (model, evaluator, info).
    """
    from acvi_tf.data import cnndm
    from acvi_tf.training.schedules import ModeSchedule
    from acvi_tf.training.trainer import Trainer
    watch = common.Stopwatch()
    os.makedirs(model_dir, exist_ok=True)
    vocab = load_vocab(model_dir, fv)
    pairs, report = read_pairs("train", fv.max_train_pairs, log=_log)
    if not pairs:
        raise SystemExit("error: no usable training pair was read (see the report above)")
    store = cnndm.EncodedPairs(vocab, fv.max_enc_steps, fv.max_dec_steps)
    for p in pairs:
        store.add(p.article, p.abstract_sents)
    del pairs
    phases = schedule(fv)
    _log(f"train: {len(store):,} pairs, vocabulary {len(vocab):,}; {fv.train_steps:,} steps of "
         f"{fv.batch_size} = {fv.train_steps * fv.batch_size / len(store):.2f} epochs; phases "
         f"(end step, enc, dec): {list(phases.phases)}, then {phases.coverage_steps} with "
         f"coverage")
    config = model_config(vocab, fv)
    common.check_model_config(model_dir, config)
    _save_run_config(model_dir, fv)
    pointer = fv.head == "pointer"
    stream_args = (store, fv.batch_size, phases, fv.seed, pointer)
    evaluator = Evaluator(vocab, phases, fv)
    trainer = Trainer(lambda: common.build_model(config),
                      common.train_config_from_flags(model_dir, fv),
                      common.resumable_train_data(lambda: TrainStream(*stream_args)),
                      eval_fn=evaluator.eval_fn,
                      mode_schedule=ModeSchedule(fv.train_steps, fv.gumbel_fraction,
                                                 extra=phases.modes),
                      strategy=common.make_strategy(fv), log=_log,
                      warm_start=common.warm_start_fn(fv.init_from, model_dir,
                                                      _dummy_batch(pointer), _log))
    info = {}
    coverage_start = phases.phases[-1][0]
    if fv.coverage and phases.coverage_steps and fv.eval_before_coverage:
        trainer.train(stop_at=coverage_start)
        previous = _load_results(model_dir).get("no_coverage", {})
        if previous.get("steps") == coverage_start:
            info["no_coverage"] = previous  # a resumed run keeps its earlier evaluation
        elif int(trainer.step.numpy()) == coverage_start:
            info["no_coverage"] = evaluator.evaluate(trainer.model, coverage_start, model_dir,
                                                     suffix="_no_coverage")
            common.update_results(model_dir, no_coverage=info["no_coverage"])
    metrics = trainer.train()
    info.update({"steps": int(trainer.step.numpy()), "train_wall_time_sec": watch.seconds(),
                 "train_metrics": {k: float(v) for k, v in metrics.items()},
                 "train_pairs": len(store), "train_data_report": report,
                 "train_data_partial": cnndm.split_counts("train")[0] < cnndm.SPLIT_SIZES["train"],
                 "epochs": fv.train_steps * fv.batch_size / len(store),
                 "phases": [list(p) for p in phases.phases],
                 "coverage_steps": phases.coverage_steps,
                 "train_command": common.command_line(MODULE),
                 "diagnostics": evaluator.final_diagnostics})
    return trainer.model, evaluator, info


def _load_results(model_dir):
    path = os.path.join(model_dir, "results.json")
    return common.load_json(path) if os.path.exists(path) else {}


def _system(fv):
    name = common.system_name(fv)
    return name if fv.head == "pointer" else f"seq2seq-{name}"


def _finish(model_dir, scores, fv=FLAGS, extra=None, system=None):
    data = {"task": "summarize", "dataset": "cnn_dailymail", "system": system or _system(fv),
            "attention": None if system else fv.attention, "head": fv.head,
            "vocab_size": fv.vocab_size, "profile": fv.profile,
            "command": common.command_line(MODULE), "argv": sys.argv,
            "decode": common.decode_options(fv, final=True),
            "partial_eval": bool(fv.max_eval_pairs), **scores}
    data.update(extra or {})
    return common.finish_results(model_dir, data, _log)


def run_lead3(model_dir, fv=FLAGS):
    """Table 1's lead-3 row: the first three sentences of each test article."""
    from acvi_tf.metrics import novelty
    watch = common.Stopwatch()
    pairs, report = read_pairs("test", fv.max_eval_pairs, log=_log)
    hyps = [novelty.lead3(p.article) for p in pairs]
    common.write_text(os.path.join(model_dir, "decode_test.txt"),
                      "\n".join(" ".join(h) for h in hyps))
    scores = score_summaries(hyps, [p.abstract_sents for p in pairs], fv)
    scores.update(test_articles=len(pairs), test_data_report=report, steps=0,
                  eval_wall_time_sec=watch.seconds())
    return _finish(model_dir, scores, fv, system="lead-3",
                   extra={"head": None, "vocab_size": None, "decode": None})


def run_duc2004(model, step, model_dir, fv=FLAGS):
    """Table 5: a CNN/DM model summarizes DUC2004's 500 inputs; ROUGE recall at 75 bytes."""
    from acvi_tf.data import cnndm
    from acvi_tf.metrics import rouge
    watch = common.Stopwatch()
    vocab = load_vocab(model_dir, fv)
    duc = cnndm.read_duc2004()
    examples = [cnndm.make_example(text, [], vocab, fv.max_enc_steps, fv.max_dec_steps)
                for text in duc.inputs]
    evaluator = Evaluator(vocab, schedule(fv), fv)
    words, _ = evaluator.summarizer(model).summarize(
        examples, common.decode_options(fv, final=True), evaluator.coverage_at(step))
    path = os.path.join(model_dir, "decode_duc2004.txt")
    common.write_text(path, "\n".join(" ".join(w) for w in words))
    result = rouge.rouge_duc2004([[" ".join(w)] for w in words], duc.references)
    scores = percent_rouge(result, measure="r")
    _log(f"DUC2004 ROUGE-1/2/L recall (75 bytes): {scores['rouge_1']:.2f} / "
         f"{scores['rouge_2']:.2f} / {scores['rouge_l']:.2f}")
    scores.update(command=common.command_line(MODULE), decode_file=path, steps=step,
                  decode=common.decode_options(fv, final=True),
                  wall_time_sec=watch.seconds(), inputs=len(duc.inputs))
    return common.update_results(model_dir, duc2004=scores)


def run_decode(model, step, model_dir, fv=FLAGS):
    from acvi_tf.data import cnndm
    vocab = load_vocab(model_dir, fv)
    if fv.input:
        with open(fv.input, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f]
    else:
        lines = [line.rstrip("\n") for line in sys.stdin]
    keep = [i for i, line in enumerate(lines) if cnndm.split_words(line)]
    examples = [cnndm.make_example(lines[i], [], vocab, fv.max_enc_steps, fv.max_dec_steps)
                for i in keep]
    evaluator = Evaluator(vocab, schedule(fv), fv)
    words, _ = evaluator.summarizer(model).summarize(
        examples, common.decode_options(fv, final=True), evaluator.coverage_at(step))
    out = [""] * len(lines)  # an empty article gives an empty line
    for i, w in zip(keep, words):
        out[i] = " ".join(w)
    text = "".join(s + "\n" for s in out)
    if fv.output:
        with open(fv.output, "w", encoding="utf-8") as f:
            f.write(text)
        _log(f"wrote {len(out)} summaries to {fv.output}")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


_log = common.log


def main(argv):
    logging.getLogger("absl").setLevel(logging.WARNING)
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    fv = FLAGS
    model_dir = common.require_model_dir(fv)
    # duc2004 reads a trained model exactly as eval does.
    restore_mode = "eval" if fv.mode == "duc2004" else fv.mode
    saved = common.resolve_run_flags(model_dir, restore_mode, PROFILES,
                                     DATA_FLAGS + common.MODEL_FLAGS, fv)
    if saved:
        for name in SCHEDULE_FLAGS + ("train_steps",):
            if name in saved["flags"] and not common.explicit(name, fv):
                fv.set_default(name, saved["flags"][name])
    check_flags(fv)
    if fv.dry_run:
        complete, lines = data_status()
        print(f"command: {common.command_line(MODULE)}\n" + "\n".join(lines))
        return 0 if complete else 3

    from acvi_tf.data.sources import DataError
    from acvi_tf.metrics.meteor import MeteorError
    from acvi_tf.metrics.rouge import RougeError
    try:
        if fv.mode == "lead3":
            os.makedirs(model_dir, exist_ok=True)
            run_lead3(model_dir, fv)
            return 0
        if fv.mode in ("train", "train_eval"):
            complete, lines = data_status()
            if not complete and not fv.allow_partial_data:
                _log("\n".join(lines))
                raise SystemExit(
                    f"error: the cnn_dailymail files above are missing or partial copies, and "
                    f"--profile={fv.profile} needs the full data (the results would not be "
                    f"comparable). Get them: {how_to_get()}. Or pass --allow_partial_data.")
            model, evaluator, info = run_train(model_dir, fv)
            if fv.mode == "train":
                common.update_results(model_dir, **info)
                return 0
            scores = evaluator.evaluate(model, info["steps"], model_dir)
            _finish(model_dir, scores, fv, extra=info)
            return 0
        model, step = common.load_model(model_dir, _dummy_batch(fv.head == "pointer"))
        if fv.mode == "decode":
            run_decode(model, step, model_dir, fv)
        elif fv.mode == "duc2004":
            run_duc2004(model, step, model_dir, fv)
        else:
            scores = Evaluator(load_vocab(model_dir, fv), schedule(fv), fv).evaluate(
                model, step, model_dir)
            _finish(model_dir, scores, fv)
        return 0
    except DataError as e:
        raise SystemExit(f"error: data missing or malformed: {e}") from None
    except (RougeError, MeteorError) as e:
        raise SystemExit(f"error: metric could not run: {e}") from None
    except FileNotFoundError as e:
        raise SystemExit(f"error: {e}") from None
    except common.ConfigError as e:
        raise FlagError(e.field, e.detail) from None


if __name__ == "__main__":
    define_flags()
    app.run(main)
