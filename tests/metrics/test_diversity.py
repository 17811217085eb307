"""Entropy and distinct-n (Bahuleyan et al. 2018, Table 2) against hand counts, and the
results hook that adds them to every task's results."""

import math

import pytest

from acvi_tf.metrics import diversity
from acvi_tf.run.results import finish_results

CORPUS = ["a b a c", "a b", "", "d"]
# unigrams: a a a b b c d -> 7 tokens, 4 distinct
# bigrams (inside sentences): (a b) (b a) (a c) (a b) -> 4, 3 distinct


def test_distinct_n_by_hand():
    assert diversity.distinct_n(CORPUS, 1) == pytest.approx(4 / 7)
    assert diversity.distinct_n(CORPUS, 2) == pytest.approx(3 / 4)
    assert diversity.distinct_n(CORPUS, 3) == pytest.approx(2 / 2)  # (a b a) (b a c)
    assert diversity.distinct_n([["x", "y"], ["y", "x"]], 2) == 1.0  # no cross-sentence bigram
    assert diversity.distinct_n([], 1) == 0.0 and diversity.distinct_n(["a"], 2) == 0.0
    with pytest.raises(ValueError):
        diversity.distinct_n(CORPUS, 0)


def test_entropy_by_hand_in_nats():
    p = [3 / 7, 2 / 7, 1 / 7, 1 / 7]
    assert diversity.entropy(CORPUS) == pytest.approx(-sum(q * math.log(q) for q in p))
    assert diversity.entropy(["a a a"]) == 0.0
    assert diversity.entropy(["a b c d"]) == pytest.approx(math.log(4))  # nats, not bits
    assert diversity.entropy([]) == 0.0


def test_diversity_and_per_source_protocol():
    d = diversity.diversity(CORPUS)
    assert d == {"entropy": pytest.approx(diversity.entropy(CORPUS)),
                 "distinct_1": pytest.approx(4 / 7), "distinct_2": pytest.approx(3 / 4),
                 "tokens": 7}
    groups = [["a a", "a a"], ["a b", "c d"]]
    g = diversity.per_source_diversity(groups)
    assert g["distinct_1"] == pytest.approx((1 / 4 + 4 / 4) / 2)
    assert g["distinct_2"] == pytest.approx((1 / 2 + 2 / 2) / 2)
    assert g["entropy"] == pytest.approx((0.0 + math.log(4)) / 2)
    assert g["tokens"] == 8 and g["groups"] == 2


def test_finish_results_adds_diversity_next_to_every_decode(tmp_path):
    txt = tmp_path / "decode_test.txt"
    txt.write_text("a b a c\na b\n\nd\n")
    tsv = tmp_path / "decode_val.tsv"
    tsv.write_text("clip1\ta b a c\nclip2\ta b\nclip3\t\nclip4\td\n")
    done = {"entropy": 9.0, "distinct_1": 9.0, "distinct_2": 9.0, "tokens": 1}
    data = {"decode_file": str(txt),
            "splits": {"val": {"decode_file": str(tsv)},
                       "test": {"decode_file": str(txt), "diversity": done}}}
    logged = []
    results = finish_results(str(tmp_path), data, logged.append)
    expected = diversity.diversity(CORPUS)
    assert results["diversity"] == pytest.approx(expected)
    assert results["splits"]["val"]["diversity"] == pytest.approx(expected)  # clip ids dropped
    assert results["splits"]["test"]["diversity"] == done  # a task's own value is kept
    assert any(m.startswith("splits.val diversity: entropy") for m in logged), logged
