"""Tests of acvi_tf.metrics.bleu against sacrebleu itself."""

import pytest
import sacrebleu

from acvi_tf.metrics import bleu

HYPS = [
    "The cat sat on the mat.",
    "There is a dog in the garden, isn't there?",
    "He didn't go to school today",
    "Romanian: ședința a fost amânată.",
]
REFS = [
    "The cat is sitting on the mat.",
    "There's a dog in the garden, isn't there?",
    "He did not go to school today.",
    "Romanian: ședința a fost amânată.",
]
REFS2 = [
    "A cat sat on the mat.",
    "A dog is in the garden, right?",
    "He didn't go to school today.",
    "Romanian: sedința s-a amânat.",
]


@pytest.mark.parametrize("tokenize", ["13a", "none", "intl"])
def test_equals_sacrebleu_corpus_bleu(tokenize):
    ours = bleu.corpus_bleu(HYPS, REFS, tokenize=tokenize)
    theirs = sacrebleu.corpus_bleu(HYPS, [REFS], tokenize=tokenize)
    assert ours.score == theirs.score
    assert 0 < ours.score < 100
    assert list(ours.precisions) == pytest.approx(theirs.precisions)
    assert (ours.hyp_len, ours.ref_len) == (theirs.sys_len, theirs.ref_len)
    assert f"tok:{tokenize}" in ours.signature
    assert f"version:{sacrebleu.__version__}" in ours.signature
    assert float(ours) == ours.score and ours.signature in str(ours)


def test_multiple_references_and_lowercase():
    ours = bleu.corpus_bleu(HYPS, [REFS, REFS2])
    theirs = sacrebleu.corpus_bleu(HYPS, [REFS, REFS2])
    assert ours.score == theirs.score and "nrefs:2" in ours.signature
    low = bleu.corpus_bleu([h.upper() for h in HYPS], REFS, lowercase=True)
    assert low.score == sacrebleu.corpus_bleu([h.upper() for h in HYPS], [REFS],
                                              lowercase=True).score
    assert "case:lc" in low.signature


def test_extremes():
    assert bleu.corpus_bleu(REFS, REFS).score == pytest.approx(100.0)
    assert bleu.tokenized_bleu(["a b c d"], ["w x y z"]).score == 0.0


def test_sacre_bleu_is_13a():
    r = bleu.sacre_bleu(HYPS, REFS)
    assert r.score == sacrebleu.corpus_bleu(HYPS, [REFS], tokenize="13a").score
    assert "tok:13a" in r.signature and "smooth:exp" in r.signature


def test_tokenized_bleu_is_unsmoothed_tokenize_none():
    hyps = ["the cat sat on the mat .", "a dog ."]
    refs = ["the cat is on the mat .", "the dog ."]
    r = bleu.tokenized_bleu(hyps, refs)
    expected = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", smooth_method="none")
    assert r.score == expected.score
    assert "tok:none" in r.signature and "smooth:none" in r.signature


def test_remove_bpe():
    assert bleu.remove_bpe("un@@ believ@@ able news@@") == "unbelievable news"
    assert bleu.remove_bpe("no marks here") == "no marks here"
    assert bleu.remove_bpe("▁un believ able ▁news .", "sentencepiece") == "unbelievable news."
    with pytest.raises(ValueError, match="unknown BPE style"):
        bleu.remove_bpe("x", "wordpiece")


def test_tokenized_bleu_on_bpe_equals_bleu_on_de_bped_text():
    hyps_bpe = ["the un@@ believ@@ able cat sat on the mat .", "a small dog bark@@ s ."]
    refs_bpe = ["the un@@ believ@@ able cat is on the mat .", "the small dog bark@@ ed ."]
    plain_h = ["the unbelievable cat sat on the mat .", "a small dog barks ."]
    plain_r = ["the unbelievable cat is on the mat .", "the small dog barked ."]
    with_bpe = bleu.tokenized_bleu(hyps_bpe, refs_bpe, bpe="subword-nmt")
    assert with_bpe.score == bleu.tokenized_bleu(plain_h, plain_r).score
    # ... and differs from BLEU on the segmented text, so removal really happened.
    assert with_bpe.score != bleu.tokenized_bleu(hyps_bpe, refs_bpe).score

    sp_h = ["▁the ▁un believ able ▁cat ▁sat ▁on ▁the ▁mat ▁.", "▁a ▁small ▁dog ▁bark s ▁."]
    sp_r = ["▁the ▁un believ able ▁cat ▁is ▁on ▁the ▁mat ▁.", "▁the ▁small ▁dog ▁bark ed ▁."]
    assert (bleu.tokenized_bleu(sp_h, sp_r, bpe="sentencepiece").score
            == bleu.tokenized_bleu(plain_h, plain_r).score)


def test_input_errors():
    with pytest.raises(ValueError, match="2 hypotheses but reference stream 0 has 1 lines"):
        bleu.corpus_bleu(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="reference stream 1 has 1 lines"):
        bleu.corpus_bleu(["a", "b"], [["a", "b"], ["a"]])
    with pytest.raises(TypeError, match="hypothesis 0"):
        bleu.corpus_bleu([["a", "b"]], ["a b"])
    with pytest.raises(TypeError, match="not one string"):
        bleu.corpus_bleu("a b", ["a b"])
