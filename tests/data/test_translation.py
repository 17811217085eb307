"""Tests of acvi_tf.data.translation: registry, readers, WMT's BPE, post-processing
and BLEU per dataset. Fixture corpora are written to tmp dirs; the
tests on ../shared/data skip when it is absent."""

import json
import os
import unicodedata

import numpy as np
import pytest

from acvi_tf.data import sources
from acvi_tf.data import translation as T
from acvi_tf.data.batching import Batches
from acvi_tf.data.sources import DataError
from acvi_tf.data.vocab import EOS_ID, UNK_ID

CEDILLA = "şţŞŢ"
COMMA = "șțȘȚ"


# ---------------------------------------------------------------- fixtures

def _write(path, lines, final_newline=True):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines) + ("\n" if final_newline and lines else ""))
    return path


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """An empty mirror dir; the download dir is a separate empty tmp dir, so that
    nothing outside the test is picked up."""
    root = tmp_path / "mirror"
    root.mkdir()
    monkeypatch.setenv("ACVI_DATA_MIRROR", str(root))
    monkeypatch.setenv("ACVI_DATA_DIR", str(tmp_path / "downloads"))
    return str(root)


def _shared_root():
    env = os.environ.get("ACVI_DATA_MIRROR")
    if env and os.path.isdir(os.path.join(env, T.IWSLT15)):
        return env
    root = os.path.join(os.path.dirname(sources.REPO_ROOT), "shared", "data")
    return root if os.path.isdir(root) else None


@pytest.fixture
def shared(monkeypatch):
    """The real mirror (../shared/data), or skip."""
    root = _shared_root()
    if root is None:
        pytest.skip("../shared/data (the real dataset mirror) is not available")
    monkeypatch.setenv("ACVI_DATA_MIRROR", root)
    return root


def _need(root, dataset):
    if not os.path.isdir(os.path.join(root, dataset)):
        pytest.skip(f"{dataset} is not in the data mirror {root}")


def _iwslt_fixture(root, train_en=None, train_vi=None):
    d = os.path.join(root, T.IWSLT15)
    _write(os.path.join(d, "train.en"), train_en or [
        "Rachel Pike : The science", "I &apos;d  like to talk", "zebra crossing"])
    _write(os.path.join(d, "train.vi"), train_vi or [
        "Khoa học đằng sau", "Tôi muốn nói", "vạch qua đường"], final_newline=False)
    _write(os.path.join(d, "tst2012.en"), ["a b"] * 1553)
    _write(os.path.join(d, "tst2012.vi"), ["c d"] * 1553)
    _write(os.path.join(d, "vocab.en"), ["<unk>", "<s>", "</s>", "Rachel", "Pike", ":", "The",
                                         "science", "I", "&apos;d", "like", "to", "talk"])
    _write(os.path.join(d, "vocab.vi"), ["<unk>", "<s>", "</s>", "Khoa", "học", "Tôi", "muốn"])
    return d


_RO_WORDS = ("şedinţa", "Parlamentului", "procesul-verbal", "ţară", "Şcoala", "aprobarea",
             "ședința", "și", "ţine", "Ţara", "este", "în", "pentru", "către", "după")
_EN_WORDS = ("the", "session", "of", "Parliament", "minutes", "country", "school", "approval",
             "is", "in", "for", "towards", "after", "and", "keeps")


def _wmt_fixture(root, n_train=300, n_test=40, seed=0):
    rng = np.random.default_rng(seed)
    d = os.path.join(root, T.WMT16)

    def sentences(words, n):
        return [" ".join(rng.choice(words, size=rng.integers(1, 12))) for _ in range(n)]

    en_train, ro_train = sentences(_EN_WORDS, n_train), sentences(_RO_WORDS, n_train)
    ro_train[0] = "Componenţa  Parlamentului:\ta se vedea procesul-verbal "  # tab, double space
    _write(os.path.join(d, "europarl-v7.ro-en.en"), en_train)
    _write(os.path.join(d, "europarl-v7.ro-en.ro"), ro_train)
    for stem in ("newsdev2016", "newstest2016"):
        _write(os.path.join(d, f"{stem}.en"), sentences(_EN_WORDS, n_test))
        # A character the BPE never saw in training: byte fallback must keep it.
        _write(os.path.join(d, f"{stem}.ro"), sentences(_RO_WORDS, n_test - 1) + ["Ştiri 漢字 ţ"])
    return d


def _m30k_fixture(root):
    d = os.path.join(root, T.MULTI30K)
    _write(os.path.join(d, "tok", "train.lc.norm.tok.en"),
           ["a man runs .", "a dog runs .", "two men sit ."])
    _write(os.path.join(d, "tok", "train.lc.norm.tok.de"),
           ["ein mann läuft .", "ein hund läuft .", "zwei männer sitzen ."])
    _write(os.path.join(d, "raw", "train.en"), ["A man runs.", "A dog runs.", "Two men sit."])
    _write(os.path.join(d, "raw", "train.de"),
           ["Ein Mann läuft.", "Ein Hund läuft.", "Zwei Männer sitzen."])
    return d


# ------------------------------------------------------------------ registry

def test_sources_are_registered_with_official_counts():
    iwslt = sources.get(T.IWSLT15)
    assert iwslt.file("train.en").lines == 133_317
    assert iwslt.file("tst2012.vi").lines == 1_553 and iwslt.file("tst2013.en").lines == 1_268
    assert iwslt.file("vocab.en").lines == 17_191 and iwslt.file("vocab.vi").lines == 7_709
    assert iwslt.file("train.vi").url == \
        "https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi/train.vi"
    wmt = sources.get(T.WMT16)
    assert wmt.file("newsdev2016.ro").lines == 1_999 and wmt.file("newstest2016.en").lines == 1_999
    assert wmt.file("europarl-v7.ro-en.ro").lines == 399_375
    m30k = sources.get(T.MULTI30K)
    for stem, n in (("train", 29_000), ("val", 1_014), ("test_2016_flickr", 1_000)):
        for lang in ("en", "de"):
            assert m30k.file(f"tok/{stem}.lc.norm.tok.{lang}").lines == n
            assert m30k.file(f"raw/{stem}.{lang}").lines == n
    assert m30k.file("tok/train.lc.norm.tok.de").url.endswith("data/task1/tok/train.lc.norm.tok.de")


# ------------------------------------------------------------------- readers

def test_iwslt_reader_on_fixture(mirror):
    _iwslt_fixture(mirror)
    corpus = T.load_parallel(T.IWSLT15, "train", "en", "vi")
    assert corpus.src[1] == ["I", "&apos;d", "like", "to", "talk"]  # double space
    assert corpus.tgt[2] == ["vạch", "qua", "đường"]  # the last line has no newline
    assert corpus.partial
    assert "iwslt15_en_vi/train.en: 3 of 133,317 lines (partial copy)" in corpus.report
    assert "iwslt15_en_vi/train.vi: 3 of 133,317 lines (partial copy)" in corpus.report
    src, tgt, report = corpus  # unpacks
    assert src is corpus.src and report == corpus.report

    dev = T.load_parallel(T.IWSLT15, "dev", "vi", "en")  # the other direction
    assert len(dev) == 1553 and not dev.partial
    assert dev.src[0] == ["c", "d"] and "1,553 lines (complete)" in dev.report
    assert T.load_parallel(T.IWSLT15, "tst2012", "en", "vi").src == dev.tgt


def test_iwslt_unknown_words_become_unk(mirror):
    _iwslt_fixture(mirror)
    data = T.prepare(T.IWSLT15, "en", "vi")
    assert len(data.src_vocab) == 14 and len(data.tgt_vocab) == 8
    src, tgt, corpus = data.encode("train")
    assert list(src[0]) == [4, 5, 6, 7, 8]
    assert list(src[2]) == [UNK_ID, UNK_ID]  # "zebra crossing"
    assert list(tgt[1]) == [6, 7, UNK_ID]  # Tôi muốn nói
    # Decoding for evaluation keeps <unk>; the references keep the real words.
    assert data.decode(list(tgt[1]) + [EOS_ID, 5]) == "Tôi muốn <unk>"
    assert data.references("train")[1] == "Tôi muốn nói"


def test_mismatched_sides_name_both_files_and_counts(mirror):
    d = _iwslt_fixture(mirror, train_vi=["một", "hai"])
    with pytest.raises(DataError) as e:
        T.load_parallel(T.IWSLT15, "train", "en", "vi")
    msg = str(e.value)
    assert os.path.join(d, "train.en") in msg and os.path.join(d, "train.vi") in msg
    assert "3 lines" in msg and "has 2" in msg
    # Reading only a head must not hide the mismatch.
    with pytest.raises(DataError, match="has 3 lines but"):
        T.load_parallel(T.IWSLT15, "train", "en", "vi", max_lines=2)


def test_max_lines_reads_a_head_and_says_so(mirror):
    _iwslt_fixture(mirror)
    head = T.load_parallel(T.IWSLT15, "train", "en", "vi", max_lines=2)
    assert len(head) == 2 and head.src[0][0] == "Rachel"
    assert "3 of 133,317 lines (partial copy); first 2 read (max_lines=2)" in head.report


def test_missing_file_and_bad_utf8_are_named(mirror):
    with pytest.raises(DataError, match="iwslt15_en_vi/tst2013.en not found"):
        T.load_parallel(T.IWSLT15, "test", "en", "vi")
    d = _iwslt_fixture(mirror)
    with open(os.path.join(d, "train.en"), "ab") as f:
        f.write(b"caf\xe9\n")
    with pytest.raises(DataError, match=r"train\.en:4: not valid UTF-8"):
        T.load_parallel(T.IWSLT15, "train", "en", "vi")


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown translation dataset"):
        T.load_parallel("wmt14", "train", "en", "de")
    with pytest.raises(ValueError, match="not 'de'"):
        T.load_parallel(T.IWSLT15, "train", "en", "de")
    with pytest.raises(ValueError, match="not 'valid'"):
        T.load_parallel(T.IWSLT15, "valid", "en", "vi")


def test_normalize_romanian():
    assert T.normalize_romanian("şedinţa Şcoala Ţara") == "ședința Școala Țara"
    assert T.normalize_romanian("s\u0327i t\u0327") == "și ț"  # decomposed cedillas
    assert T.normalize_romanian("ședința") == "ședința"
    assert T.normalize_text("  Componenţa\t Parlamentului\u00a0x ", "ro") == \
        "Componența Parlamentului x"
    # Only the Romanian side gets the diacritic mapping (English refs stay as they are).
    assert T.normalize_text("Ştefan  Ţiriac", "en") == "Ştefan Ţiriac"


def test_wmt_reader_and_bpe_round_trip(mirror, tmp_path):
    _wmt_fixture(mirror)
    train = T.load_text(T.WMT16, "train", "en", "ro")
    assert len(train) == 300 and train.partial  # a 300-line head, and no SETimes2
    assert "europarl-v7.ro-en.ro: 300 of 399,375 lines (partial copy)" in train.report
    assert "SETIMES.en-ro.ro: missing" in train.report
    assert train.tgt[0] == "Componența Parlamentului: a se vedea procesul-verbal"
    assert not any(c in line for line in train.tgt for c in CEDILLA)
    assert any(c in line for line in train.tgt for c in COMMA)
    words = T.load_parallel(T.WMT16, "train", "en", "ro")
    assert words.tgt[0] == ["Componența", "Parlamentului:", "a", "se", "vedea", "procesul-verbal"]

    bpe_dir = str(tmp_path / "bpe")
    data = T.prepare(T.WMT16, "en", "ro", bpe_dir=bpe_dir, bpe_vocab_size=400)
    assert data.src_vocab is data.tgt_vocab and len(data.src_vocab) == 400
    with open(os.path.join(bpe_dir, "spm.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    assert manifest["training_lines"] == 600 and "partial copy" in manifest["data_report"]

    src, tgt, corpus = data.encode("test")
    refs = data.references("test")
    assert refs == corpus.tgt and refs[-1] == "Știri 漢字 ț"
    # encode (tf-text SentencepieceTokenizer) -> decode returns the normalised text.
    assert data.decode_batch(tgt) == refs
    assert data.decode_batch(src) == corpus.src
    assert all(len(ids) and min(ids) > EOS_ID for ids in tgt)
    # Pieces -> text for evaluation, including byte-fallback pieces of "漢字".
    pieces = data.codec.pieces(refs[-1])
    assert any(p.startswith("<0x") for p in pieces)
    assert T.detokenize(T.WMT16, pieces) == refs[-1]
    assert T.detokenize(T.WMT16, " ".join(pieces)) == refs[-1]

    # The model is reused, never silently replaced.
    model = os.path.join(bpe_dir, "spm.model")
    mtime = os.path.getmtime(model)
    assert T.train_bpe(bpe_dir, 400) == model and os.path.getmtime(model) == mtime
    with pytest.raises(DataError, match="differs in: vocab_size"):
        T.train_bpe(bpe_dir, 500)


def test_multi30k_vocab_cutoff_and_raw_variant(mirror):
    _m30k_fixture(mirror)
    data = T.prepare(T.MULTI30K, "en", "de", min_count=2)
    # en: "." x3, "a" x2, "runs" x2 survive min_count=2; singletons become <unk>.
    assert data.src_vocab.tokens[4:] == [".", "a", "runs"]
    assert data.tgt_vocab.tokens[4:] == [".", "ein", "läuft"]
    src, tgt, _ = data.encode("train")
    assert list(src[2]) == [UNK_ID, UNK_ID, UNK_ID, 4]
    assert len(T.load_vocab(T.MULTI30K, "en", min_count=1)) == 4 + 8
    raw = T.load_parallel(T.MULTI30K, "train", "de", "en", variant="raw")
    assert raw.src[0] == ["Ein", "Mann", "läuft."] and raw.tgt[2] == ["Two", "men", "sit."]
    with pytest.raises(DataError, match="val.lc.norm.tok.en not found"):
        T.load_parallel(T.MULTI30K, "dev", "en", "de")


def test_detokenize_and_metric_per_dataset():
    assert T.detokenize(T.IWSLT15, ["I", "&apos;d", "like", "</s>"]) == "I &apos;d like"
    assert T.detokenize(T.MULTI30K, "a  man runs .") == "a man runs ."
    assert T.detokenize(T.WMT16, ["▁Com", "pon", "ența", "▁Par", "la", "ment", "ului", ":"]) == \
        "Componența Parlamentului:"
    assert T.detokenize(T.WMT16, "Com@@ pon@@ ența Parlamentului") == "Componența Parlamentului"
    hyps, refs = ["a man runs .", "the dog"], ["a man runs .", "a dog ."]
    iw = T.evaluate_bleu(T.IWSLT15, hyps, refs)
    assert "tok:none" in iw.signature and "smooth:none" in iw.signature
    assert "tok:13a" in T.evaluate_bleu(T.WMT16, hyps, refs).signature


# --------------------------------------------------------------- real data

def test_real_iwslt15(shared):
    _need(shared, T.IWSLT15)
    train = T.load_parallel(T.IWSLT15, "train", "en", "vi")
    # The mirror's head: 999 newline-terminated lines + a final line without one.
    assert len(train) == 1_000 and train.partial
    assert "iwslt15_en_vi/train.en: 1,000 of 133,317 lines (partial copy)" in train.report
    assert train.src[0] == "Rachel Pike : The science behind a climate headline".split()
    assert train.tgt[0][:3] == ["Khoa", "học", "đằng"]
    dev = T.load_parallel(T.IWSLT15, "dev", "en", "vi")
    test = T.load_parallel(T.IWSLT15, "test", "en", "vi")
    assert (len(dev), len(test)) == (1_553, 1_268) and not dev.partial and not test.partial
    assert test.src[1] == ["And", "I", "was", "very", "proud", "."]
    data = T.prepare(T.IWSLT15, "en", "vi")
    assert (len(data.src_vocab), len(data.tgt_vocab)) == (17_192, 7_710)
    src, tgt, _ = data.encode("test")
    unk_rate = np.mean(np.concatenate(tgt) == UNK_ID)
    assert 0 < unk_rate < 0.05  # the vocab covers the test set, but not every word
    pipe = Batches(src, tgt, 64, seed=0)
    assert pipe.num_filtered > 0 and pipe.num_examples + pipe.num_filtered == 1_268


def test_real_wmt16_counts_and_diacritics(shared):
    _need(shared, T.WMT16)
    train = T.load_text(T.WMT16, "train", "en", "ro")
    assert len(train) == 10_000 and train.partial
    assert "wmt16_en_ro/europarl-v7.ro-en.ro: 10,000 of 399,375 lines (partial copy)" \
        in train.report
    raw_ro = T.read_lines(os.path.join(shared, T.WMT16, "europarl-v7.ro-en.ro"))
    assert sum(line.count(c) for line in raw_ro for c in CEDILLA) > 20_000
    assert sum(line.count(c) for line in train.tgt for c in CEDILLA) == 0
    assert raw_ro[0] == "Componenţa Parlamentului: a se vedea procesul-verbal"
    assert train.tgt[0] == "Componența Parlamentului: a se vedea procesul-verbal"
    for split in ("dev", "test"):
        c = T.load_text(T.WMT16, split, "en", "ro")
        assert len(c) == 1_999 and not c.partial and "1,999 lines (complete)" in c.report
    refs = T.references(T.WMT16, "test", "ro")
    assert refs[0] == "Șeful ONU declară că nu există soluții militare în Siria"
    assert T.references(T.WMT16, "test", "en")[0] == \
        "UN Chief Says There Is No Military Solution in Syria"


def test_real_wmt16_bpe_round_trip(shared, tmp_path):
    _need(shared, T.WMT16)
    # A small BPE on the first 300 Europarl lines of each side (fast); byte
    # fallback makes the round trip exact even for characters it never saw.
    data = T.prepare(T.WMT16, "en", "ro", bpe_dir=str(tmp_path / "bpe"), bpe_vocab_size=500,
                     bpe_max_lines=300)
    assert len(data.tgt_vocab) == 500
    test = T.load_text(T.WMT16, "test", "en", "ro", max_lines=200)
    for lines in (test.src, test.tgt):
        ids = data.codec.encode(lines)
        assert data.codec.decode(ids) == lines
    assert T.detokenize(T.WMT16, data.codec.pieces(test.tgt[5])) == test.tgt[5]
    assert unicodedata.is_normalized("NFC", test.tgt[5])


def test_real_multi30k(shared):
    _need(shared, T.MULTI30K)
    for split, n in (("train", 29_000), ("dev", 1_014), ("test", 1_000)):
        c = T.load_parallel(T.MULTI30K, split, "en", "de")
        assert len(c) == n and not c.partial
    train = T.load_parallel(T.MULTI30K, "train", "en", "de")
    assert train.src[0] == "two young , white males are outside near many bushes .".split()
    raw = T.load_parallel(T.MULTI30K, "train", "en", "de", variant="raw")
    assert len(raw) == 29_000 and raw.src[0][0] == "Two"
    data = T.prepare(T.MULTI30K, "en", "de", min_count=2)
    assert (len(data.src_vocab), len(data.tgt_vocab)) == (5_921, 7_859)
