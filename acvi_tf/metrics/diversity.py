"""Diversity of generated sentences: entropy and distinct-1 / distinct-2.

Bahuleyan, Mou, Vechtomova and Poupart, "Variational Attention for
Sequence-to-Sequence Models" (COLING 2018), Table 2 ("Measure diversity:
entropy and distinct metrics"; distinct is "the percentage of distinct
unigrams or bigrams", after Li et al., "A Diversity-Promoting Objective
Function for Neural Conversation Models", NAACL 2016).

* :func:`distinct_n` -- distinct n-grams / all n-grams, pooled over the
  sentences given; n-grams are taken inside each sentence (none crosses a
  sentence boundary).
* :func:`entropy` -- the entropy, in **nats** (natural log, as the authors'
  ``calculate_entropy``), of the unigram distribution of the tokens pooled over
  the sentences: -sum_w p(w) log p(w), p(w) = count(w) / number of tokens.

Which sentences to pool is the protocol's choice. :func:`diversity` pools a
whole decoded corpus (one output per source: what the task CLIs report next to
their scores). Bahuleyan et al. instead draw 10 samples per source (latents
sampled at decode time), compute the metrics over each source's 10 samples and
average over sources (their code's ``get_diversity_metrics``; their Table 2
values, entropy ~2.4 nats and distinct-1 ~0.2, are of that kind):
:func:`per_source_diversity`. Two differences from their code, both
deliberate: their distinct-2 counts bigrams across the boundaries of the
concatenated samples and divides by the number of *tokens*; here bigrams stay
inside a sentence and the denominator is the number of bigrams.

Sentences are token lists or strings (split on whitespace). An empty corpus (or
one without any n-gram) scores 0.
"""

import collections
import math
import statistics


def _tokens(sentence):
    return sentence.split() if isinstance(sentence, str) else list(sentence)


def ngram_counts(sentences, n):
    """A Counter of the n-grams (tuples) inside each sentence, pooled."""
    if n < 1:
        raise ValueError(f"n={n}: n-grams need n >= 1")
    counts = collections.Counter()
    for sentence in sentences:
        tokens = _tokens(sentence)
        counts.update(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    return counts


def distinct_n(sentences, n):
    """Distinct-n: the number of distinct n-grams / the number of n-grams, over the corpus."""
    counts = ngram_counts(sentences, n)
    total = sum(counts.values())
    return len(counts) / total if total else 0.0


def entropy(sentences):
    """The unigram entropy of the pooled tokens, in nats (see the module docstring)."""
    counts = ngram_counts(sentences, 1)
    total = sum(counts.values())
    if not total:
        return 0.0
    return -sum(c / total * math.log(c / total) for c in counts.values())


def diversity(sentences):
    """``{"entropy", "distinct_1", "distinct_2", "tokens"}`` of one pooled corpus."""
    sentences = [_tokens(s) for s in sentences]
    return {"entropy": entropy(sentences), "distinct_1": distinct_n(sentences, 1),
            "distinct_2": distinct_n(sentences, 2),
            "tokens": int(sum(len(s) for s in sentences))}


def per_source_diversity(groups):
    """Bahuleyan et al.'s protocol: :func:`diversity` of each group (the samples decoded
    for one source), averaged over the groups (``tokens`` is the total, ``samples`` the
    size of the largest group: K of the protocol's K decodes per source)."""
    scores = [diversity(group) for group in groups]
    if not scores:
        return diversity([])
    out = {k: statistics.fmean(s[k] for s in scores)
           for k in ("entropy", "distinct_1", "distinct_2")}
    out["tokens"] = int(sum(s["tokens"] for s in scores))
    out["groups"] = len(scores)
    out["samples"] = max(len(group) for group in groups)
    return out


def format_diversity(scores):
    return (f"entropy {scores['entropy']:.3f} nats, distinct-1 {scores['distinct_1']:.3f}, "
            f"distinct-2 {scores['distinct_2']:.3f}")


def format_per_source(scores, source="source", split="test"):
    """The report line of :func:`per_source_diversity` scores of sampled decodes."""
    return (f"{split} diversity of {scores['samples']} sampled decodes per {source} (first "
            f"{scores['groups']} {source}s, Bahuleyan et al.'s protocol): "
            f"{format_diversity(scores)}")
