"""Every metric of a run, defined once (ARCHITECTURE.md, "Where each concept lives"); the run
loop, the sweep's summary table, the store's index, MLflow, ``farm report``, ``farm regress``
and ``farm bench`` all compute their numbers here.

- Which recommendation: the configuration the farm credits, the best tested feasible one by
  the run's own observations (``optfarm.farm.run.recommendation``), in every statistic
  (``step_quality``, ``final_quality``, the reach costs, ``quality_auc``); the optimizer's own
  pick is kept apart (``pick_quality``, the summary's ``pick``).
- Quality of a recommendation: CNO (Lynceus Sec. VI), the true cost of the recommendation over
  the cheapest truly feasible configuration's, is inf without a recommendation or when the
  recommendation is truly infeasible (the raw cost ratio is kept as ``cno_raw``); Accuracy_C
  (TrimTuner Sec. V) is the true accuracy when the cost cap holds, else accuracy x C_max /
  cost, and 0 without a recommendation.
- Cost (time) to reach a target: the cumulative exploration cost (time) at the first step whose
  incumbent meets it (``REACH_TARGETS``); None (inf in statistics) when never reached.
- Quantiles over seeds or steps: ``QUANTILE_METHOD`` (an order statistic: an actual run's
  value, so infinities never interpolate).
- Quality over the whole run: ``quality_auc``, the area under the incumbent's shortfall
  against log exploration cost (the regression gate's main statistic).
- Recommendation latency: observe() of the newest observation + suggest() of the next
  configuration, model fits included wherever an optimizer does them; the first step (imports,
  numba compilation) is the warm-up, measured apart and left out of the statistics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from optfarm.farm.run.recommendation import TestedIncumbent, constraint_checks, true_values
from optfarm.farm.run.recurring_job import recurring_job_metrics
from optfarm.farm.run.targets import REACH_TARGETS, TARGET_LABELS
from optfarm.oracle.oracle import Oracle

__all__ = [
    "CNO_CAP",
    "QUANTILE_METHOD",
    "REACH_TARGETS",
    "SCORE_CAP",
    "TARGET_LABELS",
    "accuracy_c",
    "after_warmup",
    "cno",
    "config_charges",
    "exhaustive_cost",
    "final_quality",
    "finite_json",
    "first_reach",
    "latency_stats",
    "mean_config_cost",
    "meets_target",
    "pick_quality",
    "quality_auc",
    "quality_score",
    "quantile",
    "recommendation_quality",
    "shortfall_area",
    "step_quality",
    "summarize",
    "table_size",
    "target_check",
    "true_quality",
    "worse_quantile",
]

QUANTILE_METHOD = "inverted_cdf"
_TOL = 1e-12


def quantile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The q-quantile (0 <= q <= 1) by ``QUANTILE_METHOD``; NaN for no values."""
    values = np.asarray(values, dtype=float)
    return float(np.quantile(values, q, method=QUANTILE_METHOD)) if len(values) else math.nan


def worse_quantile(values: Sequence[float] | np.ndarray, q: float, metric: str) -> float:
    """The quality quantile on the worse side: CNO's q-quantile (high is bad), Accuracy_C's
    (1 - q)-quantile (low is bad), so "p90" is the value 90% of runs do at least as well as."""
    return quantile(values, q if metric == "cno" else 1.0 - q)


def cno(oracle: Oracle, config_id: int | None, fidelity: float = 1.0) -> float:
    """Cost Normalised to the Optimum (Lynceus Sec. VI): true cost of the recommendation
    (run at dataset size ``fidelity``, e.g. Nephele's) over the true cost of the cheapest
    feasible configuration at s = 1; inf without one. For a problem minimising another
    metric (``min energy``) the ratio is of that metric; maximising one (not accuracy),
    the optimum's value over the recommendation's."""
    best = oracle.optimum()
    if config_id is None or best is None:
        return math.inf
    obj = oracle.problem.objective
    metric = "cost" if obj.metric == "accuracy" else obj.metric
    ratio = oracle.true_value(config_id, fidelity, metric=metric) / oracle.true_value(
        best, metric=metric
    )
    return 1.0 / ratio if obj.direction == "max" and metric != "cost" else ratio


def accuracy_c(oracle: Oracle, config_id: int | None) -> float:
    """Accuracy_C (TrimTuner Sec. V): true accuracy at s = 1 when the cost constraint
    holds, else accuracy x C_max / cost; 0 without a recommendation."""
    if config_id is None:
        return 0.0
    acc = oracle.true_value(config_id, metric="accuracy")
    cap = oracle.problem.constraint_on("cost")
    cost = oracle.true_value(config_id, metric="cost")
    if cap is None or cap.holds(cost):
        return acc
    return acc * cap.threshold / cost


def true_quality(oracle: Oracle, config_id: int | None) -> float:
    """The problem's quality metric (``problem.metric``: CNO or Accuracy_C) of a
    recommendation at s = 1."""
    if oracle.problem.metric == "cno":
        return cno(oracle, config_id)
    return accuracy_c(oracle, config_id)


def recommendation_quality(
    oracle: Oracle, config_id: int | None, fidelity: float = 1.0
) -> dict[str, Any]:
    """``{metric: quality, "feasible": bool}`` of a recommendation, plus ``cno_raw`` (the
    cost ratio whether feasible or not) for CNO problems."""
    feasible = oracle.is_feasible(config_id, fidelity)
    if oracle.problem.metric == "cno":
        raw = cno(oracle, config_id, fidelity)
        return {"cno": raw if feasible else math.inf, "cno_raw": raw, "feasible": feasible}
    return {"accuracy_c": accuracy_c(oracle, config_id), "feasible": feasible}


def step_quality(run: Mapping[str, np.ndarray], metric: str) -> np.ndarray:
    """Per-step quality of the credited incumbent (the best tested feasible configuration,
    ``optfarm.farm.run.recommendation``) from trace columns: CNO (inf unless truly feasible: traces
    stored before ``incumbent_cno_raw`` existed hold the raw ratio) or Accuracy_C. The one
    place every statistic reads a step's credited quality."""
    return _quality(run, metric, "incumbent")


def pick_quality(run: Mapping[str, np.ndarray], metric: str) -> np.ndarray:
    """Per-step quality of the optimizer's own pick (``pick_*`` trace columns), read only
    where a paper's statistic is defined on every compared optimizer's own pick."""
    return _quality(run, metric, "pick")


def _quality(run: Mapping[str, np.ndarray], metric: str, prefix: str) -> np.ndarray:
    if metric == "cno":
        return np.where(
            np.asarray(run[f"{prefix}_feasible"]).astype(bool),
            np.asarray(run[f"{prefix}_cno"], dtype=float),
            math.inf,
        )
    return np.nan_to_num(np.asarray(run[f"{prefix}_accuracy_c"], dtype=float), nan=0.0)


def meets_target(quality: np.ndarray, metric: str, threshold: float, optimum: float) -> np.ndarray:
    """Whether each quality meets the target: CNO <= threshold; Accuracy_C >= threshold x the
    optimum's."""
    quality = np.asarray(quality)
    return quality <= threshold + _TOL if metric == "cno" else quality >= threshold * optimum - _TOL


def first_reach(quality: np.ndarray, metric: str, threshold: float, optimum: float) -> int | None:
    """Index of the first step whose quality meets the target (``meets_target``), or None."""
    idx = np.flatnonzero(meets_target(quality, metric, threshold, optimum))
    return int(idx[0]) if len(idx) else None


def target_check(oracle: Oracle, label: str) -> Callable[[Mapping[str, Any]], bool]:
    """``quality -> bool``: whether a recommendation's quality (``recommendation_quality``)
    meets the target ``label`` of ``REACH_TARGETS`` (a run's ``until`` limit), as
    ``first_reach`` judges it; ValueError naming the problem's targets for another label."""
    metric = oracle.problem.metric
    if label not in REACH_TARGETS[metric]:
        raise ValueError(
            f"until {label!r} is not a target of this {metric} problem; choose "
            f"one of {', '.join(REACH_TARGETS[metric])}"
        )
    threshold = REACH_TARGETS[metric][label]
    best = oracle.optimum()
    optimum = true_quality(oracle, best) if best is not None else math.nan

    def reached(quality: Mapping[str, Any]) -> bool:
        value = np.nan_to_num(float(quality[metric]), nan=0.0)  # as step_quality reads it
        return first_reach(np.array([value]), metric, threshold, optimum) is not None

    return reached


def final_quality(summary: Mapping, pick: bool = False) -> float:
    """The final credited recommendation's quality from a run summary (with ``pick``: the
    optimizer's own pick's; summaries stored before the pick was kept apart hold it as the
    recommendation): CNO (inf unless truly feasible; also for summaries stored when ``cno``
    held the raw ratio) or Accuracy_C (0 without one)."""
    metric = summary["metric"]
    rec = summary.get("pick" if pick and "pick" in summary else "recommendation")
    if metric == "cno":
        return float(rec["cno"]) if rec and rec["feasible"] else math.inf
    return float(rec["accuracy_c"]) if rec else 0.0


def finite_json(obj: Any) -> Any:
    """``obj`` (dicts, lists, numbers, numpy scalars) as strict JSON takes it: a value that is
    not finite (a CNO never reached, an infeasible run's inf) is None, numpy scalars are
    Python numbers. ``farm run``'s summary, the record sweeps store, keeps inf instead."""
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def after_warmup(latency: np.ndarray) -> np.ndarray:
    """A run's per-step latencies (or model-fit times) without its warm-up step: the NaN
    first step of traces written since the warm-up is kept apart (``warmup_s``), the first
    step of older ones."""
    latency = np.asarray(latency, dtype=float)
    return latency[1:] if len(latency) and not np.isnan(latency[0]) else latency[~np.isnan(latency)]


def latency_stats(latency: np.ndarray) -> dict[str, float | None]:
    """Median and p90 of a run's per-step recommendation latencies without the warm-up
    (``after_warmup``)."""
    latency = after_warmup(latency)
    if not len(latency):
        return {"median": None, "p90": None}
    return {"median": float(np.median(latency)), "p90": quantile(latency, 0.9)}


# the CNO at which a score saturates: log2(16) = 4 doublings from the optimum
CNO_CAP = 16.0
# the largest score of each quality metric (``quality_score``)
SCORE_CAP = {"cno": math.log2(CNO_CAP), "accuracy_c": 1.0}


def quality_score(quality, metric: str, optimum: float):
    """The distance of a quality (a number or an array) from the optimum, 0 the optimum and
    lower better, the one score every report reads: for CNO ``log2(min(CNO, CNO_CAP))``,
    doublings of the optimum's cost (CNO inf, no truly feasible recommendation, at the cap);
    for Accuracy_C ``1 - Accuracy_C / optimum's``, clipped to [0, 1]."""
    quality = np.asarray(quality, dtype=float)
    if metric == "cno":
        score = np.log2(np.clip(quality, 1.0, CNO_CAP))
    else:
        score = np.clip(1.0 - quality / optimum, 0.0, 1.0)
    return float(score) if score.ndim == 0 else score


def mean_config_cost(oracle: Oracle) -> float:
    """The table's mean configuration cost: the mean true cost at s = 1 over its
    configurations (the unit of Lynceus' pooled cost CDFs over jobs, Sec. VI: Scout,
    CherryPick; the leaderboard's budget unit)."""
    return float(np.nanmean(oracle.true_cost[:, -1]))


def exhaustive_cost(oracle: Oracle) -> float:
    """The table's price: every configuration run once at s = 1, the sum of their true mean
    costs (``mean_config_cost`` x ``table_size``)."""
    return float(np.nansum(oracle.true_cost[:, -1]))


def table_size(oracle: Oracle) -> int:
    """The number of configurations with a cost at s = 1 (what ``exhaustive_cost`` sums)."""
    return int(np.count_nonzero(~np.isnan(oracle.true_cost[:, -1])))


def config_charges(oracle: Oracle, deadline: bool) -> np.ndarray:
    """What one run of each configuration at s = 1 is charged (n_configs,): its true mean
    cost, or with ``deadline`` at most the problem's deadline x its price, as the harness's
    deadline rule charges a run still going then (``optfarm.farm.run.loop.Stepper``); NaN
    where the table has no cost at s = 1."""
    cost = oracle.true_cost[:, -1]
    limit = oracle.problem.deadline if deadline else None
    return cost if limit is None else np.minimum(cost, cost * limit / oracle.true_time[:, -1])


def shortfall_area(
    score: np.ndarray, cum_cost: np.ndarray, c_lo: float, ratio: float, cap: float
) -> float:
    """The area under a run's score (``score[i]`` after step i, paid at cumulative cost
    ``cum_cost[i]``: a step function) against log cost from ``c_lo`` to ``ratio`` x ``c_lo``,
    over the area of ``cap`` all along: in [0, 1], 0 the optimum from ``c_lo`` on. Before the
    first step the score is ``cap``; after the run stopped it holds its last value. With
    ``ratio`` 1 (one budget): the score at ``c_lo`` over ``cap``."""
    values = np.concatenate(([1.0], np.asarray(score, dtype=float) / cap))
    x = np.log10(np.maximum(np.asarray(cum_cost, dtype=float), 1e-300) / c_lo)
    lo, hi = 0.0, math.log10(ratio)
    if hi <= 0:
        return float(values[np.searchsorted(x, _TOL, side="right")])
    edges = np.clip(np.concatenate(([lo], x, [hi])), lo, hi)
    return float(np.sum(values * np.diff(np.maximum.accumulate(edges))) / (hi - lo))


def quality_auc(quality: np.ndarray, cum_cost: np.ndarray, oracle: Oracle) -> float:
    """Area under the run's quality curve against log exploration cost, normalised to [0, 1]
    (0: the optimum from the first run on; 1: nothing useful all along).

    The curve is the incumbent's shortfall after each step (``quality``, from
    ``step_quality``), a step function of the cumulative exploration cost ``cum_cost``; the
    axis is ``log10(c / c_opt)`` from one run of the optimum (``c = c_opt``) to measuring every
    configuration once (``c = c_all``, ``exhaustive_cost``), both true mean costs at s = 1, so
    the window is fixed by the dataset and problem alone (``shortfall_area``). Shortfall:
    ``quality_score`` over its cap (``SCORE_CAP``).

    Where the end points of a run (final quality, cost to a target) are each one number, this
    reads the whole trajectory: a regression that only delays the search, or that is bimodal
    over seeds, moves it for every seed (the nightly gate's main statistic).
    """
    best = oracle.optimum()
    if best is None or len(quality) == 0:
        return 1.0
    c_opt = oracle.true_value(best, metric="cost")
    metric = oracle.problem.metric
    optimum = accuracy_c(oracle, best) if metric == "accuracy_c" else 1.0
    return shortfall_area(
        quality_score(quality, metric, optimum),
        cum_cost,
        c_opt,
        max(exhaustive_cost(oracle) / c_opt, 10.0),
        SCORE_CAP[metric],
    )


def _described(
    oracle: Oracle, trace: pa.Table, cid: int | None, fid: float
) -> dict[str, Any] | None:
    """Configuration ``cid`` at fidelity ``fid`` as the summary reports it (None: none)."""
    if cid is None:
        return None
    return {
        "config_id": cid,
        "config": oracle.space.config(cid),
        "fidelity": fid,
        **recommendation_quality(oracle, cid, fid),
        **true_values(oracle, cid, fid),
        "constraints": constraint_checks(oracle, cid, trace, fid),
    }


def _reach_costs(
    quality: np.ndarray, metric: str, optimum_value: float, cum: np.ndarray
) -> dict[str, float | None]:
    """The cumulative exploration cost at which ``quality`` first reaches each of the
    metric's ``REACH_TARGETS`` (None: never)."""
    out = {}
    for label, threshold in REACH_TARGETS[metric].items():
        i = first_reach(quality, metric, threshold, optimum_value)
        out[label] = None if i is None else float(cum[i])
    return out


def summarize(
    spec,
    oracle: Oracle,
    trace: pa.Table,
    credited: TestedIncumbent,
    pick: tuple[int | None, float],
    stop_reason: str,
    warmup_s: float | None,
) -> dict[str, Any]:
    """The run summary ``farm run --json`` prints and the store keeps: ``recommendation`` is
    the configuration the farm credits (``credited.best()``), ``pick`` the optimizer's own
    final (config_id, fidelity) with its own reach costs and ``quality_auc``; ``tested`` says
    whether the run evaluated the pick."""
    metric = oracle.problem.metric
    best = oracle.optimum()
    optimum_value = true_quality(oracle, best) if best is not None else math.nan
    n = trace.num_rows
    summary = {
        "run_key": spec.run_key,
        "dataset": spec.dataset,
        "optimizer": spec.optimizer,
        "params": spec.params,
        "seed": spec.seed,
        "problem": oracle.problem.to_dict(),
        "metric": metric,
        "n_evaluations": n,
        "n_timed_out": int(np.sum(trace.column("timed_out").to_numpy(zero_copy_only=False))),
        "exploration_cost": float(trace.column("cost").to_numpy().sum()) if n else 0.0,
        "exploration_time": float(trace.column("time").to_numpy().sum()) if n else 0.0,
        "stop_reason": stop_reason,
        "recommendation": _described(oracle, trace, *credited.best()),
        "optimum": _optimum(oracle, best, optimum_value),
        "units": {"cost": oracle.dataset.meta.cost_unit, "time": "s"},
        "mean_config_cost": mean_config_cost(oracle),
        # the table's price (the leaderboard states its budgets as shares of it)
        "table": {"configurations": table_size(oracle), "exhaustive_cost": exhaustive_cost(oracle)},
        **_quality_statistics(oracle, trace, credited, pick, optimum_value),
        "recommendation_latency_s": {
            **latency_stats(trace.column("recommendation_latency_s").to_numpy()),
            "warmup": warmup_s,
        },
    }
    if spec.optimizer == "guindani" or spec.dataset.startswith("guindani-"):
        # the recurring-job accounting of Guindani et al., for every optimizer on their jobs
        summary["recurring_job"] = recurring_job_metrics(trace, oracle.problem)
    return summary


def _optimum(oracle: Oracle, best: int | None, optimum_value: float) -> dict[str, Any] | None:
    """The problem's optimum ``best`` as the summary reports it (None: none)."""
    if best is None:
        return None
    return {
        "config_id": best,
        oracle.problem.metric: optimum_value,
        "config": oracle.space.config(best),
        **true_values(oracle, best),
    }


def _quality_statistics(
    oracle: Oracle,
    trace: pa.Table,
    credited: TestedIncumbent,
    pick: tuple[int | None, float],
    optimum_value: float,
) -> dict[str, Any]:
    """The credited recommendation's reach costs and ``quality_auc``, then the optimizer's
    ``pick`` described (``tested``: whether the run evaluated it) with its own."""
    metric = oracle.problem.metric
    cum = trace.column("cum_exploration_cost").to_numpy()
    columns = {c: trace.column(c).to_numpy(zero_copy_only=False) for c in trace.column_names}
    quality = step_quality(columns, metric)
    picked = pick_quality(columns, metric)
    pick_rec = _described(oracle, trace, *pick)
    if pick_rec is not None:
        pick_rec["tested"] = credited.tested(*pick)
    return {
        "exploration_cost_to_reach": _reach_costs(quality, metric, optimum_value, cum),
        "quality_auc": quality_auc(quality, cum, oracle),
        "pick": pick_rec,
        "pick_exploration_cost_to_reach": _reach_costs(picked, metric, optimum_value, cum),
        "pick_quality_auc": quality_auc(picked, cum, oracle),
    }
