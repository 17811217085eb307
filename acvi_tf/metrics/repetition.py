"""N-gram repetition rate (N-GRR), the over-translation measure of VRNMT's Table 3
(Su et al., AAAI 2018, Eq. 27; from Zhang, Xiong and Su 2017):

    N-GRR = 1 / (C R) * sum_{c=1}^{C} sum_{r=1}^{R}
            (|N-grams_{c,r}| - |u(N-grams_{c,r})|) / |N-grams_{c,r}|,

the share of a sentence's n-grams that repeat an earlier n-gram of the same sentence,
averaged over the R translations of each of the C test sentences (R = 1 for a system's
output; R = the number of references for the "Reference" row). Since every translation
has the same weight 1 / (C R), the score is the mean over the flat list of all C R
sentences, which is what :func:`ngram_repetition_rate` takes.

What is counted:

* A sentence is a string (split on whitespace) or a list of tokens; tokens are compared
  exactly (``lowercase=True`` folds case first). N-grams are the len - n + 1 contiguous
  windows, with their multiplicity in |N-grams| and once each in |u(N-grams)|; so
  "a a a" has 1-GRR (3 - 1) / 3 = 2/3 and 2-GRR (2 - 1) / 2 = 1/2.
* A sentence shorter than n (the empty one included) has no n-grams and so nothing
  repeated: it contributes 0 and still counts in C R (``count_short=True``, Eq. 27's
  denominator), or is left out of the average (``count_short=False``). No case divides by
  zero; an empty corpus, or one with only short sentences left out, scores 0.
* The result is a fraction in [0, 1); Table 3 prints percentages (x 100), see
  :func:`repetition_table`.
"""


def _tokens(sentence, lowercase=False):
    tokens = sentence.split() if isinstance(sentence, str) else [str(t) for t in sentence]
    return [t.lower() for t in tokens] if lowercase else tokens


def ngrams(tokens, n):
    """The contiguous n-grams of ``tokens`` (tuples, with repeats, in order)."""
    if n < 1:
        raise ValueError(f"n-gram order must be at least 1, got {n}")
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def sentence_repetition(sentence, n, lowercase=False):
    """(|N-grams|, |N-grams| - |u(N-grams)|) of one sentence: total and repeated n-grams."""
    grams = ngrams(_tokens(sentence, lowercase), n)
    return len(grams), len(grams) - len(set(grams))


def ngram_repetition_rate(sentences, n=1, lowercase=False, count_short=True):
    """Eq. (27): the mean over ``sentences`` (all C R translations, flat) of each one's
    repeated / total n-grams; a fraction (see the module docstring for short sentences)."""
    rates = []
    for sentence in sentences:
        total, repeated = sentence_repetition(sentence, n, lowercase)
        if total:
            rates.append(repeated / total)
        elif count_short:
            rates.append(0.0)
    return sum(rates) / len(rates) if rates else 0.0


def repetition_table(sentences, max_order=4, lowercase=False, count_short=True):
    """{n: N-GRR in percent} for n = 1 .. max_order, one row of VRNMT's Table 3."""
    sentences = list(sentences)
    return {n: 100.0 * ngram_repetition_rate(sentences, n, lowercase, count_short)
            for n in range(1, max_order + 1)}


def format_table(table):
    """``{n: percent}`` (keys ints, or strings as read back from JSON) -> "a / b / c / d"."""
    return " / ".join(f"{table[k]:.2f}" for k in sorted(table, key=int))
