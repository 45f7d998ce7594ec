"""Run metrics as the papers define them, computed from a trace and the oracle's truth."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa

from farm.run.recurring_job import recurring_job_metrics
from oracle.oracle import Oracle

__all__ = ["AUC_CNO_CAP", "REACH_TARGETS", "cost_to_reach", "quality_auc", "summarize"]

# metric -> {label: (threshold kind, value)}: CNO thresholds of Lynceus Fig. 5, and 90% of the
# feasible optimum's Accuracy_C (TrimTuner Fig. 1).
REACH_TARGETS = {
    "cno": {"cno<=2": 2.0, "cno<=1.1": 1.1},
    "accuracy_c": {"acc_c>=0.9opt": 0.9},
}


def cost_to_reach(trace: pa.Table, metric: str, label: str, optimum_value: float) -> float | None:
    """Cumulative exploration cost at the first step whose incumbent reaches the target
    (CNO: a truly feasible incumbent with CNO <= threshold; Accuracy_C: at least the fraction
    of the optimum's). None when never reached."""
    threshold = REACH_TARGETS[metric][label]
    cum = trace.column("cum_exploration_cost").to_numpy()
    if metric == "cno":
        value = trace.column("incumbent_cno").to_numpy()
        feasible = trace.column("incumbent_feasible").to_numpy(zero_copy_only=False)
        hit = feasible & (value <= threshold + 1e-12)
    else:
        value = trace.column("incumbent_accuracy_c").to_numpy()
        hit = value >= threshold * optimum_value - 1e-12
    idx = np.flatnonzero(hit)
    return float(cum[idx[0]]) if len(idx) else None


# the CNO at which the quality curve's area saturates: log2(16) = 4 doublings from the optimum
AUC_CNO_CAP = 16.0


def quality_auc(trace: pa.Table, oracle: Oracle) -> float:
    """Area under the run's quality curve against log exploration cost, normalised to [0, 1]
    (0: the optimum from the first run on; 1: nothing useful all along).

    The curve is the incumbent's shortfall after each step, a step function of the
    cumulative exploration cost ``c``; the axis is ``log10(c / c_opt)`` from one run of the
    optimum (``c = c_opt``) to measuring every configuration once (``c = c_all``), both true
    mean costs at s = 1, so the window is fixed by the dataset and problem alone. Before the
    first step, and after the run stopped, the curve holds its last value. Shortfall:

    - CNO problems: ``log2(min(CNO, 16)) / 4``, with a truly infeasible or missing incumbent
      at the cap (CNO inf);
    - Accuracy_C problems: ``1 - Accuracy_C / optimum's``, clipped to [0, 1].

    Where the end points of a run (final quality, cost to a target) are each one number, this
    reads the whole trajectory: a regression that only delays the search, or that is bimodal
    over seeds, moves it for every seed (the nightly gate's main statistic).
    """
    best = oracle.optimum()
    if best is None or trace.num_rows == 0:
        return 1.0
    c_opt = oracle.true_value(best, metric="cost")
    c_all = float(np.nansum([oracle.true_value(c, 1.0, "cost")
                             for c in range(oracle.space.n_configs)]))
    lo, hi = 0.0, math.log10(max(c_all / c_opt, 10.0))
    if oracle.problem.metric == "cno":
        cno = trace.column("incumbent_cno").to_numpy().astype(float)
        feasible = trace.column("incumbent_feasible").to_numpy(zero_copy_only=False)
        cno = np.where(feasible, cno, math.inf)
        y = np.log2(np.clip(cno, 1.0, AUC_CNO_CAP)) / math.log2(AUC_CNO_CAP)
    else:
        acc = trace.column("incumbent_accuracy_c").to_numpy().astype(float)
        y = np.clip(1.0 - np.nan_to_num(acc) / oracle.accuracy_c(best), 0.0, 1.0)
    x = np.log10(np.maximum(trace.column("cum_exploration_cost").to_numpy(), 1e-300) / c_opt)
    # the step function: 1 before the first step, y[i] from x[i] to x[i+1], y[-1] to the end
    edges = np.clip(np.concatenate(([lo], x, [hi])), lo, hi)
    values = np.concatenate(([1.0], y))
    return float(np.sum(values * np.diff(np.maximum.accumulate(edges))) / (hi - lo))


def summarize(spec, oracle: Oracle, trace: pa.Table, recommendation: int | None,
              stop_reason: str) -> dict[str, Any]:
    """The run summary ``farm run --json`` prints."""
    metric = oracle.problem.metric
    best = oracle.optimum()
    optimum_value = oracle.metric(best) if best is not None else math.nan
    latency = trace.column("recommendation_latency_s").to_numpy()
    rec = None
    if isinstance(recommendation, tuple):  # (config_id, fidelity) of Nephele: CNO at that s
        cid, fid = recommendation
        rec = {"config_id": cid, "fidelity": fid, "config": oracle.space.config(cid),
               metric: oracle.cno(cid, fid) if metric == "cno" else oracle.metric(cid),
               "feasible": oracle.is_feasible(cid, fid)}
    elif recommendation is not None:
        rec = {"config_id": recommendation, "config": oracle.space.config(recommendation),
               metric: oracle.metric(recommendation),
               "feasible": oracle.is_feasible(recommendation)}
    n = trace.num_rows
    return {
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
        "recommendation": rec,
        "optimum": None if best is None else {"config_id": best, metric: optimum_value},
        "exploration_cost_to_reach": {
            label: cost_to_reach(trace, metric, label, optimum_value) if n else None
            for label in REACH_TARGETS[metric]},
        "recommendation_latency_s": {
            "median": float(np.median(latency)) if n else None,
            "p90": float(np.percentile(latency, 90)) if n else None,
        },
        "quality_auc": quality_auc(trace, oracle),
        "recurring_job": recurring_job_metrics(trace, oracle.problem),
    }
