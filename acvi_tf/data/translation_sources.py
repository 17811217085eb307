"""The translation datasets' registry entries and file layout (the paper's Table 4,
Appendix C): each dataset's files, sizes and where to get them (registered with
:mod:`acvi_tf.data.sources` at import time), its languages, and the files of each
split. Reading them is :mod:`acvi_tf.data.translation`'s job, which imports these names.
"""

import os

from acvi_tf.data import sources
from acvi_tf.data.sources import DataFile, DataSource

IWSLT15 = "iwslt15_en_vi"
WMT16 = "wmt16_en_ro"
MULTI30K = "multi30k"
DATASETS = (IWSLT15, WMT16, MULTI30K)
SPLITS = ("train", "dev", "test")

_IWSLT_URL = "https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi/"
_IWSLT_LINES = {"train": 133_317, "tst2012": 1_553, "tst2013": 1_268}
_IWSLT_VOCAB_LINES = {"en": 17_191, "vi": 7_709}  # incl. <unk> <s> </s>

sources.register(DataSource(
    name=IWSLT15,
    description="IWSLT'15 English-Vietnamese (TED talks), Stanford NLP release: "
                "Moses-tokenized, &apos;-escaped; tst2012 = dev, tst2013 = test",
    files=tuple(DataFile(f"{stem}.{lang}", url=f"{_IWSLT_URL}{stem}.{lang}", lines=n)
                for stem, n in _IWSLT_LINES.items() for lang in ("en", "vi"))
    + tuple(DataFile(f"vocab.{lang}", url=f"{_IWSLT_URL}vocab.{lang}", lines=n)
            for lang, n in _IWSLT_VOCAB_LINES.items()),
    homepage="https://nlp.stanford.edu/projects/nmt/",
    how_to_get=f"Download train/tst2012/tst2013/vocab .en/.vi from {_IWSLT_URL} "
               f"(sources.download('{IWSLT15}') does it).",
))

_EUROPARL = "europarl-v7.ro-en"
_SETIMES = "SETIMES.en-ro"  # the file names inside OPUS's SETIMES2 en-ro.txt.zip
_WMT_LINES = {_EUROPARL: 399_375, _SETIMES: 213_047, "newsdev2016": 1_999, "newstest2016": 1_999}

sources.register(DataSource(
    name=WMT16,
    description="WMT'16 English-Romanian news task: Europarl v7 + SETimes2 (train), "
                "newsdev2016 (dev), newstest2016 (test); raw untokenized text",
    # The official files are members of archives (no per-file URL), hence url=None.
    files=tuple(DataFile(f"{stem}.{lang}", lines=n)
                for stem, n in _WMT_LINES.items() for lang in ("en", "ro")),
    homepage="http://www.statmt.org/wmt16/translation-task.html",
    how_to_get=("Get the WMT'16 En-Ro files and put them in <data_dir>/wmt16_en_ro/: "
                "Europarl v7 from http://www.statmt.org/europarl/v7/ro-en.tgz "
                "(europarl-v7.ro-en.{en,ro}); SETimes2 from "
                "http://opus.nlpl.eu/download.php?f=SETIMES/v2/moses/en-ro.txt.zip "
                "(SETIMES.en-ro.{en,ro}); newsdev2016 / newstest2016 as plain text, e.g. "
                "`sacrebleu -t wmt16/dev -l en-ro --echo src` (and `--echo ref`), or from "
                "http://data.statmt.org/wmt16/translation-task/dev-romanian-updated.tgz and "
                "test.tgz (SGML), or rsennrich/wmt16-scripts."),
))

_M30K_STEMS = {"train": 29_000, "val": 1_014, "test_2016_flickr": 1_000}
_M30K_TOK_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/tok/"


def _m30k_path(stem, lang, variant):
    if variant == "tok":
        return f"tok/{stem}.lc.norm.tok.{lang}"
    if variant == "raw":
        return f"raw/{stem}.{lang}"
    raise ValueError(f"unknown Multi30k variant {variant!r}; use 'tok' or 'raw'")


sources.register(DataSource(
    name=MULTI30K,
    description="Multi30k (WMT'16 multimodal task 1) English-German: tok/ = official "
                "lowercased, normalized, Moses-tokenized text; raw/ = cased, untokenized",
    files=tuple(DataFile(_m30k_path(stem, lang, "tok"),
                         url=_M30K_TOK_URL + os.path.basename(_m30k_path(stem, lang, "tok")),
                         lines=n)
                for stem, n in _M30K_STEMS.items() for lang in ("en", "de"))
    # The official raw files are gzipped (data/task1/raw/<file>.gz); a plain
    # download would store the .gz bytes under the plain name, hence url=None.
    + tuple(DataFile(_m30k_path(stem, lang, "raw"), lines=n)
            for stem, n in _M30K_STEMS.items() for lang in ("en", "de")),
    homepage="https://github.com/multi30k/dataset",
    how_to_get=("The tok/ files download with sources.download('multi30k', paths=[...]); "
                "for raw/, fetch https://github.com/multi30k/dataset/raw/master/data/task1/raw/"
                "<file>.gz and gunzip it into <data_dir>/multi30k/raw/."),
))

_LANGS = {IWSLT15: ("en", "vi"), WMT16: ("en", "ro"), MULTI30K: ("en", "de")}
# split -> [(file stem, required)]; SETimes2 is optional so that the Europarl-only
# mirror still trains (the report then says the training set is incomplete).
_SPLIT_STEMS = {
    IWSLT15: {"train": [("train", True)], "dev": [("tst2012", True)], "test": [("tst2013", True)]},
    WMT16: {"train": [(_EUROPARL, True), (_SETIMES, False)], "dev": [("newsdev2016", True)],
            "test": [("newstest2016", True)]},
    MULTI30K: {"train": [("train", True)], "dev": [("val", True)],
               "test": [("test_2016_flickr", True)]},
}


def check_dataset(dataset):
    if dataset not in _LANGS:
        raise ValueError(f"unknown translation dataset {dataset!r}; choose one of {DATASETS}")


def check_lang(dataset, lang):
    if lang not in _LANGS[dataset]:
        raise ValueError(f"{dataset} has languages {_LANGS[dataset]}, not {lang!r}")


def split_stems(dataset, split):
    table = _SPLIT_STEMS[dataset]
    if split in table:
        return table[split]
    for entries in table.values():
        for stem, required in entries:
            if stem == split:
                return [(stem, required)]
    raise ValueError(f"{dataset} has splits {SPLITS} (or file stems "
                     f"{[s for e in table.values() for s, _ in e]}), not {split!r}")


def file_path(dataset, stem, lang, variant):
    if dataset == MULTI30K:
        return _m30k_path(stem, lang, variant)
    if variant != "tok":
        raise ValueError(f"{dataset} has one variant of its files; variant={variant!r} is "
                         f"only meaningful for {MULTI30K}")
    return f"{stem}.{lang}"
