"""The every-seed figure of a table (experiments/tables/seeds_plot.py): which rows it
draws, what it writes beside each, and that the runner links it from the markdown."""

import json

import numpy as np
import pytest

from experiments import tables
from experiments.tables import runner, seeds_plot
from tests.experiments.test_tables import _fake


def _data():
    return {"soft": {"name": "soft", "test_bleu": [36.0, 37.0, 38.0]},
            "acvi": {"name": "ACVI", "test_bleu": [35.5, None, 36.5], "diff_to_soft": -1.0,
                     "ci95": [-2.25, 0.5], "welch_p": 0.1234},
            "floor": {"name": "floor", "test_bleu": [10.0]},
            "empty": {"name": "not run", "test_bleu": []},
            "acvi@cpu": {"name": "other recipe", "test_bleu": [1.0]}}


def test_rows_are_the_first_profiles_rows_with_a_score_in_order():
    rows = seeds_plot.seed_rows(_data(), "test_bleu")
    assert [name for name, _, _ in rows] == ["soft", "ACVI", "floor"]
    assert rows[1][1] == [35.5, 36.5]  # a seed without the score is not a dot


def test_the_difference_text_gives_the_tables_comparison():
    data = _data()
    assert seeds_plot.difference_text(data["acvi"]) == "Δ -1.00 [-2.25, +0.50], p 0.12"
    assert seeds_plot.difference_text({"diff_to_soft": 0.5, "ci95": None,
                                       "welch_p": None}) == "Δ +0.50"
    assert seeds_plot.difference_text(data["soft"]) == ""


def _drawn(monkeypatch):
    """plot_seeds on _data(), returning what it drew: {row: x of its dots} and the
    arrows' texts (a clipped row)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.axes import Axes
    dots, arrows = [], []
    scatter, annotate = Axes.scatter, Axes.annotate
    monkeypatch.setattr(Axes, "scatter", lambda self, x, y, **kw: dots.append(
        (y[0], list(x))) or scatter(self, x, y, **kw))
    monkeypatch.setattr(Axes, "annotate", lambda self, text, xy, **kw: arrows.append(
        (xy[1], text)) or annotate(self, text, xy, **kw))
    return dots, arrows


def test_the_figure_draws_every_seed_and_clips_a_row_far_below_its_baseline(
        tmp_path, monkeypatch):
    dots, arrows = _drawn(monkeypatch)
    png = tmp_path / "f" / "seeds.png"
    assert seeds_plot.plot_seeds(_data(), "test_bleu", "soft", "BLEU", "t", str(png)) == 3
    assert png.stat().st_size > 1000
    assert dots == [(0, [36.0, 37.0, 38.0]), (1, [35.5, 36.5])]
    # the floor (10 < 0.8 x 37) is an arrow with its mean, not a dot
    assert arrows == [(2, "mean 10.00")]
    assert seeds_plot.plot_seeds({"x": {"test_bleu": []}}, "test_bleu", "soft", "BLEU",
                                 "t", str(tmp_path / "none.png")) == 0
    assert not (tmp_path / "none.png").exists()


def test_each_row_can_have_its_own_baseline(tmp_path, monkeypatch):
    from matplotlib.axes import Axes
    bands = []
    fill = Axes.fill_betweenx
    monkeypatch.setattr(Axes, "fill_betweenx", lambda self, y, x1, x2, **kw: bands.append(
        (round(float(np.mean(y))), x1, x2)) or fill(self, y, x1, x2, **kw))
    data = {"soft": {"rouge_1": [20.0, 22.0]}, "soft_coverage": {"rouge_1": [29.0, 31.0]},
            "acvi_coverage": {"rouge_1": [30.0]}}
    seeds_plot.plot_seeds(data, "rouge_1", tables.table1_summarization.seeds_baseline,
                          "R-1", "t", str(tmp_path / "s.png"))
    sd = np.std([20.0, 22.0], ddof=1)
    assert bands[0] == pytest.approx((0, 21.0 - sd, 21.0 + sd))
    assert bands[2] == pytest.approx((2, 30.0 - sd, 30.0 + sd))  # against soft_coverage


def test_a_table_written_to_a_file_gets_its_every_seed_figure(tmp_path):
    for name, system, seed, bleu in (("s0", "soft", 0, 36.0), ("s1", "soft", 1, 37.0),
                                     ("a0", "acvi", 0, 35.0), ("a1", "acvi", 1, 36.5)):
        d = tmp_path / "runs" / name
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps(_fake(
            task="translate", dataset="multi30k", src="en", tgt="de",
            profile="cpu_converged", system=system, argv=["translate.py", f"--seed={seed}"],
            bleu={"dev": bleu, "test": bleu})))
    out = tmp_path / "results" / "t4.md"
    text = runner.write_table("table4-cpu", tables.find_results([str(tmp_path / "runs")]),
                              str(out))
    assert (tmp_path / "results" / "t4_seeds.png").stat().st_size > 1000
    assert "![every seed's score per row](t4_seeds.png)" in text
    data = json.loads((tmp_path / "results" / "t4.json").read_text())
    assert data["acvi"]["test_bleu"] == [35.0, 36.5]
