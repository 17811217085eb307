"""The translation CLI end to end (smoke profile, a tiny fixture Multi30k), its
flag errors, the data checks, and the results tables."""

import glob
import json
import os
import random
import shutil
import subprocess

import pytest
from absl import flags

from experiments import tables, translate
from experiments import flags as xflags
from tests import cli
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_EN_DE = {"a": "ein", "man": "mann", "woman": "frau", "dog": "hund", "cat": "katze",
          "runs": "läuft", "sits": "sitzt", "on": "auf", "the": "dem", "grass": "gras",
          "red": "roten", "blue": "blauen", "ball": "ball", "plays": "spielt", "with": "mit",
          "in": "im", "park": "park", "snow": "schnee", "child": "kind", "jumps": "springt"}
_SUBJECTS = ["a man", "a woman", "a dog", "a cat", "a child"]
_VERBS = ["runs", "sits", "plays", "jumps"]
_PLACES = ["on the grass", "in the park", "in the snow", "with a red ball", "with a blue ball"]


def _sentences(n, seed):
    rng = random.Random(seed)
    en = [f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_PLACES)} ."
          for _ in range(n)]
    de = [" ".join(_EN_DE.get(w, w) for w in s.split()) for s in en]
    return en, de


def _write_mirror(root, sizes=(("train", 160), ("val", 20), ("test_2016_flickr", 20))):
    """A tiny Multi30k laid out as the official tok/ files (a 'partial copy')."""
    tok = os.path.join(root, "multi30k", "tok")
    os.makedirs(tok, exist_ok=True)
    for i, (stem, n) in enumerate(sizes):
        en, de = _sentences(n, seed=i)
        for lang, lines in (("en", en), ("de", de)):
            with open(os.path.join(tok, f"{stem}.lc.norm.tok.{lang}"), "w") as f:
                f.write("\n".join(lines) + "\n")
    return root


@pytest.fixture
def env(tmp_path):
    mirror = _write_mirror(str(tmp_path / "mirror"))
    e = dict(os.environ, ACVI_DATA_MIRROR=mirror, ACVI_DATA_DIR=str(tmp_path / "data"),
             TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
    return e


def _cli(args, env, stdin=None, module="experiments.translate"):
    return cli.run(module, args, env=env, input=stdin, timeout=600)


def _event_tags(model_dir):
    """{(run, tag): the TensorBoard plugins that wrote it} over the run's event files
    (train/, eval/, hparams/): TensorBoard shows a tag of a run on one dashboard only."""
    import tensorflow as tf
    tags = {}
    for path in glob.glob(os.path.join(model_dir, "*", "events.out.tfevents.*")):
        run = os.path.basename(os.path.dirname(path))
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                tags.setdefault((run, v.tag), set()).add(v.metadata.plugin_data.plugin_name)
    return tags


def test_train_eval_then_decode_from_a_file(tmp_path, env):
    # Training and the decode that must reproduce it run as a real run does: a fresh
    # interpreter, TensorFlow's graph optimizer and oneDNN on (tests/cli.py turns them
    # off in the other CLI runs, for time).
    as_run = dict(env, ACVI_TEST_AS_RUN="1")
    model_dir = str(tmp_path / "run")
    r = _cli(["--profile=smoke", "--attention=acvi", f"--model_dir={model_dir}"], as_run)
    assert r.returncode == 0, r.stderr[-3000:]
    # BLEU printed with sacrebleu's signature, for dev and test.
    assert "test (20 sentences) BLEU = " in r.stdout, r.stdout
    assert "nrefs:1|case:mixed|eff:no|tok:none|smooth:none|version:" in r.stdout
    results = json.load(open(os.path.join(model_dir, "results.json")))
    assert isinstance(results["bleu"]["dev"], float) and isinstance(results["bleu"]["test"], float)
    assert results["steps"] == 6 and results["profile"] == "smoke"
    assert results["command"].startswith("python -m experiments.translate --profile=smoke")
    assert results["wall_time_sec"] > 0 and results["signature"].startswith("nrefs:1")
    assert results["train_data_partial"] is True  # the fixture is a partial copy
    # provenance: the commit of the checkout the CLI ran from, one start that ended
    git = shutil.which("git")
    head = git and subprocess.run([git, "-C", REPO, "rev-parse", "HEAD"], capture_output=True,
                                  text=True)
    assert results["provenance"]["commit"] == (head.stdout.strip() if head and
                                               head.returncode == 0 else None)
    assert results["provenance"]["segments"] == 1
    for name in ("model_config.json", "run_config.json", "flags.txt", "vocab.en.txt",
                 "vocab.de.txt", "decode_dev.txt", "decode_test.txt"):
        assert os.path.exists(os.path.join(model_dir, name)), name
    with open(os.path.join(model_dir, "decode_test.txt")) as f:
        test_hyps = f.read().split("\n")[:20]
    assert len(test_hyps) == 20
    # Validation wrote dev BLEU (its sacrebleu signature under a tag of its own), sample
    # translations and an attention image; each tag by one plugin.
    tags = _event_tags(model_dir)
    for run, tag, plugin in (("eval", "dev_bleu", "scalars"), ("eval", "dev_nll", "scalars"),
                             ("eval", "dev_bleu_signature", "text"), ("eval", "sample_0", "text"),
                             ("eval", "attention_sample_0", "images"), ("train", "nll", "scalars"),
                             ("train", "kl", "scalars"), ("hparams", "test_bleu", "scalars")):
        assert tags.get((run, tag)) == {plugin}, (run, tag, tags)

    # --mode=decode rebuilds the model from model_dir: on the test sources it
    # reproduces the decode of the training run exactly.
    src = os.path.join(env["ACVI_DATA_MIRROR"], "multi30k", "tok", "test_2016_flickr.lc.norm.tok.en")
    out = str(tmp_path / "out.de")
    r = _cli(["--mode=decode", f"--model_dir={model_dir}", f"--input={src}", f"--output={out}"],
             as_run)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(out) as f:
        assert f.read().split("\n")[:20] == test_hyps
    with open(os.path.join(model_dir, "provenance.json")) as f:
        segments = json.load(f)  # decode writes nothing into model_dir: still one start
    assert [s["mode"] for s in segments] == ["train_eval"] and segments[0]["end"]

    # stdin -> stdout, and an empty line stays an (empty) line.
    r = _cli(["--mode=decode", f"--model_dir={model_dir}"], env, stdin="a dog runs .\n\n")
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(r.stdout.split("\n")) == 3 and r.stdout.split("\n")[1] == ""

    # A different model setting for an existing model_dir is refused, naming the flag.
    r = _cli(["--mode=eval", f"--model_dir={model_dir}", "--attention=soft"], env)
    assert r.returncode != 0 and "--attention" in r.stderr


def test_mixed_bfloat16_run_trains_evaluates_and_eval_restores_the_precision(tmp_path, env):
    model_dir = str(tmp_path / "bf16")
    r = _cli(["--profile=smoke", "--attention=acvi", "--precision=mixed_bfloat16",
              f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "test (20 sentences) BLEU = " in r.stdout, r.stdout
    with open(os.path.join(model_dir, "model_config.json")) as f:
        assert json.load(f)["precision"] == "mixed_bfloat16"
    with open(os.path.join(model_dir, "flags.txt")) as f:
        assert "--precision=mixed_bfloat16" in f.read().split("\n")
    bleu = json.load(open(os.path.join(model_dir, "results.json")))["bleu"]
    with open(os.path.join(model_dir, "decode_test.txt")) as f:
        decodes = f.read()

    # --mode=eval without the flag rebuilds the bfloat16 model: the same decodes and BLEU.
    r = _cli(["--mode=eval", f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.load(open(os.path.join(model_dir, "results.json")))["bleu"] == bleu
    with open(os.path.join(model_dir, "decode_test.txt")) as f:
        assert f.read() == decodes
    # Another precision for the trained model is refused, naming the flag.
    r = _cli(["--mode=eval", f"--model_dir={model_dir}", "--precision=float32"], env)
    assert r.returncode != 0 and "--precision: 'float32' differs from the trained model's " \
        "'mixed_bfloat16'" in r.stderr, r.stderr[-2000:]
    # A value that is no policy is absl's enum error, naming the flag.
    r = _cli(["--model_dir=x", "--precision=float64"], env)
    assert r.returncode != 0 and "--precision=float64" in r.stderr
    assert "mixed_bfloat16" in r.stderr


def test_select_best_evaluates_the_checkpoint_of_the_best_validation(tmp_path, env):
    """--select_best=dev_nll keeps the evaluation with the highest dev NLL (the NLL falls
    here, so an early checkpoint, not the last): history.jsonl's argmax is the step
    results.json names, and --mode=eval later scores that checkpoint again, the same BLEU.
    The diagnostics in results.json are the selected model's (the whole dev set every
    time here: its NLL is the selected evaluation's), not the last step's."""
    model_dir = str(tmp_path / "run")
    r = _cli(["--profile=smoke", "--attention=soft", "--train_steps=6", "--eval_every=2",
              "--checkpoint_every=2", "--select_best=dev_nll", "--learning_rate=0.05",
              "--eval_subset=0", f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.load(open(os.path.join(model_dir, "results.json")))
    evals = {}
    for line in open(os.path.join(model_dir, "history.jsonl")):
        record = json.loads(line)
        if "eval" in record and "dev_nll" in record["eval"]:
            evals[record["step"]] = record["eval"]["dev_nll"]
    assert sorted(evals) == [2, 4, 6]
    best = max(evals, key=evals.get)
    assert best < 6, evals  # the falling NLL puts the pick before the last step
    assert results["selected_checkpoint"]["step"] == best, evals
    assert results["selected_checkpoint"]["value"] == pytest.approx(evals[best])
    assert f"the best checkpoint by dev_nll, step {best}" in r.stderr
    assert results["diagnostics"]["dev_nll"] == pytest.approx(evals[best], rel=1e-5)
    assert results["diagnostics"]["dev_nll"] != pytest.approx(evals[6], rel=1e-5)
    r = _cli(["--mode=eval", f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    again = json.load(open(os.path.join(model_dir, "results.json")))
    assert again["bleu"] == pytest.approx(results["bleu"])


def test_reselect_redoes_the_selection_of_a_run_trained_before_the_fix(tmp_path, env):
    """--mode=reselect on a run whose best.json names its last step, as the old protocol
    let the last step's final-protocol score win: it scores the last checkpoint with the
    periodic protocol (the value the Trainer now logs there), selects among the periodic
    evaluations, restores that checkpoint and rewrites results.json and best.json (test
    BLEU, dev BLEU and diagnostics of the selected model; the training command kept). A
    run whose selected checkpoint is gone is refused, naming the step."""
    model_dir = str(tmp_path / "run")
    r = _cli(["--profile=smoke", "--attention=soft", "--train_steps=6", "--eval_every=2",
              "--checkpoint_every=2", "--keep_checkpoints=5", "--select_best=dev_nll",
              "--learning_rate=0.05", "--eval_subset=0", f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    right = json.load(open(os.path.join(model_dir, "results.json")))
    evals = {json.loads(l)["step"]: json.loads(l)["eval"]["dev_nll"]
             for l in open(os.path.join(model_dir, "history.jsonl")) if '"eval"' in l}
    chosen = right["selected_checkpoint"]["step"]
    assert chosen < 6
    # the run as the old protocol left it: the last step selected, its results the last's
    old = dict(right["selected_checkpoint"], step=6, value=99.0, checkpoint="ckpt/ckpt-6")
    with open(os.path.join(model_dir, "best.json"), "w") as f:
        json.dump(old, f)
    stale = dict(right, bleu={"dev": 99.0, "test": 99.0}, selected_checkpoint=old,
                 diagnostics=dict(right["diagnostics"], dev_nll=evals[6]))
    with open(os.path.join(model_dir, "results.json"), "w") as f:
        json.dump(stale, f)

    r = _cli(["--mode=reselect", f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    fixed = json.load(open(os.path.join(model_dir, "results.json")))
    assert fixed["selected_checkpoint"]["step"] == chosen
    assert fixed["bleu"] == pytest.approx(right["bleu"])
    assert fixed["diagnostics"]["dev_nll"] == pytest.approx(evals[chosen], rel=1e-5)
    assert fixed["reselected"]["periodic"]["6"] == pytest.approx(evals[6], rel=1e-5)
    assert fixed["reselected"]["before"]["step"] == 6
    assert fixed["command"] == right["command"]  # the training's
    assert json.load(open(os.path.join(model_dir, "best.json")))["step"] == chosen
    assert f"reselected: step {chosen}" in r.stderr

    # the selected step's checkpoints gone: refused, naming the step
    with open(os.path.join(model_dir, "best.json"), "w") as f:
        json.dump(old, f)
    for path in glob.glob(os.path.join(model_dir, "ckpt", f"ckpt-{chosen}.*")):
        os.remove(path)
    r = _cli(["--mode=reselect", f"--model_dir={model_dir}"], env)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert f"select step {chosen}" in r.stderr and "train the run again" in r.stderr


def test_copy_baseline_and_dry_run(tmp_path, env):
    model_dir = str(tmp_path / "copy")
    r = _cli(["--mode=copy_baseline", f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.load(open(os.path.join(model_dir, "results.json")))
    assert results["system"] == "copy-source"
    assert 0.0 <= results["bleu"]["test"] < 100.0

    # --dry_run: prints the command and the data status; the fixture is partial -> 3.
    r = _cli(["--profile=paper", "--dry_run", "--model_dir=x"], env)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "command: python -m experiments.translate --profile=paper" in r.stdout
    assert "PARTIAL" in r.stdout and "multi30k/tok/train.lc.norm.tok.en" in r.stdout
    assert "To get it:" in r.stdout

    # Training with the paper profile on partial data stops, naming the files (--allow_cpu:
    # past the refusal to train it without a GPU, tests/utils/test_gpus.py).
    r = _cli(["--profile=paper", f"--model_dir={tmp_path / 'p'}", "--train_steps=1",
              "--allow_cpu"], env)
    assert r.returncode != 0
    assert "partial" in r.stderr and "--allow_partial_data" in r.stderr


def test_bad_flags_and_missing_data_name_the_flag_or_file(tmp_path, env):
    r = _cli(["--model_dir=x", "--score=dot"], env)
    assert r.returncode != 0 and "--score=dot" in r.stderr
    r = _cli(["--model_dir=x", "--dataset=multi30k", "--src=vi"], env)
    assert r.returncode != 0 and "--src: 'vi' is not a language of --dataset=multi30k" in r.stderr
    empty = dict(env, ACVI_DATA_MIRROR=str(tmp_path / "empty"))
    r = _cli(["--profile=smoke", f"--model_dir={tmp_path / 'm'}"], empty)
    assert r.returncode != 0
    assert "multi30k/tok/train.lc.norm.tok" in r.stderr and "not found" in r.stderr


def _fresh_flags():
    fv = flags.FlagValues()
    translate.define_flags(fv)
    return fv


def test_shared_flags_profiles_and_attention_options(tmp_path):
    from acvi_tf import attention
    from acvi_tf.data import translation
    fv = _fresh_flags()
    assert tuple(fv["dataset"].parser.enum_values) == translation.DATASETS
    assert fv["attention"].parser.enum_values == attention.available()
    with pytest.raises(flags.IllegalFlagValueError, match="--attention=nope"):
        fv(["prog", "--attention=nope"])

    # Profile values are defaults; explicit flags (command line or flagfile) win.
    flagfile = tmp_path / "x.flags"
    flagfile.write_text("# comment\n--profile=paper\n--train_steps=7\n")
    fv = _fresh_flags()
    fv(["prog", f"--flagfile={flagfile}", "--batch_size=3", "--attention_option=kl_weight=0.5",
        "--attention=acvi"])
    xflags.apply_profile(translate.PROFILES, fv)
    assert (fv.train_steps, fv.batch_size) == (7, 3)
    assert (fv.encoder_layers, fv.optimizer, fv.lr_decay, fv.beam_width) == (2, "sgd", "luong", 10)
    config = xflags.model_config_from_flags(fv, src_vocab_size=10, tgt_vocab_size=11)
    assert config.attention_options == {"kl_weight": 0.5} and config.decoder_layers == 2
    train = xflags.train_config_from_flags("/tmp/x", fv)
    assert (train.optimizer, train.learning_rate, train.train_steps) == ("sgd", 1.0, 7)

    assert xflags.parse_attention_options(["a=1", "b='x'", "c=bound", "d=[1, 2]"]) == \
        {"a": 1, "b": "x", "c": "bound", "d": [1, 2]}
    with pytest.raises(xflags.FlagError, match="^--attention_option: 'kl_weight' is not"):
        xflags.parse_attention_options(["kl_weight"])
    with pytest.raises(xflags.FlagError, match="^--attention_option: bogus not an option"):
        xflags.parse_attention_options(["bogus=1"], "acvi")
    fv = _fresh_flags()
    fv(["prog", "--optimizer=adam", "--lr_decay=luong", "--profile=smoke"])
    xflags.apply_profile(translate.PROFILES, fv)
    with pytest.raises(xflags.FlagError, match="^--lr_decay"):
        xflags.train_config_from_flags("/tmp/x", fv)


def _fake_run(root, name, **fields):
    d = os.path.join(root, name)
    os.makedirs(d)
    r = {"task": "translate", "signature": "nrefs:1|case:mixed|eff:no|tok:none|smooth:none",
         "steps": 100, "train_wall_time_sec": 60.0, "eval_wall_time_sec": 5.0,
         "decode": {"beam_width": 10}}
    r.update(fields)
    with open(os.path.join(d, "results.json"), "w") as f:
        json.dump(r, f)
    return d


def _cells(markdown, first_cells):
    """The cells of the table row starting with ``first_cells``, and the header."""
    lines = [l for l in markdown.split("\n") if l.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[:len(first_cells)] == list(first_cells):
            return header, cells
    raise AssertionError(f"no row {first_cells} in\n{markdown}")


def test_tables_keep_the_papers_numbers_in_their_own_columns(tmp_path):
    root = str(tmp_path)
    _fake_run(root, "envi_soft", dataset="iwslt15_en_vi", src="en", tgt="vi", system="soft",
              profile="paper", bleu={"dev": 1.11, "test": 2.22}, command="python -m A")
    _fake_run(root, "envi_acvi", dataset="iwslt15_en_vi", src="en", tgt="vi", system="acvi",
              profile="paper", bleu={"dev": 3.33, "test": 4.44}, command="python -m B",
              train_data_partial=True)
    text = tables.table4(tables.find_results([root]))
    header, row = _cells(text, ["En→Vi", "Baseline (soft attention)"])
    col = {h: i for i, h in enumerate(header)}
    assert row[col["ours, paper profile: dev"]] == "1.11"
    assert row[col["ours, paper profile: test"]] == "2.22"
    assert row[col["paper (Table 4): dev"]] == "23.21"
    assert row[col["paper (Table 4): test"]] == "25.18"
    _, row = _cells(text, ["En→Vi", "ACVI"])
    assert row[col["ours, paper profile: test"]] == "4.44"
    assert row[col["paper (Table 4): test"]] == "26.16"
    assert "†" in row[col["our run"]]  # partial training data is flagged
    _, row = _cells(text, ["Ro→En", "ACVI"])
    assert row[col["ours, paper profile: dev"]] == "–" and row[col["paper (Table 4): dev"]] == "18.07"
    assert row[col["our run"]] == "not run"
    assert "`python -m A`" in text and "`python -m B`" in text
    # No paper number appears in any of our columns.
    paper_numbers = {f"{v:.2f}" for d in tables.PAPER_TABLE4.values() for p in d.values()
                     for v in p}
    for line in [l for l in text.split("\n") if l.startswith("| ")][1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        ours = [cells[i] for h, i in col.items() if h.startswith("ours")]
        assert not paper_numbers & set(ours)

    cpu = str(tmp_path / "cpu")
    os.makedirs(cpu)
    _fake_run(cpu, "copy", dataset="multi30k", src="en", tgt="de", system="copy-source",
              profile="cpu", bleu={"dev": 2.5, "test": 2.6}, command="python -m C")
    _fake_run(cpu, "soft", dataset="multi30k", src="en", tgt="de", system="soft",
              profile="cpu", bleu={"dev": 30.0, "test": 31.0}, command="python -m D")
    _fake_run(cpu, "acvi", dataset="multi30k", src="en", tgt="de", system="acvi",
              profile="cpu", bleu={"dev": 31.0, "test": 32.5}, command="python -m E")
    out = str(tmp_path / "t.md")
    assert tables.main(["table4-cpu-2500", "--runs", cpu, "--out", out]) == 0
    text = open(out).read()
    header, row = _cells(text, ["ACVI"])
    col = {h: i for i, h in enumerate(header)}
    assert row[col["ours: test2016"]] == "32.50"
    assert row[col["ours: Δ test vs baseline"]] == "+1.50"
    paper_col = [h for h in header if h.startswith("paper (Table 4")][0]
    assert row[col[paper_col]] == "+0.98 / +1.19 / +1.38 / +2.00"
    _, row = _cells(text, ["Copy the source (floor)"])
    assert row[col["ours: val"]] == "2.50"


def test_table_run_stops_on_partial_data_and_prints_the_commands(tmp_path, env, monkeypatch,
                                                                  capsys):
    monkeypatch.setenv("ACVI_DATA_MIRROR", env["ACVI_DATA_MIRROR"])
    monkeypatch.setenv("ACVI_DATA_DIR", env["ACVI_DATA_DIR"])
    code = tables.run_table("table4", str(tmp_path / "runs"), str(tmp_path / "t.md"))
    out = capsys.readouterr().out
    assert code == 2 and not os.path.exists(tmp_path / "t.md")
    assert "STOP: the iwslt15_en_vi data is missing or partial" in out
    assert "MISSING  iwslt15_en_vi/train.en" in out and "nlp.stanford.edu" in out
    assert "--flagfile=experiments/configs/table4_roen_acvi.flags" in out
    assert len([l for l in out.split("\n") if "[to run]" in l]) == len(tables.TABLES["table4"])  # every row and direction


def test_the_converged_profile_is_the_cpu_profile_trained_to_the_plateau():
    """--profile=cpu_converged: the cpu sizes and optimiser, 8,000 steps, the full val set
    every 500 steps, the best of them evaluated, length buckets of width 2 (issue 33;
    results/convergence.md)."""
    cpu, converged = translate.PROFILES["cpu"], translate.PROFILES["cpu_converged"]
    changed = {k for k in converged if converged[k] != cpu.get(k)}
    assert changed == {"train_steps", "eval_subset", "select_best", "num_buckets"}
    assert (converged["train_steps"], converged["eval_subset"], converged["select_best"]) == \
        (8000, 0, "dev_bleu")
    # buckets of width 2 tokens over the cpu profile's max_length
    assert converged["max_length"] / converged["num_buckets"] == 2
    fv = _fresh_flags()
    fv(["prog", "--profile=cpu_converged"])
    xflags.apply_profile(translate.PROFILES, fv)
    train = xflags.train_config_from_flags("/tmp/x", fv)
    assert (train.train_steps, train.select_best, train.eval_every) == (8000, "dev_bleu", 500)
