"""How a peer optimizer sees a dataset's finite table of configurations.

Each dimension with more than one value is one parameter of the peer, in its library's native
form (``GridView.parameters``): a categorical dimension is a categorical choice among its
values, an ordinal or numeric one an ordered choice among its measured values (each library
says how: ``optuna_peers``, ``smac_facade``). A point the peer suggests is a value per
dimension; ``GridView.lookup`` finds the configuration the table measured with those values,
or None for a combination the table never measured (the peer then answers its library as the
library expects a failed evaluation to be answered).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from optfarm.oracle.oracle import Observation
from optfarm.oracle.problem import Problem
from optfarm.oracle.space import Dimension, SearchSpace

__all__ = ["INFEASIBLE_MARGIN", "GridView", "constraint_values", "penalised_objective"]

# how much worse than the best feasible value seen an infeasible run is told at least, as a
# share of that value (``penalised_objective``)
INFEASIBLE_MARGIN = 0.01


class GridView:
    """The peer's parameters over ``space`` and the map from a suggested point to the
    configuration the table measured."""

    def __init__(self, space: SearchSpace):
        self.space = space
        # dimensions with one value are constant: not a parameter of the peer
        self.searched: tuple[Dimension, ...] = tuple(
            d for d in space.dimensions if len(d.values) > 1
        )
        columns = [[_plain(v) for v in space.configs[d.name]] for d in self.searched]
        self._ids: dict[tuple, int] = {}
        for config_id, key in enumerate(zip(*columns)):
            self._ids.setdefault(key, config_id)

    def parameters(self) -> list[tuple[str, str, tuple]]:
        """(name, kind, values) per searched dimension: kind ``categorical`` (unordered) or
        ``ordinal`` (ordinal and numeric dimensions: ordered), the values in the dimension's
        order as plain Python scalars."""
        return [
            (
                d.name,
                "categorical" if d.kind == "categorical" else "ordinal",
                tuple(_plain(v) for v in d.values),
            )
            for d in self.searched
        ]

    def lookup(self, point: Mapping[str, Any]) -> int | None:
        """The config_id the table measured with the values of ``point`` {dimension: value},
        or None if the table never measured that combination."""
        return self._ids.get(tuple(point[d.name] for d in self.searched))

    def combinations(self) -> int:
        """Combinations of the searched dimensions' values (measured or not)."""
        return int(np.prod([len(d.values) for d in self.searched]))


def constraint_values(problem: Problem, observation: Observation) -> list[float]:
    """One value per constraint, <= 0 when the observed run met it (Optuna's convention):
    the relative violation ``value / threshold - 1`` (``1 - value / threshold`` for ``>=``),
    or the difference when the threshold is 0, on any measured metric (``Observation.value``).
    A timed-out run violates every constraint (its named metrics are unknown)."""
    out = []
    for c in problem.constraints:
        v, t = observation.value(c.metric), c.threshold
        gap = v - t if c.op == "<=" else t - v
        out.append(gap / abs(t) if t != 0 else gap)
    if observation.timed_out:
        out = [1e-9 if math.isnan(v) else max(v, 1e-9) for v in out]
    return out


def penalised_objective(
    problem: Problem, observation: Observation, best_feasible: float | None = None
) -> float:
    """The objective for a peer with no constraint mechanism. An infeasible run's value is
    made worse by the factor (1 + v), v its total relative violation (as TrimTuner's
    Accuracy_C scales an over-budget accuracy by C_max / cost), and is never better than the
    best feasible value seen, ``best_feasible``, made worse by (``INFEASIBLE_MARGIN`` + v)
    of its magnitude: an infeasible configuration never ranks below the cheapest feasible
    one seen, and among the infeasible ones told at that floor the larger violation ranks
    worse. Without the floor, a run stopped at the deadline (violation ~0, charged the cost
    of running until it) or a fast cheap configuration just over a threshold was told less
    than the cheapest feasible configuration (docs/results/harness-rules.md)."""
    value = observation.value(problem.objective.metric)
    violation = sum(max(v, 0.0) for v in constraint_values(problem, observation))
    minimise = problem.objective.direction == "min"
    told = value * (1.0 + violation) if minimise else value / (1.0 + violation)
    if violation > 0 and best_feasible is not None:
        step = abs(best_feasible) * (INFEASIBLE_MARGIN + violation)
        told = max(told, best_feasible + step) if minimise else min(told, best_feasible - step)
    return told


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
