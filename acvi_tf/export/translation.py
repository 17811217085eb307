"""The SavedModel of a translation run: source sentences in, translations out.

``serving_default(text: tf.string [B]) -> {"translation": tf.string [B],
"score": tf.float32 [B]}``. Input is in the dataset's form, as ``--mode=decode``
reads it: Moses-tokenized text for the word-level datasets (IWSLT'15, Multi30k
``tok``), split on ASCII whitespace and looked up in the source vocabulary;
raw text for WMT'16, normalised (NFC, whitespace runs, Romanian comma-below) and
cut into the run's sentencepiece pieces by tensorflow-text. The search is the
run's final decoding (beam width, lengths, length normalisation). Output is what
``--mode=decode`` prints; ``score`` is the best hypothesis' ranking score (beam)
or summed log-probability (greedy), 0 for an empty line.

Loading a WMT'16 export needs ``import tensorflow_text`` first (its sentencepiece
ops); a word-level export needs TensorFlow alone.
"""

import tensorflow as tf

from acvi_tf import decoding
from acvi_tf.data.translation import RO_CEDILLA_TO_COMMA
from acvi_tf.data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from acvi_tf.export import base

# Python's str.isspace() set (what normalize_text's "\s+" matches), as an RE2 class.
_UNICODE_WS = r"[\t\n\x0b\x0c\r\x1c-\x1f\x{85}\p{Z}]+"

SIGNATURE = {"inputs": {"text": "tf.string [batch]: source sentences"},
             "outputs": {"translation": "tf.string [batch]", "score": "tf.float32 [batch]"}}


def normalize_text(text, lang):
    """In-graph :func:`acvi_tf.data.translation.normalize_text` (WMT'16 En-Ro)."""
    import tensorflow_text as tf_text
    text = tf_text.normalize_utf8(text, "NFC")
    text = tf.strings.strip(tf.strings.regex_replace(text, _UNICODE_WS, " "))
    if lang == "ro":
        for cedilla, comma in RO_CEDILLA_TO_COMMA.items():
            text = tf.strings.regex_replace(text, cedilla, comma)
    return text


def export(model, data, decode_options, model_dir, export_dir, step, log=print):
    """Writes the SavedModel of a trained translation ``model`` (its
    :class:`~acvi_tf.data.translation.TranslationData` ``data``; ``decode_options``
    the keyword arguments of ``model.decode``). Returns the export directory."""
    options = dict(decode_options)
    beam_width = options["beam_width"]
    codec = data.codec
    resources = []
    if codec is None:
        src_table = base.string_table(data.src_vocab.tokens, UNK_ID)
        resources.append(src_table)
        tgt_tokens = data.tgt_vocab.tokens
    else:
        tokenizer = codec.tokenizer
        resources.append(tokenizer)

    def serve(text):
        if codec is None:
            # ASCII whitespace (a trailing "\r" too), as split_tokens after rstrip("\r")
            ids = src_table.lookup(tf.strings.split(text))
        else:
            ids = tokenizer.tokenize(normalize_text(text, data.src_lang))
        src, lengths = base.pad_source(ids, PAD_ID)
        out = model.decode({"src": src}, **options)
        best = decoding.best_hypothesis(out, beam_width)
        hyp, score = best["ids"], best["score"]
        keep = base.output_mask(hyp, EOS_ID, (PAD_ID, BOS_ID))
        if codec is None:
            texts = base.join_tokens(tgt_tokens, hyp, keep)
        else:
            texts = tokenizer.detokenize(tf.ragged.boolean_mask(hyp, keep))
        texts, score = base.blank_empty(texts, score, lengths)
        return {"translation": texts, "score": score}

    run_files = base.run_files(model_dir)
    if codec is not None:
        run_files.append(codec.model_path)
    info = base.export_info("translate", model_dir, model.config, options, SIGNATURE, step,
                            {"dataset": data.dataset, "src": data.src_lang,
                             "tgt": data.tgt_lang,
                             "input_form": "raw text" if codec is not None
                             else "tokenized text (split on ASCII whitespace)",
                             "needs": ["tensorflow", "tensorflow_text"] if codec is not None
                             else ["tensorflow"]})
    return base.save(export_dir, model, serve, [tf.TensorSpec([None], tf.string, name="text")],
                     resources, run_files, info, log)
