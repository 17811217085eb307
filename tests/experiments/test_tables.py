"""experiments/tables/: every paper row with a registered system has a run (a flagfile
per profile the table uses), every dry run prints every run's command, and the
baselines' results land on their own rows."""

import io
import json
import os

import pytest

from acvi_tf.tasks import summarization as summarize_task
from experiments import tables
from experiments.tables import table1_summarization  # noqa: F401  (tables.table1_summarization)
from tests.experiments.test_flagfiles import cli_for, parse
from experiments import flags as xflags
from acvi_tf.tasks.base import system_name, system_names
from tests import cli
from tests.experiments.fake_training import use_fake_trainer


def _settings(flagfile, extra=()):
    """The run's resolved flags, parsed by its CLI."""
    path = os.path.join(tables.CONFIG_DIR, flagfile)
    return parse(cli_for(path), [f"--flagfile={path}"] + list(extra))


def _systems(runs):
    out = {}
    for name, flagfile, extra in runs:
        if flagfile and not any(a.startswith("--mode=") for a in extra):
            out[name] = _settings(flagfile, [a for a in extra if a != "--noprogress"])
    return out


@pytest.mark.parametrize("table,profile", [("table4", "paper"), ("table4-cpu", "cpu_converged"),
                                           ("table4-cpu-2500", "cpu")])
def test_table4_has_a_run_for_every_row(table, profile):
    runs = _systems(tables.TABLES[table])
    have = {(system_name(xflags.model_config_from_flags(fv)), fv.src, fv.tgt, fv.dataset) for fv in runs.values()}
    assert {fv.profile for fv in runs.values()} == {profile}
    for system in tables.TABLE4_SYSTEMS:
        assert system in system_names(), system  # every row is implemented here
        if table == "table4":
            for src, tgt in tables.PAPER_TABLE4:
                assert (system, src, tgt, tables.DATASET_OF[(src, tgt)]) in have, (system, src)
        else:
            assert (system, "en", "de", "multi30k") in have, system
    if table.startswith("table4-cpu"):  # the rows beyond the paper's (gaussian_mean_prior: --system)
        rows = {fv.system or system_name(xflags.model_config_from_flags(fv))
                for fv in runs.values()}
        assert set(tables.table4_translation.TABLE4_CPU_EXTRA) <= rows


@pytest.mark.parametrize("table", ["table3", "table3-cpu"])
def test_table3_has_a_run_for_every_row(table):
    runs = _systems(tables.TABLES[table])
    systems = {system_name(xflags.model_config_from_flags(fv)) for fv in runs.values()}
    assert set(tables.PAPER_TABLE3) <= systems
    assert {fv.profile for fv in runs.values()} == {"cpu" if table.endswith("cpu") else "paper"}


@pytest.mark.parametrize("table,profile", [("table1", "paper"), ("table1-cpu", "cpu")])
def test_table1_has_a_run_for_every_row(table, profile):
    runs = _systems(tables.TABLES[table])
    assert {fv.profile for fv in runs.values()} == {profile}
    keys = []
    for fv in runs.values():
        system = fv.system or summarize_task.system_of(
            xflags.model_config_from_flags(fv)).removeprefix("seq2seq-")
        vocab = fv.vocab_size if fv.head == "softmax" else None
        keys.append((system, fv.head, False, vocab))  # a coverage run is evaluated before it too
        if fv.coverage and fv.coverage_steps:
            keys.append((system, fv.head, True, vocab))
    rows = tables.table1_summarization.TABLE1_CPU_ROWS if profile == "cpu" else tables.PAPER_TABLE1
    for key, name, _ in rows:
        if key[0] == "lead-3":
            assert any(n == "lead3" for n, _, _ in tables.TABLES[table])
            continue
        assert any(tables.table1_summarization._match(k, key) for k in keys), (table, name)


def test_table5_decodes_every_row_with_a_table1_model():
    """Table 5 decodes DUC2004 with every trained model of table1-cpu (its run names),
    the paper's four rows among them."""
    table1 = {name: flagfile for name, flagfile, _ in tables.TABLES["table1-cpu"] if flagfile}
    names = [name for name, _, _ in tables.TABLES["table5"]]
    assert set(names) == set(table1)
    systems = {summarize_task.system_of(xflags.model_config_from_flags(_settings(table1[n])))
               for n in names}
    assert set(tables.PAPER_TABLE5) <= systems


DRY_RUNS = ["table4", "table4-cpu", "table3", "table3-cpu", "table3-smoke", "table1",
            "table1-cpu", "table5"]


@pytest.mark.parametrize("table", DRY_RUNS)
def test_dry_run_prints_the_command_of_every_run(table, tmp_path, monkeypatch):
    """No data here: every table stops (or, for the synthetic smoke table, passes the
    check) after printing one command per run, each with its flagfile."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("ACVI_DATA_MIRROR", str(empty))
    monkeypatch.setenv("ACVI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)  # no feature store, no runs/ here
    out = io.StringIO()
    # an empty archive: the repository's own would mark its finished runs [archived]
    code = tables.run_table(table, "runs", "t.md", dry_run=True, stream=out,
                            archive_root=str(tmp_path)) \
        if table in tables.SUMMARY_TABLES + tables.CAPTION_TABLES else None
    if code is None:  # the translation tables print to stdout
        import contextlib
        with contextlib.redirect_stdout(out):
            code = tables.run_table(table, "runs", "t.md", dry_run=True,
                                    archive_root=str(tmp_path))
    text = out.getvalue()
    assert code == (0 if table == "table3-smoke" else 2), text
    assert not os.path.exists(tmp_path / "t.md")
    lines = [line for line in text.split("\n") if "[to run]" in line]
    assert len(lines) == len(tables.TABLES[table]), text
    for (name, flagfile, _), line in zip(tables.TABLES[table], lines):
        assert f"runs/{name}" in line, (name, line)
        if flagfile:
            assert f"configs/{flagfile}" in line, (flagfile, line)


def _fake(**fields):
    r = {"steps": 100, "train_wall_time_sec": 60.0, "eval_wall_time_sec": 5.0,
         "decode": {"beam_width": 5}, "command": f"python -m x --{fields['system']}"}
    r.update(fields)
    return r


def _row(text, first):
    for line in text.split("\n"):
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in\n{text}")


def test_table4_baselines_render_on_their_rows():
    results = [_fake(task="translate", dataset="iwslt15_en_vi", src="en", tgt="vi",
                     system=s, profile="paper", bleu={"dev": d, "test": d + 1.0})
               for s, d in (("soft", 1.0), ("ved", 3.0), ("transformer", 5.0))]
    text = tables.table4(results)
    header = [c.strip() for c in text.split("\n")[2].strip("|").split("|")]
    col = {h: i for i, h in enumerate(header)}

    def row(direction, system):
        for line in text.split("\n"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[:2] == [direction, system]:
                return cells
        raise AssertionError((direction, system))
    ved = row("En→Vi", "VED (Bahuleyan et al. 2018)")
    assert ved[col["ours, paper profile: test"]] == "4.00"
    assert ved[col["paper (Table 4): test"]] == "25.31"
    tr = row("En→Vi", "Transformer (Vaswani et al. 2017)")
    assert tr[col["ours, paper profile: dev"]] == "5.00" and tr[col["paper (Table 4): dev"]] == "24.34"
    var = row("Ro→En", "Variational attention (Deng et al. 2018)")
    assert var[col["our run"]] == "not run" and var[col["paper (Table 4): test"]] == "17.40"
    assert row("En→Ro", "Structured attention")[col["paper (Table 4): test"]] == "7.08"
    cpu = tables.table4_cpu([dict(r, dataset="multi30k", src="en", tgt="de", profile="cpu")
                             for r in results])
    assert _row(cpu, "VED (Bahuleyan et al. 2018)")[3] == "+2.00"  # Δ test vs the soft run
    assert _row(cpu, "Structured attention")[-1] == "not run"


def _summary(system, attention, head="pointer", rouge=(30.0, 10.0, 27.0), **kw):
    return _fake(task="summarize", system=system, attention=attention, head=head,
                 profile="cpu", coverage=head == "pointer",
                 rouge=dict(zip(tables.SUMMARY_SCORES, rouge)),
                 meteor={"exact": 1.0, "full": 2.0},
                 novelty={"novel_word_percent": 0.7, "oov_adoption_percent": 1.7},
                 **{"vocab_size": 20000, **kw})


def test_table1_rows_of_latents_and_the_transformer_are_their_own():
    """VED and the Transformer run with --attention=soft; their results must not land on
    the soft-attention rows."""
    results = [_summary("soft", "soft", rouge=(31.0, 11.0, 28.0)),
               _summary("ved", "soft", rouge=(33.0, 13.0, 30.0)),
               _summary("seq2seq-transformer", "soft", head="softmax", rouge=(20.0, 5.0, 17.0))]
    text = tables.RENDER["table1-cpu"](results)
    assert "33.00" in "|".join(_row(text, "pointer-generator + coverage: VED (ICLR version)"))
    sa = "|".join(_row(text, "pointer-generator + coverage (SA)"))
    assert "31.00" in sa and "33.00" not in sa
    assert "20.00" in "|".join(_row(text, "Transformer (ICLR version)"))
    assert "20.00" not in "|".join(_row(
        text, "seq2seq with SA (20K vocabulary; the paper's 50K row at CPU scale)"))
    assert _row(text, "pointer-generator + structured attention")[-1] == "not run"
    assert _row(text, "VED (Bahuleyan et al. 2018)")[1:3] == ["0.70", "1.70"]  # Table 2
    t5 = tables.RENDER["table5"]([dict(r, duc2004={"rouge_1": 9.0, "rouge_2": 1.0,
                                                    "rouge_l": 8.0, "command": "python -m d"})
                                  for r in results[1:2]])
    assert "9.00" in "|".join(_row(t5, "VED"))


def test_rows_without_an_implementation_say_so():
    assert tables.not_run("structured") == "not run"
    assert tables.not_run("lead-3") == "not run"
    assert tables.not_run("no-such-system") == "not implemented here"
    text = tables.table3([_fake(task="caption", system="some-new-variant", profile="smoke",
                                scores={}, synthetic_features=True)])
    assert _row(text, "Structured attention")[-1] == "not run"


def test_only_runs_the_named_runs_and_refuses_unknown_names(tmp_path, monkeypatch, capsys):
    """``tables run --only`` (the make targets' ONLY=): the dry run lists just those runs;
    a name that is not one of the table's runs is refused with the list of names."""
    monkeypatch.setitem(tables.TABLES, "table1-cpu", list(tables.TABLES["table1-cpu"]))
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("ACVI_DATA_MIRROR", str(empty))
    monkeypatch.setenv("ACVI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    repo = os.path.dirname(os.path.dirname(tables.CONFIG_DIR))
    for table, only, expected in [("table1-cpu", "lead3,pg_acvi", ["lead3", "pg_acvi"]),
                                  ("table5", "pg_soft", ["pg_soft"])]:
        # As `make` runs it: `python -m` makes tables.py __main__, a second copy of the module.
        r = cli.run("experiments.tables", ["run", table, "--only", only, "--runs_root", "runs",
                                           "--out", "t.md", "--dry_run",
                                           "--archive_root", str(empty)],
                    env=dict(os.environ, PYTHONPATH=repo), cwd=str(tmp_path), timeout=300)
        lines = [l for l in r.stdout.split("\n") if "[to run]" in l]
        assert [l.split("runs/")[-1] for l in lines] == expected, r.stdout + r.stderr
    with pytest.raises(SystemExit):
        tables.main(["run", "table1-cpu", "--only", "pg_soft,pg_nope", "--runs_root", "runs",
                     "--out", "t.md", "--dry_run"])
    assert "pg_nope" in capsys.readouterr().err


def test_make_targets_default_to_the_soft_vs_acvi_comparison():
    """The CPU-scale targets train soft and ACVI only unless ONLY=all (hours otherwise)."""
    import re
    make = open(os.path.join(os.path.dirname(tables.CONFIG_DIR), "..", "Makefile")).read()
    for target, table in [("table1-cpu", "table1-cpu"), ("table4-cpu", "table4-cpu"),
                          ("table4-cpu-2500", "table4-cpu-2500"),
                          ("table3-cpu", "table3-cpu"), ("table5", "table5")]:
        only = re.search(rf"^{target}: ONLY \?= (\S+)$", make, re.M).group(1).split(",")
        names = [r[0] for r in tables.TABLES[table]]
        assert set(only) <= set(names), (target, only)
        assert any("soft" in n for n in only) and any("acvi" in n for n in only), target


def test_table4_cpu_seeds_give_mean_and_std_and_a_copy_adds_nothing(tmp_path):
    """Three soft seeds (one of them found twice, e.g. in --runs_root and in the study's
    archive) and one ACVI seed: soft shows mean ± sample std over 3 seeds, ACVI its one
    number, and its Δ is against soft's mean."""
    def run(system, seed, test, where="a"):
        argv = ["translate.py", f"--model_dir={where}/{system}{seed}"] + (
            [f"--seed={seed}"] if seed else [])
        return _fake(task="translate", dataset="multi30k", src="en", tgt="de", profile="cpu",
                     system=system, argv=argv, bleu={"dev": test - 1.0, "test": test},
                     _path=f"{where}/{system}{seed}/results.json")
    results = [run("soft", 0, 27.0), run("soft", 1, 28.0), run("soft", 2, 29.0),
               run("soft", 1, 99.0, where="b"), run("acvi", 0, 30.0)]
    text = tables.table4_cpu(results)
    soft = _row(text, "Baseline (soft attention)")
    assert soft[2] == "28.00 ± 1.00 (3 seeds)" and soft[1] == "27.00 ± 1.00 (3 seeds)"
    acvi = _row(text, "ACVI")
    assert acvi[2] == "30.00" and acvi[3] == "+2.00"
    assert "99" not in text  # the second copy of seed 1 is not counted


def test_table4_cpu_converged_rows_short_of_their_planned_seeds_say_so():
    """At the converged recipe the test column names a row's planned seed count while it
    has fewer (issue 33): one ACVI seed of 5 reads "30.00 (1 of 5 seeds)", two soft seeds
    "28.50 ± 0.71 (2 of 5 seeds)"; a row at its count, and the 2,500-step profile, do not."""
    def run(system, seed, test, profile="cpu_converged"):
        argv = ["translate.py", f"--model_dir=a/{system}{seed}_{profile}", f"--seed={seed}"]
        return _fake(task="translate", dataset="multi30k", src="en", tgt="de",
                     profile=profile, system=system, argv=argv,
                     bleu={"dev": test - 1.0, "test": test},
                     _path=f"a/{system}{seed}_{profile}/results.json")
    from experiments.tables.table4_translation import TABLE4_CPU_PLANNED_SEEDS
    assert TABLE4_CPU_PLANNED_SEEDS["multi30k_acvi"] == 5
    assert "multi30k_no_attention" not in TABLE4_CPU_PLANNED_SEEDS
    converged = [run("soft", 0, 28.0), run("soft", 1, 29.0), run("acvi", 0, 30.0),
                 run("no_attention", 0, 16.0)]
    text = tables.table4_cpu(converged)
    assert _row(text, "Baseline (soft attention)")[2] == "28.50 ± 0.71 (2 of 5 seeds)"
    assert _row(text, "Baseline (soft attention)")[1] == "27.50 ± 0.71 (2 seeds)"  # val
    assert _row(text, "ACVI")[2] == "30.00 (1 of 5 seeds)"
    assert _row(text, "No attention (c_t = 0, the bridge state only; floor)")[2] == "16.00"
    old = tables.table4_cpu([run("soft", 0, 28.0, "cpu"), run("acvi", 0, 30.0, "cpu")])
    assert _row(old, "ACVI")[2] == "30.00"


def test_a_regenerated_table_keeps_the_notes_below_the_marker(tmp_path):
    from acvi_tf.utils.files import NOTES_MARKER, write_report
    out = tmp_path / "t.md"
    write_report(str(out), "# old table")
    out.write_text(out.read_text() + "2026-11-24: a note by hand\n")
    write_report(str(out), "# new table")
    text = out.read_text()
    assert text.startswith("# new table") and "old table" not in text
    assert text.index(NOTES_MARKER) < text.index("2026-11-24: a note by hand")


def test_table1_cpu_seeds_give_mean_and_std_and_the_paper_elbo_row_is_its_own():
    """Three soft seeds (one found twice) and the paper-ELBO ACVI run: soft shows mean ±
    sample std over its 3 seeds, before coverage too; the paper-ELBO run fills its own
    rows and not ACVI's, in Table 2 as well."""
    def run(system, seed, r1, where="a"):
        argv = ["summarize.py", f"--model_dir={where}/{system}{seed}"] + (
            [f"--seed={seed}"] if seed else [])
        return _summary(system, "acvi" if system.startswith("acvi") else "soft",
                        rouge=(r1, 10.0, 27.0), argv=argv, command=" ".join(argv),
                        no_coverage=dict(rouge=dict(zip(tables.SUMMARY_SCORES, (r1 - 5, 8.0, 22.0))),
                                         steps=1800),
                        _path=f"{where}/{system}{seed}/results.json")
    results = [run("soft", 0, 28.0), run("soft", 1, 29.0), run("soft", 2, 30.0),
               run("soft", 1, 99.0, where="b"), run("acvi_paper_elbo", 0, 25.0)]
    text = tables.RENDER["table1-cpu"](results)
    assert _row(text, "pointer-generator + coverage (SA)")[1] == "29.00 ± 1.00 (3 seeds)"
    assert _row(text, "pointer-generator (SA)")[1] == "24.00 ± 1.00 (3 seeds)"
    assert "99" not in text
    elbo = _row(text, "pointer-generator + ACVI + coverage, the paper's ELBO (Eq. 22 taken literally)")
    assert elbo[1] == "25.00" and elbo[8] == "42.71"  # ours, then the paper's ACVI quoted
    assert elbo[6] == elbo[7] == "–"  # no archived per-summary scores here: no bootstrap
    assert _row(text, "pointer-generator + ACVI + coverage")[-1] == "not run"
    assert _row(text, "ACVI, the paper's ELBO (Eq. 22 taken literally)")[1] == "0.70"  # Table 2


def test_table5_seeds_give_mean_and_std():
    def run(system, seed, r1):
        argv = ["summarize.py"] + ([f"--seed={seed}"] if seed else [])
        return _summary(system, "soft", argv=argv, command=" ".join(argv),
                        duc2004={"rouge_1": r1, "rouge_2": 5.0, "rouge_l": 20.0,
                                 "command": f"python -m d {seed}"})
    text = tables.RENDER["table5"]([run("soft", 0, 22.0), run("soft", 1, 24.0),
                                    run("acvi_paper_elbo", 0, 21.0)])
    assert _row(text, "SA")[1:3] == ["23.00 ± 1.41 (2 seeds)", "5.00 ± 0.00 (2 seeds)"]
    assert _row(text, "ACVI, the paper's ELBO (Eq. 22 taken literally)")[1] == "21.00"
    assert _row(text, "ACVI")[-1] == "not run"
    # Counting seeds: one seed a side has no Welch test; the baseline compares with nothing.
    assert _row(text, "SA")[4] == "–"
    assert _row(text, "ACVI, the paper's ELBO (Eq. 22 taken literally)")[4] == (
        "-2.00, Welch p = – (1 vs 2 seeds)")


def test_table5_counts_seeds_with_welch_against_scipy():
    from scipy import stats

    def run(system, seed, r1):
        argv = ["summarize.py"] + ([f"--seed={seed}"] if seed else [])
        return _summary(system, "soft", argv=argv, command=" ".join(argv),
                        duc2004={"rouge_1": r1, "rouge_2": 5.0, "rouge_l": 20.0,
                                 "command": f"python -m d {seed}"})
    soft, acvi = [22.0, 24.0, 23.5], [23.0, 25.5, 26.0]
    text = tables.RENDER["table5"]([run("soft", i, v) for i, v in enumerate(soft)]
                                   + [run("acvi", i, v) for i, v in enumerate(acvi)])
    p = stats.ttest_ind(acvi, soft, equal_var=False).pvalue
    assert _row(text, "ACVI")[4] == f"+1.67, Welch p = {p:.3f} (3 vs 3 seeds)"
    assert "Welch p" in text.split("\n")[2]  # the header names the test
    # the same numbers for scripts (results/table5.json), as Tables 1 and 4 give theirs
    from experiments.tables import table5_duc2004
    data = table5_duc2004.table5_data([run("soft", i, v) for i, v in enumerate(soft)]
                                      + [run("acvi", i, v) for i, v in enumerate(acvi)])
    assert sorted(data) == ["acvi", "soft"]
    assert data["acvi"]["seeds"] == [0, 1, 2] and data["acvi"]["rouge_1"] == acvi
    assert data["acvi"]["diff_to_soft"] == pytest.approx(sum(acvi) / 3 - sum(soft) / 3)
    assert data["acvi"]["welch_p"] == pytest.approx(p) and data["acvi"]["ci95"] is None
    assert data["soft"]["diff_to_soft"] is None


def test_table5_resamples_seeds_and_summaries_where_every_run_kept_its_scores(tmp_path):
    """With each run's per-summary DUC2004 recall beside its results.json, the cell is
    Table 1's two-level bootstrap (seeds, then summaries) with Welch's t over the runs'
    scores; a run without the file leaves the row at the difference and Welch's t."""
    import numpy as np
    from scipy import stats

    from acvi_tf.metrics import significance as sig
    from acvi_tf.metrics.rouge import DUC2004_ITEMS
    rng = np.random.default_rng(0)

    def run(system, seed, items, keep=True):
        d = tmp_path / f"{system}{seed}"
        d.mkdir()
        if keep:
            (d / DUC2004_ITEMS).write_text(json.dumps(items))
        argv = ["summarize.py"] + ([f"--seed={seed}"] if seed else [])
        return _summary(system, "soft", argv=argv, command=" ".join(argv),
                        _path=str(d / "results.json"),
                        duc2004={"rouge_1": float(np.mean(items)), "rouge_2": 5.0,
                                 "rouge_l": 20.0, "command": f"python -m d {seed}"})
    soft_items = [list(rng.uniform(10, 30, 40)) for _ in range(3)]
    acvi_items = [list(rng.uniform(12, 32, 40)) for _ in range(3)]
    soft = [run("soft", i, v) for i, v in enumerate(soft_items)]
    acvi = [run("acvi", i, v) for i, v in enumerate(acvi_items)]
    want = sig.two_level_bootstrap([sig.item_statistics(v) for v in soft_items],
                                   [sig.item_statistics(v) for v in acvi_items],
                                   sig.mean_from_statistics, 10_000)
    p = stats.ttest_ind([np.mean(v) for v in acvi_items], [np.mean(v) for v in soft_items],
                        equal_var=False).pvalue
    low, high = want["ci95"]
    text = tables.RENDER["table5"](soft + acvi)
    assert _row(text, "ACVI")[4] == (f"{want['difference']:+.2f} [{low:+.2f}, {high:+.2f}], "
                                     f"Welch p = {p:.3f} (3 vs 3 seeds)")
    # one seed decoded before the scores were kept: no interval for the row
    acvi[2] = run("acvi", 3, acvi_items[2], keep=False)
    text = tables.RENDER["table5"](soft + acvi)
    assert _row(text, "ACVI")[4].endswith(f", Welch p = {p:.3f} (3 vs 3 seeds)")
    assert "[" not in _row(text, "ACVI")[4]


def test_table5_keeps_the_plain_seq2seq_rows_of_two_vocabularies_apart():
    def run(vocab, r1):
        return _summary("seq2seq-soft", "soft", head="softmax", vocab_size=vocab,
                        duc2004={"rouge_1": r1, "rouge_2": 0.0, "rouge_l": r1,
                                 "command": f"python -m d {vocab}"})
    text = tables.RENDER["table5"]([run(20000, 0.34), run(60000, 0.65)])
    assert _row(text, "seq2seq-soft (20K vocabulary)")[1] == "0.34"
    assert _row(text, "seq2seq-soft (60K vocabulary)")[1] == "0.65"


def test_table4_cpu_n_grr_from_results_or_recomputed_from_the_archived_decode(tmp_path):
    """A run that recorded N-GRR shows it; an older run's is recomputed from the
    decode_test.txt beside its results.json, as repetition_table computes it."""
    old = tmp_path / "old"
    old.mkdir()
    (old / "decode_test.txt").write_text("a a a b\nthe dog the dog\n\n", encoding="utf-8")
    base = dict(task="translate", dataset="multi30k", profile="cpu", bleu={"dev": 1.0, "test": 2.0})
    new = _fake(system="soft", repetition={"test": {"1": 10.0, "2": 5.0, "3": 1.0, "4": 0.0}},
                **base)
    older = _fake(system="acvi", _path=str(old / "results.json"), **base)
    text = tables.RENDER["table4-cpu"]([new, older])
    assert _row(text, "Baseline (soft attention)")[4] == "10.00 / 5.00 / 1.00 / 0.00"
    from acvi_tf.metrics import repetition
    want = repetition.repetition_table(["a a a b", "the dog the dog", ""])
    assert _row(text, "ACVI")[4] == " / ".join(f"{want[n]:.2f}" for n in range(1, 5))
    assert want[1] == pytest.approx(100 * (0.5 + 0.5 + 0) / 3)  # Eq. 27 by hand


def test_the_seed_is_the_training_commands_not_a_later_evals():
    """--mode=eval rewrites command/argv without --seed; the row keeps the trained seed."""
    evaluated = {"system": "acvi", "argv": ["translate.py", "--mode=eval", "--model_dir=x"],
                 "command": "python -m t --mode=eval --model_dir=x",
                 "train_command": "python -m t --flagfile=f --model_dir=x --seed=2"}
    assert tables.render.seed_of(evaluated) == 2
    assert tables.render.seed_of({"argv": ["t.py", "--seed", "3"]}) == 3
    assert tables.render.seed_of({"command": "python -m t"}) == 0


def test_a_table_written_to_a_file_gets_its_dev_curves_figure(tmp_path):
    """Every run with a history.jsonl is a line of ``<out>_curves.png`` (read from the
    records, a resumed step keeping its last value), linked from the markdown; a table
    whose runs have no history gets no figure and no link."""
    import json
    from experiments.tables import runner
    for name, system, seed, bleu in (("s0", "soft", 0, 20.0), ("s1", "soft", 1, 21.0),
                                     ("a0", "acvi", 0, 22.0), ("copy", "copy-source", 0, 1.0)):
        d = tmp_path / "runs" / name
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps(_fake(
            task="translate", dataset="multi30k", src="en", tgt="de", profile="cpu",
            system=system, argv=["translate.py", f"--seed={seed}"],
            bleu={"dev": bleu, "test": bleu})))
        if system != "copy-source":
            (d / "history.jsonl").write_text("".join(json.dumps(
                {"step": s, "eval": {"dev_bleu": bleu * s / 4, "dev_nll": 4.0 - s / 2}}) + "\n"
                for s in (1, 2, 2, 4)))
    results = tables.find_results([str(tmp_path / "runs")])
    out = tmp_path / "results" / "t4.md"
    text = runner.write_table("table4-cpu-2500", results, str(out))
    png = tmp_path / "results" / "t4_curves.png"
    assert png.stat().st_size > 1000
    assert "![dev metrics of every run against steps](t4_curves.png)" in text
    assert "(3 runs;" in text and out.read_text().startswith(text.split("\n")[0])
    # no history anywhere: no figure
    for h in (tmp_path / "runs").glob("*/history.jsonl"):
        h.unlink()
    png.unlink()
    text = runner.write_table("table4-cpu-2500", tables.find_results(
        [str(tmp_path / "runs")]), str(out))
    assert "curves.png" not in text and not png.exists()


def test_table4_cpu_shows_only_its_recipe(tmp_path):
    """table4-cpu (cpu_converged) and table4-cpu-2500 (cpu) share row names and the
    ACVI study's archive: each shows only the runs of its own profile, in the markdown,
    the JSON and the figure."""
    import json
    from experiments.tables import runner
    for profile, test in (("cpu", 20.0), ("cpu_converged", 30.0)):
        for seed in (0, 1):
            d = tmp_path / "runs" / f"{profile}_{seed}"
            d.mkdir(parents=True)
            (d / "results.json").write_text(json.dumps(_fake(
                task="translate", dataset="multi30k", src="en", tgt="de", profile=profile,
                system="soft", argv=["translate.py", f"--seed={seed}"],
                command=f"python -m experiments.translate --seed={seed} --profile={profile}",
                bleu={"dev": test + seed, "test": test + seed})))
    results = tables.find_results([str(tmp_path / "runs")])
    for table, test, label in (("table4-cpu", 30.0, "converged"), ("table4-cpu-2500", 20.0,
                                                                   "2,500")):
        out = tmp_path / f"{table}.md"
        text = runner.write_table(table, results, str(out))
        data = json.loads((tmp_path / f"{table}.json").read_text())
        assert list(data) == ["soft"] and data["soft"]["test_bleu"] == [test, test + 1]
        assert label in text.split("\n")[0]
        # the header names the recipe: budget, schedule, checkpoint selection
        assert ("**Recipe of every row**" in text) == (table == "table4-cpu")
        assert f"{test + 0.5:.2f} ± 0.71" in _row(text, "Baseline (soft attention)")[2]


def test_sampled_diversity_is_the_mean_over_the_runs_that_measured_it():
    def run(system, seed, d1, d2):
        sampled = {"distinct_1": d1, "distinct_2": d2, "samples": 10, "groups": 100,
                   "entropy": 2.0, "tokens": 1000} if d1 is not None else None
        return _fake(task="translate", dataset="multi30k", src="en", tgt="de", profile="cpu",
                     system=system, argv=["translate.py", f"--seed={seed}"],
                     bleu={"dev": 20.0, "test": 21.0},
                     splits={"test": {"sampled_diversity": sampled}})
    text = tables.table4_cpu([run("soft", 0, None, None), run("acvi", 0, 0.1, 0.2),
                              run("acvi", 1, 0.3, 0.4), run("acvi", 2, None, None)])
    assert _row(text, "ACVI")[5] == "0.200 / 0.300 (K=10, 100 sources, 2 runs)"
    assert _row(text, "Baseline (soft attention)")[5] == "–"


def test_seeds_run_in_parallel_are_archived_and_rendered_from_the_archive(tmp_path, monkeypatch,
                                                                          capsys):
    """``tables run --seeds 0,1 --parallel 2``: seed k > 0 runs in <name>_s<k> with
    --seed=k; every finished run is archived into the table's archive, and the table
    renders from it once the run directories are gone."""
    from experiments.tables import runner
    from experiments.tables.spec import REPO_ROOT
    seeds_plan = runner.plan("table4-cpu", "r", only=["multi30k_ved"], seeds=(0, 1))
    assert [(p[0], p[2]) for p in seeds_plan] == [("multi30k_ved", "r/multi30k_ved"),
                                                  ("multi30k_ved_s1", "r/multi30k_ved_s1")]
    assert "--seed=1" in seeds_plan[1][1] and not any("--seed" in a for a in seeds_plan[0][1])
    # a stand-in for training: a translation results.json whose test BLEU is 20 + seed
    fake = tmp_path / "fake_train.py"
    fake.write_text(
        "import json, os, sys\n"
        "args = dict(a[2:].split('=', 1) for a in sys.argv[1:] if '=' in a)\n"
        "d, s = args['model_dir'], int(args.get('seed', 0))\n"
        "os.makedirs(d, exist_ok=True)\n"
        "cmd = ' '.join(['python'] + sys.argv)  # the command as run, as the CLIs record it\n"
        "json.dump({'task': 'translate', 'system': 'ved', 'profile': 'cpu', 'steps': 10,\n"
        "           'dataset': 'multi30k', 'src': 'en', 'tgt': 'de', 'decode': {'beam_width': 5},\n"
        "           'bleu': {'dev': 19.0 + s, 'test': 20.0 + s}, 'command': cmd,\n"
        "           'train_command': cmd}, open(os.path.join(d, 'results.json'), 'w'))\n"
        "open(os.path.join(d, 'decode_test.txt'), 'w').write('a b\\n')\n")
    use_fake_trainer(monkeypatch, fake)
    spec = runner.SPECS["table4-cpu"]
    archive = tmp_path / "archive"
    monkeypatch.setitem(runner.SPECS, "table4-cpu", type(spec)(
        spec.runs, spec.render, spec.task, archive=os.path.relpath(archive, REPO_ROOT)))
    runs_root, out = tmp_path / "runs", tmp_path / "t.md"
    assert runner.run_table("table4-cpu", str(runs_root), str(out), only=["multi30k_ved"],
                            seeds=(0, 1), parallel=2) == 0
    assert (runs_root / "logs" / "multi30k_ved_s1.log").exists()
    assert sorted(os.listdir(archive)) == ["multi30k_ved", "multi30k_ved_s1"]
    said = capsys.readouterr().out
    # each run archived as it ended; the sweep finds nothing left to archive
    assert said.count(f"archived in {archive}") == 2, said
    assert (archive / "multi30k_ved_s1" / "decode_test.txt").exists()
    row = _row(out.read_text(), "VED (Bahuleyan et al. 2018)")
    assert row[2] == "20.50 ± 0.71 (2 seeds)"
    # the run directories gone, the archive still renders the row (a dry run renders nothing)
    import shutil
    shutil.rmtree(runs_root)
    text = runner.write_table("table4-cpu", tables.find_results(
        runner.SPECS["table4-cpu"].result_paths(str(runs_root))))
    assert _row(text, "VED (Bahuleyan et al. 2018)")[2] == "20.50 ± 0.71 (2 seeds)"
    assert "FAILED" not in capsys.readouterr().out


def test_archive_root_sends_the_archive_to_another_checkout(tmp_path, monkeypatch, capsys):
    """``--archive_root``: runs trained from a worktree at a fixed commit archive into the
    main checkout's results/ as each ends; a missing folder is refused naming the flag."""
    from experiments.tables import runner
    fake = tmp_path / "fake_train.py"
    fake.write_text(
        "import json, os, sys\n"
        "args = dict(a[2:].split('=', 1) for a in sys.argv[1:] if '=' in a)\n"
        "os.makedirs(args['model_dir'], exist_ok=True)\n"
        "cmd = ' '.join(['python'] + sys.argv)  # the command as run, as the CLIs record it\n"
        "json.dump({'task': 'translate', 'system': 'ved', 'profile': 'cpu_converged',\n"
        "           'steps': 10, 'dataset': 'multi30k', 'src': 'en', 'tgt': 'de',\n"
        "           'bleu': {'dev': 19.0, 'test': 20.0}, 'command': cmd, 'train_command': cmd},\n"
        "          open(os.path.join(args['model_dir'], 'results.json'), 'w'))\n")
    use_fake_trainer(monkeypatch, fake)
    main = tmp_path / "main"
    main.mkdir()
    assert runner.main(["run", "table4-cpu", "--runs_root", str(tmp_path / "runs"), "--out",
                        str(tmp_path / "t.md"), "--only", "multi30k_ved",
                        "--archive_root", str(main)]) == 0
    assert (main / "results" / "table4_cpu" / "runs" / "multi30k_ved" / "results.json").exists()
    # the table renders from that checkout's archive (a worktree's own results/ is stale)
    assert sorted(json.loads((tmp_path / "t.json").read_text())) == ["ved"]
    # on a fresh machine (no runs root) the archived run is not trained again...
    import shutil
    shutil.rmtree(tmp_path / "runs")
    capsys.readouterr()
    args = ["run", "table4-cpu", "--runs_root", str(tmp_path / "runs"), "--out",
            str(tmp_path / "t.md"), "--only", "multi30k_ved", "--archive_root", str(main)]
    assert runner.main(args) == 0
    said = capsys.readouterr().out
    assert "[archived] python" in said and not (tmp_path / "runs" / "multi30k_ved").exists()
    # ...its seed 1 is, and --retrain_archived trains seed 0 again
    assert runner.main(args + ["--seeds", "0,1", "--retrain_archived"]) == 0
    assert "[archived]" not in capsys.readouterr().out
    assert (tmp_path / "runs" / "multi30k_ved" / "results.json").exists()
    assert (tmp_path / "runs" / "multi30k_ved_s1" / "results.json").exists()
    with pytest.raises(SystemExit):
        runner.main(["run", "table4-cpu", "--runs_root", str(tmp_path / "runs"), "--out",
                     str(tmp_path / "t.md"), "--archive_root", str(tmp_path / "nowhere")])
    assert f"--archive_root: {tmp_path / 'nowhere'} is not a directory" in \
        capsys.readouterr().err


def test_the_sweep_never_replaces_an_archived_run_nor_archives_an_unfinished_one(
        tmp_path, monkeypatch):
    """The runner's closing sweep archives the finished runs under --runs_root that the
    archive lacks; it leaves an archived run alone when another directory holds a run of
    the same command (a rerun of that seed), and skips a directory the table's task has
    not finished (e.g. Table 5's seed whose directory holds only its Table 1 training)."""
    from experiments.tables import runner
    from experiments.tables.spec import REPO_ROOT
    spec = runner.SPECS["table4-cpu"]
    archive = tmp_path / "archive"
    monkeypatch.setitem(runner.SPECS, "table4-cpu", type(spec)(
        spec.runs, spec.render, spec.task, archive=os.path.relpath(archive, REPO_ROOT)))
    runs_root = tmp_path / "runs"
    fake = tmp_path / "fake_train.py"
    fake.write_text("import sys; sys.exit(3)\n")  # nothing may train: every run is done
    use_fake_trainer(monkeypatch, fake)
    plan = {p[0]: p for p in runner.plan("table4-cpu", str(runs_root), only=["multi30k_ved"],
                                         seeds=(0, 1, 2))}

    def write(where, name, test, finished=True):
        cmd = " ".join(["python"] + plan[name][1][1:])  # as the CLIs record it
        os.makedirs(where, exist_ok=True)
        scores = {"bleu": {"dev": test, "test": test}} if finished else {}
        (where / "results.json").write_text(json.dumps(dict(
            task="translate", system="ved", profile="cpu_converged", steps=10,
            dataset="multi30k", src="en", tgt="de", decode={"beam_width": 5},
            command=cmd, train_command=cmd, **scores)))
    write(archive / "multi30k_ved", "multi30k_ved", 20.0)  # seed 0: archived before
    write(runs_root / "multi30k_ved", "multi30k_ved", 25.0)  # and rerun here since
    write(runs_root / "multi30k_ved_s1", "multi30k_ved_s1", 21.0)  # finished, not archived
    write(runs_root / "multi30k_ved_s2", "multi30k_ved_s2", 0.0, finished=False)
    assert runner.run_table("table4-cpu", str(runs_root), str(tmp_path / "t.md"),
                            only=["multi30k_ved"], seeds=(0, 1), stream=io.StringIO()) == 0
    assert sorted(os.listdir(archive)) == ["multi30k_ved", "multi30k_ved_s1"]
    kept = json.loads((archive / "multi30k_ved" / "results.json").read_text())
    assert kept["bleu"]["test"] == 20.0


def test_table2_covers_the_rows_without_a_pointer_too():
    """Table 1's softmax-head rows get their measured novelty in Table 2 (no paper numbers:
    the paper's Table 2 has pointer-generator rows only); rows without runs do not."""
    transformer = _summary("seq2seq-transformer", "soft", head="softmax")
    transformer["novelty"] = {"novel_word_percent": 12.5, "oov_adoption_percent": 0.0}
    results = [_summary("soft", "soft"), transformer]
    text = tables.RENDER["table1-cpu"](results)
    table2 = text[text.index("## Table 2"):]
    assert _row(table2, "Transformer (ICLR version)")[1:6] == ["12.50", "0.00", "–", "–", "–"]
    assert _row(table2, "Baseline (soft attention)")[1] == "0.70"
    assert "seq2seq with SA (20K" not in table2


def test_table1_cpu_json_has_every_seed_of_each_row_keyed_by_row():
    """results/table1_cpu.json (what the README's figures come from): per row every seed's
    ROUGE, keyed by system / head / coverage; a coverage run's scores before coverage are
    their own row; seeds found twice count once."""
    def run(system, seed, r1, where="a", head="pointer"):
        argv = ["summarize.py", f"--model_dir={where}/{system}{seed}"] + (
            [f"--seed={seed}"] if seed else [])
        extra = {} if head != "pointer" else {"no_coverage": dict(
            rouge=dict(zip(tables.SUMMARY_SCORES, (r1 - 5, 8.0, 22.0))), steps=1800)}
        return _summary(system, "soft", head=head, rouge=(r1, 10.0, 27.0), argv=argv,
                        command=" ".join(argv), provenance={"commit": f"c{seed}"}, **extra)
    results = [run("soft", 0, 28.0), run("soft", 1, 30.0), run("soft", 1, 99.0, where="b"),
               run("acvi", 0, 31.0), run("seq2seq-soft", 0, 4.0, head="softmax")]
    data = tables.SPECS["table1-cpu"].data(results)
    assert data["soft_coverage"]["rouge_1"] == [28.0, 30.0]
    assert data["soft"]["rouge_1"] == [23.0, 25.0]  # before coverage
    assert data["soft_coverage"]["seeds"] == [0, 1]
    assert data["soft_coverage"]["commit"] == ["c0", "c1"]
    assert data["acvi_coverage"]["name"] == "pointer-generator + ACVI + coverage"
    assert data["soft_softmax_20k"]["rouge_1"] == [4.0]
    # no archived per-summary scores here: no comparison is made up
    assert data["acvi_coverage"]["diff_to_soft"] is None


@pytest.mark.parametrize("table", ["table4", "table1", "table3"])
def test_paper_tables_run_acvi_ours_and_the_paper_elbo_each_from_its_own_flagfile(table):
    """As at CPU scale: ``<row>_acvi.flags`` is ACVI (ours: KL weight 1e-4, no Gumbel tail),
    ``<row>_acvi_paper_elbo.flags`` beside it the paper's ELBO taken literally (KL weight
    1, the Gumbel-Softmax tail for the last 10%), its own row (--system)."""
    runs = {name: (flagfile, extra) for name, flagfile, extra in tables.TABLES[table]}
    ours = [n for n in runs if n.endswith("acvi")]
    assert ours
    for name in ours:
        flagfile, extra = runs[name]
        literal_file, literal_extra = runs[name + "_paper_elbo"]
        assert literal_file == flagfile.replace("_acvi.flags", "_acvi_paper_elbo.flags")
        mine, paper = _settings(flagfile, extra), _settings(literal_file, literal_extra)
        assert mine.profile == paper.profile == "paper"
        assert mine.attention == paper.attention == "acvi"
        assert xflags.parse_attention_options(mine.attention_option, "acvi") == {
            "kl_weight": 0.0001}
        assert mine.gumbel_fraction == 0 and mine.system == ""
        assert xflags.parse_attention_options(paper.attention_option, "acvi") == {}
        assert paper.gumbel_fraction == 0.1 and paper.system == "acvi_paper_elbo"
        # the two differ in nothing else the model or training reads
        for key in ("encoder_units", "decoder_units", "train_steps", "batch_size", "score"):
            assert getattr(mine, key) == getattr(paper, key), key


def test_paper_table4_shows_the_paper_elbo_row_beside_acvi_quoting_the_papers_acvi():
    results = [dict(_fake(system=s, profile="paper", bleu={"dev": d, "test": d + 1.0}),
                    src="en", tgt="vi", dataset="iwslt15_en_vi")
               for s, d in (("acvi", 24.0), ("acvi_paper_elbo", 20.0))]
    text = tables.table4(results)
    ours = _row(text, "En→Vi")  # the first En→Vi row is soft attention's
    assert ours[1] == "Baseline (soft attention)"
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.split("\n")
            if line.startswith("| En→Vi")]
    acvi, elbo = (next(r for r in rows if r[1] == tables.SYSTEM_NAMES[s])
                  for s in ("acvi", "acvi_paper_elbo"))
    assert acvi[2:6] == ["24.00", "25.00", "24.08", "26.16"]
    assert elbo[2:6] == ["20.00", "21.00", "24.08", "26.16"]


@pytest.mark.parametrize("order, expected", [
    ("seeds", ["multi30k_soft", "multi30k_acvi", "multi30k_soft_s1", "multi30k_acvi_s1"]),
    ("rows", ["multi30k_soft", "multi30k_soft_s1", "multi30k_acvi", "multi30k_acvi_s1"])])
def test_runs_start_seed_by_seed_unless_asked_by_row(order, expected, tmp_path, monkeypatch):
    """``--order seeds`` (the default) lists and starts every row's seed 0 before any
    seed 1, so a runner stopped partway leaves each row with seeds; ``rows`` keeps a
    row's seeds together. The dry run prints them in the order they would start."""
    import contextlib
    monkeypatch.setenv("ACVI_DATA_MIRROR", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    kwargs = {} if order == "seeds" else {"order": order}
    with contextlib.redirect_stdout(out):
        tables.run_table("table4-cpu", "runs", "t.md", dry_run=True, stream=out,
                         only=["multi30k_soft", "multi30k_acvi"], seeds=(0, 1),
                         archive_root=str(tmp_path), **kwargs)
    listed = [line.split("--model_dir=runs/")[1].split()[0]
              for line in out.getvalue().split("\n") if "[to run]" in line]
    assert listed == expected
    with pytest.raises(ValueError, match="order"):
        tables.run_table("table4-cpu", "runs", "t.md", dry_run=True, stream=out,
                         order="random", archive_root=str(tmp_path))


def test_planned_seeds_run_each_row_to_its_own_count(tmp_path, monkeypatch):
    """``--seeds planned`` runs seeds 0..n-1 of each row for the row's planned n (issue 33:
    5 for soft attention, 3 for the noise control, 1 for the copy floor), seed by seed,
    and the CLI takes the word."""
    import contextlib
    monkeypatch.setenv("ACVI_DATA_MIRROR", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        tables.run_table("table4-cpu", "runs", "t.md", dry_run=True, stream=out,
                         only=["multi30k_copy", "multi30k_soft", "multi30k_soft_context_noise"],
                         seeds="planned", archive_root=str(tmp_path))
    listed = [line.split("--model_dir=runs/")[1].split()[0]
              for line in out.getvalue().split("\n") if "[to run]" in line]
    assert listed == ["multi30k_copy", "multi30k_soft", "multi30k_soft_context_noise",
                      "multi30k_soft_s1", "multi30k_soft_context_noise_s1",
                      "multi30k_soft_s2", "multi30k_soft_context_noise_s2",
                      "multi30k_soft_s3", "multi30k_soft_s4"]
    cli = io.StringIO()
    with contextlib.redirect_stdout(cli), contextlib.redirect_stderr(io.StringIO()):
        tables.runner.main(["run", "table4-cpu", "--runs_root", "runs", "--out", "t.md",
                            "--only", "multi30k_soft", "--seeds", "planned",
                            "--archive_root", str(tmp_path), "--dry_run"])
        assert "table4-cpu: 5 runs" in cli.getvalue()
        with pytest.raises(SystemExit):
            tables.runner.main(["run", "table4-cpu", "--runs_root", "runs", "--out", "t.md",
                                "--seeds", "plan", "--dry_run"])


def test_finish_within_gives_each_run_its_rows_archived_length(tmp_path, monkeypatch):
    """``--finish_within M``: the runner hands the job scheduler a window M minutes from
    now and each run the median wall time of its row's archived seeds (the table's median
    for a row with none); without the flag no window."""
    import time
    archive = tmp_path / "results" / "table4_cpu" / "runs"
    for name, seconds in [("multi30k_soft", 2000.0), ("multi30k_soft_s1", 2400.0),
                          ("multi30k_ved", 5000.0)]:
        os.makedirs(archive / name)
        (archive / name / "results.json").write_text(json.dumps({"wall_time_sec": seconds}))
    seen = {}

    def fake_run_jobs(jobs, parallel, log_dir, stream, start_until=None, finish_until=None):
        seen.update(finish_until=finish_until,
                    lengths={j.name: j.expected_seconds for j in jobs})
        return 0
    monkeypatch.setattr(tables.runner, "run_jobs", fake_run_jobs)
    monkeypatch.setitem(tables.preflight.CHECKS, "translate", lambda *a: True)
    monkeypatch.setattr(tables.runner, "write_table", lambda *a, **k: "table")
    monkeypatch.chdir(tmp_path)
    argv = ["run", "table4-cpu", "--runs_root", "runs", "--out", "t.md", "--only",
            "multi30k_soft,multi30k_vrnmt", "--seeds", "2", "--archive_root", str(tmp_path)]
    start = time.time()
    assert tables.runner.main(argv + ["--finish_within", "90"]) == 0
    assert start + 90 * 60 <= seen["finish_until"] <= time.time() + 90 * 60
    assert seen["lengths"] == {"multi30k_soft_s2": 2200.0, "multi30k_vrnmt_s2": 2400.0}
    assert tables.runner.main(argv) == 0
    assert seen["finish_until"] is None
    with pytest.raises(SystemExit):
        tables.runner.main(argv + ["--finish_within", "-1"])
