"""The record every small benchmark writes (``acvi_ablation``, ``op_profile``, ``rng_xla``):
what ran (command, commit, date), how loaded the machine was (``benchmarks.load``), JSON
with a markdown report beside it."""

import datetime
import json
import os
import sys

from acvi_tf.utils.provenance import code_version
from benchmarks import REPO_ROOT
from benchmarks.load import is_idle, load_average


def header(module, argv, load_start, others_cores):
    """The fields every record starts with; ``argv`` None means ``sys.argv[1:]``."""
    return {"code": code_version(),
            "command": f"python -m {module} " + " ".join(sys.argv[1:] if argv is None else argv),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "load_start": load_start, "load_end": load_average(),
            "others_cores_during_timing": others_cores, "idle": is_idle(others_cores)}


def preamble(result, title, while_="timing"):
    """The markdown's first lines: the title, when, which commit, the load, and a warning
    when the machine was not idle."""
    code = result["code"]
    if isinstance(code, dict):
        code = code.get("commit", "?")[:7] + (" + uncommitted changes" if code.get("dirty") else "")
    lines = [f"# {title}", "",
             f"{result['date']}; commit {code}; load average {result['load_start']} at the "
             f"start, {result['load_end']} at the end; other processes used "
             f"{result['others_cores_during_timing']} cores while {while_}.", ""]
    if not result["idle"]:
        lines += ["**The machine was not idle: these numbers are not results.**", ""]
    return lines


def write(out, result, markdown):
    """Writes ``result`` as JSON to ``out`` (relative to the repository unless absolute) and
    ``markdown`` beside it (``.md``), and prints the markdown."""
    out = os.path.join(REPO_ROOT, out) if not os.path.isabs(out) else out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.splitext(out)[0] + ".md", "w") as f:
        f.write(markdown)
    print(markdown)
