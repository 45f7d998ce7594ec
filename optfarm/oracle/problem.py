"""What is optimised: objective, constraints and exploration budget.

A ``Problem`` is built from a dataset's defaults plus the user's overrides. Constraints are
plain data (``time <= 300``); the oracle evaluates them on true values for the metrics, and
optimizers model them from observations.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from .contract import METRICS
from .spelling import did_you_mean

__all__ = [
    "Objective",
    "Constraint",
    "Problem",
    "ProblemError",
    "METRICS",
    "TIME_UNITS",
    "parse_constraint",
    "to_seconds",
]

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "min": 60.0, "h": 3600.0}  # -> seconds
_METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ProblemError(ValueError):
    """A problem a dataset or an optimizer cannot take (a metric the dataset does not measure,
    an objective the optimizer does not optimise, e.g. Lynceus without 'min cost'): bad input,
    the command line exits 2 with this one-line message."""


def _check_metric(what: str, metric: str) -> None:
    """Any measured metric may be constrained or optimised: the built-in ones and the named
    metrics a dataset measures (``DatasetMeta.measured``), e.g. ``rmsd`` or ``p95_ms``."""
    if not isinstance(metric, str) or not _METRIC_NAME.fullmatch(metric):
        raise ValueError(f"{what} metric {metric!r} is not a metric name (letters, digits, _)")


def to_seconds(value: float, unit: str) -> float:
    """``value`` in ``unit`` (s, ms, min, h) as seconds, rounded to 12 significant digits so
    that 205000 ms is exactly 205 s."""
    return float(f"{value * TIME_UNITS[unit]:.12g}")


def parse_constraint(text: str) -> tuple[str, str, float, str | None]:
    """``'time <= 205 s'`` -> ("time", "<=", 205.0, "s"); the unit is optional."""
    m = re.fullmatch(
        r"\s*(\w+)\s*(<=|>=)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
        r"\s*([A-Za-z%][\w/%]*)?\s*",
        text,
    )
    if not m:
        raise ValueError(f"constraint {text!r} is not of the form 'time<=300' or 'time <= 205 s'")
    return m.group(1), m.group(2), float(m.group(3)), m.group(4)


@dataclass(frozen=True)
class Objective:
    """``minimize cost`` (Lynceus, Nephele, CherryPick, Guindani) or ``maximize accuracy``
    (TrimTuner, FABOLAS); any measured metric of a dataset (``min energy``)."""

    metric: str = "cost"
    direction: Literal["min", "max"] = "min"

    def __post_init__(self):
        _check_metric("objective", self.metric)
        if self.direction not in ("min", "max"):
            raise ValueError(
                f"objective direction {self.direction!r} is not 'min' or "
                f"'max'{did_you_mean(self.direction, ('min', 'max'))}"
            )

    def __str__(self) -> str:
        return f"{self.direction} {self.metric}"

    @classmethod
    def parse(cls, text: str) -> Objective:
        """``'min cost'`` / ``'max accuracy'``."""
        parts = text.split()
        if len(parts) != 2:
            raise ValueError(f"objective {text!r} is not of the form 'min cost' or 'max accuracy'")
        return cls(metric=parts[1], direction=cast(Literal["min", "max"], parts[0]))


@dataclass(frozen=True)
class Constraint:
    """``metric op threshold`` with op ``<=`` or ``>=``, on the true value of a configuration;
    ``metric`` is time (seconds), cost, accuracy or any named metric the dataset measures."""

    metric: str
    op: Literal["<=", ">="]
    threshold: float

    def __post_init__(self):
        _check_metric("constraint", self.metric)
        if self.op not in ("<=", ">="):
            raise ValueError(f"constraint operator {self.op!r} is not '<=' or '>='")
        if not math.isfinite(self.threshold):
            raise ValueError(f"constraint threshold {self.threshold!r} is not a finite number")

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.threshold:g}"

    def shown(self, cost_unit: str) -> str:
        """``time<=205 s``: the constraint with its unit (time in seconds, cost in the
        dataset's ``cost_unit``; other metrics in the dataset's own unit, not named)."""
        unit = {"time": "s", "cost": cost_unit}.get(self.metric)
        return f"{self}{' ' + unit if unit else ''}"

    def holds(self, value):
        """Elementwise test (numpy arrays or floats); NaN never holds."""
        return value <= self.threshold if self.op == "<=" else value >= self.threshold

    @classmethod
    def parse(cls, text: str) -> Constraint:
        """``'time<=300'``, ``'accuracy >= 0.85'``, ``'cost<=0.1'``, ``'rmsd<=2.1'``; a time
        may carry its unit (``'time<=205000 ms'``, stored in seconds). Units of other metrics
        are the dataset's own (the table import checks a unit written there)."""
        metric, op, value, unit = parse_constraint(text)
        if unit is not None:
            if metric != "time" or unit not in TIME_UNITS:
                raise ValueError(
                    f"constraint {text!r}: only a time takes a unit here ({', '.join(TIME_UNITS)})"
                )
            value = to_seconds(value, unit)
        return cls(metric, cast(Literal["<=", ">="], op), value)


@dataclass(frozen=True)
class Problem:
    """Objective, constraints and exploration budget (``inf``: unlimited)."""

    objective: Objective = field(default_factory=Objective)
    constraints: tuple[Constraint, ...] = ()
    budget: float = math.inf

    def __post_init__(self):
        if not self.budget > 0:
            raise ValueError(f"budget must be positive, got {self.budget!r}")

    @property
    def metric(self) -> str:
        """The quality metric of a recommendation: ``cno`` for cost minimisation (Lynceus),
        ``accuracy_c`` for accuracy maximisation under a cost cap (TrimTuner)."""
        return "accuracy_c" if self.objective.metric == "accuracy" else "cno"

    def check_measured(self, dataset: str, measured: tuple[str, ...]) -> None:
        """Raise ProblemError (with a "did you mean") when the objective or a constraint names
        a metric that ``dataset`` does not measure (``measured``: ``DatasetMeta.measured``)."""
        scalars = [m for m in measured if m != "acc_curve"]
        named = [(f"objective '{self.objective}'", self.objective.metric)]
        named += [(f"constraint '{c}'", c.metric) for c in self.constraints]
        for what, metric in named:
            if metric not in scalars:
                raise ProblemError(
                    f"{dataset}: the {what} names {metric!r}, which the dataset "
                    f"does not measure{did_you_mean(metric, scalars)} (measured: "
                    f"{', '.join(scalars)})"
                )

    def constraint_on(self, metric: str) -> Constraint | None:
        return next((c for c in self.constraints if c.metric == metric), None)

    @property
    def deadline(self) -> float | None:
        """The job's deadline in seconds: the threshold of its ``time <= T`` constraint (a run
        still going at T cannot be feasible); None without one."""
        return min(
            (c.threshold for c in self.constraints if c.metric == "time" and c.op == "<="),
            default=None,
        )

    def with_overrides(self, *, objective=None, constraints=None, budget=None) -> Problem:
        return replace(
            self,
            objective=self.objective if objective is None else objective,
            constraints=self.constraints if constraints is None else tuple(constraints),
            budget=self.budget if budget is None else budget,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "objective": str(self.objective),
            "constraints": [str(c) for c in self.constraints],
            "budget": None if math.isinf(self.budget) else self.budget,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Problem:
        budget = d.get("budget")
        return cls(
            Objective.parse(d.get("objective", "min cost")),
            tuple(Constraint.parse(c) for c in d.get("constraints", ())),
            math.inf if budget is None else float(budget),
        )
