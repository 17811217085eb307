"""Writes a table: its markdown over the runs' results, the dev-curve and every-seed
figures beside it (matplotlib PNGs linked from the markdown), and its JSON where the table
has one; the notes written by hand below the marker are kept."""

import os

from acvi_tf.run.records import read_history
from acvi_tf.utils.files import save_json, write_report
from experiments.tables.curves import plot_rows
from experiments.tables.registry import RENDER, SPECS
from experiments.tables.render import SYSTEM_NAMES
from experiments.tables.seeds_plot import plot_seeds


def rows_of(results):
    """[(row label, [history of each run])], the rows in SYSTEM_NAMES' order."""
    order = list(SYSTEM_NAMES)
    systems = sorted({r["system"] for r in results},
                     key=lambda s: (order.index(s) if s in order else len(order), s))
    return [(SYSTEM_NAMES.get(s, s), [read_history(os.path.dirname(r["_path"])) for r in results
                                      if r["system"] == s and r.get("_path")])
            for s in systems]


def write_table(table, results, out=None, epilogue=()):
    """The markdown of ``table`` over ``results``, then the ``epilogue`` lines; with
    ``out``, written there (notes by hand below the marker kept) together with the
    table's dev-curve figure ``<out>_curves.png``, linked from the markdown."""
    spec = SPECS[table]
    results = spec.select(results)
    text = RENDER[table](results)
    if epilogue:
        text += "\n\n" + "\n".join(epilogue)
    if out and spec.curves:
        png = os.path.splitext(out)[0] + "_curves.png"
        drawn = plot_rows(rows_of(results), spec.curves, f"{table}: dev metrics against steps",
                          png)
        if drawn:
            text += (f"\n\n## Dev curves\n\n![dev metrics of every run against steps]"
                     f"({os.path.basename(png)})\n\nEvery run above with a history.jsonl "
                     f"({drawn} runs; a row's seeds share its colour): the evaluations "
                     f"logged during training (history.jsonl), on the eval subset with "
                     f"the eval decoding, not the final scores of the table.")
    data = spec.data(results) if out and spec.data else None
    if data is not None and spec.seeds:
        score, baseline, label = spec.seeds
        png = os.path.splitext(out)[0] + "_seeds.png"
        if plot_seeds(data, score, baseline, label, f"{table}: every seed", png):
            text += (f"\n\n## Every seed\n\n![every seed's score per row]"
                     f"({os.path.basename(png)})\n\nOne dot per seed that ran (none left "
                     f"out), the red bar the row's mean; the shaded band behind a row is its "
                     f"baseline's mean ± sample std, the seed-to-seed noise the row's "
                     f"difference is read against (a row far below it, a floor or a row "
                     f"that fails to learn, is an arrow at the left edge with its mean). "
                     f"On the right: the row's seeds and, where the table "
                     f"compares it with the baseline counting seeds, Δ of the means, the "
                     f"two-level bootstrap's 95% interval and Welch's p.")
    if out:
        write_report(out, text)
        if data is not None:
            save_json(os.path.splitext(out)[0] + ".json", data)
    return text
