"""Every seed of every row of a table, one dot each, against the baseline's spread: the
figure that shows at a glance whether a row's difference stands out of the seed-to-seed
noise the tables' counting-seeds comparison is about (:mod:`experiments.tables.significance`).

Read from the table's data (``<out>.json``, the ``data`` of its :class:`Table`): entries
with a list of per-seed scores under ``score`` and, where the table computed one, the
difference to the baseline with its two-level bootstrap interval (``diff_to_soft``,
``ci95``) and Welch's p (``welch_p``).
"""

import os
import textwrap

import numpy as np


def seed_rows(data, score):
    """[(name, [score of each seed], entry)] of ``data``'s first-profile entries (keys
    without ``@``) that hold at least one score, in the data's order."""
    rows = []
    for key, entry in data.items():
        if "@" in key:
            continue
        values = [v for v in entry.get(score) or [] if v is not None]
        if values:
            rows.append((entry.get("name", key), values, entry))
    return rows


def difference_text(entry):
    """``Δ +0.68 [-0.28, +1.71], p 0.37`` of an entry with a difference, else ""."""
    diff = entry.get("diff_to_soft")
    if diff is None:
        return ""
    text = f"Δ {diff:+.2f}"
    if entry.get("ci95"):
        low, high = entry["ci95"]
        text += f" [{low:+.2f}, {high:+.2f}]"
    if entry.get("welch_p") is not None:
        text += f", p {entry['welch_p']:.2g}"
    return text


# Rows whose mean is below this share of their baseline's mean (floors, rows that fail to
# learn) are drawn clipped at the axis' left edge, so that the rows near the baseline keep
# a scale on which a seed's spread is visible.
CLIP_BELOW = 0.8


def _mean_std(values):
    return (float(np.mean(values)),
            float(np.std(values, ddof=1)) if len(values) > 1 else 0.0)


def plot_seeds(data, score, baseline, xlabel, title, out_png):
    """Writes ``out_png``: a line per row of ``data`` (:func:`seed_rows`), its seeds as
    dots and their mean as a bar over a band of its baseline's mean ± sample std, and on
    the right its seed count and :func:`difference_text`. ``baseline``: the key of the
    baseline row, or a function of a row's key giving it (Table 1 reads each row against
    the pointer-generator with or without coverage, as the row). A row whose mean is under
    :data:`CLIP_BELOW` of its baseline's is drawn as an arrow at the left edge with its
    mean written. Returns the number of rows drawn (0: nothing written)."""
    rows = seed_rows(data, score)
    if not rows:
        return 0
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = {id(entry): key for key, entry in data.items()}
    bands = []
    for _, _, entry in rows:
        base_key = baseline(keys[id(entry)]) if callable(baseline) else baseline
        base = [v for v in (data.get(base_key) or {}).get(score) or [] if v is not None]
        bands.append(_mean_std(base) if base else None)
    shown = [v for (_, values, _), band in zip(rows, bands) for v in values
             if band is None or np.mean(values) >= CLIP_BELOW * band[0]]
    shown += [m + d for band in bands if band for m, d in ((band[0], -band[1]),
                                                          (band[0], band[1]))]
    low, high = min(shown), max(shown)
    margin = 0.08 * (high - low) + 0.1
    low, high = low - margin, high + margin
    fig, ax = plt.subplots(figsize=(11, 0.42 * len(rows) + 1.4))
    right = []
    for y, ((name, values, entry), band) in enumerate(zip(rows, bands)):
        if band:
            ax.fill_betweenx([y - 0.45, y + 0.45], band[0] - band[1], band[0] + band[1],
                             color="tab:blue", alpha=0.15, linewidth=0)
            ax.plot([band[0]] * 2, [y - 0.45, y + 0.45], color="tab:blue", alpha=0.6,
                    linewidth=1)
        mean = float(np.mean(values))
        text = difference_text(entry)
        right.append(f"{len(values)} seed{'s' if len(values) != 1 else ''}"
                     + (f"; {text}" if text else ""))
        if mean < low:
            ax.annotate(f"mean {mean:.2f}", (low, y), xytext=(low + 0.06 * (high - low), y),
                        va="center", fontsize=7,
                        arrowprops=dict(arrowstyle="->", color="gray"))
            continue
        ax.scatter(values, [y] * len(values), s=22, color="black", alpha=0.75, zorder=3)
        ax.plot([mean] * 2, [y - 0.3, y + 0.3], color="tab:red", linewidth=2, zorder=4)
    ax.set_xlim(low, high)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([textwrap.fill(name, 48) for name, _, _ in rows], fontsize=7)
    side = ax.twinx()
    side.set_ylim(ax.get_ylim())
    side.set_yticks(range(len(rows)))
    side.set_yticklabels(right, fontsize=7)
    ax.set(xlabel=xlabel, title=title + ("\n(band: the row's baseline, mean ± sample std)"
                                          if any(bands) else ""))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out_png)), exist_ok=True)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return len(rows)
