"""A word (or subword) vocabulary: token <-> id, shared by all tasks.

Ids 0-3 are always the special tokens, in this order::

    0 <pad>   padding; never a real token, so lengths are "number of non-zeros"
    1 <unk>   any token outside the vocabulary
    2 <s>     start of a target sequence (the decoder's first input)
    3 </s>    end of a sequence (the decoder's last output)

Regular tokens follow from id 4 in file (or frequency) order. Vocabulary files
are read in the two common layouts:

* one token per line -- the Stanford NMT ``vocab.en``/``vocab.vi``, which already
  start with ``<unk> <s> </s>``; special tokens found in a file are recognised and
  kept at their fixed ids rather than duplicated;
* ``token count`` per line -- See et al.'s CNN/DailyMail ``vocab``.

``max_size`` always counts the special tokens too, as See et al. and
tensorflow/nmt do: a "50K vocabulary" has exactly 50,000 ids.
"""

import collections
import os
import re

from acvi_tf.utils.text import split_tokens  # noqa: F401  (vocab.split_tokens)

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


class VocabError(ValueError):
    """A vocabulary file is malformed; the message names the file and line."""


def _read_vocab_lines(path):
    """Yields (line_number, text) of a UTF-8 file, splitting only on '\\n'.

    Python's universal newlines would also split on '\\r', '\\x85' or '\\u2028',
    which can occur inside tokens; '\\n' is what ``wc -l`` and the file counts
    in the data registry count.
    """
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise VocabError(f"{path}:{number}: not valid UTF-8 ({e})") from None
            yield number, line.rstrip("\n").rstrip("\r")


_COUNT = re.compile(r"[0-9]+")


class Vocab:
    """Token <-> id mapping with ``<pad>``=0, ``<unk>``=1, ``<s>``=2, ``</s>``=3.

    Args:
      tokens: the regular tokens, most important first. Special tokens among
        them are skipped (they already have their fixed ids).
      counts: optional token -> frequency, kept for :meth:`save` and inspection.
    """

    def __init__(self, tokens, counts=None):
        self._id_to_token = list(SPECIALS)
        self._token_to_id = {t: i for i, t in enumerate(SPECIALS)}
        for token in tokens:
            if token in SPECIALS:
                continue
            if not isinstance(token, str) or split_tokens(token) != [token]:
                # A token with ASCII whitespace could never come out of
                # split_tokens(), and would break the file layout of save().
                raise ValueError(f"invalid vocabulary token {token!r}")
            if token in self._token_to_id:
                raise ValueError(f"duplicate vocabulary token {token!r}")
            self._token_to_id[token] = len(self._id_to_token)
            self._id_to_token.append(token)
        self.counts = dict(counts) if counts else {}

    # ------------------------------------------------------------------ build
    @classmethod
    def load(cls, path, max_size=None, min_count=None):
        """Reads a vocabulary file: ``token`` or ``token count`` per line.

        Args:
          path: the file; lines are either all ``token`` or all ``token count``.
          max_size: keep at most this many ids, the 4 special tokens included.
          min_count: drop tokens rarer than this (needs a count column).

        Raises :class:`VocabError` naming the file and line for a malformed or
        duplicate line.
        """
        tokens, counts, first_seen = [], {}, {}
        has_counts = None
        for number, line in _read_vocab_lines(path):
            fields = split_tokens(line)
            where = f"{path}:{number}"
            if not fields:
                raise VocabError(f"{where}: empty line in vocabulary file")
            if len(fields) == 1:
                line_has_count = False
            elif len(fields) == 2 and _COUNT.fullmatch(fields[1]):
                line_has_count = True
            else:
                raise VocabError(f"{where}: expected 'token' or 'token count', got {line!r}")
            if has_counts is None:
                has_counts = line_has_count
            elif has_counts != line_has_count:
                layout = "'token count'" if has_counts else "'token'"
                raise VocabError(f"{where}: {line!r} does not follow the file's {layout} layout "
                                 f"(set by line 1)")
            token = fields[0]
            if token in first_seen:
                raise VocabError(f"{where}: duplicate token {token!r} (first on line "
                                 f"{first_seen[token]})")
            first_seen[token] = number
            if line_has_count and token not in SPECIALS:  # save() writes 0 for them
                counts[token] = int(fields[1])
            tokens.append(token)
        if min_count is not None:
            if not has_counts:
                raise VocabError(f"{path}: min_count={min_count} needs a 'token count' file, "
                                 f"but its lines hold tokens only")
            tokens = [t for t in tokens if t in SPECIALS or counts[t] >= min_count]
        return cls._truncated(tokens, counts, max_size)

    @classmethod
    def build(cls, corpus, min_count=1, max_size=None):
        """Builds a vocabulary from token lists, most frequent first.

        Ties are broken alphabetically, so the result does not depend on the
        order of the corpus. ``min_count`` drops rare tokens (they become
        ``<unk>``); ``max_size`` counts the 4 special tokens too.
        """
        counter = collections.Counter()
        for tokens in corpus:
            counter.update(tokens)
        for special in SPECIALS:
            counter.pop(special, None)
        ranked = sorted((t for t, c in counter.items() if c >= min_count),
                        key=lambda t: (-counter[t], t))
        return cls._truncated(ranked, dict(counter), max_size)

    @classmethod
    def _truncated(cls, tokens, counts, max_size):
        if max_size is not None:
            if max_size < len(SPECIALS):
                raise ValueError(f"max_size={max_size} is smaller than the {len(SPECIALS)} "
                                 f"special tokens")
            regular = [t for t in tokens if t not in SPECIALS]
            tokens = regular[:max_size - len(SPECIALS)]
        kept = set(tokens)
        return cls(tokens, counts={t: c for t, c in counts.items() if t in kept})

    def save(self, path):
        """Writes one token per line in id order (specials included), plus a
        count column when every regular token has a count; :meth:`load` reads
        it back to an equal vocabulary."""
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        regular = self._id_to_token[len(SPECIALS):]
        with_counts = bool(regular) and all(t in self.counts for t in regular)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for token in self._id_to_token:
                if with_counts:
                    f.write(f"{token} {self.counts.get(token, 0)}\n")
                else:
                    f.write(token + "\n")
        os.replace(tmp, path)  # never leave a half-written vocabulary behind

    # ------------------------------------------------------------- properties
    @property
    def pad_id(self):
        return PAD_ID

    @property
    def unk_id(self):
        return UNK_ID

    @property
    def bos_id(self):
        return BOS_ID

    @property
    def eos_id(self):
        return EOS_ID

    @property
    def special_ids(self):
        return frozenset(range(len(SPECIALS)))

    @property
    def tokens(self):
        """All tokens in id order (a copy)."""
        return list(self._id_to_token)

    def __len__(self):
        return len(self._id_to_token)

    def __contains__(self, token):
        return token in self._token_to_id

    def __eq__(self, other):
        return isinstance(other, Vocab) and self._id_to_token == other._id_to_token

    def __hash__(self):
        return hash(tuple(self._id_to_token))

    def __repr__(self):
        preview = " ".join(self._id_to_token[len(SPECIALS):len(SPECIALS) + 5])
        return f"Vocab(size={len(self)}, first tokens: {preview} ...)"

    # ---------------------------------------------------------------- lookups
    def token_to_id(self, token):
        return self._token_to_id.get(token, UNK_ID)

    def id_to_token(self, index):
        return self._id_to_token[index]

    def encode(self, tokens, add_bos=False, add_eos=False):
        """Token list -> id list; unknown tokens map to ``<unk>``."""
        get = self._token_to_id.get
        ids = [get(t, UNK_ID) for t in tokens]
        if add_bos:
            ids.insert(0, BOS_ID)
        if add_eos:
            ids.append(EOS_ID)
        return ids

    def decode(self, ids, strip_special=True):
        """Id list -> token list.

        With ``strip_special`` (for evaluation), decoding stops at the first
        ``</s>`` -- anything a decoder emits after it is not part of the output --
        and ``<pad>``/``<s>`` are dropped. ``<unk>`` is kept: it is a real
        (wrong) output word, and BLEU should count it as such.
        """
        out = []
        for i in ids:
            i = int(i)
            if strip_special:
                if i == EOS_ID:
                    break
                if i in (PAD_ID, BOS_ID):
                    continue
            out.append(self._id_to_token[i])
        return out
