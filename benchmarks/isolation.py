"""Subprocess isolation (``--isolate=yes``): each (size, XLA) group runs in a worker process
of its own, ``python -m benchmarks.bench --_worker SPEC``, so that its memory is returned
when it ends and a crash or an out-of-memory error becomes error records, not the end of
the run."""

import json
import os
import signal
import subprocess
import sys
import tempfile

from benchmarks import REPO_ROOT
from benchmarks.flops import xla_dump_flags
from benchmarks.output import log_stderr, write_json
from benchmarks.profiles import PROFILES
from benchmarks.timing import run_group


def worker(spec_path):
    """``--_worker SPEC``: runs one group and writes its result (the parent reads it)."""
    with open(spec_path) as f:
        spec = json.load(f)
    result = run_group(spec, spec.get("dump_dir"), log_stderr)
    write_json(spec["result"], result)


def spawn(spec, log):
    """Runs a group in a fresh process: its memory (XLA can ask for many GB) and any
    crash stay there. A failed worker becomes error records."""
    with tempfile.TemporaryDirectory(prefix="bench_") as tmp:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        dump_dir = None
        if spec["train"] and spec["xla"] and spec["flops"] != "analytic":
            dump_dir = os.path.join(tmp, "hlo")
            env["XLA_FLAGS"] = xla_dump_flags(env.get("XLA_FLAGS"), dump_dir)
        spec = dict(spec, result=os.path.join(tmp, "result.json"), dump_dir=dump_dir)
        spec_path = os.path.join(tmp, "spec.json")
        write_json(spec_path, spec)
        code = subprocess.run([sys.executable, "-m", "benchmarks.bench", "--_worker", spec_path],
                              cwd=REPO_ROOT, env=env, check=False).returncode
        if os.path.exists(spec["result"]):
            with open(spec["result"]) as f:
                result = json.load(f)
            result["worker_exit_code"] = code
            return result
    why = f"the worker process failed ({_exit_reason(code)})"
    log(f"  {why}")
    size = PROFILES[spec["profile"]].sizes[spec["size"]]
    common = {"size": spec["size"], "xla": spec["xla"], "error": why}
    shape = {"batch": size.batch, "src_len": size.src_len, "tgt_len": size.tgt_len}
    variants = spec["variants"]
    return {"worker_exit_code": code, "flops": {},
            "train": [dict(common, variant=v, **shape) for v in variants] if spec["train"] else [],
            "beam": [dict(common, variant=v) for v in variants] if spec["beam"] else []}


def _exit_reason(code):
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"

