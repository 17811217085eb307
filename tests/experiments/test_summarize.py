"""The summarization CLI end to end (smoke profile, a tiny fixture CNN/DM and DUC2004),
the phase-following training stream, lead-3, its flag errors and the Tables 1/2/5."""

import json
import os
import random

import numpy as np
import pytest

from acvi_tf.metrics import meteor
from absl import flags

from experiments import flags as xflags
from experiments import summarize, tables
from tests.data.test_cnndm import _record, _write_bin
from tests import cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_WORDS = ("the a police man woman city court said on in was to of and has been "
          "new year old after for with by at from").split()
_NAMES = ["zorblat", "quixby", "mervane", "tollund", "braxa", "vintor"]  # never in the vocab


def _pair(rng, lead_is_abstract=False):
    sents = []
    for _ in range(rng.randint(4, 7)):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(4, 9))]
        words.insert(rng.randrange(len(words)), rng.choice(_NAMES))
        sents.append(" ".join(words) + " .")
    article = " ".join(sents)
    abstract = sents[:3] if lead_is_abstract else [sents[0], " ".join(sents[-1].split()[:5]) + " ."]
    return article, " ".join(f"<s> {s} </s>" for s in abstract)


def _write_mirror(root, seed=0):
    """finished_files with a vocab (36 words) and one chunk per split; DUC2004 (500 x 4)."""
    rng = random.Random(seed)
    ff = os.path.join(root, "cnn_dailymail", "finished_files")
    os.makedirs(os.path.join(ff, "chunked"))
    with open(os.path.join(ff, "vocab"), "w") as f:
        f.writelines(f"{w} {1000 - i}\n" for i, w in enumerate(_WORDS + [".", "<s>", "</s>"]))
    for split, n, lead in (("train", 40, False), ("val", 6, False), ("test", 6, True)):
        _write_bin(os.path.join(ff, "chunked", f"{split}_000.bin"),
                   [_record(*_pair(rng, lead)) for _ in range(n)])
    duc = os.path.join(root, "duc2004")
    os.makedirs(duc)
    for name in ("input.txt",) + tuple(f"task1_ref{i}.txt" for i in range(4)):
        with open(os.path.join(duc, name), "w") as f:
            f.writelines(" ".join(rng.choice(_WORDS + _NAMES) for _ in range(8)) + "\n"
                         for _ in range(500))
    return root


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("summ")
    mirror = _write_mirror(str(root / "mirror"))
    return dict(os.environ, ACVI_DATA_MIRROR=mirror, ACVI_DATA_DIR=str(root / "data"),
                TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)


def _cli(args, env, stdin=None):
    return cli.run(summarize.MODULE, args, env=env, input=stdin)


def _test_articles(env):
    from acvi_tf.data import cnndm
    path = os.path.join(env["ACVI_DATA_MIRROR"], "cnn_dailymail", "finished_files", "chunked",
                        "test_000.bin")
    return list(cnndm.read_bin(path))


def test_train_eval_then_duc2004_and_decode(tmp_path, env):
    model_dir = str(tmp_path / "pg_acvi")
    r = _cli(["--profile=smoke", "--attention=acvi", f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-4000:]
    res = json.load(open(os.path.join(model_dir, "results.json")))
    assert res["task"] == "summarize" and res["system"] == "acvi" and res["steps"] == 8
    assert res["command"].startswith("python -m experiments.summarize --profile=smoke")
    # Table 5's phases over the 6 steps before coverage, then 2 with coverage.
    assert [p[0] for p in res["phases"]] == [2, 3, 4, 5, 6] and res["coverage_steps"] == 2
    assert res["coverage"] is True and res["no_coverage"]["coverage"] is False
    assert res["no_coverage"]["steps"] == 6
    for scores in (res, res["no_coverage"]):
        for k in ("rouge_1", "rouge_2", "rouge_l"):
            assert 0.0 <= scores["rouge"][k] <= 100.0
        assert scores["rouge"]["options"] == "-c 95 -2 -1 -U -r 1000 -n 4 -w 1.2 -a -m"
        assert scores["test_articles"] == 6
        assert 0.0 <= scores["novelty"]["oov_adoption_percent"] <= 100.0
    assert "meteor" not in res  # the smoke profile skips the jar (--nometeor)
    # Decodes are written next to the checkpoint; every word of a summary is a
    # vocabulary word or a word of its own article (OOVs come from the article only).
    pairs = _test_articles(env)
    vocab = set(open(os.path.join(model_dir, "vocab.txt")).read().split())
    with open(os.path.join(model_dir, "decode_test.txt")) as f:
        decoded = f.read().split("\n")[:6]
    assert len(decoded) == 6 and any(decoded)
    for line, pair in zip(decoded, pairs):
        assert set(line.split()) <= vocab | set(pair.article.split()), line

    # --mode=decode rebuilds the model (with coverage, as trained last) and
    # reproduces the test decode from the article text.
    src = str(tmp_path / "articles.txt")
    with open(src, "w") as f:
        f.write("\n".join(p.article for p in pairs) + "\n\n")
    r = _cli(["--mode=decode", f"--model_dir={model_dir}", f"--input={src}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split("\n")[:7] == decoded + [""]

    # Table 5: DUC2004, 4 references, ROUGE recall at 75 bytes.
    r = _cli(["--mode=duc2004", f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    duc = json.load(open(os.path.join(model_dir, "results.json")))["duc2004"]
    assert duc["options"] == "-c 95 -r 1000 -n 2 -w 1.2 -a -m -b 75"
    assert duc["measure"] == "recall" and duc["count"] == 500 and 0 <= duc["rouge_1"] <= 100
    assert duc["command"].startswith("python -m experiments.summarize --mode=duc2004")
    with open(duc["decode_file"]) as f:
        assert len(f.read().rstrip("\n").split("\n")) == 500
    # each summary's own ROUGE-1 recall, for Table 5's bootstrap: they average to the
    # reported score (up to ROUGE-1.5.5's bootstrap estimate of the mean)
    items = json.load(open(os.path.join(model_dir, "rouge1_items_duc2004.json")))
    assert len(items) == 500 and abs(sum(items) / 500 - duc["rouge_1"]) < 0.1
    # a mode that adds a section records the run's provenance with it: two starts that wrote
    provenance = json.load(open(os.path.join(model_dir, "results.json")))["provenance"]
    assert provenance["segments"] == 2 and "commit" in provenance

    # The trained model's settings are fixed: a different one is refused, naming the flag.
    r = _cli(["--mode=eval", f"--model_dir={model_dir}", "--attention=soft"], env)
    assert r.returncode != 0 and "--attention" in r.stderr


def test_lead3_scores_the_first_three_sentences(tmp_path, env):
    # The fixture's test abstracts ARE the first three sentences: ROUGE must be 100.
    model_dir = str(tmp_path / "lead3")
    r = _cli(["--mode=lead3", "--profile=smoke", "--meteor", f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.load(open(os.path.join(model_dir, "results.json")))
    assert res["system"] == "lead-3" and res["test_articles"] == 6
    assert res["command"] == f"python -m experiments.summarize --mode=lead3 --profile=smoke " \
                             f"--meteor --model_dir={model_dir}"
    for k in ("rouge_1", "rouge_2", "rouge_l"):
        assert res["rouge"][k] == pytest.approx(100.0)
    # --meteor: both modes through the CLI; the summaries are the references, so METEOR is
    # 100 in both. Without java or the jar the run says what is missing instead.
    missing = meteor.missing_requirements()
    if missing:
        assert res["meteor"] == {"skipped": missing}
    else:
        assert res["meteor"]["exact"] == pytest.approx(100.0)
        assert res["meteor"]["full"] == pytest.approx(100.0)
        assert res["meteor"]["full_modules"] == ["exact", "stem", "synonym", "paraphrase"]
        assert res["meteor"]["exact_modules"] == ["exact"]
    pairs = _test_articles(env)
    with open(os.path.join(model_dir, "decode_test.txt")) as f:
        assert f.read().split("\n")[:6] == [" ".join(p.abstract_sents) for p in pairs]


def test_lead1_on_val_writes_the_first_sentence_to_the_val_section(tmp_path, env):
    model_dir = str(tmp_path / "lead1")
    r = _cli(["--mode=lead3", "--profile=smoke", "--lead_sentences=1", "--lead_split=val",
              f"--model_dir={model_dir}"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.load(open(os.path.join(model_dir, "results.json")))
    assert res["system"] == "lead-1" and res["lead_sentences"] == 1
    assert res["val"]["val_articles"] == 6 and "test_articles" not in res
    assert "rouge" not in res and not os.path.exists(os.path.join(model_dir, "decode_test.txt"))
    # The fixture's val abstracts are an article's first sentence, then 5 words of its
    # last: lead-1 is that first sentence, all of whose words are in the reference.
    assert 50 < res["val"]["rouge"]["rouge_1"] < 100
    from acvi_tf.data import cnndm
    path = os.path.join(env["ACVI_DATA_MIRROR"], "cnn_dailymail", "finished_files", "chunked",
                        "val_000.bin")
    with open(os.path.join(model_dir, "decode_val.txt")) as f:
        lines = f.read().split("\n")[:6]
    assert lines == [p.abstract_sents[0] for p in cnndm.read_bin(path)]


def test_flag_errors_name_the_flag(tmp_path, env):
    r = _cli(["--profile=smoke", "--nocoverage", f"--model_dir={tmp_path / 'x'}"], env)
    assert r.returncode != 0 and "--coverage_steps" in r.stderr
    r = _cli(["--profile=smoke", "--coverage_steps=8", f"--model_dir={tmp_path / 'x'}"], env)
    assert r.returncode != 0 and "--coverage_steps: 8 leaves no step" in r.stderr
    # The paper profile refuses the partial copy and says what to download.
    r = _cli(["--profile=paper", f"--model_dir={tmp_path / 'p'}", "--train_steps=10",
              "--coverage_steps=2", "--allow_cpu"], env)
    assert r.returncode != 0 and "pointer-generator" in r.stderr and "partial" in r.stderr


def test_train_batches_follow_the_phases_and_resume(tmp_path):
    from acvi_tf.data import cnndm
    from acvi_tf.data.article_batches import ArticleBatches
    from acvi_tf.data.vocab import Vocab
    from acvi_tf.training.schedules import PhaseSchedule
    rng = random.Random(1)
    vocab = Vocab(_WORDS)
    store = cnndm.EncodedPairs(vocab, 30, 10)
    for _ in range(10):
        article, abstract = _pair(rng)
        store.add(article, cnndm.abstract2sents(abstract))
    phases = PhaseSchedule([(3, 5, 4), (6, 30, 10)], 2)
    batches = []
    it = ArticleBatches(store, 4, phases, seed=3).iterator()
    for step in range(8):
        b = next(it)
        batches.append(b)
        enc, dec = phases.phase(step)["max_enc_steps"], phases.phase(step)["max_dec_steps"]
        assert b["src"].shape[1] <= enc and b["tgt_in"].shape[1] <= dec
        if step == 4:
            state = dict(it.state_dict())
    assert max(b["src"].shape[1] for b in batches[3:]) > 5  # the second phase is longer
    # 10 pairs, batches of 4: two batches an epoch, every epoch a new permutation.
    assert state == {"epoch": 2, "batch": 1, "seed": 3, "num_examples": 10}
    resumed = ArticleBatches(store, 4, phases, seed=3).iterator()
    resumed.load_state_dict(state)
    for b in batches[5:]:
        r = next(resumed)
        for k in b:
            np.testing.assert_array_equal(np.asarray(r[k]), np.asarray(b[k]))


def _fake(system, rouge, profile="cpu", nocov=None, meteor=(15.0, 16.0), **kw):
    r = {"task": "summarize", "system": system, "head": "pointer", "profile": profile,
         "vocab_size": 20000, "command": f"python -m experiments.summarize --{system}",
         "rouge": dict(zip(("rouge_1", "rouge_2", "rouge_l"), rouge)),
         "meteor": {"exact": meteor[0], "full": meteor[1]}, "steps": 2000,
         "novelty": {"novel_word_percent": 0.5, "oov_adoption_percent": 1.5},
         "decode": {"beam_width": 4}, "test_articles": 500, "partial_eval": True,
         "coverage": nocov is not None, "attention": None if system == "lead-3" else system,
         **kw}
    if nocov:
        r["no_coverage"] = {"rouge": dict(zip(("rouge_1", "rouge_2", "rouge_l"), nocov)),
                            "meteor": {"exact": 1.0, "full": 2.0}, "steps": 1800}
    return r


def test_tables_render_ours_beside_the_paper():
    results = [_fake("soft", (30.1, 11.2, 27.3), nocov=(29.0, 10.0, 26.0)),
               _fake("acvi", (31.4, 12.5, 28.6), nocov=(30.0, 11.0, 27.0),
                     duc2004={"rouge_1": 22.2, "rouge_2": 5.5, "rouge_l": 19.9,
                              "command": "python -m experiments.summarize --mode=duc2004"}),
               _fake("lead-3", (37.12, 15.72, 33.53), meteor=(19.0, 20.5))]
    text = tables.RENDER["table1-cpu"](results)
    # Our numbers and the paper's sit in separate columns, on the paper's rows.
    acvi_cov = next(line for line in text.splitlines()
                    if line.startswith("| pointer-generator + ACVI + coverage"))
    assert "31.40" in acvi_cov and "42.71" in acvi_cov
    assert "30.00" in next(line for line in text.splitlines()
                           if line.startswith("| pointer-generator + ACVI |"))
    lead = next(line for line in text.splitlines() if line.startswith("| lead-3 baseline |"))
    assert "37.12" in lead and "40.34" in lead
    assert "python -m experiments.summarize --acvi" in text  # the command beside the number
    assert "Table 2" in text and "0.38" in text  # Table 2's paper ACVI novel-word rate
    t5 = tables.RENDER["table5"](results)
    assert "22.20" in t5 and "32.09" in t5 and "--mode=duc2004" in t5


def test_table_dry_runs(tmp_path, env, monkeypatch):
    import io
    monkeypatch.setenv("ACVI_DATA_MIRROR", env["ACVI_DATA_MIRROR"])
    out = io.StringIO()
    code = tables.run_table("table1", str(tmp_path / "t1"), str(tmp_path / "t1.md"),
                            dry_run=True, stream=out)
    text = out.getvalue()
    # Paper scale needs the full 287,227 training pairs: stop, say what to get, show commands.
    assert code == 2 and "STOP" in text and "train: 40 of 287,227 pairs" in text
    assert "--flagfile=experiments/configs/table1_pg_acvi.flags" in text
    out = io.StringIO()
    assert tables.run_table("table1-cpu", str(tmp_path / "t1c"), str(tmp_path / "t1c.md"),
                            dry_run=True, stream=out) == 0
    out = io.StringIO()
    assert tables.run_table("table5", str(tmp_path / "none"), str(tmp_path / "t5.md"),
                            dry_run=True, stream=out) == 2
    assert "no trained model" in out.getvalue()


def test_diversity_samples_reaches_the_decode_config():
    fv = flags.FlagValues()
    summarize.define_flags(fv)
    fv(["prog", "--profile=smoke", "--attention=acvi", "--diversity_samples=10",
        "--diversity_sources=20"])
    xflags.apply_profile(summarize.PROFILES, fv)
    summarize.check_flags(fv)  # no longer refused
    decode = xflags.decode_config_from_flags(fv)
    assert (decode.diversity_samples, decode.diversity_sources) == (10, 20)
