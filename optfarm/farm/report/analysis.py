"""The numbers of a report in the papers' form: from a sweep's traces and run summaries, the
curves, reach costs and statistics per dataset and optimizer variant, and the papers' published
numbers beside ours (``optfarm.farm.report.papers``). ``optfarm.farm.report.page`` writes them as
figures (``optfarm.farm.report.plots``) and one HTML page with the sections of
``optfarm.farm.report.sections``.

The core, ``analyse(trace, summaries)``, works on plain inputs: a pyarrow table of trace rows
(``optfarm.farm.run.loop.TRACE_SCHEMA``, concatenated over runs) and the runs' summary dicts
(``optfarm.farm.run.loop.run_one(spec).summary``); ``optfarm.farm.sweep.results.load_sweep`` reads
them from a sweep's results store.

The metrics (CNO, Accuracy_C, the reach targets, the quantile method, latency) are those of
``optfarm.farm.run.metrics``. Curves are step functions of the cumulative exploration cost on a
common cost grid per dataset (a run that stopped keeps its last recommendation); percentiles are
taken over seeds at each grid point, except Lynceus Fig. 4's p90 curve, which pairs the p90 CNO and
the p90 cost at each step, as the paper does (``paper_p90_curve``). Costs and times to reach a
target are inf when never reached, reported as p50 / p90 over seeds, and for Accuracy_C also as the
mean over seeds, the statistic of TrimTuner's figures.

Every statistic reads the configuration the farm credits
(``optfarm.farm.run.metrics.step_quality``). The optimizer's own pick has its statistics apart (keys
``pick_...``): TrimTuner's Fig. 1-3 define theirs on each compared optimizer's own recommendation
(TrimTuner's and FABOLAS' are model picks at s = 1 from sub-sampled runs), so their reproductions
read those (``optfarm.farm.report.papers``), labelled "own pick".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa

from optfarm.farm.report.papers import FIG4_STAT, PAPER_NUMBERS, PaperNumber
from optfarm.farm.run.loop import PICK_COLUMNS, STATISTICS_COLUMNS
from optfarm.farm.run.metrics import (
    QUANTILE_METHOD,
    REACH_TARGETS,
    after_warmup,
    final_quality,
    first_reach,
    meets_target,
    pick_quality,
    quantile,
    step_quality,
    worse_quantile,
)
from optfarm.farm.run.targets import ACC_C_90, CNO_1_1

__all__ = [
    "GUINDANI_METRICS",
    "CHOICE_COLUMNS",
    "TRACE_COLUMNS",
    "peer_rows",
    "peer_statistics",
    "DatasetAnalysis",
    "Group",
    "analyse",
    "cost_where_curve_reaches",
    "paper_p90_curve",
    "ordinal",
    "paper_rows",
    "plain",
    "variant_labels",
]

# Guindani et al. Table 1: the per-run metrics guindani runs carry in summary["recurring_job"]
GUINDANI_METRICS = ("unfeasible_executions", "unfeasible_cost_ratio", "mean_feasible_cost")
GRID_POINTS = 200
_CHUNK = 1000  # runs of a group put on the grid at once


@dataclass
class Group:
    """The runs of one optimizer variant on one dataset, one entry per seed (sorted)."""

    optimizer: str
    params: dict
    seeds: list[int] = field(default_factory=list)
    summaries: list[dict] = field(default_factory=list)
    traces: list[dict[str, np.ndarray]] = field(default_factory=list)


@dataclass
class DatasetAnalysis:
    dataset: str
    metric: str
    optimum: float
    cost_grid: np.ndarray
    time_grid: np.ndarray
    groups: dict[str, Group]
    # label -> p50 CNO on the cost grid and Lynceus Fig. 4's p90 curve, or mean Accuracy_C
    curves: dict[str, dict[str, np.ndarray]]
    reach: dict[str, dict[str, np.ndarray]]  # label -> target -> per-seed cost
    stats: dict[str, dict[str, Any]]  # label -> statistics (``group_stats``)


def variant_labels(summaries: Sequence[Mapping]) -> dict[str, str]:
    """run_key -> a label per optimizer variant: the optimizer name, plus the parameters
    whose values differ between that optimizer's variants in the sweep (``lynceus[la=1]``)."""
    variants: dict[str, dict[str, dict]] = {}
    # the parameters' key once per distinct parameters (their repr: 20,000 runs, few variants)
    by_repr = {repr(s["params"]): s["params"] for s in summaries}
    key_of = {r: _params_key(params) for r, params in by_repr.items()}
    keys = [key_of[repr(s["params"])] for s in summaries]
    for s, key in zip(summaries, keys):
        variants.setdefault(s["optimizer"], {})[key] = s["params"]
    names = {}
    for optimizer, params in variants.items():
        differing = sorted(
            {
                k
                for p in params.values()
                for k in p
                if len({_fmt_value(q.get(k)) for q in params.values()}) > 1
            }
        )
        for key, p in params.items():
            names[optimizer, key] = optimizer + (
                "[" + ",".join(f"{k}={_fmt_value(p.get(k))}" for k in differing) + "]"
                if differing
                else ""
            )
    return {s["run_key"]: names[s["optimizer"], key] for s, key in zip(summaries, keys)}


def _params_key(params: Mapping) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def _fmt_value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


# -- analysis ---------------------------------------------------------------------------------
def analyse(trace: pa.Table, summaries: Sequence[Mapping]) -> dict[str, DatasetAnalysis]:
    """Curves, reach costs and statistics per report section (a dataset, or a dataset and
    problem when the sweep poses several) and optimizer variant."""
    if not summaries:
        raise ValueError("no runs to report on (the sweep has no finished run)")
    missing = [c for c in STATISTICS_COLUMNS if c not in trace.column_names]
    if missing:
        raise ValueError(f"trace table lacks column {missing[0]!r}")
    by_run = _split_runs(
        trace.select([c for c in TRACE_COLUMNS + CHOICE_COLUMNS if c in trace.column_names])
    )
    labels = variant_labels(summaries)
    texts = [_problem_text(s) for s in summaries]
    problems: dict[str, set[str]] = {}
    for s, text in zip(summaries, texts):
        problems.setdefault(s["dataset"], set()).add(text)
    sections: dict[tuple[str, str], dict[str, Group]] = {}
    for i in sorted(
        range(len(summaries)),
        key=lambda i: (
            summaries[i]["dataset"],
            texts[i],
            labels[summaries[i]["run_key"]],
            summaries[i]["seed"],
        ),
    ):
        s = summaries[i]
        if s["run_key"] not in by_run and s["n_evaluations"]:
            raise ValueError(f"trace table has no rows for run {s['run_key']}")
        section = s["dataset"]
        if len(problems[s["dataset"]]) > 1:
            section += f" [{texts[i]}]"
        g = sections.setdefault((section, s["dataset"]), {}).setdefault(
            labels[s["run_key"]], Group(s["optimizer"], dict(s["params"]))
        )
        g.seeds.append(s["seed"])
        g.summaries.append(s)
        g.traces.append(by_run[s["run_key"]] if s["run_key"] in by_run else _empty_run())
    return {
        section: _analyse_dataset(dataset, groups)
        for (section, dataset), groups in sections.items()
    }


# what ``analyse`` reads (the pick columns where a trace has them)
TRACE_COLUMNS = STATISTICS_COLUMNS + PICK_COLUMNS
# the runs' choices, kept when the trace read has them (the leaderboard shows an optimizer
# that made another's very choices once)
CHOICE_COLUMNS = ("config_id", "fidelity")


def _problem_text(summary: Mapping) -> str:
    """``min cost s.t. time<=300`` (one report section per dataset and problem)."""
    p = summary["problem"]
    text = f"{p['objective']} s.t. {', '.join(p['constraints']) or 'nothing'}"
    return text if p.get("budget") is None else f"{text}, budget {p['budget']:g}"


def _split_runs(trace: pa.Table) -> dict[str, dict[str, np.ndarray]]:
    keys = trace.column("run_key").to_numpy(zero_copy_only=False)
    order = np.argsort(keys, kind="stable")
    cols = {
        c: trace.column(c).to_numpy(zero_copy_only=False)[order]
        for c in trace.column_names
        if c != "run_key"
    }
    keys = keys[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else []
    bounds = list(starts) + [len(keys)]
    return {keys[a]: {c: v[a:b] for c, v in cols.items()} for a, b in pairwise(bounds)}


def _empty_run() -> dict[str, np.ndarray]:
    return {c: np.empty(0) for c in STATISTICS_COLUMNS[1:] + PICK_COLUMNS}


def _analyse_dataset(dataset: str, groups: dict[str, Group]) -> DatasetAnalysis:
    metric = _dataset_metric(dataset, groups)
    optimum = next(
        (s["optimum"][metric] for g in groups.values() for s in g.summaries if s.get("optimum")),
        math.nan,
    )
    runs = [t for g in groups.values() for t in g.traces]
    cost_grid = _grid([t["cum_exploration_cost"] for t in runs])
    time_grid = _grid([t["cum_exploration_time"] for t in runs])
    curves, reach, stats = {}, {}, {}
    for label, g in groups.items():
        steps = _Steps(g.traces)
        quality = steps.quality(metric)
        curves[label] = _curves(steps, quality, metric, cost_grid, time_grid)
        reached, picked = _first_reaches(steps, quality, metric, optimum)
        reach[label] = {target: r[:, 0] for target, r in reached.items()}
        stats[label] = group_stats(g, metric, reached, picked)
        if metric == "cno":
            stats[label][FIG4_STAT] = cost_where_curve_reaches(
                curves[label]["fig4_cost"], curves[label]["fig4_cno"], 1.0
            )
    return DatasetAnalysis(
        dataset, metric, optimum, cost_grid, time_grid, groups, curves, reach, stats
    )


def _dataset_metric(dataset: str, groups: Mapping[str, Group]) -> str:
    """The one quality metric of a dataset's runs (ValueError when they mix two)."""
    metrics = {s["metric"] for g in groups.values() for s in g.summaries}
    if len(metrics) != 1:
        raise ValueError(f"dataset {dataset!r} mixes quality metrics {sorted(metrics)}")
    return metrics.pop()


def _curves(
    steps: _Steps, quality: np.ndarray, metric: str, cost_grid: np.ndarray, time_grid: np.ndarray
) -> dict[str, np.ndarray]:
    """A group's curves: for CNO the p50 over seeds on the cost grid and Lynceus Fig. 4's
    p90 curve; for Accuracy_C the mean over seeds on the cost grid and on the time grid."""
    values = steps.on_grid("cum_exploration_cost", quality, cost_grid, _before(metric))
    if metric == "cno":
        fig4_cost, fig4_cno = _p90_curve(steps, quality)
        return {
            "p50": np.quantile(values, 0.5, axis=0, method=QUANTILE_METHOD),
            "fig4_cost": fig4_cost,
            "fig4_cno": fig4_cno,
        }
    by_time = steps.on_grid("cum_exploration_time", quality, time_grid, 0.0)
    return {"mean": values.mean(axis=0), "mean_by_time": by_time.mean(axis=0)}


def _first_reaches(
    steps: _Steps, quality: np.ndarray, metric: str, optimum: float
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per reach target, each run's (cost, time) at its first step meeting it: of the
    credited incumbent, and of the optimizer's own pick where the traces have it (else the
    credited incumbent's again)."""
    own = steps.quality(metric, pick=True) if steps.has("pick_feasible") else quality
    reached = {
        target: steps.first_reach(quality, metric, thr, optimum)
        for target, thr in REACH_TARGETS[metric].items()
    }
    picked = {
        target: steps.first_reach(own, metric, thr, optimum)
        for target, thr in REACH_TARGETS[metric].items()
    }
    return reached, picked


def paper_p90_curve(
    traces: Sequence[Mapping[str, np.ndarray]], q: float = 0.9
) -> tuple[np.ndarray, np.ndarray]:
    """Lynceus Fig. 4 (Sec. VI-C): "the 90-th percentile of the CNO ... as a function of the
    90-th percentile of the exploration cost". At each exploration step i (bootstrap
    included), the q-quantile over runs of the cumulative exploration cost and the q-quantile
    over runs of the incumbent's CNO; a run that stopped keeps its last cost and CNO, a run
    without a feasible recommendation has CNO = inf. Returns (cost, cno), one entry a step."""
    steps = _Steps(traces)
    return _p90_curve(steps, steps.quality("cno"), q)


def _p90_curve(steps: _Steps, cno: np.ndarray, q: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """``paper_p90_curve`` of the runs ``steps``, their per-step CNO ``cno`` (flat)."""
    if steps.width == 0:
        return np.empty(0), np.empty(0)
    return (
        np.quantile(
            steps.held(steps.column("cum_exploration_cost"), 0.0), q, axis=0, method=QUANTILE_METHOD
        ),
        np.quantile(steps.held(cno, math.inf), q, axis=0, method=QUANTILE_METHOD),
    )


def cost_where_curve_reaches(cost: np.ndarray, cno: np.ndarray, threshold: float) -> float:
    """The cost of a (cost, CNO) curve's first point with CNO <= threshold (the paper reads
    Fig. 4 "where each curve reaches the optimum"); inf when it never does."""
    hit = first_reach(np.asarray(cno), "cno", threshold, 1.0)
    return math.inf if hit is None else float(cost[hit])


def _grid(columns: list[np.ndarray]) -> np.ndarray:
    """A geometric grid from the cheapest first step to the largest cumulative value."""
    firsts = [c[0] for c in columns if len(c) and c[0] > 0]
    lasts = [c[-1] for c in columns if len(c)]
    if not firsts:
        return np.array([0.0, 1.0])
    lo, hi = min(firsts), max(max(lasts), min(firsts) * 1.01)
    return np.geomspace(lo, hi, GRID_POINTS)


def _before(metric: str) -> float:
    """The quality before any evaluation: no recommendation."""
    return math.inf if metric == "cno" else 0.0


class _Steps:
    """The runs of a group step by step, as arrays over all of them at once: a column's
    values of every run one after the other (``column``, ``quality``), and as a (runs x
    steps) table where a run that stopped holds its last value (``held``). A report of
    20,000 runs computes each run's quality once and makes no Python call per run and
    statistic (the numbers are those of the per-run definitions in ``optfarm.farm.run.metrics``)."""

    def __init__(self, traces: Sequence[Mapping[str, np.ndarray]]):
        self.traces = traces
        self.lengths = np.array([len(t["cum_exploration_cost"]) for t in traces], dtype=np.intp)
        self.width = int(self.lengths.max(initial=0))
        starts = np.cumsum(self.lengths) - self.lengths
        step = np.arange(self.width)
        self.valid = step < self.lengths[:, None]  # (runs x steps): a step the run made
        last = np.maximum(self.lengths[:, None] - 1, 0)
        self._at = starts[:, None] + np.minimum(step, last)  # where step j of run r is held
        self._columns: dict[str, np.ndarray] = {}
        self._reach_at: dict[str, np.ndarray] = {}

    def has(self, name: str) -> bool:
        return all(name in t for t in self.traces)

    def column(self, name: str) -> np.ndarray:
        """The column's values of every run, one run after the other."""
        if name not in self._columns:
            self._columns[name] = (
                np.concatenate([t[name] for t in self.traces]) if self.traces else np.empty(0)
            )
        return self._columns[name]

    def quality(self, metric: str, pick: bool = False) -> np.ndarray:
        """Each step's credited quality (``optfarm.farm.run.metrics.step_quality``; with ``pick``:
        the optimizer's own pick's, ``pick_quality``)."""
        names = (
            ("pick_feasible", "pick_cno", "pick_accuracy_c")
            if pick
            else ("incumbent_feasible", "incumbent_cno", "incumbent_accuracy_c")
        )
        used = names[2:] if metric != "cno" else names[:2]
        columns = {name: self.column(name) for name in used}
        return (pick_quality if pick else step_quality)(columns, metric)

    def held(self, flat: np.ndarray, before: float) -> np.ndarray:
        """The (runs x steps) table of ``flat`` (a ``column`` or ``quality``), each run
        padded with its last value (``before`` for a run without steps)."""
        flat = np.asarray(flat, dtype=float)
        if not len(flat):
            return np.full((len(self.lengths), self.width), before)
        table = flat[np.minimum(self._at, len(flat) - 1)]
        table[self.lengths == 0] = before
        return table

    def on_grid(self, cum: str, quality: np.ndarray, grid: np.ndarray, before: float) -> np.ndarray:
        """(runs x grid points): each run's step function ``quality`` (changing at its column
        ``cum``) at ``grid``, ``before`` ahead of its first step."""
        table = np.full((len(self.lengths), len(grid)), before)
        if self.width == 0:
            return table
        values = self.held(quality, before)
        # the grid point from which each step counts (searchsorted(cum, grid, "right") of
        # each run is how many of its steps count at a grid point)
        first = np.searchsorted(
            grid, np.where(self.valid, self.held(self.column(cum), math.inf), math.inf)
        )
        for lo in range(0, len(table), _CHUNK):  # a thousand runs at a time: bounded memory
            rows = first[lo : lo + _CHUNK]
            flat = (np.arange(len(rows))[:, None] * (len(grid) + 1) + rows).ravel()
            counts = np.bincount(flat, minlength=len(rows) * (len(grid) + 1))
            idx = np.cumsum(counts.reshape(len(rows), -1)[:, :-1], axis=1) - 1
            table[lo : lo + _CHUNK] = np.where(
                idx >= 0,
                np.take_along_axis(values[lo : lo + _CHUNK], np.maximum(idx, 0), axis=1),
                before,
            )
        return table

    def first_reach(
        self, quality: np.ndarray, metric: str, threshold: float, optimum: float
    ) -> np.ndarray:
        """(runs x 2): each run's (cumulative exploration cost, time) at its first step whose
        ``quality`` meets the target (``optfarm.farm.run.metrics.meets_target``); (inf, inf) when
        it never does."""
        hits = self.valid & meets_target(self.held(quality, np.nan), metric, threshold, optimum)
        reached = hits.any(axis=1)
        first = hits.argmax(axis=1)[:, None]
        for name in ("cum_exploration_cost", "cum_exploration_time"):
            if name not in self._reach_at:
                self._reach_at[name] = self.held(self.column(name), math.inf)
        return np.column_stack(
            [
                np.where(
                    reached, np.take_along_axis(self._reach_at[name], first, axis=1)[:, 0], math.inf
                )
                for name in ("cum_exploration_cost", "cum_exploration_time")
            ]
        )


def group_stats(
    g: Group, metric: str, reached: Mapping[str, np.ndarray], picked: Mapping[str, np.ndarray]
) -> dict[str, Any]:
    """The statistics tables and paper comparisons use (keys named in ``paper_numbers``):
    those of the credited incumbent, and ``pick_...`` those of the optimizer's own pick
    (``reached``, ``picked``: per target, per seed (cost, time) to reach it)."""
    stats = _run_stats(g, metric)
    for target, r in reached.items():
        stats[f"never:{target}"] = never_text(g.summaries, r[:, 0])
    for prefix, by_target in (("", reached), ("pick_", picked)):
        for target, r in by_target.items():
            stats.update(_reach_stats(f"{prefix}reach", target, r))
    stats.update(_recurring_job_stats(g.summaries))
    return stats


def _run_stats(g: Group, metric: str) -> dict[str, Any]:
    """A group's runs: their number, evaluations, exploration cost, final quality (of the
    credited incumbent and of the optimizer's own pick), recommendation latency and model
    fit time (after the warm-up), and for CNO the distance to the optimum."""
    final = np.array([final_quality(s) for s in g.summaries])
    own = np.array([final_quality(s, pick=True) for s in g.summaries])
    latency = np.concatenate([after_warmup(t["recommendation_latency_s"]) for t in g.traces])
    fit = np.concatenate([after_warmup(t["model_fit_s"]) for t in g.traces])
    stats: dict[str, Any] = {
        "runs": len(g.summaries),
        "nex_median": float(np.median([s["n_evaluations"] for s in g.summaries])),
        "exploration_cost_median": float(np.median([s["exploration_cost"] for s in g.summaries])),
        "final_p50": worse_quantile(final, 0.5, metric),
        "final_p90": worse_quantile(final, 0.9, metric),
        "final_mean": float(final.mean()),
        "pick_final_p50": worse_quantile(own, 0.5, metric),
        "pick_final_mean": float(own.mean()),
        "latency_median_s": float(np.median(latency)) if len(latency) else math.nan,
        "latency_p90_s": quantile(latency, 0.9),
        "latency_mean_s": float(latency.mean()) if len(latency) else math.nan,
        "model_fit_mean_s": float(fit.mean()) if len(fit) else math.nan,
    }
    if metric == "cno":
        stats["dopt_median"] = stats["final_p50"] - 1.0
    return stats


def _reach_stats(key: str, target: str, r: np.ndarray) -> dict[str, float]:
    """The ``key:target`` statistics of the per-seed (cost, time) rows ``r`` to reach a
    target: the share of seeds that reached it, p50 / p90 of cost and time, and their means
    (TrimTuner's figures average over runs: inf when a run never reached the target)."""
    stats = {f"{key}_frac:{target}": float(np.isfinite(r[:, 0]).mean())}
    for q in (50, 90):
        stats[f"{key}_p{q}:{target}"] = quantile(r[:, 0], q / 100)
        stats[f"{key}_time_p{q}:{target}"] = quantile(r[:, 1], q / 100)
    stats[f"{key}_mean:{target}"] = float(np.mean(r[:, 0])) if len(r) else math.nan
    stats[f"{key}_time_mean:{target}"] = float(np.mean(r[:, 1])) if len(r) else math.nan
    return stats


def _recurring_job_stats(summaries: Sequence[Mapping]) -> dict[str, float]:
    """The mean over runs of each of Guindani's recurring-job metrics the runs report."""
    jobs = [s["recurring_job"] for s in summaries if s.get("recurring_job")]
    stats = {}
    for key in GUINDANI_METRICS:
        values = [j[key] for j in jobs if j.get(key) is not None]
        if values:
            stats[f"{key}_mean"] = float(np.mean(values))
    return stats


def plain(v: float) -> str:
    """A number as the report writes it: 4 significant digits, never in exponent notation
    (66,720 rather than 6.672e+04; 0.00008329 rather than 8.329e-05)."""
    if abs(v) >= 1e4:
        return f"{v:,.0f}"
    return np.format_float_positional(v, precision=4, fractional=False, trim="-")


def ordinal(n: int) -> str:
    """A place as the reports write it: "1st", "2nd", "3rd", "11th"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# the loop's limits: a run that ended there was stopped, not stopping by itself
LIMITS = ("budget", "iterations", "target")


def never_text(summaries: Sequence[Mapping], reach_cost: np.ndarray) -> str:
    """Why the runs that never reached a target did not: "3 not within 400 runs" (they ran
    into the run's limits: iterations or budget) and "2 stopped themselves at $2.3-3.2
    (gave up: 100 repeats)" (the optimizer's own stop: converged, exhausted, gave up: N
    repeats), or "stopped at the run's own target" (a run's ``until``, short of a stricter
    target); "" when every run reached it."""
    limited, own, until = [], [], []
    for s, cost in zip(summaries, reach_cost):
        if math.isfinite(cost):
            continue
        reason = s.get("stop_reason")
        (until if reason == "target" else limited if reason in LIMITS else own).append(s)
    parts = [f"{len(until)} stopped at the run's own target (until)"] if until else []
    if limited:
        n = max(s["n_evaluations"] for s in limited)
        parts.append(f"{len(limited)} not within {n} runs")
    if own:
        costs = sorted(s["exploration_cost"] for s in own)
        span = plain(costs[0]) if costs[0] == costs[-1] else f"{plain(costs[0])}-{plain(costs[-1])}"
        reasons = ", ".join(sorted({str(s.get("stop_reason")) for s in own}))
        parts.append(
            f"{len(own)} stopped {'itself' if len(own) == 1 else 'themselves'} at "
            f"{span} ({reasons})"
        )
    return "; ".join(parts)


# -- the papers' numbers beside ours ----------------------------------------------------------
def paper_rows(
    analyses: Mapping[str, DatasetAnalysis], numbers: Sequence[PaperNumber] = PAPER_NUMBERS
) -> list[dict[str, Any]]:
    """One row per (published number, dataset, our matching variant) present in the sweep."""
    rows = []
    for n in numbers:
        for name, a in analyses.items():
            if n.applies_to(a.dataset):
                rows += _number_rows(n, name, a)
    return rows


def _number_rows(n: PaperNumber, name: str, a: DatasetAnalysis) -> list[dict[str, Any]]:
    """A published number's rows on one dataset: one per variant it selects that has its
    statistic, over the baseline variant sharing the most parameters with it when the number
    is a ratio (no rows when the sweep has no baseline variant)."""
    bases = [
        label
        for label, g in a.groups.items()
        if n.baseline is not None and n.baseline.matches(g.optimizer, g.params)
    ]
    if n.baseline is not None and not bases:
        return []
    rows = []
    for label, g in a.groups.items():
        if not n.selector.matches(g.optimizer, g.params) or n.stat not in a.stats[label]:
            continue
        base = max(bases, key=lambda b: _shared_params(a.groups[b], g)) if bases else None
        rows.append(_paper_row(n, name, a, label, base))
    return rows


def _paper_row(
    n: PaperNumber, name: str, a: DatasetAnalysis, label: str, base: str | None
) -> dict[str, Any]:
    """The published number beside ours for variant ``label`` (over ``base``'s)."""
    ours, values = _ours(a, n.stat, label, base)
    # a statistic of each optimizer's own pick has the farm's beside it: the same on the
    # configuration it credits, the best tested one (issue 33)
    tested = n.stat.removeprefix("pick_") if n.stat.startswith("pick_") else None
    return {
        "paper": n.paper,
        "where": n.where,
        "section": name,
        "quantity": n.quantity,
        "paper value": n.published,
        "note": n.note,
        "statistic": "own pick" if tested else "tested incumbent",
        "ours": ours,
        "ours, tested incumbent": _ours(a, tested, label, base)[0]
        if tested in a.stats[label]
        else None,
        "our variants": label if base is None else f"{label} / {base}",
        "our values": values,
    }


def _ours(a: DatasetAnalysis, stat: str, label: str, base: str | None) -> tuple[float, str]:
    """A variant's ``stat`` (over the baseline variant's, a ratio, when there is one) and
    the values shown for it."""
    ours = a.stats[label][stat]
    if base is None:
        return ours, _short(ours)
    return (_ratio(ours, a.stats[base][stat]), f"{_short(ours)} / {_short(a.stats[base][stat])}")


# -- the paper's optimizers against the peers --------------------------------------------------
# The papers' statistics, all lower-is-better: (stat key, what it is, the key of the fraction of
# runs that reached the target, if it is a reach cost). Lynceus: p90 cost to CNO <= 1.1;
# TrimTuner: mean cost to 90% of the optimum's Accuracy_C, of the credited configuration and
# (the paper's statistic) of each optimizer's own pick; Guindani et al. (Table 1, a section
# where guindani ran): unfeasible executions, mean feasible cost per execution, and the final
# recommendation's CNO.
PEER_STATS = {
    "cno": ((f"reach_p90:{CNO_1_1}", "p90 cost to CNO <= 1.1", f"reach_frac:{CNO_1_1}"),),
    "accuracy_c": (
        (
            f"reach_mean:{ACC_C_90}",
            "mean cost to 90% of the optimum's Accuracy_C",
            f"reach_frac:{ACC_C_90}",
        ),
        (
            f"pick_reach_mean:{ACC_C_90}",
            "the same, own pick (TrimTuner Fig. 1-2)",
            f"pick_reach_frac:{ACC_C_90}",
        ),
    ),
    "guindani": (
        ("unfeasible_executions_mean", "mean unfeasible executions", None),
        ("mean_feasible_cost_mean", "mean feasible cost per execution", None),
        ("final_mean", "mean final CNO", None),
    ),
}


def peer_statistics(a: DatasetAnalysis) -> tuple[tuple[str, str, str | None], ...]:
    """The paper's statistics of a report section (``PEER_STATS``): Guindani's where guindani
    ran, else those of the section's quality metric."""
    if any(g.optimizer == "guindani" for g in a.groups.values()):
        return PEER_STATS["guindani"]
    return PEER_STATS[a.metric]


def peer_rows(analyses: Mapping[str, DatasetAnalysis]) -> list[dict[str, Any]]:
    """Per section with peers (``optfarm.optimizers.registry.is_peer``) and statistic of
    ``peer_statistics``: every variant's value, its ratio to the best peer's (below 1: better
    than every peer) and to the best paper optimizer's (above 1: worse than the paper's)."""
    from optfarm.optimizers.registry import is_peer

    rows = []
    for name, a in analyses.items():
        kinds = {
            label: "peer" if is_peer(g.optimizer) else "paper" for label, g in a.groups.items()
        }
        if "peer" not in kinds.values():
            continue
        for key, quantity, reached in peer_statistics(a):
            values = {label: a.stats[label].get(key, math.nan) for label in a.groups}
            best = {
                kind: min(
                    (label for label in values if kinds[label] == kind),
                    key=lambda label: _nan_last(values[label]),
                    default=None,
                )
                for kind in ("peer", "paper")
            }
            for label, value in values.items():
                rows.append(
                    {
                        "section": name,
                        "statistic": quantity,
                        "optimizer": label,
                        "kind": kinds[label],
                        "runs": a.stats[label]["runs"],
                        "evaluations p50": a.stats[label]["nex_median"],
                        "reached": a.stats[label][reached] if reached else None,
                        "never": a.stats[label].get(f"never:{reached.split(':', 1)[1]}", "")
                        if reached and not key.startswith("pick_")
                        else "",
                        "value": value,
                        "best peer": best["peer"],
                        "ratio to the best peer": _ratio(value, values[best["peer"]]),
                        "ratio to the best paper optimizer": None
                        if best["paper"] is None
                        else _ratio(value, values[best["paper"]]),
                    }
                )
    return rows


def _nan_last(value: float) -> float:
    return math.inf if math.isnan(value) else value


def _shared_params(a: Group, b: Group) -> int:
    """How many parameters two variants share (a ratio compares the closest variants, e.g.
    TrimTuner-GP with CMA-ES against TrimTuner-GP with CEA)."""
    return sum(k in b.params and str(v) == str(b.params[k]) for k, v in a.params.items())


def _short(value: float) -> str:
    """A statistic as the ratio's terms are shown: 4 significant digits, "never" for inf (the
    target was not reached at that percentile), "-" for NaN."""
    if math.isnan(value):
        return "-"
    return "never" if math.isinf(value) else f"{value:.4g}"


def _ratio(num: float, den: float) -> float:
    """num / den; NaN (shown as "-") when the baseline variant never reached the target
    (den inf) or spent nothing."""
    if math.isinf(den) or den == 0:
        return math.nan
    return num / den
