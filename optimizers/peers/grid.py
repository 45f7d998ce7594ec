"""How a peer optimizer, which searches a continuous or categorical box, sees a dataset's
finite table of configurations.

Each dimension with more than one value is one parameter of the peer: a categorical dimension
is a categorical choice among its values; an ordinal or numeric dimension is a float on [0, 1],
its encoding in ``SearchSpace.features`` (log scale where natural, ordered labels by rank).
A point the peer suggests is written as a feature row (one-hot for the categoricals) and
mapped to the **nearest measured configuration**: the smallest squared Euclidean distance in
the encoded feature space every farm model sees, ties broken by the smallest ``config_id``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from oracle.oracle import Observation
from oracle.problem import Problem
from oracle.space import Dimension, SearchSpace

__all__ = ["GridView", "constraint_values", "penalised_objective"]


@dataclass(frozen=True)
class _Column:
    dimension: Dimension
    start: int          # first feature column of the dimension
    width: int          # number of feature columns (one-hot width for a categorical)


class GridView:
    """The peer's parameters over ``space`` and the map from a suggested point to a
    configuration."""

    def __init__(self, space: SearchSpace):
        self.space = space
        columns, start = [], 0
        for d in space.dimensions:
            width = len(d.values) if d.kind == "categorical" else 1
            columns.append(_Column(d, start, width))
            start += width
        self._columns = tuple(columns)
        # dimensions with one value are constant: not a parameter of the peer
        self.searched = tuple(c for c in columns if len(c.dimension.values) > 1)

    def parameters(self) -> list[tuple[str, str, tuple]]:
        """(name, kind, choices) per searched dimension: kind ``categorical`` with its values
        as plain Python scalars, or ``unit`` for a float on [0, 1]."""
        return [(c.dimension.name, "categorical", tuple(_plain(v) for v in c.dimension.values))
                if c.dimension.kind == "categorical" else (c.dimension.name, "unit", ())
                for c in self.searched]

    def features(self, point: Mapping[str, Any]) -> np.ndarray:
        """The feature row of a suggested point {dimension: value or unit float}."""
        x = self.space.features[0].astype(float).copy()   # constant dimensions as they are
        for c in self.searched:
            value = point[c.dimension.name]
            if c.dimension.kind == "categorical":
                x[c.start:c.start + c.width] = 0.0
                x[c.start + [_plain(v) for v in c.dimension.values].index(value)] = 1.0
            else:
                x[c.start] = float(value)
        return x

    def nearest(self, point: Mapping[str, Any]) -> int:
        """The config_id nearest to ``point`` in the encoded feature space (ties: smallest
        config_id, as ``np.argmin`` returns the first minimum)."""
        d2 = ((self.space.features - self.features(point)) ** 2).sum(axis=1)
        return int(np.argmin(d2))


def constraint_values(problem: Problem, observation: Observation) -> list[float]:
    """One value per constraint, <= 0 when the observed run met it (Optuna's convention):
    the relative violation ``value / threshold - 1`` (``1 - value / threshold`` for ``>=``),
    or the difference when the threshold is 0, on any measured metric (``Observation.value``).
    A timed-out run violates every constraint (its named metrics are unknown)."""
    out = []
    for c in problem.constraints:
        v, t = observation.value(c.metric), c.threshold
        gap = (v - t if c.op == "<=" else t - v)
        out.append(gap / abs(t) if t != 0 else gap)
    if observation.timed_out:
        out = [1e-9 if math.isnan(v) else max(v, 1e-9) for v in out]
    return out


def penalised_objective(problem: Problem, observation: Observation) -> float:
    """The objective for a peer with no constraint mechanism: an infeasible run's value is
    made worse by the factor (1 + total relative violation), as TrimTuner's Accuracy_C scales
    an over-budget accuracy by C_max / cost."""
    value = observation.value(problem.objective.metric)
    factor = 1.0 + sum(max(v, 0.0) for v in constraint_values(problem, observation))
    return value * factor if problem.objective.direction == "min" else value / factor


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
