"""Table 2 metrics and the lead-3 baseline: acvi_tf.metrics.novelty."""

import math

import pytest

from acvi_tf.data import cnndm
from acvi_tf.data.vocab import Vocab
from acvi_tf.metrics import novelty


def test_split_sentences_quotes_and_brackets():
    art = ('he said : " we won . " the crowd cheered ! " next year , " he added , " again . " '
           "( it rained . ) she left ? ! then ‘ no ’ . trailing words")
    assert novelty.split_sentences(art) == [
        'he said : " we won . "',
        "the crowd cheered !",
        '" next year , " he added , " again . "',
        "( it rained . )",
        "she left ? !",
        "then ‘ no ’ .",
        "trailing words",
    ]
    # A straight quote after a full stop opens the next sentence when the
    # current one has no open quote.
    assert novelty.split_sentences('it ended . " we go , " he said .') == [
        "it ended .", '" we go , " he said .']
    # Abbreviations are one token in PTB tokenization and do not end sentences.
    assert novelty.split_sentences("the u.s. team won . ok") == ["the u.s. team won .", "ok"]


def test_lead3():
    art = "one . two ! three ? four . five ."
    assert novelty.lead3(art) == ["one .", "two !", "three ?"]
    assert novelty.lead3("only one sentence") == ["only one sentence"]
    assert novelty.lead3("") == []


def test_novel_word_rate_by_hand():
    articles = ["the cat sat on the mat .", "a dog ran ."]
    # Summary 1: "the cat slept ." -> "slept" is novel (1 of 4).
    # Summary 2: "a fox ran <unk> </s> ignored" -> "fox" novel; <unk> and
    # everything after </s> are not counted (1 of 3).
    summaries = ["the cat slept .", "a fox ran <unk> </s> ignored words"]
    assert novelty.novel_word_counts(summaries[1], articles[1]) == (1, 3)
    assert novelty.novel_word_rate(summaries, articles) == pytest.approx(2 / 7)
    assert novelty.novel_word_rate(["[UNK] [STOP]"], ["x"]) == 0.0  # no tokens: 0, not NaN
    assert novelty.novel_word_rate([["the", "cat"]], ["the cat"]) == 0.0


def test_oov_adoption_rate_through_the_extended_vocabulary():
    vocab = Vocab(["the", "cat", "sat", "on", "mat", "."])
    article = "the zebra sat on the quagga mat ."
    _, oovs = cnndm.article2ids(article.split(), vocab)
    assert oovs == ["zebra", "quagga"]
    V = len(vocab)
    # A decoded summary: the, zebra (copied OOV), sat, quagga (copied OOV), ., </s>.
    ids = [vocab.token_to_id("the"), V, vocab.token_to_id("sat"), V + 1,
           vocab.token_to_id("."), vocab.eos_id]
    words = cnndm.outputids2words(ids, vocab, oovs)
    assert novelty.oov_adoption_counts(words, oovs) == (2, 5)
    stats = novelty.novelty_stats([words, "the cat"], [article, "the cat"], [oovs, []])
    assert stats["oov_adoption_rate"] == pytest.approx(2 / 7)
    assert stats["oov_adoption_percent"] == pytest.approx(100 * 2 / 7)
    assert stats["novel_word_rate"] == 0.0  # copied words are in the article
    assert not math.isnan(novelty.oov_adoption_rate([], []))
    with pytest.raises(ValueError):
        novelty.oov_adoption_rate(["a"], [])
