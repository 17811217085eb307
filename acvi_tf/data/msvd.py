"""MSVD / Youtube2Text captions (Chen & Dolan 2011) for the video-captioning experiment.

Implements the data side of Section 4.2 / Table 3 and Appendix B of "Amortized
Context Vector Inference for Sequence-to-Sequence Networks": 1,970 clips, about
80,000 clip/description pairs, descriptions preprocessed "only using the wordpunct
tokenizer from the NLTK toolbox" (here also lowercased), split into "the first
1,200 video clips" (train), "a validation set composed of 100 clips" and "the last
600 clips" (test).

Two caption files are read:

* the S2VT files ``sents_{train,val,test}_lc_nopunc.txt`` (``vidN<TAB>caption``,
  already lowercased with punctuation removed; 48,774 / 4,290 / 27,763 captions of
  vid1-1200 / vid1201-1300 / vid1301-1970), the default and what the mirror holds;
* the original ``AllVideoDescriptions.txt`` of the Microsoft Research Video
  Description Corpus: ``#`` comment lines at the top, then ``<YouTubeID>_<start>_<end>
  [<Language>] <description>`` per line. The UT release is English-only and has no
  language column; a language column (as in the multilingual corpus) is detected and
  only ``English`` lines are kept. Clip names map to ``vidN`` through
  ``youtube_video_to_id_mapping.txt`` (S2VT's numbering: clip names in sorted order).

Clips are numbered ``vid1 .. vid1970`` and the splits are ranges of that numbering:

=========  ==================  ===================  ==========================
scheme     train               val                  test
=========  ==================  ===================  ==========================
``paper``  vid1-1200 (1,200)   vid1201-1300 (100)   vid1371-1970 (600, "last")
``s2vt``   vid1-1200 (1,200)   vid1201-1300 (100)   vid1301-1970 (670)
=========  ==================  ===================  ==========================

The paper's counts add up to 1,900 < 1,970: taken literally ("first 1,200", "100",
"last 600") its split leaves out the 70 clips ``vid1301 .. vid1370`` (listed in
:data:`PAPER_DROPPED_CLIPS`), which are in neither set. The usual MSVD split (Yao et
al. 2015, the paper's ref. 25, and S2VT) tests on all 670; "600" in the paper may be
a slip for 670, so ``s2vt`` is offered as the alternative.
"""

import collections
import dataclasses
import logging
import re

from acvi_tf.data import sources
from acvi_tf.data.sources import DataError, DataFile, DataSource

log = logging.getLogger(__name__)

NAME = "msvd"
SPLIT_FILES = {"train": "sents_train_lc_nopunc.txt", "val": "sents_val_lc_nopunc.txt",
               "test": "sents_test_lc_nopunc.txt"}
OFFICIAL_CAPTIONS = {"train": 48_774, "val": 4_290, "test": 27_763}  # 80,827 in all
NUM_CLIPS = 1_970
MAPPING_FILE = "youtube_video_to_id_mapping.txt"
ALL_DESCRIPTIONS_FILE = "AllVideoDescriptions.txt"

# Inclusive vidN ranges of each split scheme (see the module docstring).
SPLITS = {
    "paper": {"train": (1, 1200), "val": (1201, 1300), "test": (1371, 1970)},
    "s2vt": {"train": (1, 1200), "val": (1201, 1300), "test": (1301, 1970)},
}
PAPER_DROPPED_CLIPS = tuple(f"vid{i}" for i in range(1301, 1371))

_S2VT_URL = ("https://raw.githubusercontent.com/vijayvee/video-captioning/"
             "b28ee65d7832860eb79e316974ab9f2b1d5d0840/text_files/")
_ALL_DESCRIPTIONS_URL = ("https://www.cs.utexas.edu/users/ml/clamp/videoDescription/"
                         "AllVideoDescriptions.txt")

MSVD = sources.register(DataSource(
    name=NAME,
    description=("MSVD / Youtube2Text (Chen & Dolan 2011): 1,970 YouTube clips with ~40 "
                 "English descriptions each; S2VT caption files (lowercased, no "
                 "punctuation) 48,774 / 4,290 / 27,763 captions, or the original "
                 "AllVideoDescriptions.txt. No videos or CNN features."),
    files=(
        DataFile(SPLIT_FILES["train"], url=_S2VT_URL + SPLIT_FILES["train"],
                 lines=OFFICIAL_CAPTIONS["train"]),
        DataFile(SPLIT_FILES["val"], url=_S2VT_URL + SPLIT_FILES["val"],
                 lines=OFFICIAL_CAPTIONS["val"]),
        DataFile(SPLIT_FILES["test"], url=_S2VT_URL + SPLIT_FILES["test"],
                 lines=OFFICIAL_CAPTIONS["test"]),
        DataFile(MAPPING_FILE, url=_S2VT_URL + MAPPING_FILE, lines=NUM_CLIPS),
        # Alternative caption source; its line count includes header comments.
        DataFile(ALL_DESCRIPTIONS_FILE, url=_ALL_DESCRIPTIONS_URL),
    ),
    homepage="https://www.cs.utexas.edu/users/ml/clamp/videoDescription/",
    how_to_get=(
        "The S2VT caption files (sents_*_lc_nopunc.txt, youtube_video_to_id_mapping.txt) "
        "come with S2VT (Venugopalan et al. 2015) and e.g. the text_files/ folder of "
        "github.com/vijayvee/video-captioning. The original descriptions, "
        "AllVideoDescriptions.txt (Microsoft Research Video Description Corpus), are at "
        f"{_ALL_DESCRIPTIONS_URL}; the videos are YouTubeClips.tar from the same page (not "
        "needed for captions; many YouTube originals are gone). Put the files under "
        "$ACVI_DATA_MIRROR/msvd/ or data/msvd/."),
))


# --------------------------------------------------------------------------------------
# Tokenization
# --------------------------------------------------------------------------------------

def tokenize(text):
    """Appendix B: NLTK ``wordpunct_tokenize``, after lowercasing.

    ``wordpunct_tokenize`` splits on ``\\w+|[^\\w\\s]+``, so ``"it's"`` becomes
    ``it ' s``; on the S2VT ``_nopunc`` files it reduces to a whitespace split.
    """
    from nltk.tokenize import wordpunct_tokenize
    return wordpunct_tokenize(text.lower())


# --------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------

_VID = re.compile(r"^vid([1-9][0-9]*)$")
_CLIP_NAME = re.compile(r"^(?P<youtube>.+)_(?P<start>\d+)_(?P<end>\d+)$")


def vid_number(clip):
    """``"vid17"`` -> 17 (raises ValueError for anything else)."""
    m = _VID.match(clip)
    if not m:
        raise ValueError(f"not an MSVD clip id of the form vidN: {clip!r}")
    return int(m.group(1))


def _lines(path):
    """(line number, text without the newline) over a UTF-8 file, split on '\\n' only.

    Undecodable bytes become U+FFFD rather than aborting: the original corpus has
    non-English descriptions, and a lost English line is counted, not fatal.
    """
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for number, line in enumerate(f, start=1):
            yield number, line.rstrip("\n").rstrip("\r")


def read_mapping(path=None):
    """``youtube_video_to_id_mapping.txt`` -> {clip name: "vidN"} (``<name> vidN`` lines)."""
    path = path or sources.locate(NAME, MAPPING_FILE)
    mapping, seen_vids = {}, {}
    for number, line in _lines(path):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2 or not _VID.match(fields[1]):
            raise DataError(f"{path}:{number}: expected '<clip name> vidN', got {line!r}")
        name, vid = fields
        if name in mapping:
            raise DataError(f"{path}:{number}: clip {name!r} mapped twice")
        if vid in seen_vids:
            raise DataError(f"{path}:{number}: {vid} already used on line {seen_vids[vid]}")
        mapping[name] = vid
        seen_vids[vid] = number
    if not mapping:
        raise DataError(f"{path}: no clip mapping lines")
    return mapping


def read_s2vt_captions(path):
    """An S2VT ``sents_*.txt`` file -> [(vidN, tokens)] in file order.

    Lines are ``vidN<TAB>caption``. A caption empty after tokenization is skipped
    with a warning (there are none in the S2VT files); a malformed line is an error
    naming the file and line.
    """
    out, empty = [], 0
    for number, line in _lines(path):
        if not line.strip():
            continue
        clip, sep, text = line.partition("\t")
        if not sep or not _VID.match(clip):
            raise DataError(f"{path}:{number}: expected 'vidN<TAB>caption', got {line[:80]!r}")
        tokens = tokenize(text)
        if not tokens:
            empty += 1
            continue
        out.append((clip, tokens))
    if empty:
        log.warning("%s: %d empty captions skipped", path, empty)
    return out


@dataclasses.dataclass
class DescriptionStats:
    """What :func:`read_all_video_descriptions` kept and dropped."""
    lines: int = 0
    comments: int = 0
    kept: int = 0
    non_english: int = 0
    empty: int = 0
    unmapped: int = 0                 # descriptions of clips not in the 1,970
    unmapped_clips: set = dataclasses.field(default_factory=set)
    language_column: bool = False
    languages: collections.Counter = dataclasses.field(default_factory=collections.Counter)


def _detect_language_column(rows):
    """True when the second field of every row looks like a language name.

    A language column holds a few capitalised names (``English``, ``Spanish``, ...);
    English descriptions start with "a", "the", "A", ... so some row fails the test,
    and a column of more than 100 distinct values is not a language column.
    """
    seconds = [r[2].split(None, 1)[0] if r[2].split() else "" for r in rows]
    if not seconds:
        return False
    if not all(re.fullmatch(r"[A-Z][A-Za-z]+", s) for s in seconds):
        return False
    return len(set(seconds)) <= 100


def read_all_video_descriptions(path=None, mapping=None, language="English",
                                language_column="auto"):
    """``AllVideoDescriptions.txt`` -> ([(vidN, tokens)], :class:`DescriptionStats`).

    Lines starting with ``#`` are comments; the others are ``<YouTubeID>_<start>_<end>``
    then, if ``language_column`` (True / False / "auto": detected over the whole
    file), a language name, then the description. Only ``language`` lines are kept
    when there is a language column; descriptions are tokenized with
    :func:`tokenize`. Clip names map to ``vidN`` through ``mapping`` (default:
    :func:`read_mapping`); descriptions of clips outside it are counted and dropped.
    """
    path = path or sources.locate(NAME, ALL_DESCRIPTIONS_FILE)
    mapping = mapping if mapping is not None else read_mapping()
    stats = DescriptionStats()
    rows = []
    for number, line in _lines(path):
        stats.lines += 1
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            stats.comments += 1
            continue
        name, _, rest = stripped.partition(" ")
        if not _CLIP_NAME.match(name):
            raise DataError(f"{path}:{number}: expected '<YouTubeID>_<start>_<end> ...', "
                            f"got {line[:80]!r}")
        rows.append((number, name, rest))
    if language_column == "auto":
        language_column = _detect_language_column(rows)
    stats.language_column = bool(language_column)
    out = []
    for number, name, rest in rows:
        if language_column:
            lang, _, rest = rest.strip().partition(" ")
            if not lang:
                raise DataError(f"{path}:{number}: missing language field")
            stats.languages[lang] += 1
            if lang.lower() != language.lower():
                stats.non_english += 1
                continue
        vid = mapping.get(name)
        if vid is None:
            stats.unmapped += 1
            stats.unmapped_clips.add(name)
            continue
        tokens = tokenize(rest)
        if not tokens:
            stats.empty += 1
            continue
        out.append((vid, tokens))
        stats.kept += 1
    if not out:
        raise DataError(f"{path}: no {language} descriptions of known clips were read "
                        f"({stats.lines} lines, {stats.unmapped} of unmapped clips, "
                        f"{stats.non_english} in other languages)")
    if stats.unmapped:
        log.info("%s: %d descriptions of %d clips outside the 1,970-clip mapping dropped",
                 path, stats.unmapped, len(stats.unmapped_clips))
    return out, stats


# --------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------

@dataclasses.dataclass
class CaptionSplit:
    """The clips of one split and all their tokenized captions.

    ``clips`` are in vidN order; ``captions[clip]`` lists token lists in file order.
    """
    name: str
    clips: list
    captions: dict

    @property
    def num_captions(self):
        return sum(len(self.captions[c]) for c in self.clips)

    def pairs(self):
        """Training pairs: one ``(clip, tokens)`` per caption, in file order."""
        return [(c, toks) for c in self.clips for toks in self.captions[c]]

    def references(self):
        """Evaluation: ``{clip: [reference, ...]}``, ALL references of each clip,
        tokens joined by single spaces (the input of :mod:`acvi_tf.metrics.caption`)."""
        return {c: [" ".join(t) for t in self.captions[c]] for c in self.clips}


def split_clips(scheme="paper", num_clips=NUM_CLIPS):
    """{"train" | "val" | "test": [vidN, ...]} of a split scheme (``paper`` or ``s2vt``)."""
    try:
        ranges = SPLITS[scheme]
    except KeyError:
        raise ValueError(f"unknown MSVD split scheme {scheme!r}; choose from {sorted(SPLITS)}") from None
    return {split: [f"vid{i}" for i in range(lo, min(hi, num_clips) + 1)]
            for split, (lo, hi) in ranges.items()}


def load_captions(source="s2vt", paths=None):
    """All captions: {vidN: [tokens, ...]} from the S2VT files or AllVideoDescriptions.

    ``source``: "s2vt" (the three ``sents_*`` files; each clip must be in the file of
    its S2VT split) or "all_descriptions". ``paths`` overrides file locations
    (``{"train": .., "val": .., "test": ..}`` for s2vt, ``{"descriptions": ..,
    "mapping": ..}`` for all_descriptions).
    """
    paths = paths or {}
    captions = collections.defaultdict(list)
    if source == "s2vt":
        s2vt = split_clips("s2vt")
        for split, fname in SPLIT_FILES.items():
            path = paths.get(split) or sources.locate(NAME, fname)
            lo, hi = SPLITS["s2vt"][split]
            for clip, tokens in read_s2vt_captions(path):
                if not lo <= vid_number(clip) <= hi:
                    raise DataError(f"{path}: {clip} is not a clip of the S2VT {split} split "
                                    f"({s2vt[split][0]}..{s2vt[split][-1]})")
                captions[clip].append(tokens)
    elif source == "all_descriptions":
        mapping = read_mapping(paths.get("mapping"))
        rows, _ = read_all_video_descriptions(paths.get("descriptions"), mapping)
        for clip, tokens in rows:
            captions[clip].append(tokens)
    else:
        raise ValueError(f"source must be 's2vt' or 'all_descriptions', got {source!r}")
    return dict(captions)


def load_splits(scheme="paper", source="s2vt", paths=None, captions=None):
    """{"train" | "val" | "test": :class:`CaptionSplit`} for a split scheme.

    A clip of a split without any caption is an error (it could not be evaluated).
    """
    captions = captions if captions is not None else load_captions(source, paths)
    out = {}
    for split, clips in split_clips(scheme).items():
        missing = [c for c in clips if not captions.get(c)]
        if missing:
            raise DataError(f"msvd ({source}): {len(missing)} clips of the {scheme} {split} "
                            f"split have no caption, e.g. {missing[:5]}")
        out[split] = CaptionSplit(split, clips, {c: captions[c] for c in clips})
    return out


def build_vocab(train_split, min_count=1, max_size=None):
    """The caption vocabulary from the TRAINING captions only (``acvi_tf.data.vocab.Vocab``).

    ``min_count`` is the frequency cut-off (rarer words become ``<unk>``); the paper
    reports "approximately 16,000 unique words" and no cut-off, so the default keeps
    every training word. ``max_size`` counts the 4 special tokens.
    """
    from acvi_tf.data.vocab import Vocab
    return Vocab.build((toks for _, toks in train_split.pairs()),
                       min_count=min_count, max_size=max_size)


def encode_pair(tokens, vocab, max_len=None):
    """Caption tokens -> (decoder input ``<s> w1 .. wn``, target ``w1 .. wn </s>``) ids.

    ``max_len`` cuts both to at most ``max_len`` ids (a cut target has no ``</s>``).
    """
    ids = vocab.encode(tokens)
    dec_in, target = [vocab.bos_id] + ids, ids + [vocab.eos_id]
    if max_len is not None:
        dec_in, target = dec_in[:max_len], target[:max_len]
    return dec_in, target


def counts_report(source="s2vt", paths=None, scheme="paper"):
    """Lines describing the local copy against the official sizes (for logs/CLIs)."""
    lines = []
    if source == "s2vt" and not paths:
        for split, fname in SPLIT_FILES.items():
            msg, _ = sources.completeness(NAME, fname)
            lines.append(msg)
    captions = load_captions(source, paths)
    lines.append(f"msvd ({source}): {sum(map(len, captions.values())):,} captions of "
                 f"{len(captions):,} of {NUM_CLIPS:,} clips")
    for split, data in load_splits(scheme, source, captions=captions).items():
        lines.append(f"  {scheme} {split}: {len(data.clips):,} clips "
                     f"({data.clips[0]}..{data.clips[-1]}), {data.num_captions:,} captions")
    if scheme == "paper":
        dropped = sum(len(captions.get(c, ())) for c in PAPER_DROPPED_CLIPS)
        lines.append(f"  not used by the paper split: {len(PAPER_DROPPED_CLIPS)} clips "
                     f"({PAPER_DROPPED_CLIPS[0]}..{PAPER_DROPPED_CLIPS[-1]}), {dropped:,} captions")
    return lines


# --------------------------------------------------------------------------------------
# Videos (for feature extraction)
# --------------------------------------------------------------------------------------

VIDEO_EXTENSIONS = (".avi", ".mp4", ".webm", ".mkv", ".mov")


def video_paths(videos_dir, mapping=None):
    """``({vidN: video file}, [clip names without a file])`` for the MSVD videos.

    ``videos_dir`` is the unpacked ``YouTubeClips.tar`` (``<YouTubeID>_<start>_<end>.avi``
    per clip); the clip names map to ``vidN`` through ``mapping`` (default:
    :func:`read_mapping`, the S2VT numbering the caption files use). Other
    extensions in :data:`VIDEO_EXTENSIONS` are accepted for re-encoded copies.
    """
    import os
    if not os.path.isdir(videos_dir):
        raise DataError(f"{videos_dir}: not a directory of MSVD videos (unpack "
                        f"YouTubeClips.tar from {MSVD.homepage} there)")
    mapping = mapping if mapping is not None else read_mapping()
    files = {}
    for name in os.listdir(videos_dir):
        stem, ext = os.path.splitext(name)
        if ext.lower() in VIDEO_EXTENSIONS:
            files.setdefault(stem, os.path.join(videos_dir, name))
    found, missing = {}, []
    for name, vid in sorted(mapping.items(), key=lambda kv: vid_number(kv[1])):
        if name in files:
            found[vid] = files[name]
        else:
            missing.append(name)
    return found, missing
