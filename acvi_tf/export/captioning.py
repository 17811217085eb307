"""The SavedModel of a captioning run: clip features in, captions out.

``serving_default(features: tf.float32 [B, frames, dim]) -> {"caption": tf.string
[B], "score": tf.float32 [B]}``. ``features`` are what ``--mode=extract_features``
stores per clip (the run's CNN features, one row per sampled frame; ``dim`` is
fixed by the run, ``frames`` may differ from the run's but the CLI always feeds
its own count). Every frame is attended to, as :class:`Captioner` does. The
caption is what ``--mode=decode`` prints: the run's final search, cut at the
first ``</s>``, ``<pad>``/``<s>`` dropped, tokens joined by spaces; ``score`` is
the best hypothesis' ranking score (beam) or summed log-probability (greedy).
"""

import tensorflow as tf

from acvi_tf import decoding
from acvi_tf.data.vocab import BOS_ID, EOS_ID, PAD_ID
from acvi_tf.export import base

SIGNATURE = {"inputs": {"features": "tf.float32 [batch, frames, dim]: CNN features per frame"},
             "outputs": {"caption": "tf.string [batch]", "score": "tf.float32 [batch]"}}


def export(model, vocab, dim, num_frames, decode_options, model_dir, export_dir, step,
           log=print):
    """Writes the SavedModel of a trained captioning ``model`` (its
    :class:`~acvi_tf.data.vocab.Vocab`, feature dimension ``dim`` and the run's
    ``num_frames``, recorded). Returns the export directory."""
    options = dict(decode_options)
    beam_width = options["beam_width"]
    tokens = vocab.tokens

    def serve(features):
        batch = tf.shape(features)[0]
        src_len = tf.fill([batch], tf.shape(features)[1])
        out = model.decode({"src": features, "src_len": src_len}, **options)
        best = decoding.best_hypothesis(out, beam_width)
        keep = base.output_mask(best["ids"], EOS_ID, (PAD_ID, BOS_ID))
        return {"caption": base.join_tokens(tokens, best["ids"], keep), "score": best["score"]}

    info = base.export_info("caption", model_dir, model.config, options, SIGNATURE, step,
                            {"feature_dim": int(dim), "num_frames": int(num_frames),
                             "input_form": "float32 features [batch, frames, dim]",
                             "needs": ["tensorflow"]})
    spec = tf.TensorSpec([None, None, int(dim)], tf.float32, name="features")
    return base.save(export_dir, model, serve, [spec], [], base.run_files(model_dir), info,
                     log)
