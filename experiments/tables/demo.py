"""The quick start's table (``make demo``): a short Multi30k En→De run of soft attention
and ACVI (ours) beside the copy-the-source baseline, then what a new user wants to see of
them: a few test sentences with the reference and each model's translation, and the
attention heat map of one of them (drawn by the translation CLI's decode mode).

Both models use the table4-cpu flagfiles cut to a few minutes on 2 cores (:data:`DEMO_ARGS`);
the table's header says what the numbers are: a demo, not a result.
"""

import os
import subprocess
import sys

from experiments.tables.spec import REPO_ROOT, Table
from experiments.tables.table4_translation import COPY_BASELINE_ARGS, table4_cpu

# ACVI here is the 2,500-step table's ACVI (ours), KL weight 1e-4, not the converged
# table's KL weight 0: at the demo's size and learning rate (128 units, 2e-3) KL weight 0
# did not learn at all on 2026-11-29 (train NLL 5.6 from step 200 to 2,000, dev BLEU 0.00
# against soft attention's 22.12; sigma at its floor by step 200 while the encoder states'
# norm grew to 12, soft's 3.4; results/acvi_study.md, dated note). A reading not yet
# tested by a run: the KL term's h^2 part keeps the states' norm down at KL weight 1e-4.
# Measured on 2 cores, the two models trained at once with one thread each (make demo
# passes --parallel 2). A smaller model than the cpu profile's (128 units everywhere),
# trained on the pairs of <= 20 tokens (94% of Multi30k's training set) in length buckets
# of width 2 (the converged recipe's), greedy decoding of the first 500 val/test sentences.
# 2,000 steps, not 1,500: at 1,500 the step where a run's attention takes off (dev BLEU
# past ~10; results/convergence.md) decided the table. On an AVX2 machine with oneDNN
# (2026-11-27), soft attention scored 10.31 test BLEU at 1,500 steps against 18.43 on the
# earlier machine; at 2,000 steps in width-2 buckets 20.83, in 9:04 for the whole demo.
DEMO_STEPS = 2000
DEMO_EVAL_LINES = 500
DEMO_ARGS = [f"--train_steps={DEMO_STEPS}", "--max_length=20", "--num_buckets=25",
             "--learning_rate=2e-3",
             "--embed_dim=128", "--encoder_units=128", "--decoder_units=128",
             "--attention_units=128", "--head_units=128", "--eval_every=0", "--beam_width=1",
             f"--max_eval_lines={DEMO_EVAL_LINES}", "--diversity_samples=0", "--noprogress"]
# In the order the two lanes of `--parallel 2` take them: the two models first (ACVI's step
# is the slower), the copy baseline (12 s) when soft attention's lane frees up; listed
# first, it held back ACVI's start and so the demo's end by its 12 s (2026-12-01).
DEMO_RUNS = [("multi30k_acvi", "table4cpu_multi30k_acvi.flags", DEMO_ARGS),
             ("multi30k_soft", "table4cpu_multi30k_soft.flags", DEMO_ARGS),
             ("multi30k_copy", None, COPY_BASELINE_ARGS + [f"--max_eval_lines={DEMO_EVAL_LINES}"])]
# The models whose translations the epilogue shows, in this order; the heat map is ACVI's.
EXAMPLE_RUNS = (("Soft attention", "multi30k_soft"), ("ACVI (ours)", "multi30k_acvi"))
HEATMAP_RUN = "multi30k_acvi"
NUM_EXAMPLES = 3

TITLE = (f"Demo: a short Multi30k En→De run, BLEU ({DEMO_STEPS:,} Adam steps of a 128-unit "
         f"model on 2 CPU cores, greedy decoding of the first {DEMO_EVAL_LINES} val and "
         f"test2016 sentences: a demo of the pipeline, not a result. The models are far from "
         f"converged and run one seed each, so a difference here says neither where they end "
         f"nor which learns faster (at 5 seeds each of the converged recipe, ACVI's dev BLEU "
         f"is level with or below soft attention's at every evaluation: "
         f"results/convergence_soft_acvi.md); the CPU-scale results, 8,000 steps and several "
         f"seeds a row, are results/table4_cpu.md)")


def render(results):
    return table4_cpu(results, TITLE, only_run=True)


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


def examples(runs_root, sources, references, count=NUM_EXAMPLES):
    """Markdown: the first ``count`` test sentences, each with its reference and every
    model's translation (read from the runs' ``decode_test.txt``)."""
    decodes = {}
    for label, name in EXAMPLE_RUNS:
        path = os.path.join(runs_root, name, "decode_test.txt")
        if os.path.exists(path):
            decodes[label] = _lines(path)
    out = ["## Example translations (the first test2016 sentences)", ""]
    for i in range(min(count, len(sources))):
        out += [f"{i + 1}. source: {sources[i]}", f"   - reference: {references[i]}"]
        out += [f"   - {label}: {lines[i] if i < len(lines) else '(not decoded)'}"
                for label, lines in decodes.items()]
    return out


def attention_heatmap(runs_root, source, out_dir, stream=None):
    """Draws the attention of the heat-map run's model on ``source`` (one line, the
    dataset's tokenized form) through ``python -m experiments.translate --mode=decode
    --attention_plots``; returns the PNG's path, or None (with the CLI's error on
    ``stream``) when it could not be drawn."""
    model_dir = os.path.join(runs_root, HEATMAP_RUN)
    os.makedirs(out_dir, exist_ok=True)
    src_file = os.path.join(out_dir, "source.txt")
    with open(src_file, "w", encoding="utf-8") as f:
        f.write(source + "\n")
    argv = [sys.executable, "-m", "experiments.translate", f"--model_dir={model_dir}",
            "--mode=decode", f"--input={src_file}",
            f"--output={os.path.join(out_dir, 'translation.txt')}", "--beam_width=1",
            f"--attention_plots={out_dir}", "--attention_plots_count=1"]
    proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True)
    png = os.path.join(out_dir, "attention_0000.png")
    if proc.returncode != 0 or not os.path.exists(png):
        print(f"the attention heat map could not be drawn ({' '.join(argv[1:])}):\n"
              f"{proc.stderr[-2000:]}", file=stream or sys.stderr)
        return None
    return png


def epilogue(runs_root, out, stream=None):
    """The example translations and the heat map, as markdown lines below the table; the
    heat map is written beside ``out`` (``<out>_attention/attention_0000.png``)."""
    from acvi_tf.data.translation import references
    # The tokenized files the runs read: the English side is the models' input.
    sources, refs = references("multi30k", "test", "en"), references("multi30k", "test", "de")
    text = examples(runs_root, sources, refs)
    png = attention_heatmap(runs_root, sources[0],
                            os.path.splitext(out)[0] + "_attention", stream)
    text += ["", "## Attention of ACVI (ours) on sentence 1", ""]
    if png is None:
        text.append("(could not be drawn: the error is in the demo's output)")
    else:
        rel = os.path.relpath(png, os.path.dirname(os.path.abspath(out)))
        text += [f"![ACVI's attention a_t^i on test sentence 1]({rel})", "",
                 f"`{png}`: source tokens (columns) against output tokens (rows), with "
                 f"ACVI's mean sigma(h_i) (Eq. 18) per source position below, drawn by "
                 f"`python -m experiments.translate --model_dir={os.path.join(runs_root, HEATMAP_RUN)} "
                 f"--mode=decode --attention_plots=DIR`."]
    return text


TABLES = {"demo": Table(DEMO_RUNS, render, "translate", epilogue=epilogue)}
