"""CNN/DailyMail (See et al., 2017 preprocessing) and DUC2004 Task 1 readers.

Implements the data side of the summarization experiments (Tables 1, 2 and 5) of
"Amortized Context Vector Inference for Sequence-to-Sequence Networks" (Chatzis et
al.), whose evaluation platform is the pointer-generator of See et al. (2017),
"Get To The Point: Summarization with Pointer-Generator Networks". The behaviour
follows See et al.'s ``data.py`` and ``batcher.py``:

* ``finished_files/chunked/{train,val,test}_NNN.bin``: records of an 8-byte
  little-endian length followed by a serialized ``tf.Example`` with bytes features
  ``article`` and ``abstract``; abstracts mark sentences with ``<s> ... </s>``.
* ``finished_files/vocab``: ``word count`` per line, most frequent first.
* The pointer-generator's examples and batches (the per-example extended vocabulary,
  See et al.'s cut of decoder inputs and targets): :mod:`acvi_tf.data.pointer_examples`,
  whose names are importable from here too (``cnndm.make_example``, ...).

DUC2004 is the Rush et al. (2015) evaluation release: the first sentence of each
of 500 documents and 4 human references (75-byte task), one per line.

The mirror is partial (see ``../shared/data/README.md``); :func:`counts_report`
reports it against the official sizes, e.g. ``train: 39,227 of 287,227 pairs
(partial copy; 40 of 288 chunks)``. Empty and malformed examples are counted and skipped, never
fatal; a truncated file is reported with its name and the record index.

The vocabulary is the shared :class:`acvi_tf.data.vocab.Vocab` (``<pad>`` 0,
``<unk>`` 1, ``<s>`` 2, ``</s>`` 3 play See et al.'s ``[PAD] [UNK] [START] [STOP]``).
"""

import collections
import dataclasses
import logging
import os
import struct

import numpy as np

from acvi_tf.data import sources
from acvi_tf.data import vocab as vocab_lib
from acvi_tf.data.pointer_examples import (  # noqa: F401 - See et al.'s examples: cnndm.X
    Example, EncodedPairs, TENSOR_KEYS, abstract2ids, article2ids, make_batch, make_example,
    outputids2words, strip_decoded, to_tensors)
from acvi_tf.data.sources import DataError, DataFile, DataSource
from acvi_tf.data.vocab import Vocab

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------
# Registry entries
# ---------------------------------------------------------------------------

# Official sizes (See et al. 2017, Sec. 4; ``make_datafiles.py`` output).
SPLIT_SIZES = {"train": 287_227, "val": 13_368, "test": 11_490}
CHUNK_SIZE = 1000  # ``make_datafiles.chunk_file``: 1,000 examples per chunk
NUM_CHUNKS = {s: -(-n // CHUNK_SIZE) for s, n in SPLIT_SIZES.items()}  # 288 / 14 / 12
VOCAB_PATH = "finished_files/vocab"
VOCAB_LINES = 200_000  # ``make_datafiles.py`` keeps the 200,000 most frequent words
DUC_SIZE = 500
DUC_INPUT = "input.txt"
DUC_REFS = tuple(f"task1_ref{i}.txt" for i in range(4))


def chunk_path(split, index):
    """The registered relative path of chunk ``index`` of ``split``."""
    return f"finished_files/chunked/{split}_{index:03d}.bin"


CNNDM = sources.register(DataSource(
    name="cnn_dailymail",
    description=("CNN/DailyMail, non-anonymized, See et al. (2017) preprocessing "
                 "(lowercased, PTB-tokenized; abstracts carry <s> ... </s>), chunked "
                 "into 1,000-example .bin files; 287,227 / 13,368 / 11,490 pairs."),
    files=(DataFile(VOCAB_PATH, lines=VOCAB_LINES),) + tuple(
        DataFile(chunk_path(split, i))
        for split in ("train", "val", "test") for i in range(NUM_CHUNKS[split])),
    homepage="https://github.com/abisee/pointer-generator",
    how_to_get=("Get See et al.'s preprocessed finished_files/ (the link in the README of "
                "github.com/abisee/pointer-generator), or build it from the raw CNN and "
                "DailyMail stories with make_datafiles.py of github.com/abisee/cnn-dailymail; "
                "then put it under $ACVI_DATA_MIRROR/cnn_dailymail/finished_files/ (or "
                "data/cnn_dailymail/finished_files/)."),
))

DUC2004 = sources.register(DataSource(
    name="duc2004",
    description=("DUC 2004 Task 1 as released for Rush et al. (2015): the first sentence "
                 "of each of 500 documents and 4 human references (75-byte task)."),
    files=(DataFile(DUC_INPUT, lines=DUC_SIZE),)
    + tuple(DataFile(r, lines=DUC_SIZE) for r in DUC_REFS),
    homepage="https://duc.nist.gov/duc2004/",
    how_to_get=("DUC 2004 is distributed by NIST by agreement (https://duc.nist.gov/); "
                "prepare input.txt (first sentence per document, lowercased, "
                "PTB-tokenized) and task1_ref0..3.txt (one reference per line) as in "
                "Rush et al. (2015) and put them under $ACVI_DATA_MIRROR/duc2004/."),
))

# ---------------------------------------------------------------------------
# Vocabulary (the shared acvi_tf.data.vocab.Vocab)
# ---------------------------------------------------------------------------

# See et al.'s [PAD] [UNK] [START] [STOP] are the shared vocabulary's <pad> <unk>
# <s> </s>, with the same ids 0-3 (See et al. had [UNK]=0, [PAD]=1: the ids of the
# special tokens change no result). Abstract sentence marks are removed by
# abstract2sents before any lookup, so "<s>" in an abstract never meets START.
PAD_TOKEN, UNK_TOKEN, START_TOKEN, STOP_TOKEN = vocab_lib.SPECIALS
SENTENCE_START = "<s>"
SENTENCE_END = "</s>"

# See et al.'s code (Python 2) split byte strings, i.e. on ASCII whitespace only:
# a non-breaking space (U+00A0) stays inside a token. 54 vocab words contain one
# (5 of them in the top 50K) and articles contain such tokens too.
split_words = vocab_lib.split_tokens


def load_vocab(max_size=50_000, path=None):
    """See et al.'s vocabulary: ``cnn_dailymail/finished_files/vocab`` (``word
    count`` per line, most frequent first), located through the registry.

    ``max_size`` counts the 4 special tokens, as See et al.'s ``vocab_size``: the
    paper's 50K vocabulary is the special tokens + the 49,996 most frequent words.
    Returns an :class:`acvi_tf.data.vocab.Vocab`.
    """
    return Vocab.load(path or sources.locate("cnn_dailymail", VOCAB_PATH), max_size=max_size)


# ---------------------------------------------------------------------------
# .bin reader
# ---------------------------------------------------------------------------

Pair = collections.namedtuple("Pair", "article abstract_sents uid")
Pair.__doc__ = ("One article/abstract pair: ``article`` a str, ``abstract_sents`` the "
                "abstract's sentences (``<s>``/``</s>`` removed), ``uid`` 'file.bin#index'.")


@dataclasses.dataclass
class ReadStats:
    """Counts of what a reader yielded and skipped, for the report after a pass."""
    read: int = 0
    empty_article: int = 0
    empty_abstract: int = 0
    malformed: int = 0
    truncated: list = dataclasses.field(default_factory=list)  # "file: record i ..." messages

    @property
    def skipped(self):
        return self.empty_article + self.empty_abstract + self.malformed

    def report(self):
        msg = (f"read {self.read:,} pairs; skipped {self.skipped:,} "
               f"({self.empty_article} empty article, {self.empty_abstract} empty abstract, "
               f"{self.malformed} malformed)")
        if self.truncated:
            msg += f"; {len(self.truncated)} truncated file(s): " + "; ".join(self.truncated)
        return msg


def abstract2sents(abstract):
    """Splits an abstract into sentences on ``<s> ... </s>`` (See et al., data.py).

    Text outside the tags is dropped, as in See et al.; sentences are stripped and
    empty ones dropped.
    """
    sents, cur = [], 0
    while True:
        start = abstract.find(SENTENCE_START, cur)
        if start < 0:
            return sents
        end = abstract.find(SENTENCE_END, start + len(SENTENCE_START))
        if end < 0:
            return sents
        s = abstract[start + len(SENTENCE_START):end].strip(" \t\n\r\x0b\x0c")
        if s:
            sents.append(s)
        cur = end + len(SENTENCE_END)


_EXAMPLE_CLS = None


def _example_cls():
    # TensorFlow is imported only when a .bin file is read, so that registering
    # the data sources (importing this module) stays cheap.
    global _EXAMPLE_CLS
    if _EXAMPLE_CLS is None:
        import tensorflow as tf
        _EXAMPLE_CLS = tf.train.Example
    return _EXAMPLE_CLS


def _get_text(example, key):
    feat = example.features.feature
    if key not in feat:
        raise ValueError(f"no {key!r} feature")
    values = feat[key].bytes_list.value
    if len(values) == 0:
        raise ValueError(f"{key!r} is not a non-empty bytes feature")
    return values[0].decode("utf-8")


def _truncated(path, index, what, stats, strict):
    msg = f"{path}: record {index} is truncated ({what}); read {index} complete records"
    if strict:
        raise DataError(msg)
    log.warning(msg)
    if stats is not None:
        stats.truncated.append(msg)


def read_records(path, stats=None, strict=False):
    """Yields ``(index, bytes)`` for each length-prefixed record of a .bin file.

    A record whose header or body is cut short ends the file with a warning naming
    ``path`` and the record index (a :class:`DataError` if ``strict``); a length that
    cannot be right (negative) is reported the same way, since the stream cannot be
    resynchronised after it.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        index = 0
        while True:
            header = f.read(8)
            if not header:
                return
            if len(header) < 8:
                _truncated(path, index, f"{len(header)} of 8 length bytes", stats, strict)
                return
            (n,) = struct.unpack("<q", header)
            remaining = size - f.tell()
            if n < 0 or n > remaining:
                _truncated(path, index, f"length {n} but {remaining} bytes left", stats, strict)
                return
            yield index, f.read(n)
            index += 1


def read_bin(path, stats=None, strict=False):
    """Yields :class:`Pair` for each usable example of one See et al. .bin file.

    Each record is parsed with ``tf.train.Example.FromString``. A record that does
    not parse, lacks ``article``/``abstract`` or is not UTF-8 is counted as
    ``malformed``; an empty article (after stripping) or an abstract with no
    ``<s> ... </s>`` sentence is counted and skipped (See et al. skip empty
    articles too). Counts go to ``stats`` (a :class:`ReadStats`).
    """
    stats = stats if stats is not None else ReadStats()
    example_cls = _example_cls()
    name = os.path.basename(path)
    for index, raw in read_records(path, stats, strict):
        try:
            ex = example_cls.FromString(raw)
            article = _get_text(ex, "article")
            abstract = _get_text(ex, "abstract")
        except Exception as e:  # DecodeError, ValueError, UnicodeDecodeError
            stats.malformed += 1
            log.debug("%s: record %d is malformed (%s), skipped", path, index, e)
            continue
        if not split_words(article):
            stats.empty_article += 1
            continue
        sents = abstract2sents(abstract)
        if not sents:
            stats.empty_abstract += 1
            continue
        stats.read += 1
        yield Pair(article, sents, f"{name}#{index}")


def chunk_files(split, required=True):
    """Local paths of the chunks of ``split`` that are present, in official order."""
    if split not in SPLIT_SIZES:
        raise ValueError(f"unknown split {split!r}; one of {sorted(SPLIT_SIZES)}")
    paths = [sources.locate("cnn_dailymail", chunk_path(split, i), required=False)
             for i in range(NUM_CHUNKS[split])]
    paths = [p for p in paths if p]
    if not paths and required:
        sources.locate("cnn_dailymail", chunk_path(split, 0))  # raises with how_to_get
    return paths


def iter_pairs(split, limit=None, stats=None, strict=False, paths=None):
    """Yields :class:`Pair` over the local chunks of ``split`` (official order).

    ``paths`` overrides the chunk list (e.g. a test file). ``limit`` stops after
    that many yielded pairs.
    """
    stats = stats if stats is not None else ReadStats()
    if limit is not None and limit <= 0:
        return
    n = 0
    for path in (paths if paths is not None else chunk_files(split)):
        for pair in read_bin(path, stats, strict):
            yield pair
            n += 1
            if limit is not None and n >= limit:
                return  # before read_bin parses (and counts) one more record


def count_records(path, stats=None):
    """Number of complete records in a .bin file (headers only; nothing parsed)."""
    size = os.path.getsize(path)
    n = 0
    with open(path, "rb") as f:
        while True:
            header = f.read(8)
            if not header:
                return n
            if len(header) < 8:
                _truncated(path, n, f"{len(header)} of 8 length bytes", stats, False)
                return n
            (length,) = struct.unpack("<q", header)
            if length < 0 or f.tell() + length > size:
                _truncated(path, n, f"length {length} past the end of the file", stats, False)
                return n
            f.seek(length, os.SEEK_CUR)
            n += 1


def split_counts(split):
    """(local records, official pairs, local chunk files, official chunk files)."""
    paths = chunk_files(split, required=False)
    return (sum(count_records(p) for p in paths), SPLIT_SIZES[split],
            len(paths), NUM_CHUNKS[split])


def counts_report(splits=("train", "val", "test")):
    """One line per split against the official size, e.g.
    ``train: 39,227 of 287,227 pairs (partial copy; 40 of 288 chunks)``.

    Records are counted from their headers; empty/malformed ones, which
    :func:`read_bin` skips, are still counted here.
    """
    lines = []
    for split in splits:
        n, total, chunks, total_chunks = split_counts(split)
        if n >= total:
            lines.append(f"{split}: {n:,} pairs (complete)")
        else:
            lines.append(f"{split}: {n:,} of {total:,} pairs (partial copy; "
                         f"{chunks} of {total_chunks} chunks)")
    return lines


# ---------------------------------------------------------------------------
# Batches over a split (the training batches: acvi_tf.data.article_batches)
# ---------------------------------------------------------------------------

def batches(split, vocab, batch_size, max_enc_steps=400, max_dec_steps=100, *,
            limit=None, shuffle=False, seed=None, buffer_size=10_000,
            drop_remainder=False, fixed_shapes=False, stats=None, strict=False,
            paths=None):
    """Yields :func:`make_batch` dicts over ``split`` (a plain Python generator).

    ``shuffle`` shuffles the chunk order and then through a buffer of
    ``buffer_size`` examples (See et al. shuffle through a queue). ``fixed_shapes``
    pads to ``max_enc_steps`` / ``max_dec_steps``. After the pass, ``stats``
    holds the counts of skipped examples; they are also logged.
    """
    stats = stats if stats is not None else ReadStats()
    rng = np.random.default_rng(seed)
    if paths is None:
        paths = chunk_files(split)
    if shuffle:
        paths = [paths[i] for i in rng.permutation(len(paths))]
    pairs = iter_pairs(split, limit=limit, stats=stats, strict=strict, paths=paths)
    if shuffle:
        pairs = _shuffled(pairs, buffer_size, rng)
    enc_len = max_enc_steps if fixed_shapes else None
    dec_len = max_dec_steps if fixed_shapes else None
    pending = []
    for pair in pairs:
        pending.append(make_example(pair.article, pair.abstract_sents, vocab,
                                    max_enc_steps, max_dec_steps))
        if len(pending) == batch_size:
            yield make_batch(pending, vocab, enc_len, dec_len)
            pending = []
    if pending and not drop_remainder:
        yield make_batch(pending, vocab, enc_len, dec_len)
    log.info("cnn_dailymail %s: %s", split, stats.report())


def _shuffled(items, buffer_size, rng):
    buf = []
    for x in items:
        buf.append(x)
        if len(buf) >= buffer_size:
            j = int(rng.integers(len(buf)))
            buf[j], buf[-1] = buf[-1], buf[j]
            yield buf.pop()
    order = rng.permutation(len(buf))
    for j in order:
        yield buf[j]


# ---------------------------------------------------------------------------
# DUC2004
# ---------------------------------------------------------------------------

DucData = collections.namedtuple("DucData", "inputs references")
DucData.__doc__ = ("DUC2004 Task 1: ``inputs`` 500 first sentences (str); ``references`` "
                   "500 lists of the 4 reference strings, aligned with ``inputs``.")


def _read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def read_duc2004():
    """Reads DUC2004 (Rush et al. 2015 form): the inputs and the 4 references.

    Every file must have 500 lines (the official count); otherwise a
    :class:`DataError` names the file.
    """
    files = (DUC_INPUT,) + DUC_REFS
    data = {}
    for name in files:
        path = sources.locate("duc2004", name)
        lines = _read_lines(path)
        if len(lines) != DUC_SIZE:
            raise DataError(f"duc2004/{name}: {len(lines):,} lines, expected {DUC_SIZE} ({path})")
        data[name] = lines
    refs = [list(r) for r in zip(*(data[r] for r in DUC_REFS))]
    return DucData(data[DUC_INPUT], refs)
