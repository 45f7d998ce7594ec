"""Sensitivity of a sweep's results to its parameters: which parameter matters, how much, and
where two interact -- for sweeps whose optimizer parameters (and datasets) form a full grid.

Responses, one number per run (so that means and variances exist with inf outcomes):
  - ``quality_auc``: the area under the run's quality curve (``optfarm.farm.run.metrics``), in [0,
  1];
  - ``final``: the final recommendation's score (``optfarm.farm.run.metrics.quality_score``:
    ``log2(min(CNO, 16))``, a truly infeasible or missing recommendation at the cap, or
    ``1 - Accuracy_C / optimum's``);
  - ``reach``: ``log10`` of the exploration cost to reach CNO <= 1.1 or 90% of the optimum's
    Accuracy_C; never reached counts as the sweep's costliest reach x 10 (a penalty above
    every run that got there).
Lower is better for all three.

Importance is a functional ANOVA over the grid (Hooker 2007; Hutter et al., ICML 2014, for
hyperparameters): with the response averaged over seeds in each grid cell, the variance of the
cell means over the (uniformly weighted) grid splits exactly into main effects and interactions
of every order; a parameter's importance is its main effect's share, a pair's the share of
its two-way interaction. We use it rather than a random forest's permutation importance
because the grid is full and small: the decomposition is exact, needs no model, and its terms
add up. The bootstrap over seeds (resampling each cell's seeds) gives confidence intervals and
the stability of the ranking; the smallest number of seeds at which the ranking's top parameter
stays the same in 90% of the resamples is reported as the seeds it needs ("more than N" when
the sweep's N seeds are not enough). The shares split the variance of cell means *over seeds*,
which seed noise inflates: the report also gives the share that noise alone would produce
(``noise_share``), and the rest that interactions of three factors or more hold.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from optfarm.farm.run.metrics import final_quality, quality_score
from optfarm.farm.run.targets import HEADLINE

__all__ = [
    "RESPONSES",
    "RESPONSE_UNITS",
    "Sensitivity",
    "by_optimizer",
    "factors_of",
    "figures",
    "importance_rows",
    "main_effect_rows",
    "noise_share",
    "responses",
    "sensitivity",
]

RESPONSES = ("quality_auc", "final", "reach")
# what each response's numbers are, for tables and axes (the module's docstring defines them)
RESPONSE_UNITS = {
    "quality_auc": "quality_auc (area under the shortfall curve)",
    "final": "final: log2 CNO (capped at 16), or 1 - Accuracy_C / optimum's",
    "reach": "reach: log10 $ to CNO<=1.1 or 90% of the optimum (never = 10x costliest)",
}
_AXIS = {
    "quality_auc": "quality_auc",
    "final": "final shortfall",
    "reach": "log10 cost to the target",
}


def factors_of(summaries: Sequence[Mapping]) -> dict[str, list]:
    """The grid: each optimizer parameter that takes several values in the sweep (named
    ``optimizer.param``), plus ``dataset`` when there are several; {factor: sorted levels}."""
    levels: dict[str, set] = {}
    for s in summaries:
        for k, v in s["params"].items():
            levels.setdefault(f"{s['optimizer']}.{k}", set()).add(_hashable(v))
        levels.setdefault("dataset", set()).add(s["dataset"])
    return {f: sorted(v, key=str) for f, v in sorted(levels.items()) if len(v) > 1}


def _hashable(v):
    return v if not isinstance(v, (list, dict)) else str(v)


def responses(summary: Mapping, never: float) -> dict[str, float]:
    """The three responses of one run (see the module's docstring)."""
    metric = summary["metric"]
    optimum = (summary.get("optimum") or {}).get(metric, math.nan)
    final = quality_score(final_quality(summary), metric, optimum)
    cost = summary["exploration_cost_to_reach"].get(HEADLINE[metric])
    reach = never if cost is None else math.log10(max(cost, 1e-300))
    return {
        "quality_auc": float(summary.get("quality_auc", math.nan)),
        "final": final,
        "reach": reach,
    }


@dataclass
class Sensitivity:
    """The analysis of one response over the sweep's grid."""

    response: str
    factors: dict[str, list]
    n_seeds: int
    # factor -> per level: median, ci_low, ci_high (of the median), mean (what the shares split)
    main_effects: dict[str, list[dict]]
    importance: dict[str, float]  # factor or "a x b" -> share of the variance
    importance_ci: dict[str, tuple[float, float]]
    ranking: list[str]  # factors by main-effect share, largest first
    top_stability: float  # share of resamples with the same top factor
    seeds_needed: int | None  # smallest n seeds with top_stability >= 0.9
    cell_means: dict[tuple, float]
    higher_order: float  # share of interactions of three factors or more
    noise: float  # share seed noise alone would give (see below)

    def to_dict(self) -> dict:
        return {
            "response": self.response,
            "factors": self.factors,
            "n_seeds": self.n_seeds,
            "main_effects": self.main_effects,
            "importance": self.importance,
            "importance_ci": {k: list(v) for k, v in self.importance_ci.items()},
            "ranking": self.ranking,
            "top_stability": self.top_stability,
            "seeds_needed": self.seeds_needed,
            "higher_order": self.higher_order,
            "noise": self.noise,
        }


def _anova(cells: np.ndarray) -> dict[tuple[int, ...], float]:
    """Variance shares of the main effects and two-way interactions of a full-grid array of
    cell means (one axis per factor), uniform weights."""
    total = float(np.var(cells))
    if total <= 0:
        return {(i,): 0.0 for i in range(cells.ndim)} | {
            p: 0.0 for p in itertools.combinations(range(cells.ndim), 2)
        }
    grand = float(cells.mean())
    axes = range(cells.ndim)
    marg = {i: cells.mean(axis=tuple(a for a in axes if a != i)) - grand for i in axes}
    out: dict[tuple[int, ...], float] = {(i,): float(np.var(marg[i])) / total for i in axes}
    for i, j in itertools.combinations(axes, 2):
        pair = cells.mean(axis=tuple(a for a in axes if a not in (i, j))) - grand
        inter = pair - marg[i][:, None] - marg[j][None, :]
        out[(i, j)] = float(np.mean(inter**2)) / total
    return out


def _main_effects(
    data: np.ndarray, factors: Mapping[str, list], rng: np.random.Generator, n_boot: int
) -> dict[str, list[dict]]:
    """Per factor and level: the median response over the other factors and the seeds (the
    last axis of ``data``), its 90% bootstrap interval over seeds, and the mean."""
    n_seeds = data.shape[-1]
    main = {}
    for i, f in enumerate(factors):
        rows = []
        for j, lv in enumerate(factors[f]):
            vals = np.take(data, j, axis=i)
            meds = [
                float(np.median(np.take(data[..., rng.integers(0, n_seeds, n_seeds)], j, axis=i)))
                for _ in range(n_boot)
            ]
            rows.append(
                {
                    "level": lv,
                    "median": float(np.median(vals)),
                    "ci_low": float(np.quantile(meds, 0.05)),
                    "ci_high": float(np.quantile(meds, 0.95)),
                    "mean": float(vals.mean()),
                }
            )
        main[f] = rows
    return main


def sensitivity(
    summaries: Sequence[Mapping], response: str = "quality_auc", n_boot: int = 200, seed: int = 0
) -> Sensitivity | None:
    """The analysis of ``response`` over the sweep's grid, or None without a full grid (every
    combination of the factors' levels present with the same seeds) or without an optimizer
    parameter among the factors (datasets alone would hold 100% of the variance by
    definition: no sensitivity to read)."""
    factors = factors_of(summaries)
    if set(factors) <= {"dataset"}:
        return None
    data = _grid_data(summaries, factors, response)
    if data is None:
        return None
    names, n_seeds = list(factors), data.shape[-1]
    rng = np.random.default_rng(seed)
    point = _shares(data, names)
    boot = [_shares(data[..., rng.integers(0, n_seeds, n_seeds)], names) for _ in range(n_boot)]
    ci = {
        k: (
            float(np.quantile([b[k] for b in boot], 0.05)),
            float(np.quantile([b[k] for b in boot], 0.95)),
        )
        for k in point
    }
    ranking = sorted(names, key=lambda f: -point[f])
    stability = _top_share(boot, names, ranking[0])
    needed = _seeds_needed(data, names, ranking[0], rng)
    main = _main_effects(data, factors, rng, n_boot)
    cell_means = {
        tuple(factors[f][c] for f, c in zip(names, cell)): float(data[cell].mean())
        for cell in itertools.product(*(range(len(factors[f])) for f in names))
    }
    return Sensitivity(
        response,
        factors,
        n_seeds,
        main,
        point,
        ci,
        ranking,
        stability,
        needed,
        cell_means,
        higher_order=max(0.0, 1.0 - sum(point.values())),
        noise=noise_share(data),
    )


def _grid_data(
    summaries: Sequence[Mapping], factors: Mapping[str, list], response: str
) -> np.ndarray | None:
    """``response`` on the grid: one axis per factor (its levels' order), the last axis the
    seeds every cell has; None when a cell is missing or fewer than two seeds are common."""
    names = list(factors)
    index = {f: {lv: i for i, lv in enumerate(levels)} for f, levels in factors.items()}
    never = _never_reached(summaries)
    by_cell: dict[tuple, dict[int, float]] = {}
    for s in summaries:
        values = {
            **{f"{s['optimizer']}.{k}": _hashable(v) for k, v in s["params"].items()},
            "dataset": s["dataset"],
        }
        cell = tuple(index[f][values[f]] for f in names)
        by_cell.setdefault(cell, {})[s["seed"]] = responses(s, never)[response]
    shape = tuple(len(factors[f]) for f in names)
    if len(by_cell) != math.prod(shape):
        return None
    seeds = sorted(set.intersection(*(set(v) for v in by_cell.values())))
    if len(seeds) < 2:
        return None
    data = np.empty(shape + (len(seeds),))
    for cell, vals in by_cell.items():
        data[cell] = [vals[s] for s in seeds]
    return data


def _never_reached(summaries: Sequence[Mapping]) -> float:
    """The ``reach`` response of a run that never reached its target: ``log10`` of the
    sweep's costliest reach x 10 (1.0 when no run reached it)."""
    finite = [
        c
        for s in summaries
        for c in s["exploration_cost_to_reach"].values()
        if c is not None and c > 0
    ]
    return math.log10(max(finite) * 10) if finite else 1.0


def _shares(data: np.ndarray, names: Sequence[str]) -> dict[str, float]:
    """The ANOVA shares of the seeds' means of ``data``, by factor or "a x b" pair."""
    return {_label(k, names): v for k, v in _anova(data.mean(axis=-1)).items()}


def _top_share(shares: Sequence[Mapping[str, float]], names: Sequence[str], top: str) -> float:
    """The share of ``shares`` (resamples) whose largest main effect is ``top``'s."""
    return float(np.mean([max(names, key=lambda f: b[f]) == top for b in shares]))


def _seeds_needed(
    data: np.ndarray, names: Sequence[str], top: str, rng: np.random.Generator
) -> int | None:
    """The smallest number of seeds n whose resamples (100 draws of n seeds with replacement)
    keep ``top`` first in 90% of them; None when the sweep's seeds are not enough."""
    n_seeds = data.shape[-1]
    for n in range(2, n_seeds + 1):
        sub = [_shares(data[..., rng.choice(n_seeds, n, replace=True)], names) for _ in range(100)]
        if _top_share(sub, names, top) >= 0.9:
            return n
    return None


def noise_share(data: np.ndarray) -> float:
    """The share of the cell means' variance that seed noise alone would produce. Seeds are
    common random numbers (a seed is the same bootstrap sample and oracle noise in every
    cell), so the noise is what is left of each run after its cell's mean and its seed's mean
    over the cells: sigma^2 = sum of squares / ((cells - 1)(seeds - 1)), and the cell means'
    variance it alone gives is sigma^2 / seeds x (cells - 1) / cells. Near 1 or above, the
    grid's differences are within seed noise, whatever the shares say."""
    cells = data.reshape(-1, data.shape[-1])
    n_cells, n_seeds = cells.shape
    total = float(np.var(cells.mean(axis=1)))
    resid = (
        cells - cells.mean(axis=1, keepdims=True) - cells.mean(axis=0, keepdims=True) + cells.mean()
    )
    sigma2 = float(np.sum(resid**2)) / ((n_cells - 1) * (n_seeds - 1))
    expected = sigma2 / n_seeds * (n_cells - 1) / n_cells
    if total <= 0:
        return math.inf if expected > 0 else 0.0
    return expected / total


def _label(key: tuple[int, ...], names: Sequence[str]) -> str:
    return " x ".join(names[i] for i in key)


# -- the report's section -----------------------------------------------------------------------
def by_optimizer(analyses: Mapping) -> dict[str, dict[str, Sensitivity]]:
    """For each optimizer whose parameters form a grid in the sweep, per quality metric
    (datasets a factor when there are several): {name: {response: Sensitivity}}, the name
    the optimizer's, with the metric when the sweep has both."""
    runs: dict[tuple[str, str], list[dict]] = {}
    for a in analyses.values():
        for g in a.groups.values():
            runs.setdefault((g.optimizer, a.metric), []).extend(g.summaries)
    metrics = {metric for _, metric in runs}
    out = {}
    for (optimizer, metric), summaries in sorted(runs.items()):
        name = optimizer if len(metrics) == 1 else f"{optimizer} ({metric})"
        found = {r: sensitivity(summaries, r) for r in RESPONSES}
        if all(found.values()):
            out[name] = found
    return out


def importance_rows(analyses: Mapping) -> list[dict]:
    """Per optimizer grid and response: each factor's and top pair's share of the variance
    with its 90% bootstrap interval, the ranking's stability and the seeds it needs."""
    rows = []
    for optimizer, found in by_optimizer(analyses).items():
        for response, s in found.items():
            pairs = sorted((k for k in s.importance if " x " in k), key=lambda k: -s.importance[k])[
                :2
            ]
            common = {
                "top factor stable in": f"{s.top_stability:.0%} of resamples",
                "seeds needed": (
                    s.seeds_needed if s.seeds_needed is not None else f"more than {s.n_seeds}"
                ),
                "seeds": s.n_seeds,
            }
            for rank, name in enumerate([*s.ranking, *pairs], 1):
                lo, hi = s.importance_ci[name]
                rows.append(
                    {
                        "optimizer": optimizer,
                        "response": RESPONSE_UNITS[response],
                        "rank": rank if " x " not in name else "pair",
                        "factor": name,
                        "share of variance": f"{s.importance[name]:.1%}",
                        "90% interval": f"{lo:.1%} - {hi:.1%}",
                        **common,
                    }
                )
            if len(s.factors) > 2:
                rows.append(
                    {
                        "optimizer": optimizer,
                        "response": RESPONSE_UNITS[response],
                        "rank": "rest",
                        "factor": "interactions of 3+ factors",
                        "share of variance": f"{s.higher_order:.1%}",
                        **common,
                    }
                )
            rows.append(
                {
                    "optimizer": optimizer,
                    "response": RESPONSE_UNITS[response],
                    "rank": "noise",
                    "factor": "seed noise alone would give",
                    "share of variance": f"{s.noise:.0%}",
                    **common,
                }
            )
    return rows


def main_effect_rows(analyses: Mapping) -> list[dict]:
    """Per optimizer grid, response, factor and level: the median response over every run at
    that level with its 90% bootstrap interval over seeds, and the mean, the statistic whose
    variance the importance shares split (a median can stay put while the mean moves, e.g.
    when most runs reach the optimum and a few fail badly)."""
    rows = []
    for optimizer, found in by_optimizer(analyses).items():
        for response, s in found.items():
            for factor in s.ranking:
                for r in s.main_effects[factor]:
                    rows.append(
                        {
                            "optimizer": optimizer,
                            "response": RESPONSE_UNITS[response],
                            "factor": factor,
                            "level": r["level"],
                            "median": r["median"],
                            "90% interval": f"{r['ci_low']:.4g} - {r['ci_high']:.4g}",
                            "mean": r["mean"],
                        }
                    )
    return rows


def figures(analyses: Mapping, out_dir) -> list:
    """Main-effect panels per response and heat maps of the two largest interactions of
    ``quality_auc``, per optimizer grid; ``sensitivity.json`` with every number."""
    import json
    from pathlib import Path

    from optfarm.farm.report import plots
    from optfarm.farm.run.metrics import finite_json

    out_dir = Path(out_dir)
    files, doc = [], {}
    for optimizer, found in by_optimizer(analyses).items():
        doc[optimizer] = {r: s.to_dict() for r, s in found.items()}
        slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in optimizer)
        for response, s in found.items():
            files.append(
                plots.plot_main_effects(
                    out_dir / f"sensitivity_{slug}_{response}.png",
                    f"{optimizer}: main effects on {response}",
                    s,
                    ylabel=_AXIS[response],
                )
            )
        s = found["quality_auc"]
        pairs = sorted((k for k in s.importance if " x " in k), key=lambda k: -s.importance[k])
        for pair in pairs[:2]:
            a, b = pair.split(" x ")
            files.append(
                plots.plot_interaction(
                    out_dir / f"interaction_{slug}_{a}_{b}.png", optimizer, s, a, b
                )
            )
    if doc:
        path = out_dir / "sensitivity.json"
        path.write_text(json.dumps(finite_json(doc), indent=1, default=str, allow_nan=False))
        files.append(path)
    return files
