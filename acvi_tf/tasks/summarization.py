"""Abstractive summarization on CNN/DailyMail (Section 4.1, Tables 1, 2, 5) as a task."""

from acvi_tf.data import cnndm, sources

SPLITS = ("train", "val", "test")


def data_status(splits=SPLITS):
    """``(complete, lines)``: the vocab and each split against the official sizes."""
    vocab = sources.locate("cnn_dailymail", cnndm.VOCAB_PATH, required=False)
    lines = [f"  vocab: {'ok' if vocab else 'MISSING'}"]
    complete = vocab is not None
    for split in splits:
        n, total, _, _ = cnndm.split_counts(split)
        complete &= n >= total
        lines.append("  " + cnndm.counts_report((split,))[0])
    return complete, lines


def how_to_get(name="cnn_dailymail"):
    s = sources.get(name)
    return f"{s.how_to_get} (homepage: {s.homepage}; local mirror: $ACVI_DATA_MIRROR/{name}/)"
