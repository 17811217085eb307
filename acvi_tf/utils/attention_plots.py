"""Attention pictures: a heat-map of a_t^i (source tokens against target tokens) as a PNG.

For ACVI a second panel shows sigma(h_i) (Eq. 18) per source position, averaged over the
context dimensions, so the picture says where the posterior is sharp and where it is
noise. Used by ``--mode=decode --attention_plots=DIR``.
"""

import os

import numpy as np


def plot_attention(path, attention, src_tokens, tgt_tokens, sigma=None, title=None):
    """Writes the heat-map of ``attention`` [T, N] (rows: target steps) to ``path``.

    ``src_tokens`` (N labels) and ``tgt_tokens`` (T labels) name the axes; ``sigma``
    [N] adds the ACVI panel. Returns ``path``.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a = np.asarray(attention, np.float32)
    t, n = a.shape
    if len(src_tokens) != n or len(tgt_tokens) != t:
        raise ValueError(f"attention is {t}x{n} but there are {len(tgt_tokens)} target and "
                         f"{len(src_tokens)} source tokens")
    width = max(4.0, 0.35 * n + 2.0)
    height = max(3.0, 0.3 * t + 1.5) + (1.2 if sigma is not None else 0.0)
    fig = plt.figure(figsize=(width, height))
    if sigma is not None:
        grid = fig.add_gridspec(2, 1, height_ratios=[max(t, 1), 3], hspace=0.05)
        ax = fig.add_subplot(grid[0])
        ax_sigma = fig.add_subplot(grid[1], sharex=ax)
    else:
        ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(a, cmap="viridis", aspect="auto", vmin=0.0, vmax=max(float(a.max()), 1e-9))
    ax.set_yticks(range(t))
    ax.set_yticklabels(tgt_tokens, fontsize=8)
    ax.set_ylabel("target")
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.01, label="a_t^i")
    if sigma is not None:
        s = np.asarray(sigma, np.float32)
        ax_sigma.bar(range(n), s, color="tab:orange")
        ax_sigma.set_ylabel("mean σ(h_i)", fontsize=8)
        ax_sigma.set_xticks(range(n))
        ax_sigma.set_xticklabels(src_tokens, rotation=60, ha="right", fontsize=8)
        ax.tick_params(labelbottom=False)
    else:
        ax.set_xticks(range(n))
        ax.set_xticklabels(src_tokens, rotation=60, ha="right", fontsize=8)
        ax.set_xlabel("source")
    if title:
        ax.set_title(title, fontsize=9)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path
