"""experiments/unk_share.py: the <unk> shares of targets and sources, counted by hand."""

import pytest

from acvi_tf.data.vocab import Vocab
from experiments import unk_share


def test_shares_count_the_tokens_the_loss_sees():
    vocab = Vocab(["the", "cat", "sat", "."])  # 8 ids; "zorb", "mat", "dog" are OOVs
    pairs = [
        # target "the zorb sat ." + </s>: zorb is OOV but in the article (pointer copies it)
        ("the zorb sat on the mat .", ["the zorb sat ."]),
        # target cut at 3 tokens (no </s>): "dog mat the"; both OOVs, neither in the
        # first 4 article words ("the cat sat ."), so both stay <unk> for the pointer too
        ("the cat sat . dog", ["dog mat the cat"]),
        ("", ["the cat ."]),  # empty article: skipped, as training skips it
    ]
    s = unk_share.shares(pairs, vocab, max_enc_steps=4, max_dec_steps=3)
    assert s["pairs"] == 2 and s["skipped_empty_article"] == 1
    # targets: [the, zorb, sat] (cut at 3: no </s>) and [dog, mat, the]
    assert s["target_tokens"] == 6
    assert s["target_unk_softmax"] == pytest.approx(3 / 6)   # zorb, dog, mat
    assert s["target_unk_pointer"] == pytest.approx(2 / 6)   # dog, mat (zorb is copyable)
    assert s["targets_with_unk"] == pytest.approx(1.0)
    # sources read: [the, zorb, sat, on] and [the, cat, sat, .]
    assert s["source_tokens"] == 8
    assert s["source_unk"] == pytest.approx(2 / 8)            # zorb, on
    # full articles: 7 + 5 words, OOVs zorb, on, mat, dog
    assert s["source_unk_full"] == pytest.approx(4 / 12)
    assert s["unk_rank"] == 1                                 # 3 <unk> against 2 "the"
    assert s["top_targets"][0] == ["<unk>", pytest.approx(0.5)]


def test_shares_keep_stop_token_of_short_targets():
    vocab = Vocab(["a", "b"])
    s = unk_share.shares([("a b", ["a"])], vocab, max_enc_steps=8, max_dec_steps=8)
    assert s["target_tokens"] == 2          # "a" + </s>
    assert s["target_unk_softmax"] == 0.0 and s["unk_rank"] is None
