"""Per-metric surrogate bundle for problems over (x, s): one model per metric the problem
needs (objective, every constrained metric, and the cost of a run), each on a log scale
[TrimTuner Sec. III, FABOLAS Sec. 3.2]:

- accuracy -> ``log(1 - accuracy)`` (a loss: smaller is better), FABOLAS loss basis;
- cost, time -> ``log(value)``, FABOLAS cost basis;
- any other measured metric (``rmsd``, ``p95_ms``, ``energy``: ``Observation.metrics``) as it
  is, its sign unknown (a constraint on it, or ``min`` of it as the objective).

Every objective handled is then "minimise z" (max accuracy, min cost, min time), and each
constraint becomes ``z op' threshold'`` (``accuracy >= a`` is ``z <= log(1 - a)``), kept in
``Targets.constraints`` for the acquisition functions
(``acquisition.analytic.constraints_log_pf``).

A run stopped by its time cap (``base.stopped_at_cap``: the harness's deadline on a board) is
censored: it shows only that its time exceeds the cap T, and its cost what it spent until then.
Fed as measured, such a run reads as one that took exactly T: on a table where most runs are
stopped, a time model fitted on them gives every configuration P(time <= T) = 1/2 and the
constraint stops guiding the search (docs/results/large-spaces.md, "Deadline stops"). Its
time and cost are fed at ``PAR_K`` = 2 times what it spent instead: the penalised run time
PAR-k with which algorithm configuration scores a capped run, and at which its censored-data
imputation is capped [Hutter, Hoos, Leyton-Brown, Bayesian optimization with censored
response data, 2011 (SMAC); PAR-2 is the SAT competitions' score].
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from optfarm.oracle.problem import Problem, ProblemError

__all__ = ["to_model_scale", "Targets", "PAR_K", "CENSORED"]

_EPS = 1e-9
PAR_K = 2.0  # a censored run's time and cost are fed at PAR_K x what it spent
CENSORED = ("time", "cost")  # the metrics a run stopped at its cap leaves censored


def to_model_scale(metric: str, values):
    """Observed values of ``metric`` on the model scale (log loss or log cost/time)."""
    v = np.asarray(values, dtype=float)
    if metric == "accuracy":
        return np.log(np.clip(1.0 - v, _EPS, None))
    if metric in ("cost", "time"):
        return np.log(np.clip(v, _EPS, None))
    return v


def _basis(metric: str) -> str:
    return "loss" if metric == "accuracy" else "cost"


class Targets:
    """The models of one problem, fitted together on the same inputs.

    Args:
        problem: objective (max accuracy / min cost / min time) and constraints.
        make_model: ``make_model(basis) -> unfitted model`` (``basis``: "loss" or "cost").
    """

    def __init__(self, problem: Problem, make_model: Callable[[str], object]):
        obj = problem.objective
        if (obj.metric == "accuracy") != (obj.direction == "max"):
            raise ProblemError(
                f"objective {obj} is not supported (use max accuracy, or min "
                "of cost, time or a measured metric)"
            )
        self.objective = obj.metric
        self.constraints = []
        for c in problem.constraints:
            thr = float(to_model_scale(c.metric, c.threshold))
            op = c.op if c.metric != "accuracy" else ("<=" if c.op == ">=" else ">=")
            self.constraints.append((c.metric, op, thr))
        self.metrics = tuple(
            dict.fromkeys([self.objective, "cost"] + [m for m, _, _ in self.constraints])
        )
        self.models = {m: make_model(_basis(m)) for m in self.metrics}

    def fit(
        self,
        X: np.ndarray,
        observed: dict[str, np.ndarray],
        censored: np.ndarray | None = None,
    ) -> Targets:
        """Fit every model on the rows ``X`` and their ``observed`` {metric: values}; the rows
        ``censored`` marks (stopped at their time cap) have their time and cost fed at
        ``PAR_K`` times the observed."""
        for m, model in self.models.items():
            y = np.asarray(observed[m], dtype=float)
            if not np.all(np.isfinite(y)):
                raise ValueError(f"observed {m} has missing values: every run must report it")
            if censored is not None and m in CENSORED:
                y = np.where(censored, PAR_K * y, y)
            model.fit(X, to_model_scale(m, y))
        return self

    def with_points(self, X: np.ndarray, z: dict[str, np.ndarray]) -> Targets:
        """A copy whose models are conditioned on fantasised model-scale values ``z``."""
        new = object.__new__(Targets)
        new.__dict__.update(self.__dict__)
        new.models = {m: model.with_points(X, z[m]) for m, model in self.models.items()}
        return new

    def predict(self, X: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """{metric: (mean, std)} on the model scale."""
        return {m: model.predict(X) for m, model in self.models.items()}

    def predict_rows(self, table: np.ndarray, rows: np.ndarray | slice) -> dict:
        """``predict(table[rows])`` by models that keep what they can of their predictions at
        ``table`` from fit to fit (``GaussianProcess.predict_rows``)."""
        return {m: model.predict_rows(table, rows) for m, model in self.models.items()}

    def quality(self, mean_objective: np.ndarray) -> np.ndarray:
        """Predicted quality to maximise in CEA: accuracy 1 - exp(z); for cost/time 1/value."""
        if self.objective == "accuracy":
            return 1.0 - np.exp(mean_objective)
        return np.exp(-mean_objective)
