"""Evaluation metrics: BLEU (sacrebleu), and the summarization and captioning scores."""
