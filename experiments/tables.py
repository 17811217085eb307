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
# Soft attention, structured attention and ACVI as the journal version (papers/001_*)
# prints them (soft and ACVI are the same in the ICLR version; its structured row is
# 23.81/25.00, 21.19/23.08, 14.04/15.08, 17.02/17.68); variational attention, VED and
# the Transformer are rows of the ICLR version's Table 4 only (papers/000_*).
PAPER_TABLE4 = {
    ("en", "vi"): {"soft": (23.21, 25.18), "structured": (16.81, 17.00),
                   "variational": (23.48, 25.54), "ved": (24.47, 25.31),
                   "acvi": (24.08, 26.16), "transformer": (24.34, 25.68)},
    ("vi", "en"): {"soft": (20.89, 23.28), "structured": (17.19, 18.08),
                   "variational": (21.13, 23.61), "ved": (21.32, 23.80),
                   "acvi": (21.26, 24.47), "transformer": (21.40, 23.92)},
    ("en", "ro"): {"soft": (12.87, 14.40), "structured": (7.04, 7.08),
                   "variational": (14.02, 15.51), "ved": (12.84, 12.76),
                   "acvi": (14.15, 15.78), "transformer": (13.90, 15.30)},
    ("ro", "en"): {"soft": (15.87, 15.78), "structured": (11.02, 11.68),
                   "variational": (17.49, 17.40), "ved": (15.18, 15.56),
                   "acvi": (18.07, 17.78), "transformer": (17.66, 17.91)},
}
# Table 4's rows, in the paper's order (the ICLR version's: its Transformer row last).
TABLE4_METHODS = ("soft", "structured", "variational", "ved", "acvi", "transformer")
METHODS = {"soft": "Baseline (soft attention)", "structured": "Structured attention",
           "variational": "Variational attention (Deng et al. 2018)",
           "ved": "VED (Bahuleyan et al. 2018)", "acvi": "ACVI",
           "transformer": "Transformer (Vaswani et al. 2017)",
           "copy-source": "Copy the source (floor)"}
LANG_NAMES = {"en": "En", "vi": "Vi", "ro": "Ro", "de": "De"}
DATASET_OF = {("en", "vi"): "iwslt15_en_vi", ("vi", "en"): "iwslt15_en_vi",
              ("en", "ro"): "wmt16_en_ro", ("ro", "en"): "wmt16_en_ro"}
PROFILE_LABELS = {"paper": "ours, paper profile", "cpu": "ours, CPU scale",
                  "smoke": "ours, smoke test"}
SPLIT_NAMES = {"iwslt15_en_vi": ("tst2012", "tst2013"), "wmt16_en_ro": ("newsdev2016",
                                                                        "newstest2016"),
               "multi30k": ("val", "test2016")}

CONFIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")
# One run per row and direction (experiments/configs/table4_<direction>_<method>.flags):
# soft and ACVI first (the paper's comparison), then the baselines.
TABLE4_DIRECTIONS = ("envi", "vien", "enro", "roen")
TABLE4_BASELINES = ("structured", "variational", "ved", "transformer")
TABLE4_RUNS = [(f"{d}_{a}", f"table4_{d}_{a}.flags", [])
               for d in TABLE4_DIRECTIONS for a in ("soft", "acvi")] + [
    (f"{d}_{a}", f"table4_{d}_{a}.flags", []) for a in TABLE4_BASELINES
    for d in TABLE4_DIRECTIONS]
COPY_BASELINE_ARGS = ["--dataset=multi30k", "--src=en", "--tgt=de", "--mode=copy_baseline"]
TABLE4_CPU_RUNS = [("multi30k_copy", None, COPY_BASELINE_ARGS)] + [
    (f"multi30k_{a}", f"table4cpu_multi30k_{a}.flags", ["--noprogress"])
    for a in ("soft", "acvi") + TABLE4_BASELINES]
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

def find_results(paths, task="translate", key="bleu"):
    """results.json of every ``task`` run (holding ``key``) under ``paths`` (a model_dir
    or a folder of them)."""
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
            if key in r and r.get("task") == task:
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


def _not_run(system):
    """The "our run" cell of a row without a result: "not run" when the row's system is
    registered here (a flagfile runs it), else "not implemented here"."""
    if system in ("copy-source", "lead-3"):
        return "not run"
    return "not run" if system in common.system_names() else "not implemented here"


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
        for method in TABLE4_METHODS:
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
            row += [paper[method][0], paper[method][1], " ".join(refs) or _not_run(method)]
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
        "Soft attention, structured attention and ACVI quote the journal version; "
        "variational attention, VED and the Transformer are rows of the ICLR version only "
        "(which reports structured attention at 23.81/25.00, 21.19/23.08, 14.04/15.08 "
        "and 17.02/17.68). "
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
    for method in ("copy-source",) + TABLE4_METHODS:
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
        row += [paper, " ".join(dict.fromkeys(refs)) or _not_run(method)]
        rows.append(row)
    align = "l" + "rrr" * len(profiles) + "ll"
    text = [
        f"# {title}",
        "",
        common.markdown_table(headers, rows, align),
        "",
        "Multi30k (WMT'16 multimodal task 1) En→De, official lowercased tokenized files; "
        "val (1,014) and test2016 (1,000); tokenized BLEU (sacrebleu `tok:none`, no "
        "smoothing). The paper does not report Multi30k: its column quotes each method's "
        "test-BLEU difference to the baseline in its Table 4 (other datasets, full scale), "
        "for the direction of the effect only; it is not our result (structured "
        "attention: the journal version's numbers).",
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
# Table 3: video captioning on MSVD (experiments/caption.py)
# ---------------------------------------------------------------------------

# Table 3 (raw scores, as printed): (val, test). SA, structured and ACVI are in every
# version of the paper; variational attention (Deng et al. 2018) and VED (Bahuleyan
# et al. 2018) rows are from the later version (papers/003_*).
PAPER_TABLE3 = {
    "soft": {"ROUGE-L": (0.5628, 0.5701), "CIDEr": (0.4575, 0.421)},
    "structured": {"ROUGE-L": (0.5804, 0.5712), "CIDEr": (0.5071, 0.4283)},
    "variational": {"ROUGE-L": (0.5809, 0.5716), "CIDEr": (0.5103, 0.4289)},
    "ved": {"ROUGE-L": (0.5839, 0.5749), "CIDEr": (0.5421, 0.4298)},
    "acvi": {"ROUGE-L": (0.5968, 0.5766), "CIDEr": (0.6039, 0.4375)},
}
CAPTION_METHODS = {
    "soft": "SA (soft attention)", "structured": "Structured attention",
    "variational": "Variational attention (Deng et al. 2018)",
    "ved": "VED (Bahuleyan et al. 2018)",
    "gaussian": "Gaussian variational attention (Bahuleyan et al. 2018)", "acvi": "ACVI"}
# Our columns per run group: (metric, split).
TABLE3_COLUMNS = (("ROUGE-L", "val"), ("ROUGE-L", "test"), ("CIDEr-D", "val"),
                  ("CIDEr-D", "test"), ("BLEU-4", "test"), ("METEOR", "test"))
SYNTHETIC_NOTE = (
    "> **WARNING: SYNTHETIC FEATURES.** Every column group marked *SYNTHETIC features* "
    "was produced from random vectors (`--synthetic_features`), not from any video. "
    "Those numbers only show that the pipeline (features → training → beam search → "
    "coco-caption scores) runs end to end; they say NOTHING about the paper or about "
    "the attention variants.")


def _caption_group(r):
    label = _profile_label(r["profile"])
    if r.get("synthetic_features"):
        return f"{label}, SYNTHETIC features"
    if not r.get("pretrained_features"):
        return f"{label}, random-CNN features"
    return label


def table3(results, title="Table 3: video captioning on MSVD (Youtube2Text)"):
    """The paper's Table 3 rows (methods), our runs grouped by profile and feature kind."""
    groups = sorted({_caption_group(r) for r in results}) or [_profile_label("paper")]
    headers = ["Method"]
    for g in groups:
        headers += [f"{g}: {m} {s}" for m, s in TABLE3_COLUMNS]
    headers += ["paper (Table 3): ROUGE-L val", "paper (Table 3): ROUGE-L test",
                "paper (Table 3): CIDEr val", "paper (Table 3): CIDEr test", "our run"]
    ours = sorted({r["system"] for r in results} - set(PAPER_TABLE3))
    rows, notes = [], _Footnotes()
    for method in list(PAPER_TABLE3) + ours:
        row, refs = [CAPTION_METHODS.get(method, method)], []
        for g in groups:
            r = next((x for x in results if x["system"] == method
                      and _caption_group(x) == g), None)
            if r is None:
                row += [None] * len(TABLE3_COLUMNS)
                continue
            for metric, split in TABLE3_COLUMNS:
                v = r["scores"].get(split, {}).get(metric)
                row.append(None if v is None else f"{v:.4f}")
            # The translation footnote's partial-eval note reads BLEU fields.
            ref = notes.add(dict(r, partial_eval=False))
            if r.get("partial_eval"):
                ref += " (first clips only)"
            refs.append(ref + (" §" if r.get("synthetic_features") else ""))
        paper = PAPER_TABLE3.get(method)
        row += (list(paper["ROUGE-L"]) + list(paper["CIDEr"])) if paper else [None] * 4
        row.append(" ".join(refs) or _not_run(method))
        rows.append(row)
    rows = [[f"{c:.4f}" if isinstance(c, float) else c for c in row] for row in rows]
    text = [f"# {title}", ""]
    if any(r.get("synthetic_features") for r in results):
        text += [SYNTHETIC_NOTE, ""]
    text += [
        common.markdown_table(headers, rows, "l" + "r" * (len(headers) - 2) + "l"),
        "",
        "Scores are raw (0-1), as Table 3 prints them: pycocoevalcap ROUGE-L and CIDEr-D "
        "(the coco-caption \"CIDEr\"), BLEU-4 and METEOR 1.5, one beam-search caption per "
        "clip against all its references, over the whole split (val: 100 clips; test: the "
        "paper's last 600, or S2VT's 670 with --split_scheme=s2vt). Columns headed *ours* "
        "are our runs; the columns headed *paper (Table 3)* quote the paper and are never "
        "our results. § = synthetic features (not results). Gaussian variational attention "
        "is the attention-level latent of Bahuleyan et al., not their VED row.",
        "",
        "Runs (the command that produced each number):",
        "",
        notes.render() or "(none yet)",
    ]
    return "\n".join(text)


# Extra args per table on top of the flagfiles (experiments/configs/table3_*.flags).
# Table 3's rows (VED and variational attention: the ICLR and later versions), and
# Gaussian variational attention, which is not a row of it.
TABLE3_METHODS = ("soft", "structured", "variational", "ved", "gaussian", "acvi")
TABLE3_RUNS = [(a, f"table3_{a}.flags", ["--noprogress"]) for a in TABLE3_METHODS]
TABLE3_CPU_RUNS = [(a, f"table3_{a}.flags", ["--profile=cpu", "--noprogress"])
                   for a in TABLE3_METHODS]
# Minutes on 2 cores: real captions, SYNTHETIC features, a small model, greedy val
# decoding during training and beam 5 at the end (at least 4 words: an under-trained
# model's beam otherwise prefers the empty caption). A test of the path, not a result.
TABLE3_SMOKE_ARGS = ["--profile=smoke", "--features=", "--synthetic_features",
                     "--train_steps=300", "--embed_dim=32", "--encoder_units=32",
                     "--decoder_units=64", "--attention_units=32", "--head_units=64",
                     "--batch_size=32", "--learning_rate=5e-3", "--eval_every=0",
                     "--checkpoint_every=300", "--log_every=50", "--beam_width=5",
                     "--decode_max_length=20", "--min_length=4", "--noprogress"]
TABLE3_SMOKE_RUNS = [(a, f"table3_{a}.flags", TABLE3_SMOKE_ARGS) for a in ("soft", "acvi")]
CAPTION_TABLES = ("table3", "table3-cpu", "table3-smoke")
TABLES.update({"table3": TABLE3_RUNS, "table3-cpu": TABLE3_CPU_RUNS,
               "table3-smoke": TABLE3_SMOKE_RUNS})
RENDER.update({
    "table3": table3,
    "table3-cpu": lambda rs: table3(rs, "Table 3 at CPU scale: video captioning on MSVD"),
    "table3-smoke": lambda rs: table3(rs, "Table 3 smoke run: MSVD captions, SYNTHETIC "
                                          "features (not results)")})


# ---------------------------------------------------------------------------
# Tables 1, 2 and 5: summarization (experiments/summarize.py)
# ---------------------------------------------------------------------------

# Table 1 (ROUGE-1, -2, -L F1; METEOR exact, full), the rows we can produce, keyed
# (system, head, coverage, vocab size); the lead-3 row is See et al.'s.
PAPER_TABLE1 = [
    (("soft", "softmax", False, 150_000), "seq2seq with SA (150K vocabulary)",
     (30.49, 11.17, 28.08, 11.65, 12.86)),
    (("soft", "softmax", False, 50_000), "seq2seq with SA (50K vocabulary)",
     (31.33, 11.81, 28.83, 12.03, 13.20)),
    (("soft", "pointer", False, None), "pointer-generator (SA)", (36.44, 15.66, 33.42, 15.35, 16.65)),
    (("soft", "pointer", True, None), "pointer-generator + coverage (SA)",
     (39.53, 17.28, 36.38, 17.32, 18.72)),
    (("structured", "pointer", False, None), "pointer-generator + structured attention",
     (36.72, 15.84, 33.64, 15.43, 16.87)),
    (("structured", "pointer", True, None), "pointer-generator + structured attention + coverage",
     (40.12, 17.61, 36.74, 17.38, 18.93)),
    (("acvi", "pointer", False, None), "pointer-generator + ACVI", (39.96, 17.41, 36.40, 16.68, 17.84)),
    (("acvi", "pointer", True, None), "pointer-generator + ACVI + coverage",
     (42.71, 19.24, 39.05, 18.47, 20.09)),
    (("lead-3", None, False, None), "lead-3 baseline", (40.34, 17.70, 36.57, 20.48, 22.21)),
    # Rows of the ICLR version's Table 1 only (papers/000_*; the same in papers/003_*
    # but the Transformer's); its other rows have the journal version's numbers.
    (("transformer", "softmax", False, None), "Transformer (ICLR version)",
     (24.40, 5.89, 17.60, 10.38, 10.72)),
    (("variational", "pointer", True, None),
     "pointer-generator + coverage: variational attention (ICLR version)",
     (40.04, 17.37, 36.45, 17.14, 18.66)),
    (("ved", "pointer", True, None), "pointer-generator + coverage: VED (ICLR version)",
     (41.28, 18.05, 38.12, 17.63, 18.87)),
]
# Table 2 (pointer-generator + coverage): rates as printed (read as percentages);
# variational attention and VED from the ICLR version.
PAPER_TABLE2 = {"soft": (0.05, 1.16), "structured": (0.05, 1.18), "variational": (0.05, 1.18),
                "ved": (0.12, 1.21), "acvi": (0.38, 1.25)}
# Table 5 of the ICLR version (DUC2004, ROUGE-1/2/L recall at 75 bytes).
PAPER_TABLE5 = {"soft": ("SA", (27.02, 7.44, 22.69)),
                "variational": ("Variational attention", (27.65, 7.58, 23.50)),
                "ved": ("VED", (30.68, 9.97, 27.02)), "acvi": ("ACVI", (32.09, 10.88, 28.14))}
SUMMARY_SCORES = ("rouge_1", "rouge_2", "rouge_l")


def _summary_rows(results):
    """(row key, scores dict, run) for every Table 1 row our runs give: each coverage
    run gives a row without coverage (``no_coverage``) and one with it."""
    rows = []
    for r in results:
        if r["system"] == "lead-3":
            rows.append((("lead-3", None, False, None), r, r))
            continue
        system = _summary_system(r)
        vocab = r.get("vocab_size") if r.get("head") == "softmax" else None
        if r.get("no_coverage"):
            rows.append(((system, r["head"], False, vocab), r["no_coverage"], r))
        rows.append(((system, r["head"], bool(r.get("coverage")), vocab), r, r))
    return rows


def _summary_system(r):
    """The row system of a summarization run: ``system`` as experiments.summarize writes
    it (the variant, latent or architecture; softmax-head runs carry a "seq2seq-"
    prefix), not ``attention`` (soft for VED and the Transformer too)."""
    system = r.get("system") or r.get("attention")
    return system[len("seq2seq-"):] if system.startswith("seq2seq-") else system


def _summary_notes(r):
    notes = []
    if r.get("partial_eval") and r.get("test_articles"):
        notes.append(f"first {r['test_articles']:,} test articles")
    if r.get("train_data_partial"):
        notes.append("partial training data")
    return notes


def _match(key, want):
    return key[:3] == want[:3] and (want[3] is None or key[3] == want[3])


def table1(results, title="Table 1: abstractive summarization on CNN/DailyMail"):
    """Table 1's rows; ROUGE F1 and METEOR of our runs by profile; Table 2 below it."""
    rows_ours = _summary_rows(results)
    profiles = sorted({r["profile"] for _, _, r in rows_ours if r["system"] != "lead-3"}) \
        or ["paper"]
    metrics = ("R-1", "R-2", "R-L", "METEOR exact", "METEOR full")
    headers = ["Method"]
    for p in profiles:
        headers += [f"{_profile_label(p)}: {m}" for m in metrics]
    headers += [f"paper (Table 1): {m}" for m in metrics] + ["our run"]
    rows, notes = [], _Footnotes()
    for key, name, paper in PAPER_TABLE1:
        row, refs = [name], []
        for p in profiles:
            hit = next(((s, r) for k, s, r in rows_ours if _match(k, key)
                        and (r["profile"] == p or r["system"] == "lead-3")), None)
            if hit is None:
                row += [None] * len(metrics)
                continue
            s, r = hit
            meteor = s.get("meteor") or {}
            row += [s["rouge"][k] for k in SUMMARY_SCORES] + [meteor.get("exact"),
                                                             meteor.get("full")]
            ref = notes.add(dict(r, partial_eval=False, splits={}))
            extra = _summary_notes(r)
            if s is not r:
                extra.append(f"at step {s.get('steps'):,}, before coverage")
            refs.append(ref + (f" ({'; '.join(extra)})" if extra else ""))
        row += list(paper) + [" ".join(dict.fromkeys(refs)) or _not_run(key[0])]
        rows.append(row)
    table2_rows = []
    for system, (nw, oov) in PAPER_TABLE2.items():
        r = next((x for x in results if x["system"] != "lead-3"
                  and _summary_system(x) == system
                  and x.get("head") == "pointer" and x.get("novelty")), None)
        ours = [r["novelty"]["novel_word_percent"], r["novelty"]["oov_adoption_percent"]] \
            if r else [None, None]
        table2_rows.append([METHODS.get(system, system)] + ours + [nw, oov,
                           notes.add(dict(r, partial_eval=False, splits={})) if r
                           else _not_run(system)])
    text = [
        f"# {title}",
        "",
        common.markdown_table(headers, rows, "l" + "r" * (len(headers) - 2) + "l"),
        "",
        "ROUGE-1/2/L F1 from the official ROUGE-1.5.5 (See et al.'s options `-c 95 -2 -1 -U "
        "-r 1000 -n 4 -w 1.2 -a -m`, one sentence per line); METEOR 1.5 in exact mode and "
        "in full mode (exact, stem, synonym, paraphrase). Columns headed *ours* are our "
        "runs; *paper (Table 1)* quotes the paper and is never our result. A coverage run "
        "gives two rows: the model at the end of the last phase (before coverage) and the "
        "final one. CPU-scale runs train on a 39,227-pair partial copy with reduced sizes "
        "and are not comparable with the paper's numbers; the local test chunks are the "
        "first 4,000 of 11,490 test articles (mostly CNN).",
        "",
        "## Table 2: novel words and OOV adoption (pointer-generator + coverage)",
        "",
        common.markdown_table(
            ["Method", "ours: novel words %", "ours: OOV adoption %",
             "paper (Table 2): novel words", "paper (Table 2): OOV adoption", "our run"],
            table2_rows, "lrrrrl"),
        "",
        "Novel words: generated tokens absent from the full article; OOV adoption: generated "
        "tokens that are article words outside the vocabulary (copied by the pointer); both "
        "pooled over the test summaries, in percent (`acvi_tf/metrics/novelty.py`). The "
        "paper does not define them; its numbers are read as percentages.",
        "",
        "Runs (the command that produced each number):",
        "",
        notes.render() or "(none yet)",
    ]
    return "\n".join(text)


def table5(results, title="Table 5: DUC2004 with CNN/DailyMail-trained models"):
    """DUC2004 transfer: ROUGE-1/2/L recall at 75 bytes, ours beside the paper's."""
    results = [r for r in results if r.get("duc2004")]
    profiles = sorted({r["profile"] for r in results}) or ["paper"]
    headers = ["Model"]
    for p in profiles:
        headers += [f"{_profile_label(p)}: R-{m}" for m in ("1", "2", "L")]
    headers += ["paper (Table 5): R-1", "paper (Table 5): R-2", "paper (Table 5): R-L",
                "our run"]
    rows, notes = [], _Footnotes()
    systems = list(PAPER_TABLE5) + sorted({r["system"] for r in results} - set(PAPER_TABLE5))
    for system in systems:
        name, paper = PAPER_TABLE5.get(system, (METHODS.get(system, system), (None,) * 3))
        row, refs = [name], []
        for p in profiles:
            r = next((x for x in results if x["system"] == system and x["profile"] == p), None)
            if r is None:
                row += [None] * 3
                continue
            row += [r["duc2004"][k] for k in SUMMARY_SCORES]
            refs.append(notes.add(dict(r, command=r["duc2004"]["command"],
                                       train_command=r.get("train_command"),
                                       partial_eval=False, splits={})))
        rows.append(row + list(paper) + [" ".join(refs) or _not_run(system)])
    return "\n".join([
        f"# {title}",
        "",
        common.markdown_table(headers, rows, "l" + "r" * (len(headers) - 2) + "l"),
        "",
        "ROUGE-1/2/L recall against the 4 references, Rush et al.'s options `-c 95 -r 1000 "
        "-n 2 -w 1.2 -a -m -b 75` (first 75 bytes of each summary). The models are the "
        "pointer-generator + coverage runs of Table 1 (profile in the header), decoding the "
        "500 first sentences of DUC2004. *paper (Table 5)* quotes the ICLR version.",
        "",
        "Runs (the command that produced each number):",
        "",
        notes.render() or "(none yet)",
    ])


SUMMARY_TABLES = ("table1", "table1-cpu", "table5", "lead3")
# The baselines' runs (experiments/configs/table1_<name>.flags, table1_cpu_<name>.flags).
TABLE1_BASELINES = ("pg_structured", "pg_variational", "pg_ved", "transformer")
TABLE1_RUNS = [("lead3", None, ["--mode=lead3", "--profile=paper"])] + [
    (n, f"table1_{n}.flags", ["--noprogress"])
    for n in ("pg_soft", "pg_acvi", "seq2seq_50k", "seq2seq_150k") + TABLE1_BASELINES]
TABLE1_CPU_RUNS = [("lead3", None, ["--mode=lead3", "--profile=cpu"])] + [
    (n, f"table1_cpu_{n}.flags", ["--noprogress"])
    for n in ("pg_soft", "pg_acvi") + TABLE1_BASELINES]
# make table5 decodes DUC2004 with the pointer-generator runs under --runs_root: Table 5's
# rows (ICLR version) SA, variational attention, VED and ACVI.
TABLE5_RUNS = [(n, "table5_duc2004.flags", [])
               for n in ("pg_soft", "pg_variational", "pg_ved", "pg_acvi")]
TABLES.update({"table1": TABLE1_RUNS, "table1-cpu": TABLE1_CPU_RUNS, "table5": TABLE5_RUNS,
               "lead3": [("lead3", None, ["--mode=lead3", "--profile=paper"])]})
RENDER.update({
    "table1": table1,
    "table1-cpu": lambda rs: table1(rs, "Table 1 at CPU scale: abstractive summarization "
                                        "on CNN/DailyMail"),
    "table5": table5,
    "lead3": lambda rs: table1(rs, "The lead-3 baseline on the local CNN/DailyMail test "
                                   "chunks")})


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


def plan_module_runs(table, runs_root, module):
    """[(name, argv, model_dir, settings)] of ``TABLES[table]`` run by the CLI ``module``;
    ``settings`` are the flagfile's and the extra args' ``--key=value`` pairs (bare
    ``--flag`` / ``--noflag`` read as "true" / "false")."""
    out = []
    for name, flagfile, extra in TABLES[table]:
        settings = {}
        argv = [sys.executable, "-m", module]
        if flagfile:
            argv.append(f"--flagfile={os.path.relpath(os.path.join(CONFIG_DIR, flagfile))}")
            settings.update(_read_flagfile(os.path.join(CONFIG_DIR, flagfile)))
        for arg in extra:
            key, sep, value = arg[2:].partition("=")
            settings[key] = value if sep else ("false" if key.startswith("no") else "true")
        model_dir = os.path.join(runs_root, name)
        out.append((name, argv + list(extra) + [f"--model_dir={model_dir}"], model_dir, settings))
    return out


def _shell(argv):
    return " ".join(["python"] + [shlex.quote(a) for a in argv[1:]])


def _done(model_dir):
    path = os.path.join(model_dir, "results.json")
    return os.path.exists(path) and "bleu" in common.load_json(path)


def execute_runs(runs, stream, done=None):
    """Runs, in order, the planned runs not done yet (``done(run)``; default: a
    results.json in its model_dir); the first failure's exit code, else 0."""
    for run in runs:
        name, argv, model_dir = run[:3]
        if (done(run) if done else _done(model_dir)):
            continue
        print(f"\n=== {name}: {_shell(argv)}", file=stream, flush=True)
        code = subprocess.call(argv)
        if code != 0:
            print(f"{name} failed (exit code {code}); the table is not written", file=stream)
            return code
    return 0


def run_table(table, runs_root, out, dry_run=False, stream=None):
    if table in SUMMARY_TABLES:  # CNN/DM chunks and trained models, not translation data
        from experiments import summarize
        return summarize.run_table(table, runs_root, out, dry_run, stream)
    if table in CAPTION_TABLES:  # video features, not translation data, to check
        from experiments import caption
        return caption.run_table(table, runs_root, out, dry_run, stream)
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
    code = execute_runs(runs, stream)
    if code:
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
    p.add_argument("--only", default="all",
                   help="comma-separated run names of the table to run (e.g. "
                        "lead3,pg_soft,pg_acvi), or 'all'; the table renders every result "
                        "found under --runs_root either way")
    args = parser.parse_args(argv)
    if args.command == "run" and args.only != "all":
        names = [n for n in args.only.split(",") if n]
        known = [r[0] for r in TABLES[args.table]]
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            parser.error(f"--only: {', '.join(unknown) or 'no run names'} not among "
                         f"{args.table}'s runs: {', '.join(known)}")
        # Under `python -m experiments.tables` this module is __main__, and the task CLIs'
        # run_table read the imported copy's TABLES: filter both.
        from experiments import tables as imported
        for registry in {id(TABLES): TABLES, id(imported.TABLES): imported.TABLES}.values():
            registry[args.table] = [r for r in registry[args.table] if r[0] in names]
    if args.command == "run":
        return run_table(args.table, args.runs_root, args.out, args.dry_run)
    results = (find_results(args.runs, task="caption", key="scores")
               if args.command in CAPTION_TABLES else
               find_results(args.runs, task="summarize", key="rouge")
               if args.command in SUMMARY_TABLES else find_results(args.runs))
    if not results:
        parser.error(f"--runs: no results.json of a translation run under {args.runs}")
    text = RENDER[args.command](results)
    if args.out:
        common.write_text(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
