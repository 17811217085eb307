"""A stand-in for training in the tables' runner tests: the runner's planned commands run
a small script (which writes a results.json) instead of a task CLI."""

import sys

from experiments.tables import preflight, runner


def use_fake_trainer(monkeypatch, script, task="translate"):
    """Makes ``tables run`` execute ``script`` (a path) with each planned run's flags, and
    skips the data check of ``task``."""
    real_plan = runner.plan

    def plan(*args, **kw):
        return [(n, [sys.executable, str(script)] + argv[3:], d, s)
                for n, argv, d, s in real_plan(*args, **kw)]
    monkeypatch.setattr(runner, "plan", plan)
    monkeypatch.setitem(preflight.CHECKS, task, lambda *a: True)
