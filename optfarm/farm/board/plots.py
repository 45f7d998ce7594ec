"""The leaderboard's figures (matplotlib, Agg backend), from ``optfarm.farm.board.leaderboard``:

- ``plot_cd``: the critical-difference diagram (Demšar 2006, Fig. 1): the average ranks on an
  axis, best on the left, thick bars joining the optimizers no pairwise test separates, and
  Nemenyi's critical difference as a scale bar;
- ``plot_rank_budget``: average rank against budget (anytime), one panel per budget axis;
- ``plot_heatmap``: the table x optimizer matrix of median CNO (or Accuracy_C / optimum);
- ``plot_value_budget``: median CNO (or Accuracy_C / optimum) with its interquartile band
  against budget, per optimizer (the page's lead picture).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.ticker import FuncFormatter, NullFormatter

__all__ = ["plot_cd", "plot_heatmap", "plot_rank_budget", "plot_value_budget"]


def plot_cd(
    path: Path, mean_ranks: pd.Series, cliques: Sequence[Sequence[str]], cd: float, title: str
) -> Path:
    """The critical-difference diagram of ``mean_ranks`` (best first)."""
    k = len(mean_ranks)
    names, values = list(mean_ranks.index), mean_ranks.to_numpy(dtype=float)
    half = (k + 1) // 2
    height = 1.4 + 0.28 * max(half, k - half) + 0.18 * len(cliques)
    fig, ax = plt.subplots(figsize=(8.5, height))
    lo, hi = 1, max(k, 2)
    ax.set_xlim(lo - 0.6, hi + 0.6)
    top = 0.0
    ax.set_ylim(-(0.35 + 0.28 * max(half, k - half) + 0.18 * len(cliques)), 0.9)
    ax.hlines(top, lo, hi, color="k", lw=1)
    for r in range(lo, hi + 1):
        ax.vlines(r, top, top + 0.08, color="k", lw=1)
        ax.text(r, top + 0.13, str(r), ha="center", va="bottom", fontsize=9)
    if math.isfinite(cd):  # a CD wider than the axis is drawn across it, its value said
        width = min(cd, hi - lo)
        ax.hlines(top + 0.55, lo, lo + width, color="k", lw=1.5)
        ax.vlines([lo, lo + width], top + 0.5, top + 0.6, color="k", lw=1.5)
        ax.text(
            lo + width / 2,
            top + 0.62,
            f"Nemenyi CD = {cd:.2f}" + (" (wider than the axis)" if cd > width else ""),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    bars = 0.18 * len(cliques)
    for i, (name, value) in enumerate(zip(names, values)):
        left = i < half
        row = i if left else k - 1 - i
        y = -(0.3 + bars + 0.28 * row)
        ax.vlines(value, y, top, color="0.3", lw=0.8)
        x_end = lo - 0.5 if left else hi + 0.5
        ax.hlines(y, min(value, x_end), max(value, x_end), color="0.3", lw=0.8)
        ax.text(
            x_end + (-0.05 if left else 0.05),
            y,
            f"{name} ({value:.2f})",
            ha="right" if left else "left",
            va="center",
            fontsize=8,
        )
    for j, clique in enumerate(cliques):
        xs = [float(mean_ranks[n]) for n in clique]
        ax.hlines(-(0.12 + 0.18 * j), min(xs) - 0.03, max(xs) + 0.03, color="k", lw=3)
    ax.axis("off")
    fig.subplots_adjust(left=0.22, right=0.78)
    return _save(fig, path, title)


def plot_rank_budget(path: Path, curves: Mapping[str, Mapping[str, pd.Series]], title: str) -> Path:
    """Average rank (y, 1 on top) against budget (x), one panel per axis: ``curves`` is
    axis name -> budget label -> mean ranks per optimizer."""
    fig, axes = plt.subplots(1, len(curves), figsize=(6.2 * len(curves), 4.6), squeeze=False)
    names = sorted({n for by in curves.values() for s in by.values() for n in s.index})
    cmap = plt.get_cmap("tab10")
    for ax, (axis, by_budget) in zip(axes[0], curves.items()):
        labels = list(by_budget)
        x = np.arange(len(labels))
        for i, name in enumerate(names):
            y = [by_budget[b].get(name, np.nan) for b in labels]
            ax.plot(
                x,
                y,
                marker="o",
                ms=3,
                lw=1.3,
                color=cmap(i % 10),
                label=name,
                ls=("-", "--", ":")[i // 10 % 3],
            )
        ax.set_xticks(x, labels)
        ax.set_xlabel(axis)
        ax.set_ylabel("average rank over tables (1: best)")
        ax.set_ylim(len(names) + 0.2, 0.8)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(fig, path, title)


def plot_heatmap(path: Path, values: pd.DataFrame, metric: str, title: str) -> Path:
    """Tables (rows) x optimizers (columns, best first), each cell the median CNO (log
    colour scale) or Accuracy_C / optimum; a censored cell (NaN) is drawn black and
    marked "-"."""
    n_rows, n_cols = values.shape
    fig, ax = plt.subplots(figsize=(1.5 + 0.62 * n_cols, 1.4 + 0.3 * n_rows))
    data = np.ma.masked_invalid(values.to_numpy(dtype=float))
    cmap = plt.get_cmap("viridis_r" if metric == "cno" else "viridis").with_extremes(bad="black")
    if metric == "cno":
        hi = max(float(np.nanmax(data.filled(np.nan))) if data.count() else 2.0, 1.01)
        norm = LogNorm(vmin=1.0, vmax=hi)
        image = ax.imshow(data, cmap=cmap, norm=norm, aspect="auto")
        ticks = [t for t in (1, 1.1, 1.25, 1.5, 2, 3, 5, 10, 30, 100, 1000) if t <= hi]
    else:
        norm = plt.Normalize(0.0, 1.0)
        image = ax.imshow(data, cmap=cmap, norm=norm, aspect="auto")
        ticks = None
    for (r, c), v in np.ndenumerate(values.to_numpy(dtype=float)):
        text = "-" if np.isnan(v) else (f"{v:.2f}" if v < 10 else f"{v:.0f}")
        dark = np.isnan(v) or (norm(v) > 0.6 if metric == "cno" else norm(v) < 0.4)
        ax.text(
            c, r, text, ha="center", va="center", fontsize=6, color="white" if dark else "black"
        )
    ax.set_xticks(range(n_cols), values.columns, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(n_rows), values.index, fontsize=7)
    bar = fig.colorbar(
        image,
        ax=ax,
        fraction=0.03,
        ticks=ticks,
        label="median CNO" if metric == "cno" else "median Accuracy_C / optimum's",
    )
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    bar.ax.yaxis.set_minor_formatter(NullFormatter())
    return _save(fig, path, title)


def plot_value_budget(
    path: Path,
    x: np.ndarray,
    curves: Mapping[str, np.ndarray],
    metric: str,
    per_price: float | None,
    title: str,
) -> Path:
    """Per optimizer (``curves``: name -> 3 x len(x) array of the 25th, 50th and 75th
    percentiles) its median as a line and the interquartile range as a band, against budget
    ``x`` in multiples of the table's budget unit (log axis); CNO on a log axis. With
    ``per_price`` (the price's share per budget unit, one table), a second axis
    gives the budget as a share of the table's price."""
    fig, ax = plt.subplots(figsize=(8.4, 4.8))
    cmap = plt.get_cmap("tab10")
    for i, (name, (low, mid, high)) in enumerate(curves.items()):
        colour = cmap(i % 10)
        ax.fill_between(x, low, high, color=colour, alpha=0.12, lw=0, step="post")
        ax.step(
            x, mid, where="post", color=colour, lw=1.5, label=name, ls=("-", "--", ":")[i // 10 % 3]
        )
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.set_xlabel("budget (multiples of the table's budget unit)")
    if metric == "cno":
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel("CNO of the credited configuration (1: the optimum; 16: none feasible)")
    else:
        ax.set_ylabel("Accuracy_C / the optimum's (0: none)")
    if per_price:
        top = ax.secondary_xaxis(
            "top", functions=(lambda v: v * per_price, lambda v: v / per_price)
        )
        top.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0%}"))
        top.set_xlabel("share of the table's price (every configuration run once)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(fig, path, title)


def _save(fig, path: Path, title: str) -> Path:
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
