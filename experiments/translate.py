r"""Machine translation (Section 4.3, Appendix C, Table 4): train, evaluate, decode.

    python -m experiments.translate --flagfile=experiments/configs/table4_envi_acvi.flags
    python -m experiments.translate --dataset=multi30k --src=en --tgt=de --profile=cpu \
        --attention=acvi --model_dir=runs/m30k_acvi
    python -m experiments.translate --model_dir=runs/m30k_acvi --mode=eval
    python -m experiments.translate --model_dir=runs/m30k_acvi --mode=decode \
        --input=sentences.en --output=sentences.de

Modes: ``train_eval`` (default) trains, then decodes dev and test with
``--beam_width`` and prints BLEU with sacrebleu's signature and the diversity of
the translations (entropy, distinct-1/2 of Bahuleyan et al. 2018, over the
whitespace tokens of the decoded corpus: :mod:`acvi_tf.metrics.diversity`);
``train``; ``eval``
(a trained ``--model_dir``); ``decode`` (``--input`` or stdin to ``--output`` or
stdout; input in the dataset's form: Moses-tokenized for IWSLT/Multi30k ``tok``,
raw text for WMT); ``copy_baseline`` (the source sentence as the translation).

Everything a run needs to be rebuilt lives in ``--model_dir``: ``model_config.json``,
``run_config.json`` (the resolved flags), the vocabularies (``vocab.<lang>.txt``)
or the BPE model (``bpe/spm.model``), the Trainer's checkpoints (``ckpt/``),
TensorBoard logs (``train/``, ``eval/``: dev BLEU, sample translations, an
attention heat-map), ``decode_{dev,test}.txt`` and ``results.json``.

Profiles (``--profile``; any explicit flag overrides): ``paper`` (Section
4.3/Appendix C: 256-d embeddings, 2-layer BiLSTM encoder, 2-layer LSTM decoder,
256 units, dropout 0.2, SGD lr 1.0 with the luong step decay, 12K steps, batch
128, beam 10, max length 50), ``cpu`` (one Multi30k model in under ~30 minutes on
2 CPU cores), ``smoke`` (seconds; tests).
"""

import logging
import os
import shutil
import sys

from absl import app, flags

from acvi_tf.metrics import diversity
from experiments import common
from experiments.common import FlagError
from acvi_tf.tasks.translation import data_status, how_to_get  # noqa: F401

FLAGS = flags.FLAGS
MODULE = "experiments.translate"

# Registry names (acvi_tf.data.translation.DATASETS), spelled here so that flag
# parsing does not import TensorFlow; a test checks they agree.
DATASETS = ("iwslt15_en_vi", "wmt16_en_ro", "multi30k")
LANGS = {"iwslt15_en_vi": ("en", "vi"), "wmt16_en_ro": ("en", "ro"), "multi30k": ("en", "de")}
MODES = common.MODES + ("copy_baseline",)

PROFILES = {
    # Section 4.3 and Appendix C; the rest as tensorflow/nmt's IWSLT'15 defaults.
    "paper": dict(
        embed_dim=256, encoder_units=256, encoder_layers=2, decoder_units=256, decoder_layers=2,
        attention_units=256, head_units=256, dropout=0.2, score="multiplicative",
        optimizer="sgd", learning_rate=1.0, lr_decay="luong", clip_norm=5.0,
        train_steps=12_000, batch_size=128, max_length=50, overlong="truncate",
        beam_width=10, decode_max_length=50, length_normalization="none",
        eval_every=1000, eval_subset=500, eval_beam_width=1, checkpoint_every=1000,
        log_every=100, bpe_vocab_size=32_000, min_count=2, allow_partial_data=False),
    # Measured on 2 CPU cores (see experiments/configs/table4cpu_multi30k_*.flags).
    "cpu": dict(
        embed_dim=256, encoder_units=128, encoder_layers=1, decoder_units=256,
        decoder_layers=1, attention_units=256, head_units=256, dropout=0.2,
        score="multiplicative", optimizer="adam", learning_rate=1e-3, lr_decay="none",
        clip_norm=5.0, train_steps=2500, batch_size=64, max_length=50, overlong="filter",
        beam_width=5, decode_max_length=50, length_normalization="none",
        eval_every=500, eval_subset=200, eval_beam_width=1, checkpoint_every=500,
        log_every=50, min_count=2, bpe_vocab_size=8_000, allow_partial_data=False),
    "smoke": dict(
        embed_dim=16, encoder_units=16, encoder_layers=1, decoder_units=16, decoder_layers=1,
        attention_units=16, head_units=16, dropout=0.1, score="multiplicative",
        optimizer="adam", learning_rate=1e-2, lr_decay="none", train_steps=6, batch_size=8,
        max_length=30, overlong="filter", beam_width=2, decode_max_length=20,
        eval_every=3, eval_subset=8, eval_beam_width=1, checkpoint_every=3, log_every=2,
        min_count=1, bpe_vocab_size=200, progress=False, allow_partial_data=True,
        decode_batch_size=16),
}

DATA_FLAGS = ("dataset", "src", "tgt", "variant", "min_count", "max_vocab_size",
              "bpe_vocab_size", "max_train_lines", "max_length", "overlong", "num_buckets")
# Saved with the run (flags.txt reproduces it) but never restored from it.
RUN_FLAGS = ("max_eval_lines", "pad_multiple", "allow_partial_data")

def define_flags(fv=FLAGS):
    """Defines the shared flags (experiments.common) and the translation flags in ``fv``."""
    common.define_flags(PROFILES, default_profile="cpu", modes=MODES, flag_values=fv)
    kw = {"flag_values": fv}
    flags.DEFINE_enum("dataset", "multi30k", DATASETS,
                      "Translation dataset (data registry name).", **kw)
    flags.DEFINE_string("src", None, "Source language (default: the dataset's first).", **kw)
    flags.DEFINE_string("tgt", None, "Target language (default: the dataset's other one).",
                        **kw)
    flags.DEFINE_enum("variant", "tok", ("tok", "raw"), "Multi30k files: tok (official "
                      "lowercased, tokenized; default) or raw.", **kw)
    flags.DEFINE_integer("min_count", 2, "Multi30k: words seen fewer times become <unk>.",
                         lower_bound=1, **kw)
    flags.DEFINE_integer("max_vocab_size", None, "Cap on the word vocabularies (specials "
                         "included).", lower_bound=5, **kw)
    flags.DEFINE_integer("bpe_vocab_size", 32_000, "WMT'16: shared sentencepiece BPE size.",
                         lower_bound=100, **kw)
    flags.DEFINE_integer("max_train_lines", None, "Read only the first N training pairs.",
                         lower_bound=1, **kw)
    flags.DEFINE_integer("max_eval_lines", None, "Evaluate on the first N dev/test pairs "
                         "only (quick runs; the results say so).", lower_bound=1, **kw)
    flags.DEFINE_integer("max_length", 50, "Training length limit in tokens (both sides).",
                         lower_bound=1, **kw)
    flags.DEFINE_enum("overlong", "filter", ("filter", "truncate"), "Training pairs beyond "
                      "--max_length: drop them, or cut them (tensorflow/nmt).", **kw)
    flags.DEFINE_integer("num_buckets", 5, "Length buckets of the training batches.",
                         lower_bound=1, **kw)
    flags.DEFINE_integer("pad_multiple", 0, "Pad batch lengths up to a multiple of this "
                         "(fewer shapes for --xla); 0: no padding.", lower_bound=0, **kw)
    flags.DEFINE_string("input", None, "--mode=decode: the file to translate (default: "
                        "stdin).", **kw)
    flags.DEFINE_string("output", None, "--mode=decode: where to write (default: stdout).",
                        **kw)


define_flags()

# ---------------------------------------------------------------------------
# Flags -> settings
# ---------------------------------------------------------------------------

def resolve_languages(fv=FLAGS):
    langs = LANGS[fv.dataset]
    src = fv.src or langs[0]
    if src not in langs:
        raise FlagError("src", f"{src!r} is not a language of --dataset={fv.dataset} "
                        f"(choose {' or '.join(langs)})")
    tgt = fv.tgt or next(l for l in langs if l != src)
    if tgt not in langs:
        raise FlagError("tgt", f"{tgt!r} is not a language of --dataset={fv.dataset} "
                        f"(choose {' or '.join(langs)})")
    if tgt == src:
        raise FlagError("tgt", f"equals --src={src}")
    return src, tgt


def check_flags(fv=FLAGS):
    """Cross-flag checks that absl cannot express; errors name the flag."""
    resolve_languages(fv)
    if fv.variant == "raw" and fv.dataset != "multi30k":
        raise FlagError("variant", f"'raw' exists for multi30k only, not --dataset={fv.dataset}")
    common.check_run_flags(fv)


# ---------------------------------------------------------------------------
# Data and vocabularies in the model_dir
# ---------------------------------------------------------------------------

def _vocab_path(model_dir, lang):
    return os.path.join(model_dir, f"vocab.{lang}.txt")


def _bpe_dir(model_dir):
    return os.path.join(model_dir, "bpe")


def load_or_build_data(model_dir, src, tgt, fv=FLAGS, log=print):
    """The :class:`TranslationData`, from ``model_dir`` if saved there, else
    built from the data (and then saved into ``model_dir``)."""
    from acvi_tf.data import translation as tr
    from acvi_tf.data.vocab import Vocab
    dataset = fv.dataset
    if dataset == "wmt16_en_ro":
        spm_model = os.path.join(_bpe_dir(model_dir), tr.SPM_MODEL)
        if not os.path.exists(spm_model):
            shared = tr.default_bpe_dir(fv.bpe_vocab_size)
            log(f"training/reusing the shared BPE model in {shared} ...")
            model = tr.train_bpe(shared, fv.bpe_vocab_size, seed=0)
            os.makedirs(_bpe_dir(model_dir), exist_ok=True)
            for name in (tr.SPM_MODEL, tr.SPM_VOCAB, tr.SPM_MANIFEST):
                shutil.copy2(os.path.join(os.path.dirname(model), name),
                             os.path.join(_bpe_dir(model_dir), name))
        codec = tr.SentencePieceCodec(spm_model)
        return tr.TranslationData(dataset, src, tgt, codec.vocab, codec.vocab, codec, fv.variant,
                                  report=f"shared BPE model {spm_model} ({len(codec)} pieces)")
    paths = [_vocab_path(model_dir, src), _vocab_path(model_dir, tgt)]
    if all(os.path.exists(p) for p in paths):
        src_vocab, tgt_vocab = (Vocab.load(p) for p in paths)
        return tr.TranslationData(dataset, src, tgt, src_vocab, tgt_vocab, None, fv.variant,
                                  report=f"vocabularies from {model_dir}")
    data = tr.prepare(dataset, src, tgt, min_count=fv.min_count,
                      max_vocab_size=fv.max_vocab_size, variant=fv.variant)
    os.makedirs(model_dir, exist_ok=True)
    data.src_vocab.save(paths[0])
    data.tgt_vocab.save(paths[1])
    return data


def model_config(data, fv=FLAGS):
    from acvi_tf.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID
    return common.model_config_from_flags(
        fv, src_vocab_size=len(data.src_vocab), tgt_vocab_size=len(data.tgt_vocab),
        pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID)


def _pad_to_multiple(batch, multiple):
    import tensorflow as tf
    if not multiple:
        return batch
    out = dict(batch)
    for key in ("src", "tgt_in", "tgt_out"):
        x = batch[key]
        length = tf.shape(x)[1]
        target = (length + multiple - 1) // multiple * multiple
        out[key] = tf.pad(x, [[0, 0], [0, target - length]])
    return out


def make_train_data(batches, pad_multiple=0):
    """The Trainer's data protocol over a resumable :class:`Batches` pipeline."""
    return common.resumable_train_data(batches.iterator,
                                       lambda b: _pad_to_multiple(b, pad_multiple))


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------

class Translator:
    """Batched decoding of id sequences with one set of search settings.

    Sentences are decoded in length-sorted batches (less padding) and returned
    in input order. ``translate`` gives the hypothesis strings (through
    ``data.decode_batch``), their target ids, and optionally the attention of the
    requested sentences ([hyp_len, src_len]).
    """

    def __init__(self, model, data, beam_width=1, max_length=50, min_length=0,
                 length_normalization="none", alpha=0.6, batch_size=64):
        import tensorflow as tf
        self.data = data
        self.beam_width = beam_width
        self.batch_size = batch_size
        self._decode = common.best_hypothesis_decoder(
            model, {"src": tf.TensorSpec([None, None], tf.int32)}, beam_width=beam_width,
            max_length=max_length, min_length=min_length,
            length_normalization=length_normalization, alpha=alpha)

    def translate(self, src_ids, attention_for=()):
        import numpy as np
        lengths = [len(s) for s in src_ids]

        def make_batch(idx):
            src = np.zeros([len(idx), max(lengths[i] for i in idx)], np.int32)
            for row, i in enumerate(idx):
                src[row, :lengths[i]] = src_ids[i]
            return {"src": src}

        hyp_ids, attention = common.decode_in_batches(self._decode, lengths, make_batch,
                                                      self.batch_size, attention_for)
        return self.data.decode_batch(hyp_ids), hyp_ids, attention


class Evaluator:
    """Dev/test decoding, BLEU and the Trainer's ``eval_fn``."""

    def __init__(self, data, fv=FLAGS, log=None):
        self.data = data
        self.fv = fv
        self.log = log or (lambda m: print(m, file=sys.stderr, flush=True))
        self._splits = {}
        self._translators = {}
        self._loss_batches = {}
        self.final_dev = None  # (step, hyps, BleuResult) of the end-of-training full dev
        self.final_diagnostics = None  # the run diagnostics of that evaluation

    def split(self, split):
        """(src ids, source strings, reference strings) of a split, cut to --max_eval_lines."""
        if split not in self._splits:
            limit = self.fv.max_eval_lines
            src_ids, _, corpus = self.data.encode(split, max_lines=limit)
            refs = self.data.references(split)[:len(src_ids)]
            from acvi_tf.data.translation import references
            sources_text = references(self.data.dataset, split, self.data.src_lang,
                                      self.data.variant)[:len(src_ids)]
            self._splits[split] = (src_ids, sources_text, refs, corpus.report)
        return self._splits[split]

    def translator(self, model, final):
        opts = common.decode_options(self.fv, final=final)
        key = (id(model), tuple(sorted(opts.items())))
        if key not in self._translators:
            self._translators[key] = Translator(model, self.data,
                                                batch_size=self.fv.decode_batch_size, **opts)
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
        from acvi_tf.data.translation import Batches
        from acvi_tf.training.diagnostics import DevDiagnostics
        limit = subset or self.fv.max_eval_lines
        if limit not in self._loss_batches:
            src_ids, tgt_ids, _ = self.data.encode("dev", max_lines=limit)
            self._loss_batches[limit] = Batches(
                src_ids, tgt_ids, self.fv.decode_batch_size, shuffle=False, bucketing=False,
                max_src_len=None, max_tgt_len=None, prefetch=False)
        if not hasattr(self, "_diagnostics"):
            self._diagnostics = DevDiagnostics()
        return self._diagnostics(model, self._loss_batches[limit].dataset())

    def eval_fn(self, model, step):
        from acvi_tf.training import summaries
        final = step >= self.fv.train_steps
        subset = 0 if final else self.fv.eval_subset
        watch = common.Stopwatch()
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
        texts["dev_bleu"] = (f"{bleu} on {n} dev sentences, beam "
                             f"{self.fv.beam_width if final else self.fv.eval_beam_width}")
        images = {}
        if 0 in attention and attention[0].size:
            images["attention_sample_0"] = summaries.attention_image(attention[0])
        return {"scalars": scalars, "texts": texts, "images": images}


# ---------------------------------------------------------------------------
# Modes
# ---------------------------------------------------------------------------

def _save_run_config(model_dir, src, tgt, fv=FLAGS):
    names = (DATA_FLAGS + common.MODEL_FLAGS + common.TRAIN_FLAGS + common.DECODE_FLAGS
             + RUN_FLAGS)
    common.save_run_config(model_dir, MODULE, names, {"src": src, "tgt": tgt}, fv)


def _dummy_batch():
    import numpy as np
    return {"src": np.full([1, 2], 4, np.int32), "tgt_in": np.asarray([[2, 4]], np.int32),
            "tgt_out": np.asarray([[4, 3]], np.int32)}


def _load_model(model_dir):
    return common.load_model(model_dir, _dummy_batch())


def run_train(model_dir, src, tgt, fv=FLAGS):
    """Trains (resuming from model_dir if possible); returns (model, evaluator, info)."""
    from acvi_tf.data.translation import Batches
    from acvi_tf.training.trainer import Trainer
    watch = common.Stopwatch()
    os.makedirs(model_dir, exist_ok=True)
    data = load_or_build_data(model_dir, src, tgt, fv, log=_log)
    _log(f"data: {fv.dataset} {src}->{tgt}; {data.report}")
    src_ids, tgt_ids, corpus = data.encode("train", max_lines=fv.max_train_lines)
    _log(corpus.report)
    batches = Batches(src_ids, tgt_ids, fv.batch_size, seed=fv.seed, max_src_len=fv.max_length,
                      max_tgt_len=fv.max_length, overlong=fv.overlong,
                      num_buckets=fv.num_buckets)
    _log(f"train: {batches.num_examples:,} pairs ({batches.num_filtered:,} filtered), "
         f"{batches.num_batches():,} batches of <= {fv.batch_size} per epoch "
         f"({fv.train_steps / batches.num_batches():.2f} epochs in {fv.train_steps:,} steps)")
    config = model_config(data, fv)
    common.check_model_config(model_dir, config)
    _save_run_config(model_dir, src, tgt, fv)
    evaluator = Evaluator(data, fv)
    train_config = common.train_config_from_flags(model_dir, fv)
    trainer = Trainer(lambda: common.build_model(config), train_config,
                      make_train_data(batches, fv.pad_multiple), eval_fn=evaluator.eval_fn,
                      strategy=common.make_strategy(fv), log=_log,
                      warm_start=common.warm_start_fn(fv.init_from, model_dir, _dummy_batch(),
                                                      _log))
    metrics = trainer.train()
    info = {"steps": int(trainer.step.numpy()), "train_wall_time_sec": watch.seconds(),
            "train_metrics": {k: float(v) for k, v in metrics.items()},
            "train_pairs": batches.num_examples, "epochs": fv.train_steps / batches.num_batches(),
            "train_data_partial": corpus.partial, "train_data_report": corpus.report,
            "train_command": common.command_line(MODULE),
            "diagnostics": evaluator.final_diagnostics}
    return trainer.model, evaluator, info


def run_eval(model, evaluator, model_dir, step, fv=FLAGS):
    """Decodes dev and test with the final settings; writes decodes, prints BLEU."""
    watch = common.Stopwatch()
    results = {}
    for split in ("dev", "test"):
        if split == "dev" and evaluator.final_dev and evaluator.final_dev[0] == step:
            _, hyps, bleu = evaluator.final_dev  # the end-of-training full dev decode
        else:
            hyps, bleu, _, _, _ = evaluator.bleu(model, split, final=True)
        path = os.path.join(model_dir, f"decode_{split}.txt")
        common.write_text(path, "\n".join(hyps))
        _, _, _, report = evaluator.split(split)
        results[split] = {"bleu": bleu.score, "bleu_string": str(bleu), "signature": bleu.signature,
                          "diversity": diversity.diversity(hyps),
                          "decode_file": path, "sentences": len(hyps), "data_report": report}
        print(f"{split} ({len(hyps)} sentences) {bleu}", flush=True)
        print(f"{split} diversity: {diversity.format_diversity(results[split]['diversity'])}",
              flush=True)
    return results, watch.seconds()


def _finish(model_dir, src, tgt, split_results, eval_seconds, step, fv=FLAGS, system=None,
            extra=None):
    data = {"task": "translate", "dataset": fv.dataset, "src": src, "tgt": tgt,
            "direction": f"{src}->{tgt}", "system": system or common.system_name(fv),
            "attention": None if system else fv.attention,
            "profile": fv.profile, "steps": step,
            "bleu": {s: r["bleu"] for s, r in split_results.items()},
            "diversity": {s: r["diversity"] for s, r in split_results.items()
                          if "diversity" in r},
            "signature": next(iter(split_results.values()))["signature"],
            "splits": split_results, "command": common.command_line(MODULE),
            "argv": sys.argv, "eval_wall_time_sec": eval_seconds,
            "decode": common.decode_options(fv, final=True),
            "partial_eval": bool(fv.max_eval_lines)}
    data.update(extra or {})
    return common.finish_results(model_dir, data, _log)


def run_copy_baseline(model_dir, src, tgt, fv=FLAGS):
    """BLEU of the source sentence used as the translation (a sanity floor)."""
    from acvi_tf.data import translation as tr
    watch = common.Stopwatch()
    results = {}
    for split in ("dev", "test"):
        hyps = tr.references(fv.dataset, split, src, fv.variant)
        refs = tr.references(fv.dataset, split, tgt, fv.variant)
        if fv.max_eval_lines:
            hyps, refs = hyps[:fv.max_eval_lines], refs[:fv.max_eval_lines]
        bleu = tr.evaluate_bleu(fv.dataset, hyps, refs)
        path = os.path.join(model_dir, f"decode_{split}.txt")
        common.write_text(path, "\n".join(hyps))
        results[split] = {"bleu": bleu.score, "bleu_string": str(bleu),
                          "signature": bleu.signature, "decode_file": path,
                          "diversity": diversity.diversity(hyps), "sentences": len(hyps)}
        print(f"{split} copy-the-source ({len(hyps)} sentences) {bleu}", flush=True)
    return _finish(model_dir, src, tgt, results, watch.seconds(), 0, fv, system="copy-source")


def run_decode(model, data, fv=FLAGS):
    from acvi_tf.data.translation import normalize_text
    from acvi_tf.data.vocab import split_tokens
    if fv.input:
        with open(fv.input, encoding="utf-8") as f:
            lines = [line.rstrip("\n").rstrip("\r") for line in f]
    else:
        lines = [line.rstrip("\n").rstrip("\r") for line in sys.stdin]
    if data.codec is not None:
        texts = [normalize_text(line, data.src_lang) for line in lines]
        src_ids = [ids.tolist() for ids in data.codec.encode(texts)] if texts else []
    else:
        src_ids = [data.src_vocab.encode(split_tokens(line)) for line in lines]
    opts = common.decode_options(fv, final=True)
    hyps, _, _ = Translator(model, data, batch_size=fv.decode_batch_size, **opts).translate(
        src_ids)
    text = "".join(h + "\n" for h in hyps)
    if fv.output:
        common.write_text(fv.output, text) if text else open(fv.output, "w").close()
        _log(f"wrote {len(hyps)} translations to {fv.output}")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def dry_run(model_dir, src, tgt, fv=FLAGS):
    """Prints the resolved command and the data status; returns the exit code."""
    command = common.command_line(MODULE, [a for a in sys.argv[1:] if a != "--dry_run"])
    print(f"command: {command}")
    print(f"profile: {fv.profile}; {fv.dataset} {src}->{tgt}; --attention={fv.attention}; "
          f"model_dir: {model_dir}")
    complete, lines = data_status(fv.dataset, src, tgt, fv.variant)
    print("\n".join(lines))
    if complete:
        print("data: complete")
        return 0
    print(f"data: INCOMPLETE for {fv.dataset}. To get it: {how_to_get(fv.dataset)}")
    return 3


_log = common.log


def main(argv):
    # Tokenized BLEU (IWSLT, Multi30k) is intended; sacrebleu's "forgot to
    # detokenize?" warning would only be noise.
    logging.getLogger("sacrebleu").setLevel(logging.ERROR)
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    fv = FLAGS
    model_dir = common.require_model_dir(fv) if not fv.dry_run or fv.model_dir else None
    common.resolve_run_flags(model_dir, fv.mode, PROFILES, DATA_FLAGS + common.MODEL_FLAGS, fv)
    check_flags(fv)
    src, tgt = resolve_languages(fv)
    if fv.dry_run:
        return dry_run(model_dir, src, tgt, fv)

    from acvi_tf.data.sources import DataError
    try:
        if fv.mode in ("train", "train_eval"):
            complete, lines = data_status(fv.dataset, src, tgt, fv.variant)
            if not complete and not fv.allow_partial_data:
                _log("\n".join(lines))
                raise SystemExit(
                    f"error: the {fv.dataset} files above are missing or partial copies, and "
                    f"--profile={fv.profile} needs the full data (the results would not be "
                    f"comparable). Get them: {how_to_get(fv.dataset)}. Or pass "
                    f"--allow_partial_data to train on what is there.")
        if fv.mode == "copy_baseline":
            os.makedirs(model_dir, exist_ok=True)
            run_copy_baseline(model_dir, src, tgt, fv)
            return 0
        if fv.mode in ("train", "train_eval"):
            model, evaluator, info = run_train(model_dir, src, tgt, fv)
            if fv.mode == "train":
                common.update_results(model_dir, **info)
                return 0
            results, seconds = run_eval(model, evaluator, model_dir, info["steps"], fv)
            _finish(model_dir, src, tgt, results, seconds, info["steps"], fv, extra=info)
            return 0
        data = load_or_build_data(model_dir, src, tgt, fv, log=_log)
        model, step = _load_model(model_dir)
        if fv.mode == "decode":
            run_decode(model, data, fv)
            return 0
        results, seconds = run_eval(model, Evaluator(data, fv), model_dir, step, fv)
        _finish(model_dir, src, tgt, results, seconds, step, fv)
        return 0
    except DataError as e:
        raise SystemExit(f"error: data missing or malformed: {e}") from None
    except FileNotFoundError as e:
        raise SystemExit(f"error: {e}") from None
    except common.ConfigError as e:
        raise FlagError(e.field, e.detail) from None


if __name__ == "__main__":
    app.run(main)
