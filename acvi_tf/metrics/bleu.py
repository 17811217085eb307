"""Corpus BLEU through sacrebleu, in the two forms the MT literature reports.

* **Tokenized BLEU** (IWSLT'15 En-Vi, Multi30k; tensorflow/nmt, Luong & Manning
  2015 and the paper's Table 4): hypotheses and references are already
  tokenized (Moses), BPE/sentencepiece segmentation is removed, and BLEU is
  computed on whitespace tokens with no further tokenization
  (``tokenize="none"``) and no smoothing, as ``multi-bleu.perl`` and
  tensorflow/nmt's ``compute_bleu(smooth=False)`` do.
* **Detokenized sacreBLEU** (WMT'16 En-Ro): plain-text hypotheses against the
  raw references with sacrebleu's standard ``13a`` tokenizer; the signature
  string makes the number reproducible (Post 2018).

Every result carries sacrebleu's signature, e.g.
``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``.
"""

import dataclasses

from sacrebleu.metrics import BLEU

SENTENCEPIECE_SPACE = "\u2581"  # "▁", sentencepiece's word-boundary mark


@dataclasses.dataclass(frozen=True)
class BleuResult:
    """A corpus BLEU score (0-100) with the sacrebleu signature that produced it."""
    score: float
    signature: str
    precisions: tuple  # modified n-gram precisions, n = 1..4 (percent)
    brevity_penalty: float
    hyp_len: int
    ref_len: int

    def __float__(self):
        return float(self.score)

    def __str__(self):
        p = "/".join(f"{x:.1f}" for x in self.precisions)
        return (f"BLEU = {self.score:.2f} {p} (BP = {self.brevity_penalty:.3f} "
                f"ratio = {self.hyp_len / max(self.ref_len, 1):.3f} hyp_len = {self.hyp_len} "
                f"ref_len = {self.ref_len}) {self.signature}")


def _reference_streams(refs, num_hyps):
    """Accepts one reference per hypothesis (a list of strings) or several
    reference streams (a list of such lists); returns the list of streams."""
    if isinstance(refs, str):
        raise TypeError("refs must be a list of reference strings, not one string")
    refs = list(refs)
    streams = [refs] if refs and isinstance(refs[0], str) else [list(s) for s in refs]
    if not streams:
        raise ValueError("no references given")
    for k, stream in enumerate(streams):
        if len(stream) != num_hyps:
            raise ValueError(f"{num_hyps} hypotheses but reference stream {k} has "
                             f"{len(stream)} lines; they must be aligned line by line")
        for i, r in enumerate(stream):
            if not isinstance(r, str):
                raise TypeError(f"reference stream {k}, line {i}: expected a string, got "
                                f"{type(r).__name__} (join token lists with spaces first)")
    return streams


def _check_hyps(hyps):
    if isinstance(hyps, str):
        raise TypeError("hyps must be a list of hypothesis strings, not one string")
    hyps = list(hyps)
    for i, h in enumerate(hyps):
        if not isinstance(h, str):
            raise TypeError(f"hypothesis {i}: expected a string, got {type(h).__name__} "
                            f"(join token lists with spaces first)")
    return hyps


def corpus_bleu(hyps, refs, tokenize="13a", lowercase=False, smooth_method="exp",
                smooth_value=None, force=False):
    """Corpus BLEU of ``hyps`` against ``refs`` with sacrebleu.

    Args:
      hyps: hypothesis strings, one per segment.
      refs: reference strings aligned with ``hyps``, or a list of several such
        reference streams (multi-reference BLEU).
      tokenize: sacrebleu tokenizer: ``"13a"`` (WMT standard, for detokenized
        text), ``"none"`` (the text is already tokenized), or any other
        sacrebleu tokenizer name (``"intl"``, ``"char"``, ...).
      lowercase, smooth_method, smooth_value, force: as in sacrebleu.

    Returns a :class:`BleuResult`; its ``score`` equals
    ``sacrebleu.corpus_bleu(hyps, [refs], tokenize=...).score``.
    """
    hyps = _check_hyps(hyps)
    streams = _reference_streams(refs, len(hyps))
    metric = BLEU(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method,
                  smooth_value=smooth_value, force=force)
    result = metric.corpus_score(hyps, streams)
    return BleuResult(score=float(result.score), signature=str(metric.get_signature()),
                      precisions=tuple(float(p) for p in result.precisions),
                      brevity_penalty=float(result.bp), hyp_len=int(result.sys_len),
                      ref_len=int(result.ref_len))


def remove_bpe(text, style="subword-nmt"):
    """Undoes subword segmentation of one line.

    ``style="subword-nmt"``: Sennrich et al.'s ``@@ `` continuation marks
    (``"un@@ believ@@ able"`` -> ``"unbelievable"``), removed as fairseq and
    tensorflow/nmt do, including a dangling ``@@`` at the end of the line.
    ``style="sentencepiece"``: space-separated pieces with ``▁`` word starts
    (``"▁un believ able"`` -> ``"unbelievable"``).
    """
    if style == "subword-nmt":
        return (text + " ").replace("@@ ", "").rstrip()
    if style == "sentencepiece":
        return text.replace(" ", "").replace(SENTENCEPIECE_SPACE, " ").strip()
    raise ValueError(f"unknown BPE style {style!r}; use 'subword-nmt' or 'sentencepiece'")


def tokenized_bleu(hyps, refs, bpe=None, lowercase=False, smooth_method="none"):
    """BLEU on tokenized text, as reported for IWSLT'15 (tensorflow/nmt) and Multi30k.

    Subword marks are removed first (``bpe``: None, ``"subword-nmt"`` or
    ``"sentencepiece"``, applied to hypotheses and references alike), then BLEU
    is taken on whitespace tokens (sacrebleu ``tokenize="none"``). No smoothing
    by default, matching ``multi-bleu.perl``.
    """
    hyps = _check_hyps(hyps)
    streams = _reference_streams(refs, len(hyps))
    if bpe is not None:
        hyps = [remove_bpe(h, bpe) for h in hyps]
        streams = [[remove_bpe(r, bpe) for r in s] for s in streams]
    return corpus_bleu(hyps, streams, tokenize="none", lowercase=lowercase,
                       smooth_method=smooth_method)


def sacre_bleu(hyps, refs, lowercase=False):
    """Detokenized sacreBLEU (``13a``, exp smoothing), the WMT standard."""
    return corpus_bleu(hyps, refs, tokenize="13a", lowercase=lowercase)
