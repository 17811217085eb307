"""METEOR 1.5 through pycocoevalcap's jar: acvi_tf.metrics.meteor."""

import os

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


# The METEOR 1.5 jar run directly, as acvi_tf/metrics/meteor.py runs it, on this fixed pair
# (in a scratch directory; M = <site-packages>/pycocoevalcap/meteor):
#   printf 'the children played in the big garden\nhe bought an automobile yesterday\n' > hyp.txt
#   printf 'in the garden the child plays\nhe purchased a car\n' > ref.txt
#   java -Xmx2G -jar $M/meteor-1.5.jar hyp.txt ref.txt -l en -norm -m exact
#   java -Xmx2G -jar $M/meteor-1.5.jar hyp.txt ref.txt -l en -norm -a $M/data/paraphrase-en.gz
# printed (Segment N score, Precision, Recall, fMean, Fragmentation penalty, Final score):
JAR_PAIR = (["the children played in the big garden", "he bought an automobile yesterday"],
            ["in the garden the child plays", "he purchased a car"])
JAR_EXACT = dict(segments=[0.20893855095087172, 0.04733727810650888],
                 precision=0.2692307692307692, recall=0.35, fmean=0.33492822966507174,
                 fragmentation_penalty=0.5738114998740221, score=0.14274255985080597)
JAR_FULL = dict(segments=[0.3913438194881703, 0.37427848216235593],
                precision=0.6153846153846155, recall=0.8000000000000002,
                fmean=0.76555023923445, fragmentation_penalty=0.4995319244411238,
                score=0.3831334549733024)


@needs_java
def test_exact_and_full_mode_equal_the_jar_run_directly():
    """Both modes against the numbers the METEOR 1.5 jar printed for JAR_PAIR (the commands
    above): the final score, each segment's, precision, recall, fMean and the fragmentation
    penalty are all distinct here, so parsing the wrong line fails. Full mode counts the
    stem (children/child, played/plays), synonym (bought/purchased) and paraphrase
    (automobile/car) matches that exact mode does not."""
    hyp, ref = JAR_PAIR
    for mode, jar, modules in (("exact", JAR_EXACT, ["exact"]),
                               ("full", JAR_FULL, ["exact", "stem", "synonym", "paraphrase"])):
        r = meteor.meteor(hyp, ref, mode=mode)
        assert r["modules"] == modules, r
        for key, value in jar.items():
            assert r[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (mode, key, r)


@needs_java
def test_multiple_references():
    r = meteor.meteor(["a dog barked loudly"], [["a cat meowed", "a dog barked loudly"]],
                      mode="exact", multi_ref=True)
    assert r["score"] == pytest.approx(1.0)  # scored against the best reference
    assert "-r 2" in r["command"]


def test_the_jar_and_paraphrase_table_are_the_installed_pycocoevalcap_ones():
    """The jar and the English paraphrase table (full mode's fourth module) are the files
    pycocoevalcap==1.2 installs, located here through importlib; the table is the real
    ~60 MB file (a Git-LFS pointer or a truncated download would turn the module off)."""
    import importlib.util
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None:
        pytest.skip("the pycocoevalcap package is not installed: pip install pycocoevalcap==1.2")
    home = os.path.join(list(spec.submodule_search_locations)[0], "meteor")
    assert meteor.meteor_jar() == os.path.join(home, "meteor-1.5.jar")
    table = os.path.join(home, "data", "paraphrase-en.gz")
    assert meteor.paraphrase_table() == table
    assert os.path.getsize(table) > 50_000_000
    with open(table, "rb") as f:
        assert f.read(2) == b"\x1f\x8b"  # gzip
