"""The papers' figures as PNG files (matplotlib, Agg backend: no display needed).

Each function takes the curves ``optfarm.farm.report.analysis`` computed and writes one figure:
  - ``plot_cno``: p50 of CNO against cumulative exploration cost, and p90 of CNO against p90
    of the cost step by step (Lynceus Fig. 4);
  - ``plot_reach_cdf``: CDFs of the exploration cost needed to reach CNO <= 2 and <= 1.1
    (Lynceus Fig. 5);
  - ``plot_accuracy``: mean Accuracy_C against exploration cost and time (TrimTuner Fig. 1-2);
  - ``plot_main_effects``, ``plot_interaction``: a sweep's sensitivity to its parameters
    (``optfarm.farm.report.sensitivity``).
Peers (``optfarm.optimizers.registry.is_peer``) are drawn dashed beside the papers' optimizers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from optfarm.farm.run.targets import target_text

__all__ = ["plot_accuracy", "plot_cno", "plot_interaction", "plot_main_effects", "plot_reach_cdf"]

_NONE_LABEL = "no feasible\nrecommendation"  # CNO = inf: drawn in a band above the values


def _styles(labels: Sequence[str]) -> dict[str, dict]:
    """Line colour per variant label (``optimizer[params] (role)``); peers dashed. Each line
    is thinner than the one drawn before it, so two variants whose curves coincide show as a
    thin line inside a wider one of another colour rather than one hiding the other."""
    from optfarm.optimizers.registry import is_peer

    cmap = plt.get_cmap("tab10")
    widths = np.linspace(1.2 + 0.6 * (len(labels) - 1), 1.2, len(labels))
    return {
        label: {
            "color": cmap(i % 10),
            "lw": float(widths[i]),
            "ls": "--" if is_peer(re.split(r"[\[ ]", label)[0]) else "-",
        }
        for i, label in enumerate(labels)
    }


def _log_x(ax) -> None:
    """A logarithmic x axis over the data already drawn (or the limits set), labelled in plain
    numbers at the powers of ten, and at 2 and 5 times them when it spans less than three
    decades (matplotlib's default labels minor ticks as overlapping "3x10^0" there)."""
    ax.set_xscale("log")
    lo, hi = ax.get_xlim()
    subs = (1.0, 2.0, 5.0) if lo > 0 and hi / lo < 1e3 else (1.0,)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _save(fig, path: Path, title: str, legend_below: bool = False) -> Path:
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.1, 1, 1) if legend_below else (0, 0, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _legend_below(fig, ax, y: float = 0.0) -> None:
    """The legend under the panels (its bottom at figure height ``y``: above a footnote),
    never over a curve."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="lower center",
        bbox_to_anchor=(0.5, y),
        ncol=min(len(labels), 4),
        fontsize=8,
        frameon=False,
    )


def plot_cno(
    path: Path, dataset: str, grid: np.ndarray, curves: Mapping[str, Mapping[str, np.ndarray]]
) -> Path:
    """Two panels: the p50 of CNO over seeds at each exploration cost (``curves[label]["p50"]``
    over ``grid``), and Lynceus Fig. 4's form, the p90 of CNO against the p90 of the
    exploration cost, step by step (``fig4_cost``, ``fig4_cno``; ``analysis.paper_p90_curve``).

    CNO = inf (no feasible recommendation yet) is not a value: it is drawn in a shaded band
    above the axis' values, labelled as such. A curve can climb back into it, or up at all:
    an incumbent is chosen on what the optimizer observed (one noisy draw per run), CNO on the
    configuration's true mean, so a new incumbent whose draw met the constraints can be
    infeasible, or costlier, on average (random search on the synthetic job does so)."""
    styles = _styles(list(curves))
    values = np.concatenate([np.ravel(c[k]) for c in curves.values() for k in ("p50", "fig4_cno")])
    finite = values[np.isfinite(values)]
    top = max(float(finite.max()) if len(finite) else 2.0, 2.0)
    none_at, band = top * 4.0, (top * 2.0, top * 8.0)  # log axis: the band's middle
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), sharey=True)
    panels = (
        (
            axes[0],
            "p50 of CNO over seeds at each cost",
            "cumulative exploration cost ($)",
            lambda c: (grid, c["p50"]),
        ),
        (
            axes[1],
            "Lynceus Fig. 4: p90 of CNO at each step",
            "p90 of cumulative exploration cost at that step ($)",
            lambda c: (c["fig4_cost"], c["fig4_cno"]),
        ),
    )
    for ax, title, xlabel, xy in panels:
        _cno_panel(ax, title, xlabel, xy, curves, styles, none_at, band)
    _cno_y_axis(axes[0], top, none_at)
    fig.text(
        0.5,
        0.005,
        "A curve may climb back: incumbents are chosen on observed (noisy) "
        "runs, CNO is the true mean's; grey band: no feasible recommendation yet.",
        ha="center",
        va="bottom",
        fontsize=7.5,
        color="0.35",
    )
    _legend_below(fig, axes[1], y=0.035)
    return _save(fig, path, dataset, legend_below=True)


def _cno_panel(ax, title, xlabel, xy, curves, styles, none_at: float, band) -> None:
    """One panel of ``plot_cno``: each curve's ``xy`` points as steps on log axes, CNO = inf
    drawn at ``none_at`` inside the shaded ``band``, the optimum as a dotted line."""
    for label, c in curves.items():
        x, y = xy(c)
        ax.step(x, np.where(np.isfinite(y), y, none_at), where="post", **styles[label], label=label)
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.axhspan(*band, color="0.9", zorder=0)
    _log_x(ax)
    ax.set_yscale("log")
    ax.set_ylim(0.9, band[1])
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)


def _cno_y_axis(ax, top: float, none_at: float) -> None:
    """The CNO axis labelled in plain numbers up to about ``top``, and the no-recommendation
    band at ``none_at``."""
    ticks = [t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if t <= top * 1.5]
    ax.set_yticks(ticks + [none_at], [f"{t:g}" for t in ticks] + [_NONE_LABEL], fontsize=8)
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("CNO (1: the optimum)")


def plot_reach_cdf(path: Path, dataset: str, reach: Mapping[str, Mapping[str, np.ndarray]]) -> Path:
    """One panel per target: the empirical CDF over seeds of the exploration cost at which
    the target was first reached; ``reach[label][target]`` holds per-seed costs, inf when
    never reached (the CDF then stays below 1)."""
    targets = list(next(iter(reach.values())))
    styles = _styles(list(reach))
    fig, axes = plt.subplots(1, len(targets), figsize=(5.5 * len(targets), 4.2), sharey=True)
    axes = np.atleast_1d(axes)
    finite = np.concatenate([v[np.isfinite(v)] for r in reach.values() for v in r.values()])
    lo, hi = (finite.min() * 0.8, finite.max() * 1.25) if len(finite) else (1e-3, 1.0)
    for ax, target in zip(axes, targets):
        for label, r in reach.items():
            costs = np.sort(r[target])
            n = len(costs)
            x = np.concatenate([[lo], costs[np.isfinite(costs)], [hi]])
            y = np.concatenate([[0.0], np.arange(1, np.isfinite(costs).sum() + 1) / n])
            y = np.append(y, y[-1])
            ax.step(x, y, where="post", **styles[label], label=label)
        ax.axhline(0.9, color="grey", lw=0.9, ls="--")
        ax.text(
            lo,
            0.9,
            " 0.9: read the p90 cost here",
            va="bottom",
            ha="left",
            fontsize=7.5,
            color="0.35",
        )
        ax.set_xlim(lo, hi)
        _log_x(ax)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(f"exploration cost to reach {target_text(target)} ($)")
        ax.set_title(f"CDF over seeds, {target_text(target)}")
        ax.grid(True, which="both", alpha=0.25)
    axes[0].set_ylabel("fraction of runs")
    _legend_below(fig, axes[-1])
    return _save(fig, path, dataset, legend_below=True)


def plot_accuracy(
    path: Path,
    dataset: str,
    optimum: float,
    panels: Mapping[str, tuple[np.ndarray, Mapping[str, np.ndarray]]],
) -> Path:
    """Mean Accuracy_C over seeds against exploration cost and time;
    ``panels[axis_name] = (grid, {label: mean curve})``; the feasible optimum and 90% of it
    are drawn as horizontal lines."""
    labels = list(next(iter(panels.values()))[1])
    styles = _styles(labels)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (axis_name, (grid, curves)) in zip(axes, panels.items()):
        for label, y in curves.items():
            ax.step(grid, y, where="post", **styles[label], label=label)
        ax.axhline(optimum, color="black", lw=0.8, ls="--", label="feasible optimum")
        ax.axhline(0.9 * optimum, color="grey", lw=0.8, ls=":", label="90% of optimum")
        _log_x(ax)
        ax.set_xlabel(axis_name)
        ax.set_title("mean Accuracy_C over seeds")
        ax.grid(True, which="both", alpha=0.25)
    axes[0].set_ylabel("Accuracy_C")
    _legend_below(fig, axes[-1])
    return _save(fig, path, dataset, legend_below=True)


def plot_main_effects(path: Path, title: str, sens, ylabel: str) -> Path:
    """One panel per factor of a ``optfarm.farm.report.sensitivity.Sensitivity``: the median
    response at each level with its 90% bootstrap interval, and the mean (hollow diamonds; the
    shares split the variance of means), factors ordered by importance."""
    factors = sens.ranking
    fig, axes = plt.subplots(
        1, len(factors), figsize=(3.2 * len(factors), 3.4), sharey=True, squeeze=False
    )
    for ax, f in zip(axes[0], factors):
        rows = sens.main_effects[f]
        x = np.arange(len(rows))
        med = np.array([r["median"] for r in rows])
        err = np.array(
            [[r["median"] - r["ci_low"] for r in rows], [r["ci_high"] - r["median"] for r in rows]]
        )
        ax.errorbar(x, med, yerr=err, marker="o", capsize=4, lw=1.4, label="median, 90% interval")
        ax.plot(
            x,
            [r["mean"] for r in rows],
            "D",
            mfc="none",
            color="C1",
            ms=7,
            label="mean (what the share splits)",
        )
        ax.set_xticks(x, [str(r["level"]) for r in rows])
        lo, hi = sens.importance_ci[f]
        ax.set_title(
            f"{f}\n{100 * sens.importance[f]:.0f}% of the variance "
            f"(90%: {100 * lo:.0f}-{100 * hi:.0f}%)",
            fontsize=9,
        )
        ax.grid(True, alpha=0.25)
    axes[0][-1].legend(fontsize=7, loc="best")
    axes[0][0].set_ylabel(f"{ylabel}\n(lower is better)", fontsize=8)
    return _save(fig, path, title)


def plot_interaction(path: Path, title: str, sens, a: str, b: str) -> Path:
    """Heat map of the mean response over seeds for each (level of ``a``, level of ``b``),
    averaged over the other factors."""
    la, lb = sens.factors[a], sens.factors[b]
    names = list(sens.factors)
    ia, ib = names.index(a), names.index(b)
    grid = np.zeros((len(la), len(lb)))
    count = np.zeros_like(grid)
    for cell, value in sens.cell_means.items():
        i, j = la.index(cell[ia]), lb.index(cell[ib])
        grid[i, j] += value
        count[i, j] += 1
    grid /= np.maximum(count, 1)
    fig, ax = plt.subplots(figsize=(1.2 * len(lb) + 2.5, 0.7 * len(la) + 1.8))
    im = ax.imshow(grid, cmap="viridis_r", aspect="auto")
    lo, hi = float(grid.min()), float(grid.max())
    for i in range(len(la)):
        for j in range(len(lb)):
            light = hi == lo or (grid[i, j] - lo) / (hi - lo) < 0.5  # viridis_r: low is light
            ax.text(
                j,
                i,
                f"{grid[i, j]:.3g}",
                ha="center",
                va="center",
                fontsize=8,
                color="k" if light else "w",
            )
    ax.set_xticks(range(len(lb)), [str(v) for v in lb])
    ax.set_yticks(range(len(la)), [str(v) for v in la])
    ax.set_xlabel(b)
    ax.set_ylabel(a)
    fig.colorbar(im, ax=ax, label=f"mean {sens.response}")
    share = sens.importance.get(f"{a} x {b}", sens.importance.get(f"{b} x {a}", 0.0))
    return _save(fig, path, f"{title}: {a} x {b} ({100 * share:.0f}% of the variance)")
