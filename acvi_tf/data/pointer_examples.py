"""See et al.'s (2017) pointer-generator examples and batches (``data.py`` and
``batcher.py`` of github.com/abisee/pointer-generator), from an article/abstract pair of
:mod:`acvi_tf.data.cnndm`:

* The per-example extended vocabulary (See et al., Sec. 2.2, Eq. 9): article OOVs get ids
  ``V, V+1, ...``; targets use those ids for OOVs that occur in the article and ``[UNK]``
  otherwise; decoder inputs always see ``[UNK]`` for OOVs (``article2ids`` /
  ``abstract2ids`` / ``outputids2words``).
* Decoder input ``[START] + abstract`` and target ``abstract + [STOP]``, both cut to
  ``max_dec_steps``; a cut target has no ``[STOP]`` (``get_dec_inp_targ_seqs``).
* :class:`EncodedPairs`: a split's pairs encoded once, cut to each training phase's
  lengths (the training batches: :mod:`acvi_tf.data.article_batches`);
  :func:`make_batch`: padded batches of :class:`Example` (evaluation and decoding).

Every name here is also importable from :mod:`acvi_tf.data.cnndm`.
"""

import dataclasses

import numpy as np

# See et al.'s [STOP] is the shared vocabulary's </s>; their split on ASCII whitespace
# is split_tokens (acvi_tf.data.cnndm says why).
from acvi_tf.data.vocab import EOS as STOP_TOKEN
from acvi_tf.data.vocab import split_tokens as split_words


def article2ids(article_words, vocab):
    """Extended-vocabulary ids of the article (See et al., ``data.article2ids``).

    Returns ``(ids, oovs)``: the i-th distinct OOV of the article, in order of first
    occurrence, gets id ``len(vocab) + i``; ``oovs`` lists them.
    """
    ids, oovs, index = [], [], {}
    size = len(vocab)
    for w in article_words:
        i = vocab.token_to_id(w)
        if i == vocab.unk_id:
            if w not in index:
                index[w] = len(oovs)
                oovs.append(w)
            ids.append(size + index[w])
        else:
            ids.append(i)
    return ids, oovs


def abstract2ids(abstract_words, vocab, article_oovs):
    """Target ids in the extended vocabulary (See et al., ``data.abstract2ids``):
    an OOV that occurs in the article gets its article-OOV id, any other OOV
    ``[UNK]``."""
    index = {w: i for i, w in enumerate(article_oovs)}
    size = len(vocab)
    ids = []
    for w in abstract_words:
        i = vocab.token_to_id(w)
        if i == vocab.unk_id and w in index:
            i = size + index[w]
        ids.append(i)
    return ids


def outputids2words(ids, vocab, article_oovs):
    """Inverse of the extended vocabulary (See et al., ``data.outputids2words``).

    Raises ValueError for an id past the example's article OOVs.
    """
    words = []
    size = len(vocab)
    for i in ids:
        i = int(i)
        if i < 0:
            raise ValueError(f"negative id {i}")
        if i < size:
            words.append(vocab.id_to_token(i))
            continue
        k = i - size
        if not 0 <= k < len(article_oovs):
            raise ValueError(f"id {i} is article OOV {k}, but this example has "
                             f"{len(article_oovs)} article OOVs")
        words.append(article_oovs[k])
    return words


def strip_decoded(words):
    """Cuts a decoded word list at the first stop token (See et al., decode.py)."""
    return words[:words.index(STOP_TOKEN)] if STOP_TOKEN in words else list(words)


@dataclasses.dataclass
class Example:
    """One pointer-generator training example (See et al., ``batcher.Example``)."""
    article: str            # the full article, untruncated (lead-3, novelty, display)
    abstract_sents: list    # reference sentences (ROUGE: one per line)
    enc_input: list         # truncated article, in-vocabulary ids ([UNK] for OOVs)
    enc_input_ext: list     # same, extended ids (article OOVs -> V, V+1, ...)
    article_oovs: list      # the OOV words of the truncated article
    dec_input: list         # [START] + abstract, cut to max_dec_steps; [UNK] for OOVs
    target: list            # abstract + [STOP], cut to max_dec_steps; extended ids

    @property
    def abstract(self):
        return " ".join(self.abstract_sents)


def _dec_inp_targ(ids, max_len, start_id, stop_id):
    # See et al., Example.get_dec_inp_targ_seqs: a target cut at max_len has no
    # [STOP], so the model is never taught to stop early.
    inp = [start_id] + ids
    target = list(ids)
    if len(inp) > max_len:
        inp, target = inp[:max_len], target[:max_len]
    else:
        target.append(stop_id)
    return inp, target


def make_example(article, abstract_sents, vocab, max_enc_steps=400, max_dec_steps=100):
    """Builds an :class:`Example` from raw text (See et al.'s defaults: 400 / 100).

    The article OOVs are those of the *truncated* article, as in See et al.: the
    pointer can only copy what the encoder saw.
    """
    article_words = split_words(article)[:max_enc_steps]
    if not article_words:
        raise ValueError("empty article")  # an all-masked source would give NaN attention
    abstract_words = split_words(" ".join(abstract_sents))
    enc_input = vocab.encode(article_words)
    enc_ext, oovs = article2ids(article_words, vocab)
    dec_input, _ = _dec_inp_targ(vocab.encode(abstract_words),
                                 max_dec_steps, vocab.bos_id, vocab.eos_id)
    _, target = _dec_inp_targ(abstract2ids(abstract_words, vocab, oovs),
                              max_dec_steps, vocab.bos_id, vocab.eos_id)
    return Example(article, list(abstract_sents), enc_input, enc_ext, oovs, dec_input, target)


class EncodedPairs:
    """Training pairs encoded once, at the longest truncation of a run, as int32 arrays.

    The phase schedule (Appendix A, Table 5) trains on ever longer prefixes of the
    same articles; :meth:`example` cuts an example to a phase's lengths from
    this store and returns exactly what :func:`make_example` would build from the
    text at those lengths: article OOV ids are given in order of first occurrence,
    so the OOVs of a prefix are a prefix of the OOV list, and a target OOV that
    only occurs past the cut becomes ``[UNK]`` again. Memory: 4 bytes a token
    (no Python strings but the OOV words), so a whole split fits.
    """

    def __init__(self, vocab, max_enc_steps, max_dec_steps):
        self.vocab = vocab
        self.max_enc_steps = int(max_enc_steps)
        self.max_dec_steps = int(max_dec_steps)
        self.enc_ext, self.abs_ext, self.oovs = [], [], []

    def __len__(self):
        return len(self.enc_ext)

    def add(self, article, abstract_sents):
        """Encodes one pair (raises ValueError for an empty article, as make_example)."""
        words = split_words(article)[:self.max_enc_steps]
        if not words:
            raise ValueError("empty article")
        enc_ext, oovs = article2ids(words, self.vocab)
        # [START] + abstract is cut to max_dec_steps: later words are never used.
        abstract_words = split_words(" ".join(abstract_sents))[:self.max_dec_steps]
        self.enc_ext.append(np.asarray(enc_ext, np.int32))
        self.abs_ext.append(np.asarray(abstract2ids(abstract_words, self.vocab, oovs), np.int32))
        self.oovs.append(oovs)

    def example(self, i, max_enc_steps=None, max_dec_steps=None):
        """Pair ``i`` as an :class:`Example` at the given (shorter) lengths; its
        ``article`` and ``abstract_sents`` are empty (training needs ids only)."""
        enc = self.max_enc_steps if max_enc_steps is None else int(max_enc_steps)
        dec = self.max_dec_steps if max_dec_steps is None else int(max_dec_steps)
        if enc > self.max_enc_steps or dec > self.max_dec_steps:
            raise ValueError(f"lengths {enc}/{dec} exceed the stored "
                             f"{self.max_enc_steps}/{self.max_dec_steps}")
        size, unk = len(self.vocab), self.vocab.unk_id
        ext = self.enc_ext[i][:enc]
        num_oovs = int(ext.max()) - size + 1 if ext.size and ext.max() >= size else 0
        abstract = self.abs_ext[i]
        dec_input, _ = _dec_inp_targ(np.where(abstract >= size, unk, abstract).tolist(), dec,
                                     self.vocab.bos_id, self.vocab.eos_id)
        _, target = _dec_inp_targ(np.where(abstract >= size + num_oovs, unk, abstract).tolist(),
                                  dec, self.vocab.bos_id, self.vocab.eos_id)
        return Example("", [], np.where(ext >= size, unk, ext), ext,
                       self.oovs[i][:num_oovs], dec_input, target)


TENSOR_KEYS = ("src", "src_ext", "src_len", "src_mask", "tgt_in", "tgt_out",
               "tgt_len", "tgt_mask", "max_oovs")


def _pad(seqs, length, pad_id):
    out = np.full((len(seqs), length), pad_id, dtype=np.int32)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out


def make_batch(examples, vocab, enc_len=None, dec_len=None):
    """Pads a list of :class:`Example` into a batch dict (See et al., ``Batch``).

    Arrays (numpy, int32 unless noted): ``src`` [B,S], ``src_ext`` [B,S] (extended
    ids), ``src_len`` [B], ``src_mask`` [B,S] float32, ``tgt_in`` [B,T],
    ``tgt_out`` [B,T] (extended ids), ``tgt_len`` [B], ``tgt_mask`` [B,T] float32,
    ``max_oovs`` scalar (the most article OOVs of any example: the extended
    vocabulary of the batch is ``len(vocab) + max_oovs``). Python side, for
    evaluation: ``oovs``, ``article``, ``abstract_sents``, ``abstract``.

    S and T are the longest in the batch unless ``enc_len``/``dec_len`` fix them
    (fixed shapes avoid retracing a ``tf.function``); padding uses ``[PAD]``.
    """
    if not examples:
        raise ValueError("empty batch")
    S = enc_len or max(len(e.enc_input) for e in examples)
    T = dec_len or max(len(e.dec_input) for e in examples)
    src_len = np.array([len(e.enc_input) for e in examples], np.int32)
    tgt_len = np.array([len(e.dec_input) for e in examples], np.int32)
    if src_len.max() > S or tgt_len.max() > T:
        raise ValueError(f"enc_len={S}/dec_len={T} is shorter than an example "
                         f"({src_len.max()}/{tgt_len.max()})")
    return {
        "src": _pad([e.enc_input for e in examples], S, vocab.pad_id),
        "src_ext": _pad([e.enc_input_ext for e in examples], S, vocab.pad_id),
        "src_len": src_len,
        "src_mask": (np.arange(S)[None, :] < src_len[:, None]).astype(np.float32),
        "tgt_in": _pad([e.dec_input for e in examples], T, vocab.pad_id),
        "tgt_out": _pad([e.target for e in examples], T, vocab.pad_id),
        "tgt_len": tgt_len,
        "tgt_mask": (np.arange(T)[None, :] < tgt_len[:, None]).astype(np.float32),
        "max_oovs": np.int32(max(len(e.article_oovs) for e in examples)),
        "oovs": [e.article_oovs for e in examples],
        "article": [e.article for e in examples],
        "abstract_sents": [e.abstract_sents for e in examples],
        "abstract": [e.abstract for e in examples],
    }


def to_tensors(batch):
    """The numeric part of a batch as ``tf`` tensors (strings stay in Python)."""
    import tensorflow as tf
    return {k: tf.convert_to_tensor(batch[k]) for k in TENSOR_KEYS}
