"""The leaderboard's figures (matplotlib, Agg backend), from ``optfarm.farm.board.leaderboard``:

- ``plot_cd``: the critical-difference diagram (Demšar 2006, Fig. 1): the average ranks on an
  axis, best on the left, thick bars joining the optimizers no pairwise test separates, and
  Nemenyi's critical difference as a scale bar;
- ``plot_rank_budget``: average rank against budget (anytime), one panel per budget axis;
- ``plot_heatmap``: the table x optimizer matrix of median CNO (or Accuracy_C / optimum);
- ``plot_small_multiples``: median CNO (or Accuracy_C / optimum) with its interquartile band
  against budget, a panel per optimizer beside random search's (the page's picture).
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

__all__ = ["plot_cd", "plot_heatmap", "plot_rank_budget", "plot_small_multiples"]


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
    colour scale) or Accuracy_C / optimum; a censored cell (inf: nothing feasible) is drawn
    black and marked "none", a missing one (NaN: not run) hatched and marked "not run"."""
    n_rows, n_cols = values.shape
    fig, ax = plt.subplots(figsize=(1.5 + 0.62 * n_cols, 1.4 + 0.3 * n_rows))
    raw = values.to_numpy(dtype=float)
    data = np.ma.masked_invalid(raw)
    cmap = plt.get_cmap("viridis_r" if metric == "cno" else "viridis").with_extremes(bad="black")
    ticks = None
    if metric == "cno":
        hi = max(float(data.max()) if data.count() else 2.0, 1.01)
        norm = LogNorm(vmin=1.0, vmax=hi)
        ticks = [t for t in (1, 1.1, 1.25, 1.5, 2, 3, 5, 10, 30, 100, 1000) if t <= hi]
    else:
        norm = plt.Normalize(0.0, 1.0)
    image = ax.imshow(data, cmap=cmap, norm=norm, aspect="auto")
    for (r, c), v in np.ndenumerate(raw):
        if np.isnan(v):
            ax.add_patch(
                plt.Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor="0.92", hatch="///", lw=0)
            )
        text = "not run" if np.isnan(v) else "none" if np.isinf(v) else _cell(v)
        dark = np.isinf(v) or (
            np.isfinite(v) and (norm(v) > 0.6 if metric == "cno" else norm(v) < 0.4)
        )
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


def _cell(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.0f}"


def plot_small_multiples(
    path: Path,
    x: np.ndarray,
    curves: Mapping[str, np.ndarray],
    baseline: str | None,
    budgets: Sequence[float],
    marks: Mapping[str, Sequence[float]],
    metric: str,
    title: str,
) -> Path:
    """One panel per optimizer (``curves``: name -> 3 x len(x) array of the 25th, 50th and
    75th percentiles, in the order drawn), its median as a line and its interquartile range
    as a band against budget ``x`` (multiples of the table's budget unit, log axis), with
    ``baseline``'s median and band in grey in every other panel; dotted lines at the board's
    ``budgets``, a dot on the median at each budget of ``marks[name]``. Shared axes; CNO on a
    log axis whose top, when reached, is the cap (nothing feasible)."""
    names = [n for n in curves if n != baseline] or list(curves)
    cols = min(4, len(names), math.ceil(math.sqrt(1.5 * len(names))))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(3.1 * cols + 0.6, 1.9 * rows + 1.0),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    for ax, name in zip(axes.flat, names):
        if baseline is not None and name != baseline:
            low, mid, high = curves[baseline]
            ax.fill_between(x, low, high, color="0.5", alpha=0.2, lw=0, step="post")
            ax.step(x, mid, where="post", color="0.35", lw=1.2, ls="--")
        low, mid, high = curves[name]
        ax.fill_between(x, low, high, color="tab:blue", alpha=0.25, lw=0, step="post")
        ax.step(x, mid, where="post", color="tab:blue", lw=1.6)
        at = [b for b in marks.get(name, ()) if x[0] <= b <= x[-1]]
        ax.plot(
            at, [mid[np.searchsorted(x, b, side="right") - 1] for b in at], "o", color="tab:red"
        )
        for b in budgets:
            ax.axvline(b, color="0.6", lw=0.6, ls=":")
        ax.set_title(name, fontsize=9, pad=3)
        ax.grid(alpha=0.3, which="major")
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    _budget_axes(axes[0][0], x, budgets, curves, metric)
    fig.supxlabel("budget (multiples of the table's budget unit)", fontsize=9)
    fig.supylabel(
        "CNO (1: the optimum; 16: nothing feasible)"
        if metric == "cno"
        else "Accuracy_C / the optimum's (0: none)",
        fontsize=9,
    )
    return _save(fig, path, title, dpi=90)


def _budget_axes(
    ax, x: np.ndarray, budgets: Sequence[float], curves: Mapping[str, np.ndarray], metric: str
) -> None:
    """The shared axes of ``plot_small_multiples``: budgets as ticks ("2x"), CNO on a log
    axis from 1 to the highest upper quartile from the first budget on (the steps down to
    it from before any run is paid for enter from the top edge)."""
    ax.set_xscale("log")
    ax.set_xticks(sorted({float(x[0]), *budgets}))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    if metric != "cno":
        ax.set_ylim(-0.02, 1.02)
        return
    start = np.searchsorted(x, min(budgets))
    top = max(1.05, max(float(np.nanmax(c[2][start:])) for c in curves.values())) * 1.04
    ax.set_yscale("log")
    ax.set_ylim(0.985, top)
    ticks = [1, 1.05, 1.1, 1.2, 1.35, 1.5, 2, 3, 4, 8, 16]
    shown = [t for t in ticks if t <= top]
    ax.set_yticks(shown[:: max(1, math.ceil(len(shown) / 5))])
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _save(fig, path: Path, title: str, dpi: int = 110) -> Path:
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return path
