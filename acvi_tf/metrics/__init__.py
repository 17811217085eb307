"""Evaluation metrics: BLEU (sacrebleu), and the summarization and captioning scores."""


def paired_lists(hypotheses, references):
    """``(hypotheses, references)`` as lists, one reference per hypothesis; a ValueError
    when their counts differ or there is nothing to evaluate (the external scorers,
    ROUGE-1.5.5 and METEOR, would otherwise fail deep inside their own runs)."""
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise ValueError("nothing to evaluate")
    return hypotheses, references
