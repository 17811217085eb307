"""Machine translation (Section 4.3, Appendix C, Table 4) as a task."""

from acvi_tf.data import sources
from acvi_tf.data import translation as tr

DATASETS = tr.DATASETS
LANGS = {"iwslt15_en_vi": ("en", "vi"), "wmt16_en_ro": ("en", "ro"), "multi30k": ("en", "de")}


def data_status(dataset, src, tgt, variant="tok"):
    """``(complete, lines)``: one line per registered file of the dataset (both
    languages): missing, partial (against the official line count) or complete."""
    source = sources.get(dataset)
    complete, lines = True, []
    for f in source.files:
        if dataset == "multi30k" and not f.path.startswith(variant + "/"):
            continue
        local = sources.locate(dataset, f.path, required=False)
        if local is None:
            complete = False
            expected = f"{f.lines:,} lines expected" if f.lines else "expected"
            lines.append(f"  MISSING  {dataset}/{f.path} ({expected})")
            continue
        message, partial = sources.completeness(dataset, f.path, local)
        complete &= not partial
        lines.append(f"  {'PARTIAL ' if partial else 'ok      '} {message}  [{local}]")
    return complete, lines


def how_to_get(dataset):
    s = sources.get(dataset)
    return f"{s.how_to_get} (homepage: {s.homepage}; local mirror: $ACVI_DATA_MIRROR/{dataset}/)"
