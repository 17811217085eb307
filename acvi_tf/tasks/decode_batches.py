"""Decoding in batches, shared by the three tasks: length-sorted batches of a traced
best-hypothesis decoder (:class:`BatchedDecoder`), Bahuleyan et al.'s sampled decodes,
the attention pictures of ``--attention_plots``, and the text in and out of
``--mode=decode`` (:func:`read_lines`, :func:`write_output`)."""

import os
import sys

import numpy as np
import tensorflow as tf

from acvi_tf import decoding
from acvi_tf.errors import RunError
from acvi_tf.tasks.base import system_name
from acvi_tf.utils import shards


def decode_in_batches(decode_fn, lengths, make_batch, batch_size, attention_for=()):
    """Decodes items in length-sorted batches (less padding) and returns them in input order.

    ``make_batch(indices)`` builds the model batch of those items; ``decode_fn``
    returns ``ids`` [B, T], ``lengths`` [B] and optionally ``attention``
    [B, T, N] of the best hypothesis. Items of length 0 decode to ``[]``.
    Returns ``(hyp_ids, attention)``: a list of id lists and ``{index: [hyp_len,
    src_len] array}`` for the indices in ``attention_for``.
    """
    lengths = np.asarray(lengths)
    order = np.argsort(-lengths, kind="stable")  # longest first: a slow batch shows early
    hyp_ids = [[] for _ in range(len(lengths))]
    attention_out = {}
    wanted = set(attention_for)
    todo = [i for i in order if lengths[i] > 0]
    for start in range(0, len(todo), batch_size):
        idx = todo[start:start + batch_size]
        out = decode_fn(make_batch(idx))
        ids = out["ids"].numpy()
        lens = out["lengths"].numpy()
        att = out["attention"].numpy() if "attention" in out and wanted else None
        for row, i in enumerate(idx):
            hyp_ids[i] = ids[row, :lens[row]].tolist()
            if att is not None and i in wanted:
                attention_out[i] = att[row, :max(int(lens[row]), 1), :lengths[i]]
    return hyp_ids, attention_out


def best_hypothesis_decoder(model, input_signature, beam_width=1, seeded=False, **options):
    """A tf.function batch -> best hypothesis (``ids``, ``lengths``, ``score``,
    ``attention``: :func:`acvi_tf.decoding.best_hypothesis`). ``seeded``: the function
    takes ``(batch, seed)``, the stateless seed of whatever the model samples.
    ``options``: the rest of ``model.decode``'s search settings (DecodeConfig.options).
    The rows are decoded in the process's batch shards side by side
    (:func:`acvi_tf.utils.shards.sharded`; one shard unless a task CLI configured more)."""

    def decode_part(batch, seed):
        out = model.decode(batch, beam_width=beam_width, seed=seed, **options)
        return decoding.best_hypothesis(out, beam_width)

    def decode(batch, seed=0):
        # the process's batch shards (acvi_tf.utils.shards), each row decoded as alone
        return shards.sharded(lambda part, i: decode_part(part, shards.shard_seed(seed, i)),
                              batch)

    signature = [input_signature] + ([tf.TensorSpec([], tf.int32)] if seeded else [])
    return tf.function(decode, input_signature=signature, autograph=False)


def sampling_components(model):
    """The parts of ``model`` that can sample their latent at decode time (ACVI's and the
    Gaussian attention's context, VED's and VRNMT's z): those with ``sample_at_decode``."""
    parts = [getattr(model, "variant", None), getattr(model, "latent", None)]
    return [p for p in parts if p is not None and hasattr(p, "sample_at_decode")]


def sampled_decodes(model, input_signature, lengths, make_batch, samples, batch_size=64,
                    max_length=50):
    """Bahuleyan et al.'s diversity protocol (their Table 2): ``samples`` greedy decodes of
    each item, each with the latent drawn afresh (``sample_at_decode`` switched on for the
    trace, a different stateless seed per sample). Returns one list of ``samples`` id
    lists per item. A model with nothing to sample is refused: its K decodes would be
    one decode K times."""
    parts = sampling_components(model)
    if not parts:
        raise RunError(f"--diversity_samples: {system_name(model.config)} samples nothing at "
                       f"decode time (it has no stochastic latent or context); the protocol "
                       f"is for ACVI, the Gaussian attention, VED and VRNMT")
    before = [p.sample_at_decode for p in parts]
    try:
        for p in parts:
            p.sample_at_decode = True  # read when the decoder is traced, below
        decode = best_hypothesis_decoder(model, input_signature, beam_width=1,
                                         max_length=max_length, seeded=True)
        groups = [[] for _ in lengths]
        for k in range(samples):
            seed = tf.constant(k + 1, tf.int32)
            hyp_ids, _ = decode_in_batches(lambda batch: decode(batch, seed), lengths,
                                           make_batch, batch_size)
            for group, ids in zip(groups, hyp_ids):
                group.append(ids)
        return groups
    finally:
        for p, b in zip(parts, before):
            p.sample_at_decode = b


class BatchedDecoder:
    """One traced best-hypothesis decoder per (model, search settings), cached: the
    piece the three tasks' translator / summarizer / captioner share."""

    def __init__(self, input_signature, batch_size=64):
        self.input_signature = input_signature
        self.batch_size = batch_size
        self._decoders = {}

    def decoder(self, model, opts, key=()):
        k = (id(model), tuple(sorted(opts.items())), key)
        if k not in self._decoders:
            self._decoders[k] = best_hypothesis_decoder(model, self.input_signature, **opts)
        return self._decoders[k]

    def decode(self, model, opts, lengths, make_batch, attention_for=(), key=()):
        return decode_in_batches(self.decoder(model, opts, key), lengths, make_batch,
                                 self.batch_size, attention_for)


def read_lines(path, stream):
    """The lines of ``path`` (or of ``stream`` when path is empty), newline stripped. A
    line that is not UTF-8 is a :class:`RunError` naming the file and the line."""
    name = path or "<stdin>"
    if path:
        if os.path.isdir(path):
            raise RunError(f"--input={path} is a directory, not a text file")
        with open(path, "rb") as f:
            raw = f.read()
    else:
        raw = stream.buffer.read() if hasattr(stream, "buffer") else stream.read()
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, 1):
        try:
            out.append(line.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise RunError(f"{name}, line {number}: not UTF-8 (byte {line[e.start]:#04x} at "
                           f"column {e.start + 1}); convert the input to UTF-8") from None
    return out


def write_attention_plots(out_dir, model, attention, pictures):
    """One PNG per ``(index, source ids, source tokens, target tokens)`` in ``pictures``:
    a_t^i (``attention[index]``, [T, N]) of the decoded output, source tokens against
    target tokens, with ACVI's mean sigma(h_i) (Eq. 18) per source position as a second
    panel. Tokens are vocabulary tokens, so OOV words show as ``<unk>``; target steps
    past the tokens given are the end token. Returns the paths."""
    from acvi_tf.utils.attention_plots import plot_attention
    if pictures and not attention:
        raise RunError(f"--attention_plots: --model={model.config.model} gives no attention "
                       f"weights to draw")
    paths = []
    for index, ids, src, tgt in pictures:
        a = np.asarray(attention[index])
        src, tgt = list(src)[:a.shape[1]], list(tgt)[:a.shape[0]]
        tgt += ["</s>"] * (a.shape[0] - len(tgt))
        sigma = source_sigma(model, ids)
        path = os.path.join(out_dir, f"attention_{index:04d}.png")
        plot_attention(path, a[:, :len(src)], src, tgt,
                       sigma=None if sigma is None else sigma[:len(src)],
                       title=f"input {index + 1} ({model.config.attention})")
        paths.append(path)
    return paths


def source_sigma(model, ids):
    """The context variant's mean sigma per source position (ACVI), or None."""
    variant = getattr(model, "variant", None)
    if variant is None:
        return None
    memory_state, _ = model.start({"src": tf.constant([ids], tf.int32)}, training=False)
    values = variant.diagnostics(memory_state).get("sigma_mean")
    return None if values is None else np.asarray(values)[0]


def write_output(path, texts, log=print, what="lines"):
    """``texts`` one a line to ``path`` (stdout when empty)."""
    text = "".join(t + "\n" for t in texts)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        log(f"wrote {len(texts)} {what} to {path}")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
