r"""Results JSON -> markdown tables, with the paper's numbers quoted beside ours.

Render from finished runs (each ``--runs`` entry is a model_dir holding
``results.json``, or a folder of such model_dirs)::

    python -m experiments.tables table4 --runs runs/table4 --out results/table4.md
    python -m experiments.tables table4-cpu --runs runs/table4_cpu --out results/table4_cpu.md

Run a whole table (check the data first, train/evaluate every missing run in
turn, then render; finished runs are skipped, so it resumes)::

    python -m experiments.tables run table4 --runs_root runs/table4 --out results/table4.md
    python -m experiments.tables run table4-cpu --runs_root runs/table4_cpu \
        --out results/table4_cpu.md
    python -m experiments.tables run demo --runs_root runs/demo --out results/demo.md
    python -m experiments.tables run table4 --runs_root runs/table4 --dry_run

``run`` stops before training anything, with exit code 2, when a dataset's
files are missing or are partial copies (the mirror holds only a 999-line head
of IWSLT'15 train and 10K Europarl lines of WMT'16): it says what to download
and prints the commands it would run.

The paper's numbers are never mixed into our columns: they sit in their own
column group headed "paper (Table 4)", and our columns are headed with the
profile that produced them ("ours, paper profile", "ours, CPU scale").
"""

import argparse
import glob
import os
import shlex
import subprocess
import sys

from experiments import common

# Table 4 of the paper (BLEU, beam search): (dev, test) per direction and method.
PAPER_TABLE4 = {
    ("en", "vi"): {"soft": (23.21, 25.18), "structured": (16.81, 17.00), "acvi": (24.08, 26.16)},
    ("vi", "en"): {"soft": (20.89, 23.28), "structured": (17.19, 18.08), "acvi": (21.26, 24.47)},
    ("en", "ro"): {"soft": (12.87, 14.40), "structured": (7.04, 7.08), "acvi": (14.15, 15.78)},
    ("ro", "en"): {"soft": (15.87, 15.78), "structured": (11.02, 11.68), "acvi": (18.07, 17.78)},
}
METHODS = {"soft": "Baseline (soft attention)", "structured": "Structured attention",
           "acvi": "ACVI", "copy-source": "Copy the source (floor)"}
LANG_NAMES = {"en": "En", "vi": "Vi", "ro": "Ro", "de": "De"}
DATASET_OF = {("en", "vi"): "iwslt15_en_vi", ("vi", "en"): "iwslt15_en_vi",
              ("en", "ro"): "wmt16_en_ro", ("ro", "en"): "wmt16_en_ro"}
PROFILE_LABELS = {"paper": "ours, paper profile", "cpu": "ours, CPU scale",
                  "smoke": "ours, smoke test"}
SPLIT_NAMES = {"iwslt15_en_vi": ("tst2012", "tst2013"), "wmt16_en_ro": ("newsdev2016",
                                                                        "newstest2016"),
               "multi30k": ("val", "test2016")}

CONFIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")
TABLE4_RUNS = [(f"{d}_{a}", f"table4_{d}_{a}.flags", [])
               for d in ("envi", "vien", "enro", "roen") for a in ("soft", "acvi")]
COPY_BASELINE_ARGS = ["--dataset=multi30k", "--src=en", "--tgt=de", "--mode=copy_baseline"]
TABLE4_CPU_RUNS = [("multi30k_copy", None, COPY_BASELINE_ARGS),
                   ("multi30k_soft", "table4cpu_multi30k_soft.flags", ["--noprogress"]),
                   ("multi30k_acvi", "table4cpu_multi30k_acvi.flags", ["--noprogress"])]
# A few minutes on 2 cores (measured: 2.5-4.6 min per model, depending on load): the
# cpu profile cut to 300 steps on the pairs of <= 12 tokens, a higher learning rate,
# greedy decoding of the first 500 val/test sentences. A demo, not a result.
DEMO_ARGS = ["--train_steps=300", "--max_length=12", "--learning_rate=2e-3", "--eval_every=0",
             "--beam_width=1", "--max_eval_lines=500", "--noprogress"]
DEMO_RUNS = [("multi30k_copy", None, COPY_BASELINE_ARGS + ["--max_eval_lines=500"]),
             ("multi30k_soft", "table4cpu_multi30k_soft.flags", DEMO_ARGS),
             ("multi30k_acvi", "table4cpu_multi30k_acvi.flags", DEMO_ARGS)]
TABLES = {"table4": TABLE4_RUNS, "table4-cpu": TABLE4_CPU_RUNS, "demo": DEMO_RUNS}


# ---------------------------------------------------------------------------
# Reading results
# ---------------------------------------------------------------------------

def find_results(paths):
    """results.json of every run under ``paths`` (a model_dir or a folder of them)."""
    found = []
    for path in paths:
        if os.path.isfile(path):
            candidates = [path]
        elif os.path.exists(os.path.join(path, "results.json")):
            candidates = [os.path.join(path, "results.json")]
        else:
            candidates = sorted(glob.glob(os.path.join(path, "*", "results.json")))
        for c in candidates:
            r = common.load_json(c)
            if "bleu" in r and r.get("task") == "translate":
                r["_path"] = c
                found.append(r)
    return found


def direction_label(src, tgt):
    return f"{LANG_NAMES.get(src, src)}→{LANG_NAMES.get(tgt, tgt)}"


def _profile_label(profile):
    return PROFILE_LABELS.get(profile, f"ours, {profile} profile")


def _hours(seconds):
    if seconds is None:
        return None
    return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def _notes(r):
    notes = []
    if r.get("train_data_partial"):
        notes.append("partial training data")
    if r.get("partial_eval"):
        notes.append(f"first {r['splits']['dev']['sentences']} eval sentences only")
    return notes


class _Footnotes:
    def __init__(self):
        self.items = []
        self._refs = {}

    def add(self, r):
        key = r.get("_path") or id(r)
        if key not in self._refs:
            self._refs[key] = self._add(r)
        return self._refs[key]

    def _add(self, r):
        notes = _notes(r)
        steps = r.get("steps")
        beam = (r.get("decode") or {}).get("beam_width")
        desc = [f"`{r['command']}`"]
        if r.get("train_command") and r["train_command"] != r["command"]:
            desc.append(f"trained by `{r['train_command']}`")
        meta = []
        if steps:
            meta.append(f"{steps:,} steps")
        if r.get("train_wall_time_sec"):
            meta.append(f"train {_hours(r['train_wall_time_sec'])}")
        if r.get("eval_wall_time_sec") is not None:
            meta.append(f"eval {_hours(r['eval_wall_time_sec'])}")
        if beam:
            meta.append("greedy" if beam == 1 else f"beam {beam}")
        meta.extend(notes)
        self.items.append(" — ".join(desc) + (f" ({'; '.join(meta)})" if meta else ""))
        return f"[{len(self.items)}]" + (" †" if notes else "")

    def render(self):
        return "\n".join(f"{i}. {item}" for i, item in enumerate(self.items, 1))


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------

def table4(results):
    """The paper's Table 4 layout: rows = direction x method."""
    results = [r for r in results if (r["src"], r["tgt"]) in PAPER_TABLE4
               and r["dataset"] == DATASET_OF[(r["src"], r["tgt"])]]
    profiles = sorted({r["profile"] for r in results}) or ["paper"]
    headers = ["Direction", "Method"]
    for p in profiles:
        headers += [f"{_profile_label(p)}: dev", f"{_profile_label(p)}: test"]
    headers += ["paper (Table 4): dev", "paper (Table 4): test", "our run"]
    rows, notes = [], _Footnotes()
    for (src, tgt), paper in PAPER_TABLE4.items():
        for method in ("soft", "structured", "acvi"):
            mine = [r for r in results if (r["src"], r["tgt"]) == (src, tgt)
                    and r["system"] == method]
            row = [direction_label(src, tgt), METHODS[method]]
            refs = []
            for p in profiles:
                r = next((x for x in mine if x["profile"] == p), None)
                if r is None:
                    row += [None, None]
                    continue
                row += [r["bleu"].get("dev"), r["bleu"].get("test")]
                refs.append(notes.add(r))
            row += [paper[method][0], paper[method][1], " ".join(refs) or "not run"]
            rows.append(row)
    align = "ll" + "rr" * len(profiles) + "rrl"
    text = [
        "# Table 4: machine translation, BLEU (beam search)",
        "",
        common.markdown_table(headers, rows, align),
        "",
        "Columns headed *ours* are our runs (the profile is in the header); the columns "
        "headed *paper (Table 4)* quote the paper's numbers and are never our results. "
        "dev/test: IWSLT'15 tst2012/tst2013 (tokenized BLEU, sacrebleu `tok:none`), "
        "WMT'16 newsdev2016/newstest2016 (detokenized sacreBLEU 13a). "
        "† = see the note (e.g. trained on a partial copy of the training data: not "
        "comparable with the paper).",
        "",
        "Runs (the command that produced each number):",
        "",
        notes.render() or "(none yet)",
    ]
    sigs = sorted({r.get("signature", "") for r in results if r.get("signature")})
    if sigs:
        text += ["", "sacrebleu signatures: " + "; ".join(f"`{s}`" for s in sigs)]
    return "\n".join(text)


def table4_cpu(results, title="Table 4 at CPU scale: Multi30k En→De, BLEU"):
    """Our CPU-scale stand-in (Multi30k En->De) with the paper's Table 4 gains quoted."""
    results = [r for r in results if r["dataset"] == "multi30k"]
    profiles = sorted({r["profile"] for r in results if r["system"] != "copy-source"}) or ["cpu"]
    # The copy baseline has no model; it belongs to every profile's column group.
    headers = ["Method"]
    for p in profiles:
        lab = _profile_label(p)
        headers += [f"{lab}: val", f"{lab}: test2016", f"{lab}: Δ test vs baseline"]
    headers += ["paper (Table 4, IWSLT'15/WMT'16, full scale): Δ test vs baseline, "
                "En→Vi / Vi→En / En→Ro / Ro→En", "our run"]
    rows, notes = [], _Footnotes()
    for method in ("copy-source", "soft", "acvi"):
        row = [METHODS[method]]
        refs = []
        for p in profiles:
            r = next((x for x in results if x["system"] == method
                      and (x["profile"] == p or method == "copy-source")), None)
            base = next((x for x in results if x["system"] == "soft" and x["profile"] == p), None)
            if r is None:
                row += [None, None, None]
                continue
            delta = None
            if base is not None and method != "copy-source":
                delta = f"{r['bleu']['test'] - base['bleu']['test']:+.2f}"
            row += [r["bleu"].get("dev"), r["bleu"].get("test"), delta]
            refs.append(notes.add(r))
        if method == "copy-source":
            paper = "–"
        else:
            paper = " / ".join(f"{PAPER_TABLE4[d][method][1] - PAPER_TABLE4[d]['soft'][1]:+.2f}"
                               for d in PAPER_TABLE4)
        row += [paper, " ".join(dict.fromkeys(refs)) or "not run"]
        rows.append(row)
    align = "l" + "rrr" * len(profiles) + "ll"
    text = [
        f"# {title}",
        "",
        common.markdown_table(headers, rows, align),
        "",
        "Multi30k (WMT'16 multimodal task 1) En→De, official lowercased tokenized files; "
        "val (1,014) and test2016 (1,000); tokenized BLEU (sacrebleu `tok:none`, no "
        "smoothing). The paper does not report Multi30k: its column quotes the ACVI − "
        "baseline test-BLEU differences of its Table 4 (other datasets, full scale), "
        "for the direction of the effect only; it is not our result.",
        "",
        "Runs (the command that produced each number):",
        "",
        notes.render() or "(none yet)",
    ]
    sigs = sorted({r.get("signature", "") for r in results if r.get("signature")})
    if sigs:
        text += ["", "sacrebleu signatures: " + "; ".join(f"`{s}`" for s in sigs)]
    return "\n".join(text)


RENDER = {"table4": table4, "table4-cpu": table4_cpu,
          "demo": lambda rs: table4_cpu(rs, "Demo: a short Multi30k En→De run, BLEU")}


# ---------------------------------------------------------------------------
# Running a table
# ---------------------------------------------------------------------------

def _read_flagfile(path):
    values = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("--") and "=" in line:
                key, _, value = line[2:].partition("=")
                values[key] = value
    return values


def plan(table, runs_root):
    """[(name, command argv, model_dir, dataset, src, tgt)] for the table's runs."""
    out = []
    for name, flagfile, extra in TABLES[table]:
        model_dir = os.path.join(runs_root, name)
        argv = [sys.executable, "-m", "experiments.translate"]
        settings = {}
        if flagfile:
            path = os.path.relpath(os.path.join(CONFIG_DIR, flagfile))
            argv.append(f"--flagfile={path}")
            settings.update(_read_flagfile(os.path.join(CONFIG_DIR, flagfile)))
        for arg in extra:
            key, _, value = arg[2:].partition("=")
            settings[key] = value
        argv += list(extra) + [f"--model_dir={model_dir}"]
        out.append((name, argv, model_dir, settings.get("dataset", "multi30k"),
                    settings.get("src"), settings.get("tgt"), settings.get("variant", "tok")))
    return out


def _shell(argv):
    return " ".join(["python"] + [shlex.quote(a) for a in argv[1:]])


def _done(model_dir):
    path = os.path.join(model_dir, "results.json")
    return os.path.exists(path) and "bleu" in common.load_json(path)


def run_table(table, runs_root, out, dry_run=False, stream=None):
    from experiments import translate  # imports TensorFlow; only needed here
    stream = stream or sys.stdout
    runs = plan(table, runs_root)
    missing = {}
    for _, _, _, dataset, src, tgt, variant in runs:
        key = (dataset, variant)
        if key in missing:
            continue
        complete, lines = translate.data_status(dataset, src, tgt, variant)
        missing[key] = None if complete else lines
    bad = {k: v for k, v in missing.items() if v is not None}
    print(f"{table}: {len(runs)} runs under {runs_root}", file=stream)
    for name, argv, model_dir, *_ in runs:
        state = "done" if _done(model_dir) else "to run"
        print(f"  [{state}] {_shell(argv)}", file=stream)
    if bad:
        print("", file=stream)
        for (dataset, _), lines in bad.items():
            print(f"STOP: the {dataset} data is missing or partial:", file=stream)
            print("\n".join(lines), file=stream)
            print(f"Download it: {translate.how_to_get(dataset)}", file=stream)
            print("", file=stream)
        print("Nothing was run. Once the files are in place (the mirror via ACVI_DATA_MIRROR, "
              "or the data dir via ACVI_DATA_DIR), rerun; the commands above are what it "
              "will run.", file=stream)
        return 2
    if dry_run:
        return 0
    for name, argv, model_dir, *_ in runs:
        if _done(model_dir):
            continue
        print(f"\n=== {name}: {_shell(argv)}", file=stream, flush=True)
        code = subprocess.call(argv)
        if code != 0:
            print(f"{name} failed (exit code {code}); the table is not written", file=stream)
            return code
    text = RENDER[table](find_results([runs_root]))
    common.write_text(out, text)
    print(f"\n{text}\n\nwritten to {out}", file=stream)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m experiments.tables",
                                     description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in RENDER:
        p = sub.add_parser(name, help=f"render the {name} table from run directories")
        p.add_argument("--runs", nargs="+", required=True,
                       help="model_dirs with results.json, or folders of them")
        p.add_argument("--out", help="markdown file to write (default: print only)")
    p = sub.add_parser("run", help="check the data, run every missing run, render the table")
    p.add_argument("table", choices=sorted(TABLES))
    p.add_argument("--runs_root", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--dry_run", action="store_true",
                   help="check the data and print the commands; run nothing")
    args = parser.parse_args(argv)
    if args.command == "run":
        return run_table(args.table, args.runs_root, args.out, args.dry_run)
    results = find_results(args.runs)
    if not results:
        parser.error(f"--runs: no results.json of a translation run under {args.runs}")
    text = RENDER[args.command](results)
    if args.out:
        common.write_text(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
