"""Before a table runs anything: is each run done, and is its data (or are its features,
or the models it decodes with) in place? One check per task; each prints what is
missing and how to get it, and returns False to stop the table."""

import os

from acvi_tf.data import cnndm, sources
from acvi_tf.run.results import load_results
from acvi_tf.tasks import captioning, summarization, translation

NOTHING_RUN = ("\nNothing was run. Once that is in place (the mirror via ACVI_DATA_MIRROR, or "
               "the data dir via ACVI_DATA_DIR), rerun; the commands above are what it will "
               "run.")


def done(task, model_dir, settings):
    """Whether a run of ``task`` finished (its results.json holds its scores)."""
    results = load_results(model_dir)
    if task == "translate":
        return "bleu" in results
    if task == "caption":
        return "scores" in results
    return "duc2004" in results if settings.get("mode") == "duc2004" else "rouge" in results


def check_translation(table, runs, stream):
    missing = {}
    for *_, s in runs:
        key = (s.get("dataset", "multi30k"), s.get("variant", "tok"))
        if key not in missing:
            complete, lines = translation.data_status(key[0], s.get("src"), s.get("tgt"),
                                                      key[1])
            missing[key] = None if complete else lines
    bad = {k: v for k, v in missing.items() if v is not None}
    if not bad:
        return True
    print("", file=stream)
    for (dataset, _), lines in bad.items():
        print(f"STOP: the {dataset} data is missing or partial:", file=stream)
        print("\n".join(lines), file=stream)
        print(f"Download it: {translation.how_to_get(dataset)}", file=stream)
        print("", file=stream)
    print("Nothing was run. Once the files are in place (the mirror via ACVI_DATA_MIRROR, "
          "or the data dir via ACVI_DATA_DIR), rerun; the commands above are what it "
          "will run.", file=stream)
    return False


def check_summarization(table, runs, stream):
    """The paper profile needs all of CNN/DM; DUC2004 decoding needs trained models."""
    problems = []
    if any(s.get("mode") == "duc2004" for *_, s in runs):
        for name in (cnndm.DUC_INPUT,) + cnndm.DUC_REFS:
            if sources.locate("duc2004", name, required=False) is None:
                problems.append(f"MISSING duc2004/{name}. Get it: "
                                f"{summarization.how_to_get('duc2004')}")
        for _, _, model_dir, s in runs:
            if not os.path.exists(os.path.join(model_dir, "model_config.json")):
                problems.append(f"no trained model in {model_dir}: run the Table 1 runs first "
                                f"(`make table1-cpu`, or `make table1` at paper scale)")
    else:
        complete, lines = summarization.data_status()
        paper = any(s.get("profile", "paper") == "paper" and s.get("mode") != "lead3"
                    for *_, s in runs)
        if paper and not complete:
            problems += lines + [f"The paper profile trains on all 287,227 pairs. Get "
                                 f"them: {summarization.how_to_get('cnn_dailymail')}"]
        elif not all(cnndm.chunk_files(split, required=False) for split in summarization.SPLITS):
            problems += lines + [f"Get the chunks: {summarization.how_to_get('cnn_dailymail')}"]
    if not problems:
        return True
    print("\nSTOP:\n" + "\n".join(problems), file=stream)
    print(NOTHING_RUN, file=stream)
    return False


def check_captioning(table, runs, stream):
    """Every run not done yet needs real features (or says it uses synthetic ones)."""
    problems = {}
    for _, _, model_dir, s in runs:
        if done("caption", model_dir, s):
            continue
        synthetic = s.get("synthetic_features", "false").lower() in ("true", "1", "")
        key = (s.get("features") or None, synthetic, s.get("split_scheme", "paper"))
        if key not in problems:
            ok, lines = captioning.features_status(*key)
            problems[key] = None if ok else lines
    bad = {k: v for k, v in problems.items() if v}
    if not bad:
        return True
    print("", file=stream)
    for (features, _, _), lines in bad.items():
        print(f"STOP: no video features for {table} (MSVD videos and CNN features are "
              f"not on this machine):", file=stream)
        print("\n".join(lines), file=stream)
        print(captioning.how_to_make_features(features or captioning.DEFAULT_FEATURES),
              file=stream)
    print("\nNothing was run. With the features in place, rerun; the commands above are "
          "what it will run. `make table3-smoke` runs the same path on labelled "
          "synthetic features.", file=stream)
    return False


CHECKS = {"translate": check_translation, "summarize": check_summarization,
          "caption": check_captioning}
