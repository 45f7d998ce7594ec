"""What a run's summary says about one configuration: its true (mean) cost, time and accuracy,
and each constraint checked on the truth and on what the optimizer observed of it.

The two can disagree on noisy data: an optimizer sees one draw of the repeated measurements
(``aggregate=sample``), so a configuration whose observed run met a constraint may break it on
average; the summary then says which constraint, by how much, and what was observed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oracle.oracle import Oracle
from oracle.problem import METRICS

__all__ = ["constraint_checks", "observed_values", "true_values"]


def _number(v: float) -> float | None:
    return None if v is None or math.isnan(v) else float(v)


def true_values(oracle: Oracle, config_id: int, fidelity: float = 1.0) -> dict[str, Any]:
    """The configuration's mean measured ``cost``, ``time`` and ``accuracy`` (None where the
    dataset does not measure it) at dataset size ``fidelity``."""
    return {m: _number(oracle.true_value(config_id, fidelity, metric=m)) for m in METRICS}


def constraint_checks(oracle: Oracle, config_id: int, trace: pa.Table,
                      fidelity: float = 1.0) -> list[dict[str, Any]]:
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
        checks.append({"constraint": str(c), "metric": c.metric, "true": _number(true),
                       "holds": holds, "observed": [_number(v) for v in observed]})
    return checks


def observed_values(trace: pa.Table, metric: str) -> np.ndarray:
    """Each step's observed ``metric``: a column of the trace, or a named metric from its
    ``metrics`` map (NaN where the step did not measure it)."""
    if metric in trace.column_names:
        return trace.column(metric).to_numpy(zero_copy_only=False).astype(float)
    if "metrics" not in trace.column_names:
        return np.full(trace.num_rows, np.nan)
    return pc.map_lookup(trace.column("metrics"), metric, "first").to_numpy(
        zero_copy_only=False).astype(float)
