r"""The ACVI study (issue 10): an ablation grid and a seeds comparison at CPU scale.

Every cell is one run of ``experiments.translate`` (Multi30k En->De, the table4-cpu
profile) or ``experiments.summarize`` (CNN/DM, the table1-cpu profile) with a few
flags changed from the row's flagfile (:mod:`.grid`). Finished runs (a ``results.json``)
are skipped, interrupted ones resume from their last checkpoint, so ``run`` can be
stopped and started again at will::

    python -m experiments.acvi_study plan                      # every cell and its command
    python -m experiments.acvi_study run --runs_root runs/acvi_study --only grid
    python -m experiments.acvi_study run --runs_root runs/acvi_study --parallel 2 \
        --only noise_only,small_sigma_kl1e-3
    python -m experiments.acvi_study report --runs_root runs/acvi_study   # -> results/

``--parallel N`` runs N cells at once with one intra-op thread each
(:mod:`experiments.jobs`). ``--only`` takes cell names and the group names ``grid``,
``grid_cnndm``, ``seeds_multi30k`` and ``seeds_cnndm``. ``report`` archives the finished
runs and writes ``results/acvi_study.{md,json}`` and its plots (:mod:`.report`).
"""
