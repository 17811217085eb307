"""METEOR 1.5 (Denkowski & Lavie, 2014) through the jar shipped in pycocoevalcap.

Table 1 of Chatzis et al. ("Amortized Context Vector Inference ...") reports
METEOR "in exact match mode (rewarding only exact matches between words), as well
as full mode (which additionally rewards matching stems, synonyms and
paraphrases)", as See et al. (2017) did. The jar is
``pycocoevalcap/meteor/meteor-1.5.jar`` (found through ``importlib``); it holds
the English function words, the Snowball stemmer and the WordNet synonym data,
and the English paraphrase table ships beside it as
``pycocoevalcap/meteor/data/paraphrase-en.gz`` (passed explicitly with ``-a``).

Commands (one segment per line; a multi-sentence summary is one line)::

    full:  java -Xmx2G -jar meteor-1.5.jar hyp.txt ref.txt -l en -norm -a <paraphrase-en.gz>
           -> modules exact stem synonym paraphrase, weights 1.0 0.6 0.8 0.6,
              parameters 0.85 0.2 0.6 0.75 (Meteor's English "rank" defaults)
    exact: java -Xmx2G -jar meteor-1.5.jar hyp.txt ref.txt -l en -norm -m exact
           -> module exact, weight 1.0, same parameters

``-norm`` tokenizes, normalizes punctuation and lowercases (Meteor's recommended
setting for plain text). If the paraphrase table is missing, "full" runs
``exact stem synonym`` (weights 1.0 0.6 0.8) and the result's ``modules`` says so.
Multiple references use ``-r N`` (the reference file holds N lines per segment).
"""

import os
import re
import shutil
import subprocess
import tempfile

from acvi_tf.metrics import paired_lists
from acvi_tf.utils.packages import package_subdir

EXACT = "exact"
FULL = "full"
_FULL_MODULES = ("exact", "stem", "synonym", "paraphrase")
_FULL_WEIGHTS = ("1.0", "0.6", "0.8", "0.6")  # Meteor 1.5's English defaults


class MeteorError(RuntimeError):
    """METEOR could not run (no java, no jar, bad input)."""


def _meteor_dir():
    """pycocoevalcap ships meteor-1.5.jar and its paraphrase table."""
    return package_subdir("pycocoevalcap", "meteor", MeteorError, "pycocoevalcap==1.2")


def meteor_jar():
    """Path of ``pycocoevalcap/meteor/meteor-1.5.jar``."""
    jar = os.path.join(_meteor_dir(), "meteor-1.5.jar")
    if not os.path.isfile(jar):
        raise MeteorError(f"{jar} not found")
    return jar


def paraphrase_table():
    """Path of the English paraphrase table shipped with the jar, or None."""
    path = os.path.join(_meteor_dir(), "data", "paraphrase-en.gz")
    # A Git-LFS pointer or a truncated download is a few hundred bytes, not ~60 MB.
    return path if os.path.isfile(path) and os.path.getsize(path) > 1_000_000 else None


def missing_requirements():
    """None if METEOR can run, else a message saying what is missing."""
    if shutil.which("java") is None:
        return "java is not on PATH (apt-get install default-jre-headless)"
    try:
        meteor_jar()
    except MeteorError as e:
        return str(e)
    return None


def _line(summary):
    if not isinstance(summary, str):
        summary = " ".join(str(s) for s in summary)
    # One segment per line; "|||" is Meteor's field separator in -stdio mode.
    return " ".join(summary.replace("|||", " ").split())


def _parse(text):
    out = {"segments": []}
    for line in text.splitlines():
        m = re.match(r"^Segment (\d+) score:\s+(\S+)", line)
        if m:
            out["segments"].append(float(m.group(2)))
            continue
        for key, label in (("score", "Final score"), ("precision", "Precision"),
                           ("recall", "Recall"), ("fmean", "fMean"),
                           ("fragmentation_penalty", "Fragmentation penalty")):
            m = re.match(rf"^{label}:\s+(\S+)", line)
            if m:
                out[key] = float(m.group(1))
        m = re.match(r"^(Modules|Weights|Parameters|Eval ID):\s+(.*)$", line)
        if m:
            out[m.group(1).lower().replace(" ", "_")] = m.group(2).strip()
    return out


def meteor(hypotheses, references, mode=FULL, multi_ref=False, lang="en", memory="2G"):
    """METEOR 1.5 of ``hypotheses`` against ``references``.

    hypotheses: one str (or list of sentences) per segment.
    references: one per segment in the same form; with ``multi_ref=True`` a list of
      references per segment (the same number for every segment).
    mode: ``"exact"`` (``-m exact``) or ``"full"`` (exact stem synonym paraphrase).

    Returns ``{"score", "precision", "recall", "fmean", "fragmentation_penalty",
    "segments": [per-segment scores], "modules": [...], "weights": [...],
    "parameters": str, "eval_id": str, "mode", "command": str}``; scores are
    fractions (x100 for the papers' tables).
    """
    if mode not in (EXACT, FULL):
        raise ValueError(f"mode must be {EXACT!r} or {FULL!r}, not {mode!r}")
    hypotheses, references = paired_lists(hypotheses, references)
    missing = missing_requirements()
    if missing:
        raise MeteorError(missing)
    refs = [list(r) if multi_ref else [r] for r in references]
    n_refs = {len(r) for r in refs}
    if len(n_refs) != 1 or 0 in n_refs:
        raise ValueError(f"every segment needs the same, non-zero number of references; got {sorted(n_refs)}")
    n_refs = n_refs.pop()

    opts = ["-l", lang, "-norm"]
    if n_refs > 1:
        opts += ["-r", str(n_refs)]
    if mode == EXACT:
        opts += ["-m", "exact"]
    else:
        para = paraphrase_table()
        if para:
            opts += ["-a", para]
        else:
            # Without the table Meteor would fail to start: drop that module.
            opts += ["-m", " ".join(_FULL_MODULES[:3]), "-w", " ".join(_FULL_WEIGHTS[:3])]

    with tempfile.TemporaryDirectory(prefix="acvi_meteor_") as tmp:
        hyp_path = os.path.join(tmp, "hyp.txt")
        ref_path = os.path.join(tmp, "ref.txt")
        with open(hyp_path, "w", encoding="utf-8") as f:
            f.writelines(_line(h) + "\n" for h in hypotheses)
        with open(ref_path, "w", encoding="utf-8") as f:
            for rs in refs:
                f.writelines(_line(r) + "\n" for r in rs)
        cmd = ["java", f"-Xmx{memory}", "-jar", meteor_jar(), hyp_path, ref_path] + opts
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    if r.returncode != 0 or "Final score" not in r.stdout:
        raise MeteorError(f"METEOR failed (exit {r.returncode}): "
                          f"{(r.stderr or r.stdout).strip()[-2000:]}")
    out = _parse(r.stdout)
    out["modules"] = out.get("modules", "").split()
    out["weights"] = [float(w) for w in out.get("weights", "").split()]
    out["mode"] = mode
    out["command"] = " ".join(["java", f"-Xmx{memory}", "-jar", "meteor-1.5.jar",
                               "hyp.txt", "ref.txt"] + [f"'{o}'" if " " in o else o for o in opts])
    if len(out["segments"]) != len(hypotheses):
        raise MeteorError(f"METEOR scored {len(out['segments'])} of {len(hypotheses)} segments")
    return out
