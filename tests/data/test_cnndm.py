"""CNN/DailyMail (See et al. 2017) and DUC2004 readers: acvi_tf.data.cnndm."""

import logging
import struct

import numpy as np
import pytest

from acvi_tf.data import cnndm, sources
from acvi_tf.data.sources import DataError


def _record(article=None, abstract=None):
    import tensorflow as tf
    feature = {}
    if article is not None:
        feature["article"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[article.encode()]))
    if abstract is not None:
        feature["abstract"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[abstract.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _write_bin(path, payloads, tail=b""):
    with open(path, "wb") as f:
        for p in payloads:
            f.write(struct.pack("<q", len(p)) + p)
        f.write(tail)
    return str(path)


GOOD1 = ("the cat sat on the mat . it was happy .", "<s> the cat sat . </s> <s> it was happy . </s>")
GOOD2 = ("a dog ran far away .", "<s> dog ran . </s>")


@pytest.fixture
def bin_file(tmp_path):
    return _write_bin(tmp_path / "test_000.bin", [
        _record(*GOOD1),
        b"\xff\xff\xff corrupt",                 # not a tf.Example
        _record("   ", "<s> empty article . </s>"),  # empty article
        _record("an article .", "no sentence tags"),  # no <s> ... </s>: empty abstract
        _record(article="no abstract feature ."),     # malformed: missing feature
        _record(*GOOD2),
    ])


def test_read_bin_skips_and_counts_bad_records(bin_file):
    stats = cnndm.ReadStats()
    pairs = list(cnndm.read_bin(bin_file, stats))
    assert [p.article for p in pairs] == [GOOD1[0], GOOD2[0]]
    assert pairs[0].abstract_sents == ["the cat sat .", "it was happy ."]
    assert pairs[1].uid == "test_000.bin#5"
    assert (stats.read, stats.malformed, stats.empty_article, stats.empty_abstract) == (2, 2, 1, 1)
    assert stats.skipped == 4 and not stats.truncated
    assert "skipped 4" in stats.report()
    assert cnndm.count_records(bin_file) == 6


@pytest.mark.parametrize("tail,what", [
    (struct.pack("<q", 1000) + b"short body", "length 1000"),
    (b"\x01\x02\x03", "3 of 8 length bytes"),
])
def test_truncated_file_names_file_and_record(tmp_path, caplog, tail, what):
    path = _write_bin(tmp_path / "train_007.bin", [_record(*GOOD1), _record(*GOOD2)], tail)
    stats = cnndm.ReadStats()
    with caplog.at_level(logging.WARNING, logger="acvi_tf.data.cnndm"):
        pairs = list(cnndm.read_bin(path, stats))
    assert len(pairs) == 2  # the complete records are still read
    assert len(stats.truncated) == 1
    msg = stats.truncated[0]
    assert "train_007.bin" in msg and "record 2" in msg and what in msg
    assert "train_007.bin" in caplog.text
    with pytest.raises(DataError, match=r"train_007\.bin: record 2 is truncated"):
        list(cnndm.read_bin(path, strict=True))
    assert cnndm.count_records(path) == 2


def test_iter_pairs_limit_does_not_overread(bin_file):
    stats = cnndm.ReadStats()
    pairs = list(cnndm.iter_pairs("test", limit=1, stats=stats, paths=[bin_file]))
    assert len(pairs) == 1 and stats.read == 1
    assert list(cnndm.iter_pairs("test", limit=0, paths=[bin_file])) == []


def test_abstract2sents():
    assert cnndm.abstract2sents("<s> a b . </s> <s> c . </s>") == ["a b .", "c ."]
    assert cnndm.abstract2sents("<s> a . </s> junk <s> unterminated") == ["a ."]
    assert cnndm.abstract2sents("") == []
    assert cnndm.abstract2sents("<s>  </s>") == []


def _vocab(tmp_path, words=("the", "cat", "sat", "on", "mat", ".", "dog"), max_size=None):
    path = tmp_path / "vocab"
    path.write_text("".join(f"{w} {100 - i}\n" for i, w in enumerate(words)), encoding="utf-8")
    return cnndm.load_vocab(max_size=max_size, path=str(path))


def test_vocab_file_and_max_size(tmp_path):
    v = _vocab(tmp_path)
    assert v.tokens[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert (cnndm.PAD_TOKEN, cnndm.UNK_TOKEN, cnndm.START_TOKEN, cnndm.STOP_TOKEN) == tuple(v.tokens[:4])
    assert (v.pad_id, v.unk_id, v.bos_id, v.eos_id) == (0, 1, 2, 3)
    assert v.token_to_id("the") == 4 and len(v) == 11
    # max_size counts the 4 special tokens (See et al.'s vocab_size).
    v6 = _vocab(tmp_path, max_size=6)
    assert len(v6) == 6 and "cat" in v6 and "sat" not in v6


def test_non_breaking_space_stays_inside_a_token(tmp_path):
    v = _vocab(tmp_path, words=("the", ".\xa0.\xa0.", "cat"))
    assert v.token_to_id(".\xa0.\xa0.") == 5 and v.token_to_id("cat") == 6
    assert cnndm.split_words("a .\xa0.\xa0. b") == ["a", ".\xa0.\xa0.", "b"]


def test_extended_vocabulary_round_trip(tmp_path):
    v = _vocab(tmp_path)
    V = len(v)
    art = "the zebra sat on the quagga . the zebra".split()
    ids, oovs = cnndm.article2ids(art, v)
    assert oovs == ["zebra", "quagga"]
    assert ids == [4, V, 6, 7, 4, V + 1, 9, 4, V]
    assert cnndm.outputids2words(ids, v, oovs) == art
    # Targets: article OOVs get extended ids, other OOVs [UNK].
    abs_ids = cnndm.abstract2ids("the quagga and zebra".split(), v, oovs)
    assert abs_ids == [4, V + 1, v.unk_id, V]
    assert cnndm.outputids2words(abs_ids, v, oovs) == ["the", "quagga", "<unk>", "zebra"]
    with pytest.raises(ValueError, match="article OOV 2"):
        cnndm.outputids2words([V + 2], v, oovs)


def test_make_example_truncation_and_stop(tmp_path):
    v = _vocab(tmp_path)
    V = len(v)
    ex = cnndm.make_example("the zebra sat on the mat . quagga", ["the quagga sat .", "emu"], v,
                            max_enc_steps=6, max_dec_steps=10)
    # Encoder input cut to 6 words; "quagga" was cut off, so it is not an article OOV.
    assert ex.enc_input == [4, v.unk_id, 6, 7, 4, 8]
    assert ex.enc_input_ext == [4, V, 6, 7, 4, 8] and ex.article_oovs == ["zebra"]
    # Decoder input [START] + abstract with [UNK] for every OOV; target abstract + [STOP].
    assert ex.dec_input == [v.bos_id, 4, v.unk_id, 6, 9, v.unk_id]
    assert ex.target == [4, v.unk_id, 6, 9, v.unk_id, v.eos_id]
    # A cut target has no [STOP] (See et al.).
    cut = cnndm.make_example("the zebra", ["the zebra sat on the mat ."], v, max_dec_steps=4)
    assert cut.dec_input == [v.bos_id, 4, v.unk_id, 6]
    assert cut.target == [4, V, 6, 7]
    with pytest.raises(ValueError, match="empty article"):
        cnndm.make_example(" ", ["x"], v)


def test_encoded_pairs_cut_to_any_phase_equals_make_example(tmp_path):
    # Every (enc, dec) prefix cut from the store must be the example make_example
    # builds from the text at those lengths: OOV list, extended ids, [UNK]/[STOP].
    v = _vocab(tmp_path)
    rng = np.random.default_rng(0)
    words = ["the", "cat", "sat", "on", "mat", ".", "dog", "zebra", "quagga", "emu", "gnu"]
    store = cnndm.EncodedPairs(v, max_enc_steps=12, max_dec_steps=9)
    texts = []
    for _ in range(6):
        article = " ".join(rng.choice(words, size=int(rng.integers(1, 16))))
        sents = [" ".join(rng.choice(words, size=int(rng.integers(1, 7)))) for _ in range(2)]
        store.add(article, sents)
        texts.append((article, sents))
    assert len(store) == 6
    for i, (article, sents) in enumerate(texts):
        for enc in (1, 3, 7, 12):
            for dec in (1, 4, 9):
                want = cnndm.make_example(article, sents, v, enc, dec)
                got = store.example(i, enc, dec)
                assert list(got.enc_input) == want.enc_input, (i, enc, dec)
                assert list(got.enc_input_ext) == want.enc_input_ext
                assert got.article_oovs == want.article_oovs
                assert got.dec_input == want.dec_input and got.target == want.target
    with pytest.raises(ValueError, match="exceed"):
        store.example(0, 13, 9)


def test_make_batch_padding_and_oovs(tmp_path):
    v = _vocab(tmp_path)
    V = len(v)
    exs = [cnndm.make_example("the zebra sat", ["zebra sat ."], v),
           cnndm.make_example("the emu and the gnu sat on the mat", ["gnu ."], v)]
    b = cnndm.make_batch(exs, v)
    assert b["src"].shape == (2, 9) and b["src"].dtype == np.int32
    assert b["src_len"].tolist() == [3, 9] and b["tgt_len"].tolist() == [4, 3]
    assert b["src"][0, 3:].tolist() == [v.pad_id] * 6
    assert b["src_mask"][0].tolist() == [1, 1, 1] + [0] * 6
    assert int(b["max_oovs"]) == 3 and b["oovs"] == [["zebra"], ["emu", "and", "gnu"]]
    assert b["tgt_in"][0].tolist() == [v.bos_id, v.unk_id, 6, 9]
    assert b["tgt_out"][0].tolist() == [V, 6, 9, v.eos_id]
    assert b["tgt_out"][1].tolist() == [V + 2, 9, v.eos_id, v.pad_id]
    assert b["abstract"] == ["zebra sat .", "gnu ."]
    fixed = cnndm.make_batch(exs, v, enc_len=12, dec_len=5)
    assert fixed["src"].shape == (2, 12) and fixed["tgt_out"].shape == (2, 5)
    t = cnndm.to_tensors(b)
    assert set(t) == set(cnndm.TENSOR_KEYS) and t["src_ext"].shape == (2, 9)


def test_batches_over_a_file(tmp_path, bin_file):
    v = _vocab(tmp_path)
    stats = cnndm.ReadStats()
    out = list(cnndm.batches("test", v, batch_size=1, paths=[bin_file], stats=stats,
                             fixed_shapes=True, max_enc_steps=20, max_dec_steps=8))
    assert len(out) == 2 and out[0]["src"].shape == (1, 20)
    assert stats.skipped == 4
    shuffled = list(cnndm.batches("test", v, batch_size=2, paths=[bin_file], shuffle=True, seed=0))
    assert sorted(shuffled[0]["article"]) == sorted([GOOD1[0], GOOD2[0]])


def test_registry_entries():
    src = sources.get("cnn_dailymail")
    paths = [f.path for f in src.files]
    assert cnndm.VOCAB_PATH in paths
    assert sum(p.startswith("finished_files/chunked/train_") for p in paths) == 288
    assert "finished_files/chunked/val_013.bin" in paths
    assert "finished_files/chunked/test_011.bin" in paths and "finished_files/chunked/test_012.bin" not in paths
    assert "how" in src.how_to_get.lower() or "finished_files" in src.how_to_get
    duc = sources.get("duc2004")
    assert [(f.path, f.lines) for f in duc.files] == [
        ("input.txt", 500)] + [(f"task1_ref{i}.txt", 500) for i in range(4)]


# --------------------------------------------------------------- real data

_HAVE_CNNDM = sources.locate("cnn_dailymail", cnndm.chunk_path("test", 0), required=False)
_HAVE_DUC = sources.locate("duc2004", cnndm.DUC_INPUT, required=False)
needs_cnndm = pytest.mark.skipif(not _HAVE_CNNDM, reason="CNN/DM chunks not found (no ../shared/data mirror)")
needs_duc = pytest.mark.skipif(not _HAVE_DUC, reason="DUC2004 not found (no ../shared/data mirror)")


@needs_cnndm
def test_real_chunk_counts():
    report = cnndm.counts_report()
    assert report == ["train: 39,227 of 287,227 pairs (partial copy; 40 of 288 chunks)",
                      "val: 4,368 of 13,368 pairs (partial copy; 5 of 14 chunks)",
                      "test: 4,000 of 11,490 pairs (partial copy; 4 of 12 chunks)"]


@needs_cnndm
def test_real_first_test_example_and_vocab():
    pair = next(cnndm.iter_pairs("test"))
    assert pair.uid == "test_000.bin#0"
    assert pair.article.split()[:6] == ["marseille", ",", "france", "(", "cnn", ")"]
    assert pair.abstract_sents[0].startswith("marseille prosecutor says")
    assert len(pair.abstract_sents) == 3
    v = cnndm.load_vocab(50_000)
    assert len(v) == 50_000 and v.tokens[4:8] == [".", "the", ",", "to"]
    ex = cnndm.make_example(pair.article, pair.abstract_sents, v)
    assert len(ex.enc_input) == 400 and "germanwings" in ex.article_oovs
    assert cnndm.outputids2words(ex.target, v, ex.article_oovs)[:3] == ["marseille", "prosecutor", "says"]


@needs_duc
def test_real_duc2004():
    d = cnndm.read_duc2004()
    assert len(d.inputs) == 500 and len(d.references) == 500
    assert all(len(r) == 4 for r in d.references)
    assert d.inputs[0].startswith("cambodian leader hun sen")
    assert d.references[0][0] == "Cambodian government rejects opposition's call for talks abroad"
