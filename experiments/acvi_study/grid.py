"""The ACVI study's runs: the ablation grid, the CNN/DM grid and the seeds comparison,
each a command of a task CLI (:func:`cells`), and what a run still needs (:func:`todo`)."""

import json
import os
import sys

from experiments.jobs import Job, finished as done

MULTI30K_ACVI = "experiments/configs/table4cpu_multi30k_acvi.flags"  # ACVI (ours), once chosen
MULTI30K_PAPER = "experiments/configs/study/table4cpu_multi30k_acvi_paper_elbo.flags"
MULTI30K_SOFT = "experiments/configs/table4cpu_multi30k_soft.flags"
CNNDM_ACVI = "experiments/configs/table1_cpu_pg_acvi.flags"  # ACVI (ours), once chosen
CNNDM_PAPER = "experiments/configs/study/table1_cpu_pg_acvi_paper_elbo.flags"
CNNDM_SOFT = "experiments/configs/table1_cpu_pg_soft.flags"
SEEDS = (0, 1, 2)


def _opts(**options):
    return [f"--attention_option={k}={v}" for k, v in options.items()]


NO_TAIL = ["--gumbel_fraction=0"]
# The grid: one cell per question, each a few flags away from the paper's ACVI row
# (MULTI30K_PAPER; the cells of 2026-11-23 ran at commit 7ec12c6, where
# table4cpu_multi30k_acvi.flags held the same setting: each run's flags.txt is archived)
# (KL weight 1 against N(0, I), the Gumbel tail for the last 10%). Cells after the
# first four drop the Gumbel tail (the first four measure what it does).
GRID = [
    ("paper_elbo", "the paper's ELBO (Eq. 22), Gumbel tail", []),
    ("paper_elbo_no_tail", "the paper's ELBO, no Gumbel tail", NO_TAIL),
    ("noise_only", "KL weight 0, no Gumbel tail (a learned noise)", _opts(kl_weight=0) + NO_TAIL),
    ("noise_only_tail", "KL weight 0, Gumbel tail", _opts(kl_weight=0)),
    ("kl1e-2", "KL weight 1e-2", _opts(kl_weight=1e-2) + NO_TAIL),
    ("kl1e-3", "KL weight 1e-3", _opts(kl_weight=1e-3) + NO_TAIL),
    ("kl1e-4", "KL weight 1e-4", _opts(kl_weight=1e-4) + NO_TAIL),
    ("kl1e-5", "KL weight 1e-5", _opts(kl_weight=1e-5) + NO_TAIL),
    ("anneal", "KL weight 1 annealed linearly over the whole run",
     ["--kl_anneal_steps=2500"] + NO_TAIL),
    ("small_sigma_kl1", "initial log sigma^2 = -6, KL weight 1",
     _opts(log_sigma_sq_init=-6) + NO_TAIL),
    ("small_sigma_kl1e-2", "initial log sigma^2 = -6, KL weight 1e-2",
     _opts(log_sigma_sq_init=-6, kl_weight=1e-2) + NO_TAIL),
    ("small_sigma_kl1e-3", "initial log sigma^2 = -6, KL weight 1e-3",
     _opts(log_sigma_sq_init=-6, kl_weight=1e-3) + NO_TAIL),
    ("small_sigma_kl0", "initial log sigma^2 = -6, KL weight 0",
     _opts(log_sigma_sq_init=-6, kl_weight=0) + NO_TAIL),
    ("noise_warmup", "KL weight 0, no Gumbel tail, the noise ramped 0 -> 1 over the first "
     "1,000 steps", _opts(kl_weight=0) + NO_TAIL + ["--noise_warmup_steps=1000"]),
    ("free_bits", "free bits: 64 nats per step, KL weight 1",
     _opts(kl_free_bits=64) + NO_TAIL),
    ("kl_mean", "kl_reduce=mean (KL / D), KL weight 1", _opts(kl_reduce="mean") + NO_TAIL),
    ("warm_start", "warm start from soft attention (seed 0), KL weight 1e-3",
     ["--init_from={runs_root}/multi30k_soft_s0"] + _opts(kl_weight=1e-3) + NO_TAIL),
    # The warm start's control (added 2026-11-25): its training budget (the soft run's
    # 2,500 steps, then 2,500 more from a fresh optimizer) with soft attention throughout.
    ("warm_start_soft", "control of warm_start: soft attention warm-started from the same "
     "soft run, 2,500 more steps", ["--system=soft_grid_warm_start",
                                    "--init_from={runs_root}/multi30k_soft_s0",
                                    "--attention=soft"] + NO_TAIL),
    ("sigma_relu", "the ICLR sigma-network (log sigma^2 = ReLU(Wh + b)), KL weight 1",
     _opts(sigma_net="relu") + NO_TAIL),
    ("prior_mean_kl1", "prior N(h_bar, I), KL weight 1", _opts(prior="mean_encoder") + NO_TAIL),
    ("prior_mean_kl1e-3", "prior N(h_bar, I), KL weight 1e-3",
     _opts(prior="mean_encoder", kl_weight=1e-3) + NO_TAIL),
    ("k2", "K = 2 samples, KL weight 1", ["--num_samples=2"] + NO_TAIL),
    ("k4", "K = 4 samples, KL weight 1", ["--num_samples=4"] + NO_TAIL),
]
# The CNN/DM grid, added 2026-11-25 after the seeds comparison missed the CNN/DM target
# (ROUGE-1 of ACVI (ours) at least soft attention's) by 0.01: the KL weight around
# Multi30k's choice, seed 0, at the table1-cpu profile. A cell is chosen by ROUGE-1 F1 on
# the first 500 val articles, decoded as the test set is (`summarize --mode=val`), never
# by test scores. Two cells are runs that exist: KL weight 1e-4 is seed 0 of the
# "ACVI (ours)" row, KL weight 0 seed 0 of the noise-only row.
CNNDM_GRID = [
    ("kl0", "KL weight 0, no Gumbel tail (a learned noise)", _opts(kl_weight=0) + NO_TAIL),
    ("kl1e-5", "KL weight 1e-5", _opts(kl_weight=1e-5) + NO_TAIL),
    ("kl1e-4", "KL weight 1e-4", _opts(kl_weight=1e-4) + NO_TAIL),
    ("kl1e-3", "KL weight 1e-3", _opts(kl_weight=1e-3) + NO_TAIL),
]
# The KL-weight grid at issue 33's converged recipe (--profile=cpu_converged: 8,000 steps,
# the best-val checkpoint), added 2026-11-26: two seeds a cell, seeds that no table row
# uses (the table's ACVI seeds are 0-4), chosen by the mean of the two best val BLEU.
CONVERGED_PROFILE = "cpu_converged"
CONVERGED_SEEDS = (10, 11)
CONVERGED_GRID = [(f"kl{w}", f"KL weight {w}, {CONVERGED_PROFILE}",
                   _opts(kl_weight=w) + NO_TAIL + [f"--profile={CONVERGED_PROFILE}"])
                  for w in ("1e-3", "3e-4", "1e-4", "3e-5", "1e-5", "0")]
# "ACVI (ours)": the grid cell chosen by val BLEU only (None: not chosen yet). The tables'
# ACVI flagfiles (MULTI30K_ACVI, CNNDM_ACVI) hold that cell's flags (a test checks it);
# on Multi30k its seed 0 is the grid's run. CNN/DM has no grid: it takes Multi30k's choice.
# Chosen 2026-11-23 among four finished cells: noise_only (26.36). Chosen again
# 2026-11-24 among nine: kl1e-4 (28.44 val; see results/acvi_study.md).
OURS = {"multi30k": "kl1e-4", "cnndm": "kl1e-4"}
# Earlier choices whose seeds were run keep a comparison row of their own, so that the
# runs stay in the report: cell -> (row name, label).
# The CNN/DM grid chose KL weight 0 by val ROUGE-1 (2026-11-25; the report derives it),
# whose seeds are this row; "ACVI (ours)" on CNN/DM stays Multi30k's choice, made before
# the CNN/DM test scores were seen, and the report shows both rows.
EARLIER = {"noise_only": ("acvi_noise_only", "ACVI, KL weight 0 (the choice of 2026-11-23; "
                                             "the CNN/DM grid's by val ROUGE-1)")}


def grid_flags(name, grid=GRID):
    """The flags a cell of ``grid`` (:data:`GRID`, :data:`CNNDM_GRID`) adds to the paper's
    row."""
    return next(extra for cell, _, extra in grid if cell == name)


def _system(cell):
    """The table row a grid cell's run fills: the paper's row and ours are also seed 0 of
    the comparison; every other cell gets a row of its own (acvi_grid_<cell>), in no table."""
    if cell == "paper_elbo":
        return []  # the flagfile's --system=acvi_paper_elbo
    if any(f.startswith("--system=") for f in grid_flags(cell)):
        return []  # the cell names its row itself (a control that is not ACVI)
    if cell == OURS["multi30k"]:
        return ["--system=acvi"]
    if cell in EARLIER:
        return [f"--system={EARLIER[cell][0]}"]
    return [f"--system=acvi_grid_{cell}"]


def cell_system(argv):
    """The table row (results.json's ``system``) a cell's command fills: its last
    ``--system=`` flag, else its flagfile's, else "" (the CLI's default)."""
    system = ""
    for a in argv:
        if a.startswith("--flagfile="):
            with open(a.split("=", 1)[1], encoding="utf-8") as f:
                for line in f:
                    if line.strip().startswith("--system="):
                        system = line.strip().split("=", 1)[1]
        elif a.startswith("--system="):
            system = a.split("=", 1)[1]
    return system


def same_run(row, seed, runs_root):
    """The grid run that is also seed ``seed`` of a comparison row, or None."""
    if seed != 0:
        return None
    if row == "multi30k_acvi_paper_elbo":
        return os.path.join(runs_root, "grid_paper_elbo")
    if row == "multi30k_acvi" and OURS["multi30k"]:
        return os.path.join(runs_root, f"grid_{OURS['multi30k']}")
    for cell, (system, _) in EARLIER.items():
        if row == f"multi30k_{system}":
            return os.path.join(runs_root, f"grid_{cell}")
    return None


def cnndm_row(cell):
    """The CNN/DM comparison row whose seed 0 a CNN/DM grid cell is, or None."""
    if cell == OURS["cnndm"]:
        return "cnndm_acvi"
    return next((f"cnndm_{system}" for earlier, (system, _) in EARLIER.items()
                 if grid_flags(earlier) == grid_flags(cell, CNNDM_GRID)), None)


def val_command(model_dir):
    """What a CNN/DM grid cell is chosen by: ROUGE on the val articles (results' ``val``)."""
    return [sys.executable, "-m", "experiments.summarize", "--mode=val", "--noprogress",
            f"--model_dir={model_dir}"]


def todo(cell):
    """The commands of a cell still to run: its training run unless it finished, then,
    for a CNN/DM grid cell, its val evaluation unless results.json has one."""
    name, group, _, argv, model_dir = cell
    out = [] if done(model_dir) else [argv]
    if group == "grid_cnndm" and "val" not in _results(model_dir):
        out.append(val_command(model_dir))
    return out


def _results(model_dir):
    # not acvi_tf.run.results.load_results: the driver stays free of TensorFlow
    path = os.path.join(model_dir, "results.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cells(runs_root):
    """Every run of the study: ``(name, group, description, argv, model_dir)``."""
    out = []
    py = [sys.executable, "-m"]
    for name, about, extra in GRID:
        model_dir = os.path.join(runs_root, f"grid_{name}")
        extra = [e.format(runs_root=runs_root) for e in extra]
        out.append((f"grid_{name}", "grid", about,
                    py + ["experiments.translate", f"--flagfile={MULTI30K_PAPER}", "--noprogress",
                          f"--model_dir={model_dir}"] + _system(name) + extra, model_dir))
    for seed in SEEDS:
        rows = [("multi30k_soft", "soft attention", "experiments.translate", MULTI30K_SOFT, []),
                ("multi30k_acvi_paper_elbo", "ACVI, the paper's ELBO", "experiments.translate",
                 MULTI30K_PAPER, [])]
        if OURS["multi30k"] is not None:
            rows.append(("multi30k_acvi", "ACVI (ours)", "experiments.translate", MULTI30K_ACVI,
                         []))
        rows += [("cnndm_soft", "soft attention", "experiments.summarize", CNNDM_SOFT, []),
                 ("cnndm_acvi_paper_elbo", "ACVI, the paper's ELBO", "experiments.summarize",
                  CNNDM_PAPER, [])]
        if OURS["cnndm"] is not None:
            rows.append(("cnndm_acvi", "ACVI (ours)", "experiments.summarize", CNNDM_ACVI, []))
        for cell, (system, label) in EARLIER.items():  # the paper's row plus the cell's flags
            rows += [(f"{task}_{system}", label, module, paper, [f"--system={system}"]
                      + [f for f in grid_flags(cell) if not f.startswith("--system=")])
                     for task, module, paper in (("multi30k", "experiments.translate",
                                                  MULTI30K_PAPER),
                                                 ("cnndm", "experiments.summarize", CNNDM_PAPER))]
        for row, about, module, flagfile, extra in rows:
            name = f"{row}_s{seed}"
            model_dir = same_run(row, seed, runs_root) or os.path.join(runs_root, name)
            group = "seeds_" + row.split("_")[0]
            out.append((name, group, f"{about}, seed {seed}",
                        py + [module, f"--flagfile={flagfile}", "--noprogress",
                              f"--model_dir={model_dir}", f"--seed={seed}"] + extra, model_dir))
    for name, about, extra in CONVERGED_GRID:
        for seed in CONVERGED_SEEDS:
            cell = f"conv_{name}_s{seed}"
            model_dir = os.path.join(runs_root, cell)
            out.append((cell, "grid_converged", f"{about}, seed {seed}",
                        py + ["experiments.translate", f"--flagfile={MULTI30K_PAPER}",
                              "--noprogress", f"--model_dir={model_dir}", f"--seed={seed}",
                              f"--system=acvi_grid_conv_{name}"] + extra, model_dir))
    by_name = {c[0]: c for c in out}
    for name, about, extra in CNNDM_GRID:  # after the seeds: shared runs keep their names
        row = cnndm_row(name)
        if row is not None:  # seed 0 of a comparison row: that run and its command
            argv, model_dir = by_name[f"{row}_s0"][3], by_name[f"{row}_s0"][4]
        else:
            model_dir = os.path.join(runs_root, f"cnndm_grid_{name}")
            argv = py + ["experiments.summarize", f"--flagfile={CNNDM_PAPER}", "--noprogress",
                         f"--model_dir={model_dir}", "--seed=0",
                         f"--system=acvi_grid_cnndm_{name}"] + extra
        out.append((f"cnndm_grid_{name}", "grid_cnndm", about, argv, model_dir))
    return out


def select(all_cells, only):
    if not only:
        return all_cells
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    names = {c[0] for c in all_cells} | {c[1] for c in all_cells}
    unknown = [w for w in wanted if w not in names and f"grid_{w}" not in names]
    if unknown:
        raise SystemExit(f"--only: unknown cells {', '.join(unknown)}; see `plan`")
    out = []  # in the order asked for
    for w in wanted:
        out += [c for c in all_cells if c not in out
                and w in (c[0], c[1], c[0].removeprefix("grid_"))]
    return out


def _source(argv):
    """The ``--init_from`` run directory of a command, or None."""
    return next((a.split("=", 1)[1] for a in argv if a.startswith("--init_from=")), None)


def jobs(selected):
    """The selected cells as :class:`experiments.jobs.Job`\ s; a run shared by two cells
    (the paper's ELBO: a grid cell and seed 0 of its row) is one job."""
    out, seen = [], set()
    for cell in selected:
        if cell[4] not in seen:
            seen.add(cell[4])
            out.append(Job(cell[0], lambda cell=cell: todo(cell), waits_for=_source(cell[3])))
    return out
