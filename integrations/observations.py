"""What a tuning tool reports about one job, as the ``Observation`` a farm optimizer is told."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from oracle.oracle import Observation

__all__ = ["observation_from"]


def observation_from(metrics: Mapping[str, Any], timed_out: bool, where: str,
                     named: Sequence[str] = ()) -> Observation:
    """The job's ``time`` (seconds) and ``cost`` (required, finite, >= 0) and ``accuracy``
    (optional) from ``metrics``, and the ``named`` metrics it reports (a constrained metric
    such as ``p99_ms``); ``where`` names the trial and how it reports, for the one-line error
    when a value is missing or not a number."""
    values = {}
    for name in ("time", "cost", "accuracy"):
        value = metrics.get(name, math.nan if name == "accuracy" else None)
        try:
            values[name] = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: {name} = {value!r} is not a number (report the job's "
                             "time in seconds and its cost)") from None
        if name != "accuracy" and not (math.isfinite(values[name]) and values[name] >= 0):
            raise ValueError(f"{where}: {name} = {value!r} is not a finite non-negative number")
    extra = {}
    for name in named:
        if name not in ("time", "cost", "accuracy") and metrics.get(name) is not None:
            try:
                extra[name] = float(metrics[name])
            except (TypeError, ValueError):
                raise ValueError(f"{where}: {name} = {metrics[name]!r} is not a number") \
                    from None
    return Observation(values["time"], values["cost"], values["accuracy"], timed_out=timed_out,
                       metrics=extra)
