"""Subword units with sentencepiece: training a model (:func:`train_sentencepiece`),
applying it in the graph with tensorflow-text (:class:`SentencePieceCodec`) and
joining pieces back into text (:func:`pieces_to_text`).

Used by WMT'16 En-Ro (:func:`acvi_tf.data.translation.train_bpe` trains on its
text) and by the translation export, whose SavedModel holds the same tokenizer.
"""

import hashlib
import io
import json
import os
import re

import numpy as np
import tensorflow as tf

from acvi_tf.data.batching import to_ragged
from acvi_tf.data.sources import DataError
from acvi_tf.data.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, UNK_ID, Vocab
from acvi_tf.metrics import bleu as bleu_lib

SPM_MODEL = "spm.model"
SPM_VOCAB = "spm.vocab"
SPM_MANIFEST = "spm.json"


def _text_digest(texts):
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def pieces_to_text(pieces):
    """sentencepiece pieces -> text: join, '▁' -> space, byte pieces -> UTF-8."""
    out, pending = [], bytearray()
    for p in pieces:
        m = _BYTE_PIECE.match(p)
        if m:
            pending.append(int(m.group(1), 16))
            continue
        if pending:
            out.append(pending.decode("utf-8", errors="replace"))
            pending = bytearray()
        out.append(p)
    if pending:
        out.append(pending.decode("utf-8", errors="replace"))
    return "".join(out).replace(bleu_lib.SENTENCEPIECE_SPACE, " ").strip()


def train_sentencepiece(model_dir, texts, vocab_size=32_000, seed=0, model_type="bpe",
                        character_coverage=1.0, byte_fallback=True,
                        input_sentence_size=2_000_000, num_threads=2, report=""):
    """Trains (or reuses) a sentencepiece model of ``texts`` in ``model_dir``.

    Writes ``spm.model``, ``spm.vocab`` (pieces in id order) and ``spm.json`` (the
    settings, the digest of the training text and ``report``, a line on where the
    text came from). A model already in ``model_dir`` with the same manifest is
    reused; a different one is an error rather than silently replaced, because
    checkpoints depend on its ids.

    The model has ``<pad>``=0, ``<unk>``=1, ``<s>``=2, ``</s>``=3 like
    :class:`Vocab`, sentencepiece's identity normalisation (the caller normalises
    explicitly, so ``decode(encode(x)) == x`` for normalised ``x``) and byte
    fallback (a character never seen in training becomes UTF-8 byte pieces rather
    than ``<unk>``, so the round trip holds on dev/test text too).

    Returns the path of ``spm.model``.
    """
    import sentencepiece as spm  # heavy; only needed here

    texts = [t for t in texts if t]
    manifest = {
        "vocab_size": int(vocab_size), "model_type": model_type, "seed": int(seed),
        "character_coverage": float(character_coverage), "byte_fallback": bool(byte_fallback),
        "input_sentence_size": int(input_sentence_size), "normalization": "identity",
        "training_lines": len(texts), "training_text_sha256": _text_digest(texts),
        "sentencepiece": spm.__version__,
    }
    model_path = os.path.join(model_dir, SPM_MODEL)
    manifest_path = os.path.join(model_dir, SPM_MANIFEST)
    if os.path.exists(model_path):
        try:
            with open(manifest_path, encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError) as e:
            raise DataError(f"{model_path} exists but its manifest {manifest_path} cannot be "
                            f"read ({e}); delete {model_dir} or choose another dir") from None
        # Informational entries (the report; the sentencepiece version, which
        # does not change a trained model) are not compared.
        info = ("data_report", "sentencepiece")
        old_settings = {k: v for k, v in old.items() if k not in info}
        new_settings = {k: v for k, v in manifest.items() if k not in info}
        if old_settings != new_settings:
            diff = sorted(k for k in set(old_settings) | set(new_settings)
                          if old_settings.get(k) != new_settings.get(k))
            raise DataError(f"{model_path} was trained with different settings or text "
                            f"(differs in: {', '.join(diff)}); delete {model_dir} or choose "
                            f"another model dir")
        return model_path
    if not texts:
        raise DataError("no training text for sentencepiece")
    os.makedirs(model_dir, exist_ok=True)
    spm.set_random_generator_seed(seed)  # input sampling is random otherwise
    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=proto, model_type=model_type,
        vocab_size=vocab_size, character_coverage=character_coverage,
        byte_fallback=byte_fallback, normalization_rule_name="identity",
        pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
        pad_piece=SPECIALS[PAD_ID], unk_piece=SPECIALS[UNK_ID],
        bos_piece=SPECIALS[BOS_ID], eos_piece=SPECIALS[EOS_ID],
        input_sentence_size=input_sentence_size, shuffle_input_sentence=True,
        num_threads=num_threads, minloglevel=2)
    # Write to temporary names and rename, so a crash never leaves a model
    # without its manifest (which would block reuse with a confusing error).
    sp = spm.SentencePieceProcessor(model_proto=proto.getvalue())
    Vocab([sp.id_to_piece(i) for i in range(sp.get_piece_size())]).save(
        os.path.join(model_dir, SPM_VOCAB))
    with open(manifest_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(dict(manifest, data_report=report), f, indent=1, ensure_ascii=False)
    with open(model_path + ".tmp", "wb") as f:
        f.write(proto.getvalue())
    os.replace(manifest_path + ".tmp", manifest_path)
    os.replace(model_path + ".tmp", model_path)
    return model_path


class SentencePieceCodec:
    """A sentencepiece model applied with tensorflow-text's ``SentencepieceTokenizer``.

    ``tokenize`` works on string tensors inside tf.data; ``encode``/``decode`` are
    the batch conveniences around it. ``vocab`` is the :class:`Vocab` of pieces
    (same ids), for sizes and id -> piece lookups.
    """

    def __init__(self, model_path):
        import sentencepiece as spm
        import tensorflow_text as tf_text  # registers the op kernels; heavy

        self.model_path = model_path
        with open(model_path, "rb") as f:
            proto = f.read()
        sp = spm.SentencePieceProcessor(model_proto=proto)
        pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
        if tuple(pieces[:len(SPECIALS)]) != SPECIALS:
            raise DataError(f"{model_path}: ids 0-3 are {pieces[:4]}, expected {list(SPECIALS)} "
                            f"(train it with train_sentencepiece)")
        self.vocab = Vocab(pieces)
        self._proto = proto
        self.tokenizer = tf_text.SentencepieceTokenizer(model=proto, out_type=tf.int32)

    def _again(self, fn):
        """``fn()``, once more with a new tokenizer if its model is gone: tensorflow-text
        keeps the model in its op's kernel, and TensorFlow drops its eager kernels when
        the global seed is set (``keras.utils.set_random_seed``, which the Trainer calls
        after the training data is encoded: the dev set's encoding failed with "Resource
        ..._SentencepieceOp... does not exist", issue 42)."""
        try:
            return fn()
        except tf.errors.NotFoundError as e:
            if "SentencepieceOp" not in str(e):
                raise
            import tensorflow_text as tf_text
            self.tokenizer = tf_text.SentencepieceTokenizer(model=self._proto,
                                                            out_type=tf.int32)
            return fn()

    def __len__(self):
        return len(self.vocab)

    def tokenize(self, strings):
        """String tensor [N] -> int32 RaggedTensor [N, None] of piece ids."""
        return self.tokenizer.tokenize(strings)

    def encode(self, texts, batch_size=4096):
        """Strings -> list of int32 arrays of piece ids, tokenized in a tf.data
        pipeline (batched calls to ``SentencepieceTokenizer``, order kept)."""
        texts = list(texts)
        if not texts:
            return []
        return self._again(lambda: self._encode(texts, batch_size))

    def _encode(self, texts, batch_size):
        ds = (tf.data.Dataset.from_tensor_slices(tf.constant(texts, tf.string))
              .batch(batch_size)
              # (no AutoGraph conversion: straight-line code, converting only costs time)
              .map(tf.autograph.experimental.do_not_convert(self.tokenize),
                   num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
              .prefetch(tf.data.AUTOTUNE))
        out = []
        for ragged in ds:
            values = ragged.flat_values.numpy()
            splits = ragged.row_splits.numpy()
            out.extend(np.split(values, splits[1:-1]))
        return out

    def decode(self, ids_batch):
        """Lists of ids -> strings. Each sequence is cut at the first ``</s>``;
        ``<pad>``/``<s>`` are dropped (``<unk>`` decodes to " ⁇ ")."""
        cleaned = [self.vocab.encode(self.vocab.decode(ids)) for ids in ids_batch]
        if not cleaned:
            return []
        texts = self._again(
            lambda: self.tokenizer.detokenize(to_ragged(cleaned)).numpy().tolist())
        return [t.decode("utf-8") for t in texts]

    def pieces(self, text):
        """The pieces of one string (for inspection and tests)."""
        ids = self._again(lambda: self.tokenize(tf.constant([text])).flat_values.numpy())
        return [self.vocab.id_to_token(int(i)) for i in ids]
