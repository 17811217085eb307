"""The ACVI study driver and its report, on fake finished runs (no training)."""

import json
import os

import pytest

from experiments import archive
from experiments.jobs import run_jobs
from experiments.acvi_study import grid as acvi_study, report as acvi_study_report
from acvi_tf.metrics.significance import paired_bootstrap
from acvi_tf.run.records import curve


def _fake_run(model_dir, val, test, kl, lines):
    os.makedirs(model_dir, exist_ok=True)
    results = {"bleu": {"dev": val, "test": test}, "train_wall_time_sec": 600.0,
               "train_command": f"python -m experiments.translate --model_dir={model_dir}",
               "diagnostics": {"dev_nll": 3.0 - val / 100, "kl_mc": kl, "kl_bound": 2 * kl,
                               "context_use": 0.5, "sigma_mean": 0.3}}
    with open(os.path.join(model_dir, "results.json"), "w") as f:
        json.dump(results, f)
    with open(os.path.join(model_dir, "history.jsonl"), "w") as f:
        for step in (500, 1000, 1000):  # a resumed run repeats step 1000
            f.write(json.dumps({"step": step, "eval": {"dev_bleu": val * step / 1000,
                                                       "kl_mc": kl}}) + "\n")
    with open(os.path.join(model_dir, "decode_test.txt"), "w") as f:
        f.write("\n".join(lines))


def test_plan_names_every_cell_and_only_keeps_the_order(tmp_path):
    cells = acvi_study.cells(str(tmp_path))
    names = [c[0] for c in cells]
    assert len(names) == len(set(names))
    assert {f"grid_{n}" for n, _, _ in acvi_study.GRID} <= set(names)
    picked = acvi_study.select(cells, "noise_only,multi30k_soft_s0")
    assert [c[0] for c in picked] == ["grid_noise_only", "multi30k_soft_s0"]
    with pytest.raises(SystemExit, match="unknown"):
        acvi_study.select(cells, "nonsense")
    # the paper-ELBO seed 0 of the comparison is the grid's run, trained once
    dirs = {c[0]: c[4] for c in cells}
    assert dirs["multi30k_acvi_paper_elbo_s0"] == dirs["grid_paper_elbo"]
    # grid runs fill no table row but the two that are also seed 0 of a comparison row
    system = {c[0]: [a for a in c[3] if a.startswith("--system=")] for c in cells}
    assert system["grid_paper_elbo"] == []  # its flagfile says acvi_paper_elbo
    assert system[f"grid_{acvi_study.OURS['multi30k']}"] == ["--system=acvi"]
    assert system["grid_kl1e-3"] == ["--system=acvi_grid_kl1e-3"]
    warm = next(c for c in cells if c[0] == "grid_warm_start")
    assert acvi_study._source(warm[3]) == dirs["multi30k_soft_s0"]
    control = next(c for c in cells if c[0] == "grid_warm_start_soft")  # the same source
    assert acvi_study._source(control[3]) == dirs["multi30k_soft_s0"]
    assert acvi_study.cell_system(control[3]) == "soft_grid_warm_start"
    assert control[3].index("--attention=soft") > control[3].index(
        f"--flagfile={acvi_study.MULTI30K_PAPER}")  # overrides the flagfile's acvi


def test_run_skips_done_cells_and_waits_for_warm_start_sources(tmp_path, capsys):
    cells = acvi_study.cells(str(tmp_path))
    warm = [c for c in cells if c[0] == "grid_warm_start"]
    failed = run_jobs(acvi_study.jobs(warm), 1, str(tmp_path / "logs"))
    assert failed == 1 and "not done" in capsys.readouterr().out
    _fake_run(warm[0][4], 20.0, 21.0, 1.0, ["x"])
    assert run_jobs(acvi_study.jobs(warm), 1, str(tmp_path / "logs")) == 0  # done: nothing runs


def test_a_cnndm_grid_cell_trains_then_scores_val_and_existing_runs_only_score_val(
        tmp_path, monkeypatch, capsys):
    import sys
    cells = acvi_study.cells(str(tmp_path))
    grid = {c[0]: c for c in cells if c[1] == "grid_cnndm"}
    assert set(grid) == {f"cnndm_grid_{n}" for n, _, _ in acvi_study.CNNDM_GRID}
    dirs = {c[0]: c[4] for c in cells}
    # the grid's KL weight 1e-4 and 0 are seed 0 of the "ours" and noise-only rows
    assert grid["cnndm_grid_kl1e-4"][4] == dirs["cnndm_acvi_s0"]
    assert grid["cnndm_grid_kl0"][4] == dirs["cnndm_acvi_noise_only_s0"]
    assert "--system=acvi_grid_cnndm_kl1e-3" in grid["cnndm_grid_kl1e-3"][3]
    # a stand-in for training (writes results.json) and for --mode=val (adds "val")
    train = ("import json, os, sys; os.makedirs(sys.argv[1], exist_ok=True); "
             "json.dump({'rouge': {'rouge_1': 30.0}}, open(sys.argv[1] + '/results.json', 'w'))")
    val = ("import json, sys; p = sys.argv[1] + '/results.json'; r = json.load(open(p)); "
           "r['val'] = {'rouge': {'rouge_1': 25.0}}; json.dump(r, open(p, 'w'))")
    monkeypatch.setattr(acvi_study, "val_command", lambda d: [sys.executable, "-c", val, d])
    new = ("cnndm_grid_x", "grid_cnndm", "x", [sys.executable, "-c", train, str(tmp_path / "x")],
           str(tmp_path / "x"))
    assert acvi_study.todo(new) == [new[3], acvi_study.val_command(new[4])]
    assert run_jobs(acvi_study.jobs([new]), 1, str(tmp_path / "logs")) == 0
    with open(tmp_path / "x" / "results.json") as f:
        assert json.load(f) == {"rouge": {"rouge_1": 30.0}, "val": {"rouge": {"rouge_1": 25.0}}}
    out = capsys.readouterr().out
    assert out.count("cnndm_grid_x: python -c") == 2 and "cnndm_grid_x: done" in out
    assert acvi_study.todo(new) == []
    # a finished run is not trained again: only its val score runs
    old = ("cnndm_grid_y", "grid_cnndm", "y", [sys.executable, "-c", "raise SystemExit(3)"],
           str(tmp_path / "y"))
    os.makedirs(old[4])
    with open(os.path.join(old[4], "results.json"), "w") as f:
        json.dump({"rouge": {"rouge_1": 29.0}}, f)
    assert run_jobs(acvi_study.jobs([old]), 1, str(tmp_path / "logs")) == 0
    # a failed training run gets no val score and counts as failed
    bad = ("cnndm_grid_z", "grid_cnndm", "z", [sys.executable, "-c", "raise SystemExit(3)"],
           str(tmp_path / "z"))
    assert run_jobs(acvi_study.jobs([bad]), 1, str(tmp_path / "logs")) == 1
    assert "FAILED (exit code 3)" in capsys.readouterr().out


def test_report_tables_json_plots_and_kept_notes(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    refs = ["a b c d", "e f g h", "i j k l"]
    cells = acvi_study.cells(str(root))
    dirs = {c[0]: c[4] for c in cells}
    for seed in acvi_study.SEEDS:
        _fake_run(dirs[f"multi30k_soft_s{seed}"], 20.0 + seed, 21.0 + seed, 0.0,
                  ["a b c x", "e f x h", "i x k l"])
    _fake_run(dirs["grid_paper_elbo"], 8.0, 7.5, 0.02, ["a x x x", "e x x x", "x x x l"])
    _fake_run(dirs["grid_noise_only"], 27.0, 28.0, 2000.0, refs)
    for cell, val in (("cnndm_grid_kl1e-3", 24.5), ("cnndm_grid_kl0", 26.25)):
        _fake_run(dirs[cell], 0.0, 0.0, 1.0, ["x"])
        with open(os.path.join(dirs[cell], "results.json")) as f:
            r = json.load(f)
        r.update(rouge={"rouge_1": 29.0}, val={"rouge": {"rouge_1": val, "rouge_2": 5.0,
                                                         "rouge_l": 20.0}, "val_articles": 500,
                                               "decode": {"beam_width": 4, "min_length": 17}})
        with open(os.path.join(dirs[cell], "results.json"), "w") as f:
            json.dump(r, f)
    monkeypatch.setattr(acvi_study_report, "references", lambda split: refs)
    out = tmp_path / "results" / "acvi_study.md"
    out.parent.mkdir()
    out.write_text("old\n" + acvi_study_report.NOTES_MARKER + "\n2026-11-23: a note by hand\n")
    assert acvi_study_report.write(str(root), cells, str(out)) == 0
    text = out.read_text()
    assert "| noise_only |" in text and "27.00" in text
    assert "Best cell by val BLEU so far: **noise_only**" in text
    assert "Best cell by val ROUGE-1 so far: **kl0** (26.25). Its three seeds are the row" in text
    assert "| kl1e-5 | KL weight 1e-5 | not run yet |" in text
    assert "2026-11-23: a note by hand" in text and "old\n" not in text
    # paper ELBO vs soft: one seed pair; a p at the bootstrap's floor is written as such
    import re
    assert re.search(r"sacrebleu p (= 0\.\d+|< 1e-4)\n", text)
    data = json.loads((tmp_path / "results" / "acvi_study.json").read_text())
    assert data["multi30k"]["soft"]["test_bleu"] == [21.0, 22.0, 23.0]
    assert data["multi30k"]["acvi_paper_elbo"]["test_bleu"] == [7.5]
    # no results/table4_cpu.json here: the converged comparison lists its rows as not run
    assert "| ACVI (ours) | 0 | not run yet |" in text and data["converged_comparison"] == {}
    # the shape, plus a row per earlier choice of "ACVI (ours)" (its seeds stay shown)
    earlier = {system for system, _ in acvi_study.EARLIER.values()}
    assert set(data["cnndm"]) == {"soft", "acvi_paper_elbo", "acvi"} | earlier
    for png in ("curves_multi30k.png", "rate_distortion.png"):
        assert (tmp_path / "results" / "acvi_study" / png).stat().st_size > 1000
    # the archive alone regenerates the report
    import shutil
    shutil.rmtree(root)
    assert acvi_study_report.write(str(root), cells, str(out)) == 0
    assert json.loads((tmp_path / "results" / "acvi_study.json").read_text()) == data
    assert curve([{"step": 1, "eval": {"x": 1}}, {"step": 1, "eval": {"x": 2}}],
                 "eval", "x") == ([1], [2])


def test_the_converged_comparison_reads_the_table_and_tests_the_controls_against_ours():
    """ACVI (ours) and its controls from results/table4_cpu.json's rows: the table's
    interval decides the reading against soft attention, and each control is compared
    with ACVI (ours) by Welch's t over the seeds (scipy's own test as the reference)."""
    from scipy import stats
    soft, ours, noise = [36.9, 36.3, 36.8], [36.0, 35.2, 36.5], [37.4, 37.9, 37.6]
    table4 = {"soft": {"test_bleu": soft, "val_bleu": [36.0, 36.2, 36.4]},
              "acvi": {"test_bleu": ours, "val_bleu": [36.1, 36.0, 35.9],
                       "diff_to_soft": -0.43, "ci95": [-1.4, 0.6], "welch_p": 0.37},
              "soft_context_noise": {"test_bleu": noise, "val_bleu": [37.0, 37.1, 37.2],
                                     "diff_to_soft": 0.97, "ci95": [0.2, 1.6],
                                     "welch_p": 0.04}}
    lines, data = acvi_study_report.converged_comparison(table4)
    text = "\n".join(lines)
    assert "| ACVI (ours) | 3 | 35.90 ± 0.66 (n=3) | 36.00 ± 0.10 (n=3) | -0.43 [-1.40, +0.60]" \
        " | 0.370 | level with soft attention | – |" in text
    want = stats.ttest_ind(noise, ours, equal_var=False)
    assert data["soft_context_noise"]["vs_acvi"]["p_value"] == pytest.approx(want.pvalue)
    assert data["soft_context_noise"]["reading"] == "ahead of soft attention"
    assert f"| ahead of soft attention | {sum(noise) / 3 - sum(ours) / 3:+.2f}, " \
        f"p = {want.pvalue:.3f} |" in text
    assert "| Soft attention + dropout on c_t (control) | 0 | not run yet |" in text
    assert set(data) == {"soft", "acvi", "soft_context_noise"}
    assert acvi_study_report._verdict([-2.0, -0.1], "soft attention") == "behind soft attention"
    # A p below 0.001 keeps a significant digit (as the table prints it), not "0.000".
    table4["acvi"]["welch_p"] = 1.6e-07
    text = "\n".join(acvi_study_report.converged_comparison(table4)[0])
    assert " | -0.43 [-1.40, +0.60] | 1.6e-07 | " in text


def _flags(path):
    with open(path, encoding="utf-8") as f:
        return {line.strip() for line in f if line.startswith("--")
                and not line.startswith("--model_dir=")}


def _with_cell(paper_flags, cell_flags):
    """The paper's row (its --system dropped) with a cell's flags: a later flag of the same
    name replaces the earlier one (each --attention_option by its key)."""
    expected = {}
    for flag in sorted(f for f in paper_flags if not f.startswith("--system=")) + cell_flags:
        key = flag.split("=", 1)[0] if not flag.startswith("--attention_option=") else \
            flag.split("=", 2)[1]
        expected[key] = flag
    return set(expected.values())


def test_the_converged_tables_acvi_and_noise_control_follow_the_converged_grid():
    """table4-cpu (the converged recipe) runs ACVI (ours) as the converged KL grid chose it
    by mean val BLEU once every cell had finished (results/acvi_study.json): the paper's
    row plus the cell's flags; its noise control is the 2,500-step table's with the noise
    set to that cell's mean sigma (3 significant digits)."""
    from experiments.tables import table4_translation
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "results", "acvi_study.json"), encoding="utf-8") as f:
        payload = json.load(f)["grid_converged"]
    assert payload["final"] and payload["choice"], "the converged grid has not chosen yet"
    choice = payload["choice"]
    configs = os.path.join(root, "experiments", "configs")
    converged = table4_translation.TABLE4_CPU_CONVERGED_FLAGFILES
    assert _flags(os.path.join(configs, converged["multi30k_acvi"])) == _with_cell(
        _flags(os.path.join(root, acvi_study.MULTI30K_PAPER)),
        acvi_study.grid_flags(choice, acvi_study.CONVERGED_GRID))
    sigma = float(f"{payload['cells'][choice]['sigma_mean']:.3g}")
    noise = _flags(os.path.join(configs, converged["multi30k_soft_context_noise"]))
    before = _flags(os.path.join(configs, "table4cpu_multi30k_soft_context_noise.flags"))
    assert noise == {f for f in before if not f.startswith(
        ("--attention_option=context_noise=", "--profile="))} | {
        f"--attention_option=context_noise={sigma}", "--profile=cpu_converged"}
    runs = {name: flagfile for name, flagfile, _ in table4_translation.TABLE4_CPU_RUNS}
    assert all(runs[name] == flagfile for name, flagfile in converged.items())


@pytest.mark.parametrize("ours,paper,task", [
    (acvi_study.MULTI30K_ACVI, acvi_study.MULTI30K_PAPER, "multi30k"),
    (acvi_study.CNNDM_ACVI, acvi_study.CNNDM_PAPER, "cnndm")])
def test_the_tables_acvi_flagfile_is_the_chosen_grid_cell(ours, paper, task):
    """The tables' "ACVI" row runs exactly the chosen cell: the paper's row plus the
    cell's flags (a later flag of the same name replaces the earlier one), under its
    own row name (the paper's row is labelled --system=acvi_paper_elbo)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cell = acvi_study.OURS[task]
    assert cell is not None
    assert _flags(os.path.join(root, ours)) == _with_cell(
        _flags(os.path.join(root, paper)), acvi_study.grid_flags(cell))
    dirs = {c[0]: c[4] for c in acvi_study.cells("r")}
    if task == "multi30k":
        assert dirs["multi30k_acvi_s0"] == dirs[f"grid_{cell}"]
        assert dirs["multi30k_acvi_s1"] == os.path.join("r", "multi30k_acvi_s1")


def test_archived_runs_are_relabelled_to_their_cells_row(tmp_path):
    """Runs made before --system said "acvi" for every ACVI cell; the archive gives each
    the row of its cell today and keeps the old label."""
    cells = acvi_study.cells(str(tmp_path / "runs"))
    archive = tmp_path / "archive"
    for name in ("grid_paper_elbo", "grid_kl1e-3", f"grid_{acvi_study.OURS['multi30k']}",
                 "multi30k_soft_s1"):
        os.makedirs(archive / name)
        (archive / name / "results.json").write_text(json.dumps(
            {"system": "soft" if "soft" in name else "acvi", "bleu": {"dev": 1.0}}))
    assert acvi_study_report.relabel(cells, str(archive)) == 2
    label = {n: json.loads((archive / n / "results.json").read_text()) for n in os.listdir(archive)}
    assert label["grid_paper_elbo"]["system"] == "acvi_paper_elbo"
    assert label["grid_paper_elbo"]["system_at_run"] == "acvi"
    assert label["grid_kl1e-3"]["system"] == "acvi_grid_kl1e-3"
    assert label[f"grid_{acvi_study.OURS['multi30k']}"]["system"] == "acvi"
    assert "system_at_run" not in label["multi30k_soft_s1"]
    assert label["grid_paper_elbo"]["bleu"] == {"dev": 1.0}


def test_an_earlier_choice_keeps_its_seeds_as_a_row_of_its_own():
    """When "ACVI (ours)" is chosen again, the earlier choice's seeds stay in the report:
    seed 0 is its grid run, the other seeds run the paper's row plus the cell's flags,
    labelled with the earlier row's system (never "acvi")."""
    cells = {c[0]: c for c in acvi_study.cells("r")}
    for cell, (system, _) in acvi_study.EARLIER.items():
        assert cell != acvi_study.OURS["multi30k"]
        assert cells[f"multi30k_{system}_s0"][4] == os.path.join("r", f"grid_{cell}")
        assert acvi_study.cell_system(cells[f"grid_{cell}"][3]) == system
        for task in ("multi30k", "cnndm"):
            argv = cells[f"{task}_{system}_s1"][3]
            assert cells[f"{task}_{system}_s1"][4] == os.path.join("r", f"{task}_{system}_s1")
            assert acvi_study.cell_system(argv) == system
            assert "--seed=1" in argv
            for flag in acvi_study.grid_flags(cell):
                assert flag in argv


def _fake_summaries(model_dir, hyps, refs, rouge_1):
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "results.json"), "w") as f:
        json.dump({"rouge": {"rouge_1": rouge_1}, "train_wall_time_sec": 60.0}, f)
    for name, lines in (("decode_test.txt", hyps), ("reference_test.txt", refs)):
        with open(os.path.join(model_dir, name), "w") as f:
            f.write("\n".join(lines) + "\n")


@pytest.mark.skipif(__import__("acvi_tf.metrics.rouge", fromlist=["x"]).missing_requirements()
                    is not None, reason="ROUGE-1.5.5 needs Perl with XML::Parser")
def test_cnndm_paired_bootstrap_from_archived_per_summary_rouge(tmp_path, monkeypatch):
    """CNN/DM rows are compared summary by summary: the archive keeps ROUGE-1.5.5's
    per-summary ROUGE-1 (never the references), their mean is the run's score, and the
    report's bootstrap regenerates from the archive alone."""
    root = tmp_path / "runs"
    cells = acvi_study.cells(str(root))
    dirs = {c[0]: c[4] for c in cells}
    refs = ["the cat sat on the mat .", "police killed the gunman .", "a b c d ."]
    # soft: a third or less of each reference; ours: all of it (ROUGE-1 F 1.0)
    _fake_summaries(dirs["cnndm_soft_s0"], ["the cat x", "police x y", "a x x"], refs, 33.862)
    _fake_summaries(dirs["cnndm_acvi_s0"], refs, refs, 100.0)
    monkeypatch.setattr(acvi_study_report, "references", lambda split: None)
    out = tmp_path / "results" / "acvi_study.md"
    out.parent.mkdir()
    assert acvi_study_report.write(str(root), cells, str(out)) == 0
    archived = tmp_path / "results" / "acvi_study" / "runs"
    assert not (archived / "cnndm_acvi_s0" / "reference_test.txt").exists()
    ours = json.loads((archived / "cnndm_acvi_s0" / archive.ROUGE_ITEMS).read_text())
    assert ours == [100.0, 100.0, 100.0]
    data = json.loads((tmp_path / "results" / "acvi_study.json").read_text())
    test = data["cnndm"]["acvi"]["paired_bootstrap_vs_soft"]
    soft = json.loads((archived / "cnndm_soft_s0" / archive.ROUGE_ITEMS).read_text())
    p, _ = paired_bootstrap(soft, ours, n_samples=test["n_samples"], alternative="two-sided")
    assert test["seeds"] == 1 and test["p_value"] == p and test["candidate"] == 100.0
    assert "difference +" in out.read_text()
    # a run whose per-summary scores do not average to its reported ROUGE-1 is refused
    _fake_summaries(str(root / "bad"), refs, refs, 50.0)
    with pytest.raises(ValueError, match="reported 50.000"):
        archive.rouge1_items(str(root / "bad"))


@pytest.mark.skipif(__import__("acvi_tf.metrics.rouge", fromlist=["x"]).missing_requirements()
                    is not None, reason="ROUGE-1.5.5 needs Perl with XML::Parser")
def test_a_rerun_archived_under_an_old_name_replaces_its_per_summary_rouge(tmp_path):
    """A row trained again archives its own per-summary ROUGE-1 over the earlier run's
    (the bootstrap of a re-run once read the replaced run's scores), and a run that
    cannot score its summaries leaves none behind."""
    refs = ["the cat sat on the mat .", "police killed the gunman .", "a b c d ."]
    old, new = str(tmp_path / "old"), str(tmp_path / "new")
    _fake_summaries(old, refs, refs, 100.0)
    _fake_summaries(new, ["the cat x", "police x y", "a x x"], refs, 33.862)
    dest = tmp_path / "archive"
    assert archive.archive([("row", old)], str(dest)) == 1
    assert json.loads((dest / "row" / archive.ROUGE_ITEMS).read_text()) == [100.0] * 3
    assert archive.archive([("row", new)], str(dest)) == 1
    again = json.loads((dest / "row" / archive.ROUGE_ITEMS).read_text())
    assert again == archive.rouge1_items(new) and again != [100.0] * 3
    os.remove(os.path.join(new, "reference_test.txt"))
    os.remove(os.path.join(new, archive.ROUGE_ITEMS))
    assert archive.archive([("row", new)], str(dest)) == 1
    assert not (dest / "row" / archive.ROUGE_ITEMS).exists()


def test_the_converged_grid_runs_the_kl_weights_at_the_converged_recipe_on_unused_seeds():
    """Issue 33: KL weight 1e-3 ... 0, two seeds each, at --profile=cpu_converged, none of
    them a seed of a table row (ACVI (ours)'s table seeds 0-4 stay fresh)."""
    from experiments import translate
    from experiments.tables import table4_translation
    cells = [c for c in acvi_study.cells("r") if c[1] == "grid_converged"]
    weights = {}
    for name, _, _, argv, model_dir in cells:
        flags = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
        assert flags["profile"] == table4_translation.TABLE4_CPU_PROFILE
        assert flags["profile"] in translate.PROFILES and flags["gumbel_fraction"] == "0"
        assert int(flags["seed"]) not in range(5) and model_dir == f"r/{name}"
        weights.setdefault(flags["attention_option"], set()).add(int(flags["seed"]))
    assert weights == {f"kl_weight={w}": {10, 11}
                       for w in ("1e-3", "3e-4", "1e-4", "3e-5", "1e-5", "0")}
    assert [c[0] for c in acvi_study.select(cells, "grid_converged")] == [c[0] for c in cells]


def test_the_converged_grid_chooses_by_mean_val_bleu_among_complete_cells(tmp_path):
    """A cell is chosen only when every seed finished, by the mean of its seeds' val BLEU
    (never test): a cell with one higher seed but another missing is not chosen."""
    choose = acvi_study_report.converged_choice
    assert choose({"a": [30.0, None], "b": [None, None]}) is None
    assert choose({"a": [36.0, None], "b": [33.0, 34.0], "c": [35.0, 31.0]}) == "b"
    root = tmp_path / "runs"
    cells = acvi_study.cells(str(root))
    dirs = {c[0]: c[4] for c in cells}
    # val and test disagree: the test scores must not decide
    for cell, val, test in (("conv_kl1e-3_s10", 30.0, 40.0), ("conv_kl1e-3_s11", 31.0, 40.0),
                            ("conv_kl0_s10", 33.0, 20.0), ("conv_kl0_s11", 32.0, 20.0),
                            ("conv_kl1e-4_s10", 50.0, 50.0)):
        _fake_run(dirs[cell], val, test, 0.5, ["x"])
        with open(os.path.join(dirs[cell], "results.json")) as f:
            r = json.load(f)
        r["selected_checkpoint"] = {"step": 7500}
        with open(os.path.join(dirs[cell], "results.json"), "w") as f:
            json.dump(r, f)
    lines, payload = acvi_study_report.converged_grid(
        {c[0]: acvi_study_report.load_run(os.path.dirname(c[4]), c[0])
         for c in cells if c[1] == "grid_converged"})
    assert payload["choice"] == "kl0"
    assert payload["cells"]["kl0"]["val_bleu"] == [33.0, 32.0]
    assert payload["cells"]["kl1e-4"]["best_step"] == [7500, None]
    text = "\n".join(lines)
    assert "**kl0**" in text and "| kl0 | KL weight 0, cpu_converged | 33.00 | 32.00 | 32.50 |" in text
    assert payload["final"] is False and "Provisional, 2 of 6 cells complete" in text
    assert "| kl1e-4 | KL weight 1e-4, cpu_converged | 50.00 | not run yet | – |" in text


def test_the_archive_keeps_duc2004_scores_but_not_the_summaries_of_its_licensed_inputs(
        tmp_path):
    """Table 5's per-summary ROUGE-1 recall is archived (its two-level interval needs it);
    the DUC2004 decode is not: its summaries copy DUC2004's NIST-licensed inputs."""
    from acvi_tf.metrics.rouge import DUC2004_ITEMS
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"duc2004": {"rouge_1": 20.0}}))
    (run / DUC2004_ITEMS).write_text(json.dumps([10.0, 30.0]))
    (run / "decode_duc2004.txt").write_text("a copied input sentence\n")
    assert archive.archive([("row", str(run))], str(tmp_path / "archive")) == 1
    kept = tmp_path / "archive" / "row"
    assert json.loads((kept / DUC2004_ITEMS).read_text()) == [10.0, 30.0]
    assert not (kept / "decode_duc2004.txt").exists()
