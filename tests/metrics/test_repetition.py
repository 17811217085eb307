"""N-GRR (VRNMT's Eq. 27) against hand counts."""

import pytest

from acvi_tf.metrics.repetition import (ngram_repetition_rate, ngrams, repetition_table,
                                        sentence_repetition)


def test_sentence_counts_by_hand():
    # "the cat saw the cat": unigrams the cat saw the cat -> 5 total, 3 unique
    assert sentence_repetition("the cat saw the cat", 1) == (5, 2)
    # bigrams: (the cat) (cat saw) (saw the) (the cat) -> 4 total, 3 unique
    assert sentence_repetition("the cat saw the cat", 2) == (4, 1)
    assert sentence_repetition(["a", "a", "a"], 2) == (2, 1)
    assert ngrams(["x", "y", "z"], 3) == [("x", "y", "z")]


def test_corpus_rate_is_the_mean_over_all_translations():
    candidates = ["the cat saw the cat",   # 1-GRR 2/5, 2-GRR 1/4
                  "a b c",                 # 0, 0
                  "a a a a"]               # 3/4, 2-grams (a a)x3: 2/3
    assert ngram_repetition_rate(candidates, 1) == pytest.approx((2 / 5 + 0 + 3 / 4) / 3)
    assert ngram_repetition_rate(candidates, 2) == pytest.approx((1 / 4 + 0 + 2 / 3) / 3)
    table = repetition_table(candidates, max_order=3)
    assert table[1] == pytest.approx(100 * (2 / 5 + 3 / 4) / 3)
    # 3-grams: (the cat saw)(cat saw the)(saw the cat): 0; (a b c): 0; (a a a)x2: 1/2
    assert table[3] == pytest.approx(100 * (1 / 2) / 3)


def test_short_and_empty_sentences_never_divide_by_zero():
    sentences = ["", "a", "b b"]   # 2-grams: none, none, (b b) once -> 0 repeated
    assert ngram_repetition_rate(sentences, 2) == 0.0
    # 1-grams: "" has none (counts 0), "a" 0/1, "b b" 1/2
    assert ngram_repetition_rate(sentences, 1) == pytest.approx((0 + 0 + 0.5) / 3)
    assert ngram_repetition_rate(sentences, 1, count_short=False) == pytest.approx(0.5 / 2)
    assert ngram_repetition_rate([], 1) == 0.0
    assert ngram_repetition_rate([""], 4, count_short=False) == 0.0


def test_case_and_tokens():
    assert ngram_repetition_rate(["The the"], 1) == 0.0
    assert ngram_repetition_rate(["The the"], 1, lowercase=True) == 0.5
    assert ngram_repetition_rate([["x", "x"]], 1) == 0.5
    with pytest.raises(ValueError, match="order"):
        ngram_repetition_rate(["a"], 0)
