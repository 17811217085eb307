"""The run archive: the small files of finished runs, kept in the repository.

Run directories (checkpoints, TensorBoard logs) live outside the repository and do not
survive the machine. The tables and the ACVI study render from an archive of each
finished run's small files instead (``results.json``, ``history.jsonl``, the decodes,
the resolved flags), so a results file regenerates from the repository alone and the
paired bootstrap can be rerun on the archived decodes. References are data and stay
out; a summarization run's per-summary ROUGE-1 scores (which need them) are archived
instead.
"""

import json
import os
import shlex
import shutil

from acvi_tf.metrics.rouge import DUC2004_ITEMS

# DUC2004_ITEMS: Table 5's per-summary ROUGE-1 recall (numbers computed by --mode=duc2004).
# Its decode_duc2004.txt stays out: its summaries copy much of DUC2004's NIST-licensed
# inputs, which are not to be republished.
ARCHIVED = ("results.json", "history.jsonl", "decode_dev.txt", "decode_test.txt",
            "decode_val.txt", DUC2004_ITEMS, "flags.txt",
            "model_config.json")
# Per-summary ROUGE-1 F1 of a CNN/DM run's test decode (percent), for the paired bootstrap.
ROUGE_ITEMS = "rouge1_items_test.json"


def archive(runs, archive_root):
    """Copies the small files of every finished run of ``runs`` [(name, model_dir)] to
    ``archive_root/<name>``; returns how many runs were copied. A run directory named
    twice is archived under its first name."""
    copied, seen = 0, set()
    for name, model_dir in runs:
        if not os.path.exists(os.path.join(model_dir, "results.json")) or model_dir in seen:
            continue
        seen.add(model_dir)
        dest = os.path.join(archive_root, name)
        if os.path.realpath(dest) == os.path.realpath(model_dir):
            continue  # rendering the archive itself
        os.makedirs(dest, exist_ok=True)
        items = os.path.join(model_dir, ROUGE_ITEMS)
        decode = os.path.join(model_dir, "decode_test.txt")
        stale = os.path.exists(items) and os.path.exists(decode) and (
            os.path.getmtime(items) < os.path.getmtime(decode))  # a later eval re-decoded
        if (stale or not os.path.exists(items)) and os.path.exists(
                os.path.join(model_dir, "reference_test.txt")):
            # kept beside the run too, so a table rendered from the run has them
            with open(items + ".tmp", "w", encoding="utf-8") as f:
                json.dump(rouge1_items(model_dir), f)
            os.replace(items + ".tmp", items)
        for f in ARCHIVED + (ROUGE_ITEMS,):
            if os.path.exists(os.path.join(model_dir, f)):
                shutil.copyfile(os.path.join(model_dir, f), os.path.join(dest, f))
            elif f == ROUGE_ITEMS and os.path.exists(os.path.join(dest, f)):
                # an earlier run archived under this name: its scores are not this run's
                os.remove(os.path.join(dest, f))
        copied += 1
    return copied


def rouge1_items(model_dir):
    """ROUGE-1.5.5's own per-summary ROUGE-1 F1 (See et al.'s options) of
    ``decode_test.txt`` against ``reference_test.txt``, split into sentences as the
    summarization task splits them. Their mean is the run's reported ROUGE-1 to within
    0.05 points (the references are re-split from their one-line form, which moved one
    run's mean by 0.012); a larger mismatch is an error."""
    from acvi_tf.metrics import rouge
    from acvi_tf.metrics.novelty import split_sentences
    with open(os.path.join(model_dir, "reference_test.txt"), encoding="utf-8") as f:
        refs = f.read().rstrip("\n").split("\n")
    hyps = read_hypotheses(os.path.join(model_dir, "decode_test.txt"), len(refs))
    result = rouge.rouge_cnndm([split_sentences(h.split()) or ["."] for h in hyps],
                               [split_sentences(r.split()) for r in refs], per_item=True)
    scores = [100 * f for f in result["items"]["rouge_1"]["f"]]
    with open(os.path.join(model_dir, "results.json"), encoding="utf-8") as f:
        reported = json.load(f).get("rouge", {}).get("rouge_1")
    if reported is not None and abs(sum(scores) / len(scores) - reported) > 0.05:
        raise ValueError(f"{model_dir}: per-summary ROUGE-1 averages "
                         f"{sum(scores) / len(scores):.3f}, the run reported {reported:.3f}")
    return scores


def read_hypotheses(path, count):
    """The ``count`` hypotheses of a decode file, one per line. A final newline is not an
    extra (empty) hypothesis; a file one line short (an empty last hypothesis written
    without its newline) gets it back."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if len(lines) == count + 1 and lines[-1] == "":
        lines = lines[:-1]
    elif len(lines) == count - 1:
        lines.append("")
    if len(lines) != count:
        raise ValueError(f"{path}: {len(lines)} lines for {count} references")
    return lines


def _command_key(argv):
    """What identifies a run's command: its arguments after the interpreter, without
    ``--model_dir`` (the runs root differs between machines) and with each
    ``--flagfile`` reduced to its path under ``configs/`` (it was written relative to
    whatever directory the run started in)."""
    key = []
    for a in argv[1:]:
        if a.startswith("--model_dir="):
            continue
        if a.startswith("--flagfile=") and "configs/" in a:
            a = "--flagfile=" + a.rsplit("configs/", 1)[1]
        key.append(a)
    return tuple(key)


def archived_run(archive_root, name, argv):
    """The archived ``results.json`` of run ``name`` under ``archive_root`` if a run of
    the same command (:func:`_command_key`: the training command, or the DUC2004 decode
    Table 5 runs) finished there, else None: the tables do not train again what their
    archive already holds."""
    path = os.path.join(archive_root, name, "results.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            results = json.load(f)
    except (OSError, ValueError):
        return None  # unreadable: not evidence that the run finished
    commands = [results.get("train_command"), results.get("command"),
                (results.get("duc2004") or {}).get("command")]
    want = _command_key(argv)
    return path if any(c and _command_key(shlex.split(c)) == want for c in commands) else None
