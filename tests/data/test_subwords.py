"""Tests of acvi_tf.data.subwords: sentencepiece training is deterministic and keeps
our special ids, the tensorflow-text codec round-trips text (unseen characters too,
through byte pieces), and pieces join back into text as sentencepiece itself does."""

import json
import os

import pytest

from acvi_tf.data import subwords
from acvi_tf.data.sources import DataError
from acvi_tf.data.vocab import SPECIALS

WORDS = ("ședința", "Parlamentului", "procesul-verbal", "țară", "școala", "aprobarea",
         "the", "session", "of", "Parliament", "minutes", "country", "and", "keeps")
TEXTS = [" ".join(WORDS[i % 9:i % 9 + 5]) + f" {i}" for i in range(200)]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return subwords.train_sentencepiece(str(tmp_path_factory.mktemp("spm")), TEXTS, 400,
                                       report="fixture text")


def test_training_is_deterministic_and_reused(model, tmp_path):
    again = subwords.train_sentencepiece(str(tmp_path / "b"), TEXTS, 400)
    with open(model, "rb") as fa, open(again, "rb") as fb:
        assert fa.read() == fb.read()
    info = json.load(open(os.path.join(os.path.dirname(model), subwords.SPM_MANIFEST)))
    assert info["data_report"] == "fixture text" and info["training_lines"] == len(TEXTS)
    mtime = os.path.getmtime(model)
    assert subwords.train_sentencepiece(os.path.dirname(model), TEXTS, 400) == model
    assert os.path.getmtime(model) == mtime
    with pytest.raises(DataError, match="differs in: training_lines, training_text_sha256"):
        subwords.train_sentencepiece(os.path.dirname(model), TEXTS[:-1], 400)


def test_codec_round_trip_matches_sentencepiece(model):
    import sentencepiece as spm
    codec = subwords.SentencePieceCodec(model)
    assert tuple(codec.vocab.tokens[:4]) == SPECIALS
    texts = ["ședința Parlamentului 7", "țară școala Ωmega", ""]  # Ω never seen: bytes
    ids = codec.encode(texts)
    reference = spm.SentencePieceProcessor(model_file=model)
    assert [i.tolist() for i in ids] == reference.encode(texts)
    assert codec.decode([i.tolist() for i in ids]) == texts
    pieces = [reference.id_to_piece(int(i)) for i in ids[1]]
    assert any(p.startswith("<0x") for p in pieces)
    assert subwords.pieces_to_text(pieces) == texts[1]


def test_pieces_to_text_joins_bytes_and_word_marks():
    assert subwords.pieces_to_text(["▁a", "b", "▁", "<0xC3>", "<0xA9>", "c"]) == "ab éc"
    assert subwords.pieces_to_text(["<0xE2>", "<0x82>", "<0xAC>"]) == "€"


def test_codec_survives_the_global_seed_being_set(model):
    """tensorflow-text keeps the model in its op's kernel, and setting the global seed
    (keras.utils.set_random_seed: the Trainer, after the training data is encoded) drops
    TensorFlow's eager kernels: the dev set's encoding then failed on every WMT run
    (issue 42). The codec builds its tokenizer again and gives the same pieces."""
    import tensorflow as tf
    codec = subwords.SentencePieceCodec(model)
    texts = ["ședința Parlamentului 7", "the session of Parliament"]
    before = [i.tolist() for i in codec.encode(texts)]
    tf.random.set_seed(1234)
    assert [i.tolist() for i in codec.encode(texts)] == before
    tf.random.set_seed(1234)
    assert codec.decode(before) == codec.decode([list(i) for i in codec.encode(texts)])
    tf.random.set_seed(1234)
    assert codec.pieces("the session")[0].startswith("▁")
