"""Table 2 metrics (novel words, OOV adoption) and the lead-3 baseline of Table 1.

Table 2 of Chatzis et al. ("Amortized Context Vector Inference ...") reports a
"Rate of Novel Words" and a "Rate of OOV Words Adoption" for pointer-generator
summaries (SA 0.05 / 1.16, structured 0.05 / 1.18, ACVI 0.38 / 1.25); the paper
defines neither precisely. The definitions used here:

* **Novel-word rate** -- the words "not found in the source document" (the
  paper's words): the fraction of generated tokens that do not occur anywhere in
  the full article (tokens compared exactly, after lowercasing; the data is
  lowercased already). ``[UNK]`` (``<unk>``) is not a word and ``[STOP]``
  (``</s>``) ends the summary, so neither is counted, in the numerator or the denominator. Corpus level:
  novel tokens of all summaries / generated tokens of all summaries (as See et
  al.'s novel n-gram percentages, Fig. 6, pool the test set).
* **OOV-adoption rate** -- the fraction of generated tokens that are *article
  OOVs*: words outside the model's vocabulary (See et al.'s 50K) that occur in the
  article the encoder read (the truncated article) and so can only have been
  produced by copying with the pointer (extended ids ``V, V+1, ...``;
  See et al., Eq. 9). Same pooling and the same exclusions as above.

Both functions return fractions; :func:`novelty_stats` also gives percentages.
Table 2's numbers must be percentages (an OOV-adoption *fraction* of 1.16 is
impossible, and See et al. report novelty in percent), so compare ``*_percent``
with Table 2.

Lead-3 (See et al., Table 1: "the first three sentences of the article";
40.34 / 17.70 / 36.57 ROUGE-1/2/L). The articles in ``finished_files`` are one
tokenized string without sentence marks, so sentences are recovered from the
tokens: a sentence ends at a ``.``, ``!`` or ``?`` token (PTB tokenization makes
sentence-final punctuation a token of its own; abbreviations such as ``u.s.``
stay one token), together with any closing tokens right after it (``’``, ``”``,
``''``, ``)``, ``]``, and ``"`` / ``'`` only when the sentence has an unmatched
one: a straight quote after a full stop may open the next sentence instead).
``...`` does not end a sentence (it is mostly mid-sentence in news text).
NLTK's Punkt model is not used because its data must be downloaded.
"""

from acvi_tf.utils.text import split_tokens as split_words

SENTENCE_END_TOKENS = frozenset({".", "!", "?"})
_CLOSERS = frozenset({"’", "”", "''", ")", "]", "}", "-rrb-", "-rsb-"})
_STRAIGHT_QUOTES = frozenset({'"', "'"})
# Special tokens in either spelling: the shared vocabulary's and See et al.'s.
_NOT_WORDS = frozenset({"<unk>", "<pad>", "<s>", "[unk]", "[pad]", "[start]"})
_STOPS = frozenset({"</s>", "[stop]"})


def _tokens(text):
    if isinstance(text, str):
        return split_words(text.lower())
    return [str(t).lower() for t in text]


def split_sentences(article):
    """Splits a tokenized article (str or token list) into sentence strings.

    See the module docstring for the rule. Trailing words without a final
    ``.``/``!``/``?`` form a last sentence.
    """
    words = split_words(article) if isinstance(article, str) else list(article)
    sents, cur, i = [], [], 0
    while i < len(words):
        w = words[i]
        cur.append(w)
        i += 1
        if w not in SENTENCE_END_TOKENS:
            continue
        # Absorb repeated end marks ("? !") and closing quotes/brackets.
        while i < len(words):
            nxt = words[i]
            if nxt in SENTENCE_END_TOKENS or nxt in _CLOSERS:
                pass
            elif nxt in _STRAIGHT_QUOTES and cur.count(nxt) % 2 == 1:
                pass  # closes a quote opened in this sentence
            else:
                break
            cur.append(nxt)
            i += 1
        sents.append(" ".join(cur))
        cur = []
    if cur:
        sents.append(" ".join(cur))
    return sents


def lead3(article, n=3):
    """The lead-3 baseline: the first ``n`` sentences of the article (a list of
    sentence strings, one per ROUGE line)."""
    return split_sentences(article)[:n]


def _summary_tokens(summary):
    # Tokens up to the first stop token, without the special tokens.
    out = []
    for t in _tokens(summary):
        if t in _STOPS:
            break
        if t not in _NOT_WORDS:
            out.append(t)
    return out


def novel_word_counts(summary, article):
    """(novel tokens, generated tokens) of one summary against its full article."""
    toks = _summary_tokens(summary)
    art = set(_tokens(article))
    return sum(1 for t in toks if t not in art), len(toks)


def novel_word_rate(summaries, articles):
    """Pooled fraction of generated tokens absent from their article (Table 2,
    "Rate of Novel Words"; see the module docstring). 0.0 for no tokens."""
    novel = total = 0
    for s, a in zip(summaries, articles, strict=True):
        n, t = novel_word_counts(s, a)
        novel += n
        total += t
    return novel / total if total else 0.0


def oov_adoption_counts(summary, article_oovs):
    """(article-OOV tokens, generated tokens) of one summary.

    ``article_oovs``: the OOV words of the truncated article, as returned by
    ``acvi_tf.data.cnndm.article2ids`` / the batch's ``"oovs"`` (not in the
    vocabulary by construction).
    """
    toks = _summary_tokens(summary)
    oovs = {w.lower() for w in article_oovs}
    return sum(1 for t in toks if t in oovs), len(toks)


def oov_adoption_rate(summaries, article_oovs):
    """Pooled fraction of generated tokens that are article OOVs, i.e. copied by
    the pointer from outside the vocabulary (Table 2, "Rate of OOV Words
    Adoption"; see the module docstring). 0.0 for no tokens."""
    hit = total = 0
    for s, o in zip(summaries, article_oovs, strict=True):
        h, t = oov_adoption_counts(s, o)
        hit += h
        total += t
    return hit / total if total else 0.0


def novelty_stats(summaries, articles, article_oovs):
    """Both Table 2 rates, as fractions and as percentages."""
    nw = novel_word_rate(summaries, articles)
    oov = oov_adoption_rate(summaries, article_oovs)
    return {"novel_word_rate": nw, "oov_adoption_rate": oov,
            "novel_word_percent": 100 * nw, "oov_adoption_percent": 100 * oov,
            "count": len(summaries)}
