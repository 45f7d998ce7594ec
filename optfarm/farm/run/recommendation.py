"""Which configuration the farm credits to a run, and what a run's summary says about one
configuration: its true (mean) cost, time and accuracy, and each constraint checked on the
truth and on what the optimizer observed of it.

The recommendation rule (docs/guide/optimizers.md; one rule for every optimizer in every
statistic): the farm credits the best **tested** feasible configuration by the optimizer's own
observations (``TestedIncumbent``): among the configurations the run evaluated at full dataset
size (s = 1), those whose observed runs met every constraint (on the mean of the run's own
draws where it repeated one, as on Guindani's noisy tables; a run stopped by a time cap never
does), the one with the best mean observed objective. An optimizer that recommends over
(configuration, dataset size) pairs (Nephele, ``Optimizer.recommends_fidelity``) is credited
with the best tested pair at the size it ran. What the optimizer itself would deploy
(``Optimizer.recommend``: possibly a model's untested pick, TrimTuner's and FABOLAS'
predicted best at s = 1 from sub-sampled runs, EIc's pick before any feasible observation) is
kept beside it as the run's ``pick`` and never mixed in.

Observed and true values can disagree on noisy data: an optimizer sees one draw of the
repeated measurements (``aggregate=sample``), so a configuration whose observed run met a
constraint may break it on average; the summary then says which constraint, by how much, and
what was observed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from optfarm.oracle.oracle import Oracle
from optfarm.oracle.problem import METRICS, Problem

__all__ = ["TestedIncumbent", "constraint_checks", "observed_values", "true_values"]


class TestedIncumbent:
    """The configuration the farm credits (module docstring), kept up to date one observation
    at a time: ``add`` each evaluation, ``best()`` reads the credited (config_id, fidelity).

    Only observations at s = 1 count unless ``any_fidelity`` (an optimizer that deploys at a
    dataset size of its choice); snapshots of smaller sizes never do. Ties go to the
    configuration tested first."""

    def __init__(self, problem: Problem, any_fidelity: bool = False):
        self.problem = problem
        self.any_fidelity = any_fidelity
        self._metrics = [problem.objective.metric] + [c.metric for c in problem.constraints]
        # (config_id, fidelity) -> [runs, timed out in any, sums of self._metrics]
        self._seen: dict[tuple[int, float], list] = {}
        self._best: tuple[int, float] | None = None

    def add(self, config_id: int, fidelity: float, observation) -> None:
        """Count one evaluation of ``config_id`` at ``fidelity``."""
        if not self.any_fidelity and not math.isclose(fidelity, 1.0):
            return
        key = (int(config_id), float(fidelity))
        entry = self._seen.setdefault(key, [0, False, np.zeros(len(self._metrics))])
        entry[0] += 1
        entry[1] = entry[1] or bool(observation.timed_out)
        entry[2] = entry[2] + [observation.value(m) for m in self._metrics]
        self._best = self._search()

    def _search(self) -> tuple[int, float] | None:
        sign = 1.0 if self.problem.objective.direction == "min" else -1.0
        best, best_value = None, math.inf
        for key, (n, timed_out, sums) in self._seen.items():
            means = sums / n
            if timed_out or not all(
                bool(c.holds(v)) for c, v in zip(self.problem.constraints, means[1:])
            ):
                continue
            if sign * means[0] < best_value:
                best, best_value = key, sign * means[0]
        return best

    def best(self) -> tuple[int | None, float]:
        """The credited (config_id, fidelity); (None, 1.0) before any feasible observation."""
        return (None, 1.0) if self._best is None else self._best

    def tested(self, config_id: int | None, fidelity: float) -> bool:
        """Whether the run evaluated ``config_id`` at ``fidelity`` (a size that counts)."""
        return any(c == config_id and math.isclose(f, fidelity) for c, f in self._seen)


def _number(v: float) -> float | None:
    return None if v is None or math.isnan(v) else float(v)


def true_values(oracle: Oracle, config_id: int, fidelity: float = 1.0) -> dict[str, Any]:
    """The configuration's mean measured ``cost``, ``time`` and ``accuracy`` (None where the
    dataset does not measure it) at dataset size ``fidelity``."""
    return {m: _number(oracle.true_value(config_id, fidelity, metric=m)) for m in METRICS}


def constraint_checks(
    oracle: Oracle, config_id: int, trace: pa.Table, fidelity: float = 1.0
) -> list[dict[str, Any]]:
    """One entry per constraint of the problem: ``constraint`` (``time<=5330``), ``metric``,
    ``true`` (mean value) and ``holds`` on it, and the values ``observed`` when the run
    evaluated this configuration at this fidelity (a timed-out run observes its cap, and
    none of a named metric)."""
    ids = trace.column("config_id").to_numpy()
    fids = trace.column("fidelity").to_numpy()
    seen = (ids == config_id) & np.isclose(fids, fidelity)
    checks = []
    for c in oracle.problem.constraints:
        true = oracle.true_value(config_id, fidelity, metric=c.metric)
        observed = observed_values(trace, c.metric)[seen]
        with np.errstate(invalid="ignore"):
            holds = bool(c.holds(true))
        checks.append(
            {
                "constraint": str(c),
                "metric": c.metric,
                "true": _number(true),
                "holds": holds,
                "observed": [_number(v) for v in observed],
            }
        )
    return checks


def observed_values(trace: pa.Table, metric: str) -> np.ndarray:
    """Each step's observed ``metric``: a column of the trace, or a named metric from its
    ``metrics`` map (NaN where the step did not measure it)."""
    if metric in trace.column_names:
        return trace.column(metric).to_numpy(zero_copy_only=False).astype(float)
    if "metrics" not in trace.column_names:
        return np.full(trace.num_rows, np.nan)
    return (
        pc.map_lookup(trace.column("metrics"), metric, "first")
        .to_numpy(zero_copy_only=False)
        .astype(float)
    )
