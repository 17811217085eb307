"""Dev-metric curves of a table's rows: one figure per table, a line per run (the seeds
of a row share its colour), read from the ``history.jsonl`` of each run directory."""

import os

import numpy as np

from acvi_tf.run.records import curve


def plot_rows(rows, panels, title, out_png):
    """Writes ``out_png``: one panel per ``(kind, key, ylabel, log_scale)`` of
    ``panels``, one line per run of ``rows`` ([(row label, [history, ...])]).
    Returns the number of runs drawn (0: nothing written)."""
    drawn = [(label, [h for h in hs if any(curve(h, k, key)[0] for k, key, *_ in panels)])
             for label, hs in rows]
    drawn = [(label, hs) for label, hs in drawn if hs]
    if not drawn:
        return 0
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    colors = plt.get_cmap("tab10")
    for i, (label, histories) in enumerate(drawn):
        for j, history in enumerate(histories):
            for ax, (kind, key, _, log) in zip(axes[0], panels):
                steps, values = curve(history, kind, key)
                if steps:
                    values = np.maximum(values, 1e-3) if log else values
                    ax.plot(steps, values, marker="o", markersize=3, alpha=0.8,
                            color=colors(i % 10), label=label if j == 0 else None)
    for ax, (_, _, ylabel, log) in zip(axes[0], panels):
        ax.set(xlabel="step", ylabel=ylabel, yscale="log" if log else "linear")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out_png)), exist_ok=True)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return sum(len(hs) for _, hs in drawn)
