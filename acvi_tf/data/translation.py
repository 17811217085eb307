"""Machine-translation data (the paper's Table 4, Appendix C): sources, readers,
normalisation, vocabularies and the BLEU each dataset is scored with. Subword
models live in :mod:`acvi_tf.data.subwords`, batching in
:mod:`acvi_tf.data.batching`.

Datasets (registered with :mod:`acvi_tf.data.sources` at import time, by
:mod:`acvi_tf.data.translation_sources`):

``iwslt15_en_vi``
    IWSLT'15 English-Vietnamese, Stanford NLP release (Moses-tokenized, ``&apos;``
    escaped): train 133,317 pairs, dev ``tst2012`` (1,553), test ``tst2013``
    (1,268). Word level with the release's ``vocab.{en,vi}`` (out-of-vocabulary
    words -> ``<unk>``); scored with tokenized BLEU, as tensorflow/nmt.
``wmt16_en_ro``
    WMT'16 English-Romanian: train = Europarl v7 (399,375) + SETimes2 (213,047),
    dev ``newsdev2016`` (1,999), test ``newstest2016`` (1,999), raw text. The
    Romanian cedilla letters ş ţ Ş Ţ are mapped to the correct comma-below
    letters ș ț Ș Ț (both spellings occur in the data; the test references use
    comma-below), and a shared BPE vocabulary is trained with sentencepiece on the
    training text of both sides and applied in the input pipeline with
    tensorflow-text's ``SentencepieceTokenizer``. Scored with detokenized
    sacreBLEU (13a).
``multi30k``
    Multi30k (WMT'16 multimodal task 1) English-German, the CPU-scale benchmark:
    train 29,000, val 1,014, test_2016_flickr 1,000. Word level on the official
    lowercased, Moses-tokenized ``tok/`` files with a vocabulary built from the
    training set (frequency cut-off); ``raw/`` (cased, untokenized) optionally.
    Scored with tokenized BLEU.

Splits are ``train``, ``dev``, ``test`` (or a file stem such as ``tst2012``).

Batches. :func:`acvi_tf.data.batching.make_dataset` turns the id sequences of
:meth:`TranslationData.encode` into padded, bucketed, resumable batches.
"""

import dataclasses
import os
import re
import unicodedata

import numpy as np

from acvi_tf.data import sources, subwords
from acvi_tf.data.sources import DataError
from acvi_tf.data.translation_sources import (  # noqa: F401 - the datasets: translation.X
    DATASETS, IWSLT15, MULTI30K, SPLITS, WMT16, check_dataset, check_lang, file_path,
    split_stems)
from acvi_tf.data.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, Vocab, split_tokens
from acvi_tf.metrics import bleu as bleu_lib

# ---------------------------------------------------------------------------
# Reading and normalisation
# ---------------------------------------------------------------------------

# Cedilla letters (Turkish-style, wrong for Romanian but common in older text)
# -> the comma-below letters of the Romanian standard (Unicode 3.0).
# ş ţ Ş Ţ (cedilla) -> ș ț Ș Ț (comma below); the SavedModel export maps the same pairs.
RO_CEDILLA_TO_COMMA = {"\u015f": "\u0219", "\u0163": "\u021b", "\u015e": "\u0218",
                       "\u0162": "\u021a"}
_RO_CEDILLA_TO_COMMA = str.maketrans(RO_CEDILLA_TO_COMMA)
_ANY_WS = re.compile(r"\s+")


def normalize_romanian(text):
    """Maps ş ţ Ş Ţ (cedilla, U+015F/0163/015E/0162) to ș ț Ș Ț (comma below)."""
    # NFC first, so that "s" + combining cedilla (U+0327) is composed and mapped too.
    return unicodedata.normalize("NFC", text).translate(_RO_CEDILLA_TO_COMMA)


def normalize_text(text, lang):
    """The WMT En-Ro text normalisation: NFC, every Unicode whitespace run -> one
    space (sentencepiece would otherwise learn U+00A0 or tabs as characters),
    stripped; Romanian diacritics to comma-below on the Romanian side."""
    text = _ANY_WS.sub(" ", unicodedata.normalize("NFC", text)).strip()
    return normalize_romanian(text) if lang == "ro" else text


def read_lines(path, max_lines=None):
    """The lines of a UTF-8 text file, split on '\\n' only (as ``wc -l`` and the
    registry's line counts), without the line ending. A final line without '\\n'
    is kept. Invalid UTF-8 raises :class:`DataError` naming the file and line."""
    lines = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            if max_lines is not None and number > max_lines:
                break
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{path}:{number}: not valid UTF-8 ({e})") from None
            lines.append(line.rstrip("\n").rstrip("\r"))
    return lines


@dataclasses.dataclass
class _Side:
    lines: list
    paths: list      # local paths of the files read, in order
    counts: list     # lines per file
    report: list     # one completeness message per registered file
    partial: bool


def _read_side(dataset, split, lang, variant="tok", max_lines=None):
    """Reads (and for WMT normalises) one language side of a split."""
    check_dataset(dataset)
    check_lang(dataset, lang)
    side = _Side([], [], [], [], False)
    for stem, required in split_stems(dataset, split):
        rel = file_path(dataset, stem, lang, variant)
        local = sources.locate(dataset, rel, required=required)
        if local is None:
            expected = sources.get(dataset).file(rel).lines
            side.report.append(f"{dataset}/{rel}: missing ({expected:,} lines expected); "
                               f"the {split} set is incomplete")
            side.partial = True
            continue
        message, partial = sources.completeness(dataset, rel, local)
        side.report.append(message)
        side.partial |= partial
        remaining = None if max_lines is None else max_lines - len(side.lines)
        if remaining is not None and remaining <= 0:
            break
        lines = read_lines(local, remaining)
        if dataset == WMT16:
            lines = [normalize_text(line, lang) for line in lines]
        side.lines.extend(lines)
        side.paths.append(local)
        # Whole-file counts, so that the two sides are compared in full even
        # when only a head is read.
        side.counts.append(len(lines) if remaining is None else sources.count_lines(local))
        if remaining is not None and len(lines) == remaining:
            side.report[-1] += f"; first {len(lines):,} read (max_lines={max_lines:,})"
    return side


def _read_pair(dataset, split, src_lang, tgt_lang, variant, max_lines):
    # Validate every argument before reading anything.
    check_dataset(dataset)
    check_lang(dataset, src_lang)
    check_lang(dataset, tgt_lang)
    split_stems(dataset, split)
    if src_lang == tgt_lang:
        raise ValueError(f"source and target language are both {src_lang!r}")
    src = _read_side(dataset, split, src_lang, variant, max_lines)
    tgt = _read_side(dataset, split, tgt_lang, variant, max_lines)
    if src.paths != [] and len(src.paths) != len(tgt.paths):
        raise DataError(f"{dataset} {split}: files {src.paths} ({src_lang}) and {tgt.paths} "
                        f"({tgt_lang}) do not pair up")
    for sp, sn, tp, tn in zip(src.paths, src.counts, tgt.paths, tgt.counts):
        if sn != tn:
            raise DataError(f"parallel corpus {dataset} {split}: {sp} has {sn:,} lines but "
                            f"{tp} has {tn:,}; both sides need one line per sentence pair")
    report = "\n".join(src.report + tgt.report)
    return src, tgt, report, src.partial or tgt.partial


class ParallelCorpus:
    """Aligned source/target token lists and a completeness report.

    ``src[i]``/``tgt[i]`` are the whitespace tokens of line ``i`` (after the
    dataset's normalisation); ``report`` has one line per file read, e.g.
    ``iwslt15_en_vi/train.en: 1,000 of 133,317 lines (partial copy)``; ``partial``
    is True when any file is a partial copy or missing. Unpacks as
    ``src, tgt, report = corpus``.
    """

    def __init__(self, src, tgt, report, partial):
        self.src, self.tgt, self.report, self.partial = src, tgt, report, partial

    def __iter__(self):
        return iter((self.src, self.tgt, self.report))

    def __len__(self):
        return len(self.src)

    def __repr__(self):
        return f"ParallelCorpus({len(self)} pairs, partial={self.partial})"


def load_parallel(dataset, split, src_lang, tgt_lang, variant="tok", max_lines=None):
    """Reads a split of a parallel corpus as token lists.

    Args:
      dataset: ``"iwslt15_en_vi"``, ``"wmt16_en_ro"`` or ``"multi30k"``.
      split: ``"train"``, ``"dev"``, ``"test"`` or a file stem (``"tst2012"``).
      src_lang, tgt_lang: e.g. ``"en", "vi"`` (either direction).
      variant: Multi30k only: ``"tok"`` (official tokenized, default) or ``"raw"``.
      max_lines: read at most this many lines per side (for quick runs).

    Tokens are split on ASCII whitespace. IWSLT and Multi30k ``tok`` are already
    Moses-tokenized; WMT text is raw, so its "tokens" are whitespace words of the
    normalised text (the model sees sentencepiece pieces, see
    :class:`TranslationData`). Out-of-vocabulary words are kept here and become
    ``<unk>`` in :meth:`Vocab.encode`, so the references stay intact.

    Raises :class:`DataError` if a required file is missing or the two sides of
    a file pair have different line counts (naming both files and counts).
    """
    src, tgt, report, partial = _read_pair(dataset, split, src_lang, tgt_lang, variant, max_lines)
    return ParallelCorpus([split_tokens(x) for x in src.lines],
                          [split_tokens(y) for y in tgt.lines], report, partial)


def load_text(dataset, split, src_lang, tgt_lang, variant="tok", max_lines=None):
    """As :func:`load_parallel`, but lines as strings (normalised for WMT)."""
    src, tgt, report, partial = _read_pair(dataset, split, src_lang, tgt_lang, variant, max_lines)
    return ParallelCorpus(src.lines, tgt.lines, report, partial)


def references(dataset, split, lang, variant="tok"):
    """Reference strings for BLEU: word-level datasets -> tokens joined by one
    space (tokenized BLEU); WMT -> the normalised raw text (sacreBLEU 13a)."""
    side = _read_side(dataset, split, lang, variant)
    if dataset == WMT16:
        return side.lines
    return [" ".join(split_tokens(line)) for line in side.lines]


# ---------------------------------------------------------------------------
# Vocabularies and sentencepiece BPE
# ---------------------------------------------------------------------------

def load_vocab(dataset, lang, min_count=2, max_size=None, variant="tok"):
    """The word vocabulary of one language of a word-level dataset.

    IWSLT'15: the release's ``vocab.<lang>`` (``min_count`` does not apply; the
    file has no counts). Multi30k: built from the training split with
    ``min_count`` (tokens seen fewer times become ``<unk>``). ``max_size`` counts
    the 4 special tokens. WMT En-Ro uses a shared BPE model instead
    (:func:`train_bpe`).
    """
    check_dataset(dataset)
    check_lang(dataset, lang)
    if dataset == IWSLT15:
        return Vocab.load(sources.locate(dataset, f"vocab.{lang}"), max_size=max_size)
    if dataset == MULTI30K:
        side = _read_side(dataset, "train", lang, variant)
        return Vocab.build((split_tokens(line) for line in side.lines),
                           min_count=min_count, max_size=max_size)
    raise ValueError(f"{dataset} uses a shared sentencepiece BPE vocabulary: call "
                     f"train_bpe() and SentencePieceCodec, or prepare()")


def train_bpe(model_dir, vocab_size=32_000, texts=None, seed=0, max_lines=None, **options):
    """Trains (or reuses) the shared sentencepiece BPE model of WMT'16 En-Ro in
    ``model_dir`` (:func:`acvi_tf.data.subwords.train_sentencepiece`), on the
    training text of both sides, normalised (:func:`normalize_text`; ``max_lines``
    reads a head of it); ``texts`` trains on anything else. Returns the path of
    ``spm.model``."""
    report = ""
    if texts is None:
        corpus = load_text(WMT16, "train", "en", "ro", max_lines=max_lines)
        texts = corpus.src + corpus.tgt
        report = corpus.report
    return subwords.train_sentencepiece(model_dir, texts, vocab_size, seed=seed, report=report,
                                        **options)


# ---------------------------------------------------------------------------
# Evaluation post-processing
# ---------------------------------------------------------------------------

def detokenize(dataset, tokens):
    """A model output (token list, or a space-separated string) -> the string BLEU
    is computed on for ``dataset``.

    Word-level datasets (IWSLT'15, Multi30k): the tokens joined with single spaces
    (tokenized BLEU; special tokens should already be stripped, e.g. by
    :meth:`Vocab.decode`). WMT'16 En-Ro: sentencepiece pieces joined back into
    plain text (``▁`` -> space, byte pieces -> characters); subword-nmt ``@@ ``
    marks, if present, are removed too.
    """
    check_dataset(dataset)
    if isinstance(tokens, str):
        tokens = split_tokens(tokens)
    tokens = [t for t in tokens if t not in (SPECIALS[PAD_ID], SPECIALS[BOS_ID], SPECIALS[EOS_ID])]
    if dataset == WMT16:
        if any(t.endswith("@@") for t in tokens) and not any(
                bleu_lib.SENTENCEPIECE_SPACE in t for t in tokens):
            return bleu_lib.remove_bpe(" ".join(tokens), "subword-nmt")
        return subwords.pieces_to_text(tokens)
    return " ".join(tokens)


def evaluate_bleu(dataset, hyps, refs):
    """The paper's BLEU for ``dataset``: tokenized BLEU (IWSLT'15, Multi30k) or
    detokenized sacreBLEU 13a (WMT'16). Returns a :class:`BleuResult`."""
    check_dataset(dataset)
    if dataset == WMT16:
        return bleu_lib.sacre_bleu(hyps, refs)
    return bleu_lib.tokenized_bleu(hyps, refs)


@dataclasses.dataclass
class TranslationData:
    """Everything a translation run needs for one dataset and direction.

    Build it with :func:`prepare`. ``src_vocab``/``tgt_vocab`` give the model's
    vocabulary sizes (the same object for WMT's shared BPE); ``encode(split)``
    gives id arrays for :func:`make_dataset`; ``decode(ids)`` and
    ``references(split)`` give the strings :meth:`bleu` compares.
    """
    dataset: str
    src_lang: str
    tgt_lang: str
    src_vocab: Vocab
    tgt_vocab: Vocab
    codec: subwords.SentencePieceCodec | None = None
    variant: str = "tok"
    report: str = ""

    def encode(self, split, max_lines=None):
        """(src_ids, tgt_ids, corpus) of a split; ids are int32 numpy arrays
        without ``<s>``/``</s>`` (the pipeline adds them)."""
        if self.codec is not None:
            corpus = load_text(self.dataset, split, self.src_lang, self.tgt_lang,
                               self.variant, max_lines)
            return self.codec.encode(corpus.src), self.codec.encode(corpus.tgt), corpus
        corpus = load_parallel(self.dataset, split, self.src_lang, self.tgt_lang,
                               self.variant, max_lines)
        src = [np.asarray(self.src_vocab.encode(t), np.int32) for t in corpus.src]
        tgt = [np.asarray(self.tgt_vocab.encode(t), np.int32) for t in corpus.tgt]
        return src, tgt, corpus

    def decode(self, ids):
        """Target ids of one hypothesis -> its evaluation string."""
        return self.decode_batch([ids])[0]

    def decode_batch(self, ids_batch):
        ids_batch = [np.asarray(ids).tolist() for ids in ids_batch]
        if self.codec is not None:
            return self.codec.decode(ids_batch)
        return [detokenize(self.dataset, self.tgt_vocab.decode(ids)) for ids in ids_batch]

    def references(self, split):
        return references(self.dataset, split, self.tgt_lang, self.variant)

    def bleu(self, hyps, refs):
        return evaluate_bleu(self.dataset, hyps, refs)


def default_bpe_dir(vocab_size):
    """Where :func:`prepare` keeps the WMT BPE model (the git-ignored data dir)."""
    return os.path.join(sources.data_dir(), WMT16, f"spm_bpe{vocab_size}")


def prepare(dataset, src_lang, tgt_lang, min_count=2, max_vocab_size=None, variant="tok",
            bpe_dir=None, bpe_vocab_size=32_000, seed=0, bpe_max_lines=None):
    """Vocabularies (or the shared BPE model) for ``dataset`` in one direction.

    IWSLT'15: the release vocab files (``max_vocab_size`` optional). Multi30k: built
    from train with ``min_count``. WMT'16: sentencepiece BPE of ``bpe_vocab_size``
    pieces trained on both sides of train (reused from ``bpe_dir`` if present).
    """
    check_dataset(dataset)
    check_lang(dataset, src_lang)
    check_lang(dataset, tgt_lang)
    if dataset == WMT16:
        model = train_bpe(bpe_dir or default_bpe_dir(bpe_vocab_size), bpe_vocab_size,
                          seed=seed, max_lines=bpe_max_lines)
        codec = subwords.SentencePieceCodec(model)
        return TranslationData(dataset, src_lang, tgt_lang, codec.vocab, codec.vocab, codec,
                               variant, report=f"shared BPE model {model} ({len(codec)} pieces)")
    if dataset == MULTI30K:
        # Both sides at once: a training split whose sides do not pair up (or are empty)
        # is refused before a vocabulary exists that a later run would reuse.
        src, tgt, _, _ = _read_pair(dataset, "train", src_lang, tgt_lang, variant, None)
        vocabs = []
        for side, lang in ((src, src_lang), (tgt, tgt_lang)):
            vocab = Vocab.build((split_tokens(line) for line in side.lines),
                                min_count=min_count, max_size=max_vocab_size)
            if len(vocab) <= len(SPECIALS):
                raise DataError(f"{dataset} train ({lang}): {', '.join(side.paths)} gives an "
                                f"empty vocabulary (no token seen {min_count}+ times)")
            vocabs.append(vocab)
        src_vocab, tgt_vocab = vocabs
    else:
        src_vocab = load_vocab(dataset, src_lang, min_count, max_vocab_size, variant)
        tgt_vocab = load_vocab(dataset, tgt_lang, min_count, max_vocab_size, variant)
    return TranslationData(dataset, src_lang, tgt_lang, src_vocab, tgt_vocab, None, variant,
                           report=f"vocab sizes {src_lang} {len(src_vocab):,}, "
                                  f"{tgt_lang} {len(tgt_vocab):,} (4 special tokens included)")
