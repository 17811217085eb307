"""The README's speed figures (issue 35), generated from the benchmarks' result files.

The block ``<!-- BEGIN generated: speed -->`` of README.md shows, for each figure issue 35
sets a target for, the ratio measured in one run, the command that measured it (rebuilt
from the file's own ``argv``), the machine, commit and load of that run. The figures come
from four files a benchmark writes and a researcher copies to ``results/`` after an idle
run:

- ``results/bench_peers.json``: ``make bench-peers`` (fp32 train step and beam search);
- ``results/bench_peers_bf16.json``: the same with our ``--precision=mixed_bfloat16``;
- ``results/bench_peers_train.json``: ``make bench-peers-train`` (end to end, defaults);
- ``results/bench_acvi_soft.json``: ``python -m benchmarks.bench --profile=full
  --variants=soft,acvi ...`` (ACVI's step time over soft attention's).

:mod:`experiments.readme_results` writes and checks the block with the tables' blocks.
"""

import json
import os
import shlex

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = {"peers": "bench_peers", "peers_bf16": "bench_peers_bf16",
           "train": "bench_peers_train", "acvi": "bench_acvi_soft"}
# Issue 35's targets: (at least, value) for a speed ratio, (at most, value) for a cost.
TARGETS = {"beam": (">=", 1.2), "train": (">=", 1.2), "train_bf16": (">=", 1.5),
           "e2e": (">=", 1.2), "acvi": ("<=", 1.10)}


def _load(name, root):
    path = os.path.join(root, "results", f"{name}.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as e:
        raise SystemExit(f"{path}: not valid JSON ({e}); re-run its benchmark")


def _command(key, data):
    """The command a researcher types: the make target with the run's other arguments in
    PEERS_ARGS for the peer benchmarks, the module and its argv for bench.py."""
    if key == "train":
        argv = shlex.split(data.get("command", ""))[3:]
    else:
        argv = list(data.get("argv", []))
    if key == "acvi":
        return " ".join(["python", "-m", "benchmarks.bench"] + [shlex.quote(a) for a in argv])
    if "--peer_python" in argv:  # the make target passes its own venv's python
        i = argv.index("--peer_python")
        del argv[i:i + 2]
    target = "make bench-peers-train" if key == "train" else "make bench-peers"
    return target + (f' PEERS_ARGS="{" ".join(argv)}"' if argv else "")


def _met(target, value):
    sign, bound = TARGETS[target]
    ok = value >= bound if sign == ">=" else value <= bound
    return f"{sign} {bound:.2f} ({'met' if ok else 'not met'})"


def _acvi_ratios(data):
    """{(size, xla): ACVI's median step time / soft attention's}, from bench.py's rows."""
    return {(row["size"], row["xla"]): row["ratio_to_soft"] for row in data.get("train", [])
            if row.get("variant") == "acvi" and row.get("ratio_to_soft") is not None}


def _provenance(key, data):
    if key == "train":
        date, commit = data.get("date", ""), data.get("code", {})
        machine = "(the machine of results/bench_peers.json)"
        others = data.get("others_cores_during_timing")
    else:
        date = data.get("date") or data.get("machine", {}).get("date", "")
        commit, machine = data.get("code", {}), data.get("machine", {}).get("cpu_model", "?")
        others = data.get("load_average", {}).get("others_cores_during_timing")
    sha = (commit.get("commit") or "?")[:7] + (" + uncommitted changes" if commit.get("dirty")
                                               else "")
    load = "" if others is None else f"; other processes {others:.3f} cores while timing"
    return f"`results/{SOURCES[key]}.json`: {date[:16].replace('T', ' ')} UTC, " \
           f"commit {sha}, {machine}{load}"


def speed(root=REPO_ROOT):
    """The generated lines: a table of issue 35's figures, then each source's provenance."""
    data = {k: _load(name, root) for k, name in SOURCES.items()}
    rows = []
    if data["peers"]:
        ratios = data["peers"]["ratios"]
        rows += [("beam search, ours / OpenNMT-tf sentences/s, fp32", "peers",
                  f"{ratios['sentences_per_s']:.2f}", _met("beam", ratios["sentences_per_s"])),
                 ("training step, ours / OpenNMT-tf tokens/s, fp32", "peers",
                  f"{ratios['tokens_per_s']:.2f}", _met("train", ratios["tokens_per_s"]))]
    if data["peers_bf16"]:
        ratios = data["peers_bf16"]["ratios"]
        rows += [("training step, ours bf16 / OpenNMT-tf fp32 tokens/s", "peers_bf16",
                  f"{ratios['tokens_per_s']:.2f}", _met("train_bf16", ratios["tokens_per_s"])),
                 ("beam search, ours bf16 / OpenNMT-tf fp32 sentences/s", "peers_bf16",
                  f"{ratios['sentences_per_s']:.2f}", "–")]
    if data["train"]:
        sides = data["train"]["sides"]
        ratio = sides["ours"]["target_tokens_per_s"] / sides["opennmt-tf"]["target_tokens_per_s"]
        rows.append(("end-to-end Multi30k training with our defaults, tokens/s ratio", "train",
                     f"{ratio:.2f}", _met("e2e", ratio)))
    if data["acvi"]:
        ratios = _acvi_ratios(data["acvi"])
        for size, label in (("translation", "MT size"), ("summarization", "summarization size")):
            pair = [ratios.get((size, xla)) for xla in (False, True)]
            if any(r is None for r in pair):
                continue
            verdicts = " / ".join("met" if r <= TARGETS["acvi"][1] else "not met" for r in pair)
            rows.append((f"ACVI at its defaults (the paper's ELBO, MC KL) / soft attention step "
                         f"time, {label}, "
                         f"XLA off / on", "acvi", " / ".join(f"{r:.2f}" for r in pair),
                         f"<= {TARGETS['acvi'][1]:.2f} ({verdicts})"))
    if not rows:
        return ["No benchmark results in results/ yet: run `make bench-peers` on an idle "
                "machine and copy bench_results/bench_peers.{json,md} there."]
    lines = ["| figure | value | target (issue 35) | command |", "|---|---:|:--|:--|"]
    lines += [f"| {label} | {value} | {target} | `{_command(key, data[key])}` |"
              for label, key, value, target in rows]
    used = [k for k in SOURCES if data[k] and any(r[1] == k for r in rows)]
    lines += ["", "Generated from the benchmarks' own result files (one idle run each; each "
              "ratio measured within one run):"]
    lines += [f"- {_provenance(k, data[k])}" for k in used]
    return lines
