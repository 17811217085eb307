"""Caption metrics of the coco-caption toolkit over a whole split (Table 3).

The paper's video-captioning results (Section 4.2, Table 3) are ROUGE-L and
CIDEr on the MSVD validation and test clips [Vedantam et al. 2015, ref. 28]. This
module scores one hypothesis per clip against ALL the references of that clip with
``pycocoevalcap`` 1.2 (the pip release of coco-caption), and also reports BLEU-1..4
and METEOR 1.5, which most MSVD papers print beside them.

What each number is
-------------------
``BLEU-1`` .. ``BLEU-4``
    ``pycocoevalcap.bleu.Bleu(4)``: corpus-level BLEU (n-gram statistics summed over
    all clips), brevity penalty against the *closest* reference length.
``METEOR``
    ``pycocoevalcap.meteor.Meteor``: the METEOR 1.5 jar (``-l en -norm``, exact +
    stem + synonym + paraphrase modules) run with ``java``; the corpus score
    comes from the jar's aggregated statistics (not a mean of clip scores). Skipped,
    with a warning, when ``java`` is not on the PATH.
``ROUGE-L``
    ``pycocoevalcap.rouge.Rouge``: per clip, the LCS-based F-measure with
    beta = 1.2 using the max LCS-precision and max LCS-recall over the references;
    the split score is the mean over clips.
``CIDEr-D``
    ``pycocoevalcap.cider.Cider``. Although the class is called ``Cider``, it
    implements **CIDEr-D** (Vedantam et al. 2015, Sec. 8 / the coco-caption
    server's "CIDEr"): tf-idf n-gram vectors (n = 1..4), the hypothesis counts
    *clipped* by the reference counts (``min(vec_hyp, vec_ref)``), a Gaussian
    length penalty ``exp(-(l_hyp - l_ref)^2 / (2 * 6^2))``, the mean over n, the
    mean over references, and a factor 10. (Its ``l`` counts bigrams, i.e. words-1;
    only the difference enters, so this matters only for one-word sentences.)
    The idf weights are document frequencies over the *references of the split
    being scored* (``log(number of clips)`` is the maximum idf), which is why the
    score must be computed over the whole split at once, as here, and why CIDEr on a
    subset is not comparable with CIDEr on the split. This is the number MSVD papers
    (and Table 3) call "CIDEr"; there is no plain-CIDEr class in pycocoevalcap 1.2.

Scale: scores are multiplied by ``scale`` (default 100, the convention of most
captioning papers, e.g. CIDEr-D 0.5167 -> 51.67). NOTE: Table 3 of the ACVI paper
prints the raw values (ROUGE 0.5628, CIDEr 0.421), i.e. ``scale=1``.

Tokenization: captions from :mod:`acvi_tf.data.msvd` are already lowercased and
``wordpunct``-tokenized (Appendix B), so by default (``tokenize="whitespace"``)
tokens are joined with single spaces and passed on unchanged. ``tokenize="ptb"``
runs coco-caption's ``PTBTokenizer`` (the Stanford CoreNLP 3.4.1 jar shipped with
pycocoevalcap; works offline, needs ``java``), which also lowercases and drops
punctuation tokens -- what the coco-caption server does to raw captions.
"""

import atexit
import logging
import shutil
import threading
import warnings

import numpy as np

__all__ = ["ALL_METRICS", "score_captions", "format_scores", "java_available",
           "close_meteor"]

log = logging.getLogger(__name__)

# The metric keys of the returned dict, in print order.
ALL_METRICS = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr-D")
# Names accepted in ``metrics=``: each computes one scorer (BLEU gives 4 keys).
_SCORERS = ("BLEU", "METEOR", "ROUGE-L", "CIDEr-D")


def java_available():
    """True when a ``java`` executable is on the PATH (METEOR and PTB need it)."""
    return shutil.which("java") is not None


# The METEOR jar loads its ~60 MB paraphrase table at start-up (~15 s), so one
# process is kept for the life of the interpreter and reused by every call
# (validation every epoch would otherwise pay the start-up each time).
_meteor = None
_meteor_lock = threading.Lock()


def _get_meteor():
    global _meteor
    with _meteor_lock:
        if _meteor is None or _meteor.meteor_p.poll() is not None:
            from pycocoevalcap.meteor.meteor import Meteor
            _meteor = Meteor()
        return _meteor


def close_meteor():
    """Stops the cached METEOR java process (also run at interpreter exit)."""
    global _meteor
    with _meteor_lock:
        if _meteor is not None:
            p = _meteor.meteor_p
            try:
                p.stdin.close()
            except OSError:
                pass
            p.kill()
            p.wait()
            _meteor = None


atexit.register(close_meteor)


def _as_text(caption, where):
    """One caption as a single-space-joined string (tokens or an already-split string).

    pycocoevalcap's ROUGE-L splits on a single space, so runs of whitespace must be
    collapsed, or they would count as empty tokens.
    """
    if isinstance(caption, str):
        return " ".join(caption.split())
    if isinstance(caption, (list, tuple)) and all(isinstance(t, str) for t in caption):
        return " ".join(t for t in caption if t.strip())
    raise TypeError(f"{where}: a caption must be a string or a list of token strings, "
                    f"got {type(caption).__name__}")


def _prepare(hypotheses, references):
    """Checks both dicts cover the same clips; returns ({id: [hyp]}, {id: [refs]})."""
    hyp_ids, ref_ids = set(hypotheses), set(references)
    if hyp_ids != ref_ids:
        missing = sorted(ref_ids - hyp_ids)[:5]
        extra = sorted(hyp_ids - ref_ids)[:5]
        raise ValueError(
            "hypotheses and references must cover the same clips (the metrics are "
            f"computed over the whole split): {len(ref_ids - hyp_ids)} clips lack a "
            f"hypothesis (e.g. {missing}), {len(hyp_ids - ref_ids)} hypotheses have no "
            f"references (e.g. {extra})")
    if not hyp_ids:
        raise ValueError("no clips to score")
    res, gts = {}, {}
    for cid in sorted(hyp_ids, key=str):
        h = hypotheses[cid]
        # One hypothesis per clip: a caption, or a 1-element list holding one (the
        # pycocoevalcap form). A 1-token token list reads the same either way.
        if isinstance(h, (list, tuple)) and len(h) == 1:
            h = h[0]
        res[cid] = [_as_text(h, f"hypothesis of clip {cid!r}")]
        refs = references[cid]
        if isinstance(refs, str) or not refs:
            raise ValueError(f"references of clip {cid!r} must be a non-empty list of "
                             f"captions, got {refs!r}")
        gts[cid] = [_as_text(r, f"reference {i} of clip {cid!r}") for i, r in enumerate(refs)]
    return res, gts


def _ptb_tokenize(res, gts):
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
    tok = PTBTokenizer()
    try:
        gts = tok.tokenize({k: [{"caption": c} for c in v] for k, v in gts.items()})
        res = tok.tokenize({k: [{"caption": c} for c in v] for k, v in res.items()})
    except (OSError, ValueError) as e:
        raise RuntimeError(f"coco-caption PTBTokenizer failed ({e}); it needs java and "
                           "write access to the pycocoevalcap/tokenizer folder. Use "
                           "tokenize='whitespace' for pre-tokenized captions.") from e
    return res, gts


def score_captions(hypotheses, references, metrics=_SCORERS, tokenize="whitespace",
                   scale=100.0, per_clip=False):
    """coco-caption scores of one hypothesis per clip against all its references.

    Args:
      hypotheses: {clip_id: caption}, a caption being a string of space-separated
        tokens or a list of tokens (a 1-element list holding one caption is accepted).
      references: {clip_id: [caption, ...]} -- all references of the clip. Must have
        exactly the clips of ``hypotheses`` (a split is scored whole; see CIDEr-D).
      metrics: any of "BLEU", "METEOR", "ROUGE-L", "CIDEr-D".
      tokenize: "whitespace" (captions already tokenized; the default) or "ptb".
      scale: multiplier applied to every score (100: papers' convention; 1: raw
        pycocoevalcap values, as printed in Table 3 of the ACVI paper).
      per_clip: also return {metric: {clip_id: score}} (BLEU per clip is not
        additive and is left out).

    Returns:
      {"BLEU-1".."BLEU-4", "METEOR", "ROUGE-L", "CIDEr-D": float} for the requested
      metrics (METEOR is absent, with a warning, when java is missing); with
      ``per_clip`` a pair (scores, per_clip_scores).
    """
    unknown = set(metrics) - set(_SCORERS)
    if unknown:
        raise ValueError(f"unknown caption metrics {sorted(unknown)}; choose from {_SCORERS}")
    res, gts = _prepare(hypotheses, references)
    if tokenize == "ptb":
        if not java_available():
            raise RuntimeError("tokenize='ptb' needs java (coco-caption's Stanford "
                               "PTBTokenizer jar); install a JRE or use 'whitespace'")
        res, gts = _ptb_tokenize(res, gts)
    elif tokenize != "whitespace":
        raise ValueError(f"tokenize must be 'whitespace' or 'ptb', got {tokenize!r}")

    ids = list(res)
    scores, clips = {}, {}
    if "BLEU" in metrics:
        from pycocoevalcap.bleu.bleu import Bleu
        bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
        for n, b in enumerate(bleu, 1):
            scores[f"BLEU-{n}"] = float(b) * scale
    if "METEOR" in metrics:
        if java_available():
            m = _get_meteor()
            try:
                value, per = m.compute_score(gts, res)
            except (ValueError, BrokenPipeError) as e:
                # The jar died (e.g. out of memory): say so instead of a bare float() error.
                close_meteor()
                raise RuntimeError(f"METEOR 1.5 jar failed: {e}") from e
            scores["METEOR"] = float(value) * scale
            clips["METEOR"] = {k: float(s) * scale for k, s in zip(ids, per)}
        else:
            msg = "java not found on PATH: METEOR skipped (install a Java runtime)"
            warnings.warn(msg)
            log.warning(msg)
    if "ROUGE-L" in metrics:
        from pycocoevalcap.rouge.rouge import Rouge
        value, per = Rouge().compute_score(gts, res)
        scores["ROUGE-L"] = float(value) * scale
        clips["ROUGE-L"] = {k: float(s) * scale for k, s in zip(ids, per)}
    if "CIDEr-D" in metrics:
        from pycocoevalcap.cider.cider import Cider
        value, per = Cider().compute_score(gts, res)
        scores["CIDEr-D"] = float(value) * scale
        clips["CIDEr-D"] = {k: float(s) * scale for k, s in zip(ids, np.asarray(per))}
    scores = {k: scores[k] for k in ALL_METRICS if k in scores}
    return (scores, clips) if per_clip else scores


def format_scores(scores, digits=2):
    """One line, in the order of :data:`ALL_METRICS`: ``BLEU-4 41.20  CIDEr-D 51.67``."""
    return "  ".join(f"{k} {scores[k]:.{digits}f}" for k in ALL_METRICS if k in scores)
