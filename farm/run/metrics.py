"""Run metrics as the papers define them, computed from a trace and the oracle's truth."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa

from farm.run.recommendation import constraint_checks, true_values
from farm.run.recurring_job import recurring_job_metrics
from oracle.oracle import Oracle

__all__ = ["REACH_TARGETS", "cost_to_reach", "summarize"]

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
    if rec is not None:
        rec.update(true_values(oracle, rec["config_id"], rec.get("fidelity", 1.0)))
        rec["constraints"] = constraint_checks(oracle, rec["config_id"], trace,
                                               rec.get("fidelity", 1.0))
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
        "recommendation": rec,
        "optimum": None if best is None else {"config_id": best, metric: optimum_value,
                                              "config": oracle.space.config(best),
                                              **true_values(oracle, best)},
        "units": {"cost": oracle.dataset.meta.cost_unit, "time": "s"},
        "exploration_cost_to_reach": {
            label: cost_to_reach(trace, metric, label, optimum_value) if n else None
            for label in REACH_TARGETS[metric]},
        "recommendation_latency_s": {
            "median": float(np.median(latency)) if n else None,
            "p90": float(np.percentile(latency, 90)) if n else None,
        },
    }
    if spec.optimizer == "guindani":  # the recurring-job accounting of Guindani et al.
        summary["recurring_job"] = recurring_job_metrics(trace, oracle.problem)
    return summary
