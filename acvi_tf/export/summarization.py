"""The SavedModel of a summarization run: articles in, summaries out.

``serving_default(text: tf.string [B]) -> {"summary": tf.string [B], "score":
tf.float32 [B]}``. An article is tokenized text (CNN/DailyMail's form, as
``--mode=decode`` reads it): split on ASCII whitespace, cut to
``max_enc_steps`` words, looked up in the run's vocabulary. With the
pointer-generator head, the article's OOV words get extended ids in order of
first occurrence (See et al.'s ``article2ids``), and a copied id past the
vocabulary decodes back to that word (``outputids2words``) -- all in the graph.
The summary is cut at ``[STOP]`` and joined by spaces, exactly what
``--mode=decode`` prints; coverage is on when the run's phase schedule had it on
at the exported step. An empty article gives "" and score 0.
"""

import tensorflow as tf

from acvi_tf import decoding
from acvi_tf.export import base

SIGNATURE = {"inputs": {"text": "tf.string [batch]: tokenized articles"},
             "outputs": {"summary": "tf.string [batch]", "score": "tf.float32 [batch]"}}


def article_oov_ids(words, ids, vocab_size, unk_id):
    """See et al.'s ``article2ids`` for a batch, vectorised.

    ``words`` [B, None] tf.string and ``ids`` [B, None] int64 (ragged, same rows).
    The i-th distinct OOV word of a row (order of first occurrence) gets id
    ``vocab_size + i``. Returns ``(ids_ext ragged [B, None], oovs ragged [B, None]
    (the OOV words of each row, in id order), max_oovs int32)``.
    """
    flat_words, flat_ids = words.flat_values, ids.flat_values
    rows = words.value_rowids()
    is_oov = tf.equal(flat_ids, unk_id)
    positions = tf.cast(tf.where(is_oov)[:, 0], tf.int32)
    oov_rows = tf.gather(rows, positions)
    # A row number in the key keeps equal words of two articles apart; flat values
    # are row-major, so tf.unique numbers the keys row by row, first occurrence first.
    keys = tf.strings.join([tf.strings.as_string(oov_rows), tf.gather(flat_words, positions)],
                           separator="\x00")
    unique, index = tf.unique(keys, out_idx=tf.int32)
    num_unique = tf.size(unique)
    first = tf.math.unsorted_segment_min(tf.range(tf.size(index)), index, num_unique)
    unique_rows = tf.gather(oov_rows, first)
    nrows = words.nrows(out_type=tf.int64)
    per_row = tf.math.bincount(tf.cast(unique_rows, tf.int32), minlength=tf.cast(nrows, tf.int32),
                               maxlength=tf.cast(nrows, tf.int32), dtype=tf.int32)
    offsets = tf.cumsum(per_row, exclusive=True)
    local = index - tf.gather(offsets, tf.cast(oov_rows, tf.int32))
    ext = tf.tensor_scatter_nd_update(flat_ids, tf.expand_dims(positions, 1),
                                      tf.cast(vocab_size + local, flat_ids.dtype))
    oovs = tf.RaggedTensor.from_value_rowids(tf.gather(flat_words, tf.gather(positions, first)),
                                             unique_rows, nrows=nrows)
    return (words.with_flat_values(ext), oovs,
            tf.reduce_max(tf.concat([per_row, [0]], axis=0)))


def output_words(ids, tokens, oovs):
    """Decoded extended ids [B, T] -> words [B, T]: vocabulary tokens below
    ``len(tokens)``, the row's article OOVs (``oovs`` ragged [B, None]) above."""
    size = len(tokens)
    vocab_words = tf.gather(tf.constant(list(tokens), tf.string), tf.minimum(ids, size - 1))
    oov_words = tf.gather(oovs.to_tensor(""), tf.maximum(ids - size, 0), batch_dims=1)
    return tf.where(ids < size, vocab_words, oov_words)


def export(model, vocab, decode_options, coverage, max_enc_steps, model_dir, export_dir, step,
           log=print):
    """Writes the SavedModel of a trained summarization ``model`` (its
    :class:`~acvi_tf.data.vocab.Vocab`; ``coverage`` the decoding mode of the
    exported step). Returns the export directory."""
    options = dict(decode_options)
    beam_width = options["beam_width"]
    pointer = model.config.head == "pointer"
    table = base.string_table(vocab.tokens, vocab.unk_id)
    tokens = vocab.tokens
    model.set_mode(coverage=coverage)  # read when the serving function is traced

    def serve(text):
        words = tf.strings.split(text)[:, :max_enc_steps]  # ASCII whitespace, as split_words
        ids = table.lookup(words)
        src, lengths = base.pad_source(ids, vocab.pad_id)
        batch = {"src": src}
        if pointer:
            ext, oovs, max_oovs = article_oov_ids(words, ids, len(vocab), vocab.unk_id)
            batch.update(src_ext=base.pad_source(ext, vocab.pad_id)[0], max_oovs=max_oovs)
        out = model.decode(batch, **options)
        best = decoding.best_hypothesis(out, beam_width)
        hyp, score = best["ids"], best["score"]
        keep = base.output_mask(hyp, vocab.eos_id, ())  # strip_decoded: cut at [STOP]
        if pointer:
            summary = tf.strings.reduce_join(
                tf.ragged.boolean_mask(output_words(hyp, tokens, oovs), keep), axis=1,
                separator=" ")
        else:
            summary = base.join_tokens(tokens, hyp, keep)
        summary, score = base.blank_empty(summary, score, lengths)
        return {"summary": summary, "score": score}

    run_files = base.run_files(model_dir)
    info = base.export_info("summarize", model_dir, model.config, options, SIGNATURE, step,
                            {"coverage": bool(coverage), "pointer": pointer,
                             "max_enc_steps": int(max_enc_steps),
                             "input_form": "tokenized text (split on ASCII whitespace)",
                             "needs": ["tensorflow"]})
    return base.save(export_dir, model, serve, [tf.TensorSpec([None], tf.string, name="text")],
                     [table], run_files, info, log)
