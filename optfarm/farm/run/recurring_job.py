"""Recurring-job metrics of Guindani et al. (Table 1), from a run's trace.

Every execution of a recurring job is billed, exploration and exploitation alike, so the
metrics run over all the trace's rows:

- *unfeasible executions*: runs whose observed values broke a constraint (time over T_max)
  or that timed out;
- *ratio of unfeasible cost*: cost of those runs / cost of all runs;
- *mean feasible cost*: mean observed cost of the feasible runs (Table 1 normalises it to
  variant A's: ``normalise_to``).

References:
    [Guindani] Guindani, Ardagna, Guglielmi. Bayesian optimization for cloud resource
        management through machine learning, Sec. 4 and Table 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from optfarm.farm.run.recommendation import observed_values
from optfarm.oracle.problem import Problem

__all__ = ["recurring_job_metrics", "table1"]


def recurring_job_metrics(trace: pa.Table, problem: Problem) -> dict[str, Any]:
    """Table 1's per-run metrics over every execution in ``trace`` (observed values)."""
    n = trace.num_rows
    if n == 0:
        return {
            "unfeasible_executions": 0,
            "unfeasible_cost_ratio": None,
            "mean_feasible_cost": None,
        }
    feasible = ~trace.column("timed_out").to_numpy(zero_copy_only=False).astype(bool)
    for c in problem.constraints:  # named metrics (rmsd, p95_ms) from the trace's map
        with np.errstate(invalid="ignore"):
            feasible &= c.holds(observed_values(trace, c.metric))
    cost = observed_values(trace, "cost")
    total = float(cost.sum())
    return {
        "unfeasible_executions": int((~feasible).sum()),
        "unfeasible_cost_ratio": float(cost[~feasible].sum() / total) if total > 0 else None,
        "mean_feasible_cost": float(cost[feasible].mean()) if feasible.any() else None,
    }


def table1(runs: Mapping[str, Iterable[Mapping[str, Any]]], reference: str) -> list[dict]:
    """Rows of Table 1: for each variant (key of ``runs``, values = the per-run metric dicts
    of its repetitions) the means over repetitions, with the mean feasible cost also
    normalised to the ``reference`` variant's."""
    means = {}
    for variant, metrics in runs.items():
        metrics = list(metrics)
        means[variant] = {
            key: _mean([m[key] for m in metrics])
            for key in ("unfeasible_executions", "unfeasible_cost_ratio", "mean_feasible_cost")
        }
        means[variant]["repetitions"] = len(metrics)
    if reference not in means:
        raise KeyError(f"table1: reference variant {reference!r} is not among {sorted(means)}")
    base = means[reference]["mean_feasible_cost"]
    return [
        {
            "variant": v,
            **m,
            "normalised_mean_feasible_cost": m["mean_feasible_cost"] / base if base else math.nan,
        }
        for v, m in means.items()
    ]


def _mean(values) -> float:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else math.nan
