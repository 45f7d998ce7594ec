"""The part every peer shares: a library's ask/tell loop over a dataset's table, in the
library's native search space (``grid.GridView``: categorical and ordered choices).

A peer asks its library for a point and looks up the configuration the table measured with
those values. A combination the table never measured is answered as the library expects a
failed evaluation (``reject``: Optuna's pruned trial, SMAC's crashed one): not an
evaluation, no charge. A configuration already run (or running) is answered from memory, at
no charge: the value and constraint values it had. Otherwise the configuration goes to the
farm (a new evaluation). After ``patience`` asks in a row that gave no new evaluation the peer
stops, ``gave up: N repeats``; with the default, 2000, no peer run re-measured on
lynceus-multilayer stopped itself before the target or its 400 evaluations
(docs/results/peers.md), where 100 had stopped TPE after 20-42 runs. A
peer whose library has a constraint mechanism is told the objective and the constraint
values; one without is told ``grid.penalised_objective``, never better than the best
feasible value seen. The recommendation is the best configuration observed to meet the
constraints (as ``random``).
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from optfarm.oracle.oracle import Observation
from optfarm.oracle.problem import Problem
from optfarm.oracle.space import SearchSpace

from ..base import (
    MissingExtra,
    Optimizer,
    Param,
    Recommendation,
    Suggestion,
    init_share,
)
from .grid import GridView, constraint_values, penalised_objective

__all__ = ["PATIENCE", "TablePeer", "require"]

PATIENCE = 2000  # asks without a new evaluation before a peer gives up


def require(module: str, optimizer: str, extra: str = "peers") -> None:
    """Raise ``MissingExtra`` (one line naming the extra) when ``module`` is not installed."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ValueError:  # sys.modules[module] is None: the import is blocked
        found = False
    if not found:
        raise MissingExtra(
            f"{optimizer} needs {module}, which is not installed: pip install 'optfarm[{extra}]'"
        )


class TablePeer(Optimizer):
    """A library's ask/tell loop over the table; subclasses implement ``ask`` and ``tell``."""

    modules: ClassVar[tuple[str, ...]] = ()  # what the library needs installed
    constrained: ClassVar[bool] = True  # the library takes constraint values
    params = (
        Param(
            "patience",
            PATIENCE,
            "asks in a row that give no new evaluation (a "
            "configuration already run, answered from memory, or a combination the "
            "table never measured) after which the peer stops",
            low=1,
        ),
        init_share(),
    )

    @classmethod
    def resolve_params(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        for module in cls.modules:
            require(module, cls.name)
        return super().resolve_params(params)

    def __init__(
        self, space: SearchSpace, problem: Problem, seed: int = 0, executor=None, **params: Any
    ):
        super().__init__(space, problem, seed, executor, **params)
        self.grid = GridView(space)
        self.answers: dict[int, tuple[float, list[float]]] = {}  # config_id -> told values
        self.pending: dict[int, Any] = {}  # config_id -> open handle
        self.memory_answers = 0  # library trials answered from memory (already run)
        self.unmeasured_answers = 0  # library trials the table has no measurement for

    def ask(self) -> tuple[Any, Mapping[str, Any], int] | None:
        """The library's next point: (handle to tell, {parameter: value}, its trial number);
        None when the library gives up proposing (after ``patience`` repeats of its own)."""
        raise NotImplementedError

    def tell(self, handle: Any, value: float, constraints: list[float]) -> None:
        """Tell the library the value (NaN: the run is pending) and constraint values."""
        raise NotImplementedError

    def reject(self, handle: Any) -> None:
        """Tell the library its point cannot be evaluated (a combination never measured)."""
        raise NotImplementedError

    def startup(self) -> int:
        """Evaluations the library spends on its initial design (the trace's init phase)."""
        return 0

    def suggest(self) -> Suggestion | None:
        if self.spent >= self.problem.budget:
            return self.stopped("budget")
        if len(self.answers) >= self.space.n_configs:
            return self.stopped("exhausted")
        for _ in range(self.config["patience"]):
            asked = self.ask()
            if asked is None:  # the library's own patience ran out (SMAC)
                return self.stopped(f"gave up: {self.config['patience']} repeats")
            handle, point, number = asked
            config_id = self.grid.lookup(point)
            if config_id is None:
                self.reject(handle)
                self.unmeasured_answers += 1
                continue
            if config_id in self.answers or config_id in self.pending:
                self.tell(handle, *self.answers.get(config_id, (math.nan, [])))
                self.memory_answers += 1
                continue
            self.pending[config_id] = handle
            phase = "init" if len(self.answers) < self.startup() else "search"
            return Suggestion(config_id, 1.0, phase=phase, info={"trial": number})
        return self.stopped(f"gave up: {self.config['patience']} repeats")

    def _observe(self, suggestion: Suggestion, observation: Observation) -> None:
        handle = self.pending.pop(suggestion.config_id)
        value = (
            observation.value(self.problem.objective.metric)
            if self.constrained
            else penalised_objective(self.problem, observation, self.best_feasible())
        )
        self.answers[suggestion.config_id] = (value, constraint_values(self.problem, observation))
        self.tell(handle, *self.answers[suggestion.config_id])

    def best_feasible(self) -> float | None:
        """The best objective value observed feasible so far (None before any)."""
        obj = self.problem.objective
        values = [o.value(obj.metric) for _, o in self.history if self.observed_feasible(o)]
        if not values:
            return None
        return min(values) if obj.direction == "min" else max(values)

    def recommend(self) -> Recommendation | None:
        return self.recommend_best_observed()
