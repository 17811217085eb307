"""Tests of acvi_tf.data.vocab: file layouts, building, encode/decode, save/load."""

import os

import pytest

from acvi_tf.data import sources
from acvi_tf.data.vocab import (BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK_ID, Vocab, VocabError,
                                split_tokens)


def _write(path, text):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return str(path)


def _shared_data():
    root = os.path.join(os.path.dirname(sources.REPO_ROOT), "shared", "data")
    return root if os.path.isdir(root) else None


def test_special_ids_are_fixed():
    v = Vocab(["a", "b"])
    assert (v.pad_id, v.unk_id, v.bos_id, v.eos_id) == (0, 1, 2, 3)
    assert v.tokens[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert v.token_to_id("a") == 4 and v.id_to_token(5) == "b"
    assert len(v) == 6


def test_stanford_layout_keeps_its_specials_at_fixed_ids(tmp_path):
    # The Stanford vocab.en starts with <unk> <s> </s>; they must not be added twice.
    path = _write(tmp_path / "vocab.en", "<unk>\n<s>\n</s>\nRachel\n:\nThe\n")
    v = Vocab.load(path)
    assert len(v) == 7  # 6 lines + <pad>
    assert v.tokens == ["<pad>", "<unk>", "<s>", "</s>", "Rachel", ":", "The"]
    assert v.encode(["The", "Rachel", "zebra"]) == [6, 4, UNK_ID]


def test_specials_in_another_order_or_absent(tmp_path):
    v1 = Vocab.load(_write(tmp_path / "a", "</s>\nx\n<s>\n<unk>\ny\n"))
    v2 = Vocab.load(_write(tmp_path / "b", "x\ny\n"))
    assert v1 == v2
    assert v1.tokens == list(SPECIALS) + ["x", "y"]


def test_word_count_layout_and_cutoffs(tmp_path):
    path = _write(tmp_path / "vocab", ". 100\nthe 90\n, 80\nrare 1\n")
    v = Vocab.load(path)
    assert v.tokens[4:] == [".", "the", ",", "rare"]
    assert v.counts["the"] == 90
    assert Vocab.load(path, min_count=2).tokens[4:] == [".", "the", ","]
    # max_size counts the 4 special tokens, as See et al.'s vocab_size does.
    small = Vocab.load(path, max_size=6)
    assert len(small) == 6 and small.tokens[4:] == [".", "the"]


def test_non_breaking_space_stays_inside_a_token(tmp_path):
    # The CNN/DailyMail vocab holds ". . ." joined by U+00A0 with a count.
    path = _write(tmp_path / "vocab", ".\u00a0.\u00a0. 12\nword 3\n")
    v = Vocab.load(path)
    assert v.tokens[4:] == [".\u00a0.\u00a0.", "word"]
    assert split_tokens("a\u00a0b  c\td\n") == ["a\u00a0b", "c", "d"]


@pytest.mark.parametrize("text, line, needle", [
    ("a 1\nb 2 3\n", 2, "expected 'token' or 'token count'"),
    ("a 1\nb\n", 2, "layout"),
    ("a\nb 5\n", 2, "layout"),
    ("a\n\nb\n", 2, "empty line"),
    ("a\nb\na\n", 3, "duplicate token 'a' (first on line 1)"),
    ("a 1\nb \u00b2\n", 2, "expected 'token' or 'token count'"),  # a Unicode digit
])
def test_malformed_files_name_file_and_line(tmp_path, text, line, needle):
    path = _write(tmp_path / "bad.vocab", text)
    with pytest.raises(VocabError) as e:
        Vocab.load(path)
    assert f"{path}:{line}" in str(e.value)
    assert needle in str(e.value)


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.vocab"
    path.write_bytes(b"a\ncaf\xe9\n")
    with pytest.raises(VocabError, match=r"latin1\.vocab:2: not valid UTF-8"):
        Vocab.load(str(path))


def test_min_count_needs_counts(tmp_path):
    path = _write(tmp_path / "v", "a\nb\n")
    with pytest.raises(VocabError, match="needs a 'token count' file"):
        Vocab.load(path, min_count=2)


def test_build_frequency_cutoff_and_deterministic_ties():
    corpus = [["b", "a", "c", "c"], ["a", "b", "d"], ["c", "<s>"]]
    v = Vocab.build(corpus, min_count=2)
    # c:3, then a:2 and b:2 tied -> alphabetical; d:1 is cut; <s> is special.
    assert v.tokens[4:] == ["c", "a", "b"]
    assert Vocab.build(list(reversed(corpus)), min_count=2) == v
    assert Vocab.build(corpus, max_size=5).tokens[4:] == ["c"]
    assert v.encode(["d"]) == [UNK_ID]


def test_encode_decode():
    v = Vocab(["hello", "world"])
    ids = v.encode(["hello", "there", "world"], add_bos=True, add_eos=True)
    assert ids == [BOS_ID, 4, UNK_ID, 5, EOS_ID]
    assert v.decode(ids) == ["hello", "<unk>", "world"]
    # Output after </s> is not part of the hypothesis; pads are dropped.
    assert v.decode([4, PAD_ID, 5, EOS_ID, 4, 4]) == ["hello", "world"]
    assert v.decode(ids + [PAD_ID], strip_special=False) == [
        "<s>", "hello", "<unk>", "world", "</s>", "<pad>"]


@pytest.mark.parametrize("with_counts", [False, True])
def test_save_load_round_trip(tmp_path, with_counts):
    corpus = [["x", "y", "y"], ["z", "y", "x"]]
    v = Vocab.build(corpus) if with_counts else Vocab(["x", "y", "z"])
    path = str(tmp_path / "sub" / "vocab.txt")
    v.save(path)
    w = Vocab.load(path)
    assert w == v
    if with_counts:
        assert w.counts == {"y": 3, "x": 2, "z": 1}
    assert not os.path.exists(path + ".tmp")


def test_invalid_tokens_rejected():
    with pytest.raises(ValueError, match="duplicate"):
        Vocab(["a", "a"])
    with pytest.raises(ValueError, match="invalid"):
        Vocab(["a b"])
    with pytest.raises(ValueError, match="smaller than"):
        Vocab.build([["a"]], max_size=3)


def test_real_stanford_vocab_files():
    root = _shared_data()
    if root is None or not os.path.isdir(os.path.join(root, "iwslt15_en_vi")):
        pytest.skip("../shared/data/iwslt15_en_vi is not available")
    en = Vocab.load(os.path.join(root, "iwslt15_en_vi", "vocab.en"))
    vi = Vocab.load(os.path.join(root, "iwslt15_en_vi", "vocab.vi"))
    # 17,191 / 7,709 lines incl. <unk> <s> </s>, plus <pad>.
    assert (len(en), len(vi)) == (17_192, 7_710)
    assert en.token_to_id("<unk>") == UNK_ID and en.id_to_token(4) == "Rachel"


def test_real_cnndm_word_count_vocab():
    root = _shared_data()
    path = root and os.path.join(root, "cnn_dailymail", "finished_files", "vocab")
    if not path or not os.path.exists(path):
        pytest.skip("../shared/data/cnn_dailymail vocab is not available")
    v = Vocab.load(path, max_size=50_000)
    assert len(v) == 50_000
    assert v.tokens[4:6] == [".", "the"] and v.counts["the"] == 11_903_301
