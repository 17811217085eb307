"""Caption metrics (acvi_tf.metrics.caption) against pycocoevalcap and by hand."""

import warnings

import pytest

from acvi_tf.metrics import caption

REFS = {
    "vid1": ["a man is playing a guitar", "a man plays the guitar", "someone is playing guitar"],
    "vid2": ["a cat is eating food", "a kitten eats", "the cat is eating"],
    "vid3": ["a woman is slicing an onion", "a woman cuts an onion", "someone is chopping onions"],
}
HYPS = {"vid1": "a man is playing guitar", "vid2": "a dog is eating",
        "vid3": "a woman is cutting an onion"}


def _coco_inputs():
    ids = sorted(REFS)
    return {k: list(REFS[k]) for k in ids}, {k: [HYPS[k]] for k in ids}


def test_identical_hypothesis_and_references_score_one():
    # Hand-checkable: every n-gram matches and lengths agree -> BLEU-n = 1, and
    # LCS = the whole sentence -> ROUGE-L = 1.
    refs = {"a": ["a man is playing a guitar"], "b": ["a cat is eating some food"]}
    hyps = {"a": "a man is playing a guitar", "b": "a cat is eating some food"}
    s = caption.score_captions(hyps, refs, metrics=("BLEU", "ROUGE-L"), scale=1.0)
    for n in range(1, 5):
        assert s[f"BLEU-{n}"] == pytest.approx(1.0, abs=1e-6)
    assert s["ROUGE-L"] == pytest.approx(1.0, abs=1e-12)


def test_rouge_l_by_hand():
    # hyp "a b c d", ref "a c e d f": LCS "a c d" = 3, P = 3/4, R = 3/5,
    # F = (1 + 1.2^2) P R / (R + 1.2^2 P).
    s = caption.score_captions({"x": "a b c d"}, {"x": ["a c e d f"]},
                               metrics=("ROUGE-L",), scale=1.0)
    p, r, b2 = 3 / 4, 3 / 5, 1.2 ** 2
    assert s["ROUGE-L"] == pytest.approx((1 + b2) * p * r / (r + b2 * p), abs=1e-12)


def test_matches_pycocoevalcap_called_directly():
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge
    gts, res = _coco_inputs()
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    rouge, _ = Rouge().compute_score(gts, res)
    cider, _ = Cider().compute_score(gts, res)

    s = caption.score_captions(HYPS, REFS, metrics=("BLEU", "ROUGE-L", "CIDEr-D"), scale=1.0)
    for n in range(4):
        assert s[f"BLEU-{n + 1}"] == pytest.approx(bleu[n], abs=1e-12)
    assert s["ROUGE-L"] == pytest.approx(rouge, abs=1e-12)
    assert s["CIDEr-D"] == pytest.approx(cider, abs=1e-12)
    # The hypotheses are not perfect: a broken wrapper returning 1s would fail above.
    assert s["CIDEr-D"] > 0 and s["BLEU-4"] < 1

    # Default scale is x100, per-clip scores come back keyed by clip.
    s100, per = caption.score_captions(HYPS, REFS, metrics=("ROUGE-L", "CIDEr-D"), per_clip=True)
    assert s100["ROUGE-L"] == pytest.approx(100 * rouge)
    assert s100["CIDEr-D"] == pytest.approx(100 * cider)
    assert set(per["CIDEr-D"]) == set(REFS)
    assert sum(per["ROUGE-L"].values()) / 3 == pytest.approx(s100["ROUGE-L"])


def test_cider_d_uses_the_whole_split_for_idf():
    # CIDEr-D's idf comes from the references of all scored clips, so a clip's score
    # changes with the split around it: scoring clip by clip is not the same thing.
    whole, per = caption.score_captions(HYPS, REFS, metrics=("CIDEr-D",), per_clip=True)
    alone = caption.score_captions({"vid1": HYPS["vid1"]}, {"vid1": REFS["vid1"]},
                                   metrics=("CIDEr-D",))
    assert alone["CIDEr-D"] != pytest.approx(per["CIDEr-D"]["vid1"])


def test_input_forms_and_whitespace():
    a = caption.score_captions(HYPS, REFS, metrics=("BLEU", "ROUGE-L", "CIDEr-D"))
    tokens = {k: v.split() for k, v in HYPS.items()}
    wrapped = {k: ["  " + v.replace(" ", "   ") + " "] for k, v in HYPS.items()}
    refs_tok = {k: [r.split() for r in v] for k, v in REFS.items()}
    assert caption.score_captions(tokens, refs_tok, metrics=("BLEU", "ROUGE-L", "CIDEr-D")) == a
    assert caption.score_captions(wrapped, REFS, metrics=("BLEU", "ROUGE-L", "CIDEr-D")) == a


def test_clip_sets_must_match():
    with pytest.raises(ValueError, match="1 clips lack a hypothesis"):
        caption.score_captions({"vid1": "a"}, {"vid1": ["a"], "vid2": ["b"]})
    with pytest.raises(ValueError, match="non-empty list"):
        caption.score_captions({"vid1": "a"}, {"vid1": []})
    with pytest.raises(ValueError, match="unknown caption metrics"):
        caption.score_captions(HYPS, REFS, metrics=("SPICE",))


def test_meteor_skipped_cleanly_without_java(monkeypatch):
    monkeypatch.setattr(caption, "java_available", lambda: False)
    with pytest.warns(UserWarning, match="METEOR skipped"):
        s = caption.score_captions(HYPS, REFS, metrics=("METEOR", "ROUGE-L"))
    assert "METEOR" not in s and "ROUGE-L" in s


@pytest.mark.skipif(not caption.java_available(), reason="java is not installed")
def test_meteor_matches_pycocoevalcap():
    # Expected values: pycocoevalcap 1.2 ``Meteor().compute_score(gts, res)`` called
    # directly on these inputs (METEOR 1.5 jar, -l en -norm); recomputing them here
    # would start a second ~15 s JVM.
    s, per = caption.score_captions(HYPS, REFS, metrics=("METEOR",), scale=1.0, per_clip=True)
    assert s["METEOR"] == pytest.approx(0.4579644864922518, abs=1e-9)
    assert per["METEOR"]["vid1"] == pytest.approx(0.4645695216158345, abs=1e-9)
    assert per["METEOR"]["vid2"] == pytest.approx(0.23883483101116276, abs=1e-9)
    assert per["METEOR"]["vid3"] == pytest.approx(0.95, abs=1e-9)


@pytest.mark.skipif(not caption.java_available(), reason="java is not installed")
def test_ptb_tokenizer_lowercases_and_drops_punctuation():
    raw = {"x": "A man, playing guitar."}
    refs = {"x": ["A man is playing a guitar!"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ptb = caption.score_captions(raw, refs, metrics=("BLEU", "ROUGE-L"), tokenize="ptb")
    plain = caption.score_captions({"x": "a man playing guitar"},
                                   {"x": ["a man is playing a guitar"]}, metrics=("BLEU", "ROUGE-L"))
    assert ptb == pytest.approx(plain)


def test_format_scores_order():
    line = caption.format_scores({"CIDEr-D": 51.671, "BLEU-4": 41.2, "ROUGE-L": 68.0})
    assert line == "BLEU-4 41.20  ROUGE-L 68.00  CIDEr-D 51.67"
