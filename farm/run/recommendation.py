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

from oracle.oracle import Oracle
from oracle.problem import METRICS

__all__ = ["constraint_checks", "true_values"]


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
    evaluated this configuration at this fidelity (a timed-out run observes its cap; none for
    a metric the trace does not record)."""
    ids = trace.column("config_id").to_numpy()
    fids = trace.column("fidelity").to_numpy()
    seen = (ids == config_id) & np.isclose(fids, fidelity)
    checks = []
    for c in oracle.problem.constraints:
        true = oracle.true_value(config_id, fidelity, metric=c.metric)
        observed = (trace.column(c.metric).to_numpy(zero_copy_only=False)[seen].astype(float)
                    if c.metric in trace.column_names else [])
        with np.errstate(invalid="ignore"):
            holds = bool(c.holds(true))
        checks.append({"constraint": str(c), "metric": c.metric, "true": _number(true),
                       "holds": holds, "observed": [_number(v) for v in observed]})
    return checks
