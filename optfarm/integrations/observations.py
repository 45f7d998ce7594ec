"""What a tuning tool reports about one job, as the ``Observation`` a farm optimizer is told."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from optfarm.oracle.contract import METRICS, Observation

__all__ = ["observation_from"]


def observation_from(metrics: Mapping[str, Any], timed_out: bool, where: str) -> Observation:
    """The job's ``time`` (seconds) and ``cost`` (required, finite, >= 0), ``accuracy``
    (optional) and every other metric it reports as a real number (a quality metric, a latency
    percentile: ``Observation.metrics``, what a constraint on it reads) from ``metrics``;
    ``where`` names the trial and how it reports, for the one-line error when a value is
    missing or not a number."""
    values = {}
    for name in METRICS:
        value = metrics.get(name, math.nan if name == "accuracy" else None)
        try:
            values[name] = float(value)
        except (TypeError, ValueError):
            raise ValueError(
                f"{where}: {name} = {value!r} is not a number (report the job's "
                "time in seconds and its cost)"
            ) from None
        if name != "accuracy" and not (math.isfinite(values[name]) and values[name] >= 0):
            raise ValueError(f"{where}: {name} = {value!r} is not a finite non-negative number")
    named = {
        k: float(v)
        for k, v in metrics.items()
        if k not in values and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    return Observation(
        values["time"], values["cost"], values["accuracy"], timed_out=timed_out, metrics=named
    )
