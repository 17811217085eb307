"""METEOR 1.5 through pycocoevalcap's jar: acvi_tf.metrics.meteor."""

import pytest

from acvi_tf.metrics import meteor

_MISSING = meteor.missing_requirements()
needs_java = pytest.mark.skipif(bool(_MISSING), reason=f"METEOR cannot run: {_MISSING}")


def test_bad_arguments():
    with pytest.raises(ValueError, match="mode"):
        meteor.meteor(["a"], ["a"], mode="fuzzy")
    with pytest.raises(ValueError):
        meteor.meteor(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="same, non-zero number"):
        meteor.meteor(["a", "b"], [["a"], ["b", "c"]], multi_ref=True)


@needs_java
def test_identical_is_one_in_exact_mode():
    r = meteor.meteor(["the cat sat on the mat .", ["it was", "happy ."]],
                      ["the cat sat on the mat .", "it was happy ."], mode="exact")
    assert r["score"] == pytest.approx(1.0)
    assert r["segments"] == pytest.approx([1.0, 1.0])
    assert r["modules"] == ["exact"] and r["weights"] == [1.0]
    assert "-m exact" in r["command"] and "-norm" in r["command"]


@needs_java
def test_exact_and_full_mode_differ_on_stems_and_synonyms():
    hyp = ["the children played in the garden", "he bought an automobile"]
    ref = ["the child plays in the garden", "he purchased a car"]
    exact = meteor.meteor(hyp, ref, mode="exact")
    full = meteor.meteor(hyp, ref, mode="full")
    assert exact["modules"] == ["exact"]
    expected = ["exact", "stem", "synonym"] + (["paraphrase"] if meteor.paraphrase_table() else [])
    assert full["modules"] == expected
    # stem (children/child, played/plays) and synonym (bought/purchased,
    # automobile/car) matches only count in full mode.
    assert full["score"] > exact["score"] + 0.2
    assert all(f > e for f, e in zip(full["segments"], exact["segments"]))
    assert 0.0 <= exact["score"] < 0.5 and full["score"] <= 1.0


@needs_java
def test_multiple_references():
    r = meteor.meteor(["a dog barked loudly"], [["a cat meowed", "a dog barked loudly"]],
                      mode="exact", multi_ref=True)
    assert r["score"] == pytest.approx(1.0)  # scored against the best reference
    assert "-r 2" in r["command"]


def test_paraphrase_table_is_shipped():
    if meteor.missing_requirements() and "pycocoevalcap" in meteor.missing_requirements():
        pytest.skip("pycocoevalcap not installed")
    path = meteor.paraphrase_table()
    assert path is None or path.endswith("paraphrase-en.gz")
