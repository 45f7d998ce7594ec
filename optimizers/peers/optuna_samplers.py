"""Optuna's samplers as farm optimizers (``pip install 'optfarm[peers]'``): the optimizers a
user would reach for instead of the papers' ones, over the same table.

Each peer drives an in-memory Optuna study with the sampler's own ask/tell API:

- the search box and the map from a suggested point to the nearest measured configuration
  are ``grid.GridView``'s (categoricals as choices, ordered dimensions as floats on [0, 1]);
- a point that maps to a configuration already run is answered from memory (the value and
  constraint values it had) at no charge; it is an Optuna trial but not an evaluation of the
  farm. After ``patience`` such answers in a row the peer stops (its sampler keeps proposing
  what it has run);
- constraints go through Optuna's own mechanism, ``Trial.set_constraint`` (Optuna 5; TPE and
  GP read them: relative violations, <= 0 feasible); CMA-ES has no constraint mechanism and
  is told a penalised objective (``grid.penalised_objective``); random search ignores values;
- the sampler's seed is the run's seed; the recommendation is the best configuration observed
  to meet the constraints (as ``random``).

Optuna is imported when a peer is built, never when the registry lists it.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from typing import Any, ClassVar, Mapping

from oracle.oracle import Observation
from oracle.problem import Problem
from oracle.space import SearchSpace

from ..base import MissingExtra, Optimizer, Param, Suggestion
from .grid import GridView, constraint_values, penalised_objective

__all__ = ["OptunaTPE", "OptunaGP", "OptunaCmaEs", "OptunaRandom"]

def require(module: str, optimizer: str, extra: str = "peers") -> None:
    """Raise ``MissingExtra`` (one line naming the extra) when ``module`` is not installed."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ValueError:          # sys.modules[module] is None: the import is blocked
        found = False
    if not found:
        raise MissingExtra(f"{optimizer} needs {module}, which is not installed: "
                           f"pip install 'optfarm[{extra}]'")


class OptunaPeer(Optimizer):
    """An Optuna sampler over the dataset's table (see the module docstring)."""

    summary: ClassVar[str] = ""
    modules: ClassVar[tuple[str, ...]] = ("optuna",)
    constrained: ClassVar[bool] = True        # the sampler reads Trial constraints
    params = (Param("patience", 100, "already-run suggestions in a row (answered from memory) "
                    "after which the peer stops", low=1),)

    @classmethod
    def resolve_params(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        for module in cls.modules:
            require(module, cls.name)
        return super().resolve_params(params)

    def __init__(self, space: SearchSpace, problem: Problem, seed: int = 0, executor=None,
                 **params: Any):
        super().__init__(space, problem, seed, executor, **params)
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)  # no line per trial
        self.grid = GridView(space)
        self.distributions = {
            name: (optuna.distributions.CategoricalDistribution(choices) if kind == "categorical"
                   else optuna.distributions.FloatDistribution(0.0, 1.0))
            for name, kind, choices in self.grid.parameters()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = self.sampler(optuna)
        direction = "minimize" if problem.objective.direction == "min" else "maximize"
        self.study = optuna.create_study(direction=direction, sampler=sampler)
        self.answers: dict[int, tuple[float, list[float]]] = {}   # config_id -> told values
        self.pending: dict[int, Any] = {}                         # config_id -> open trial
        self.memory_answers = 0                                   # Optuna trials not run

    def sampler(self, optuna):
        """The Optuna sampler, seeded with the run's seed."""
        raise NotImplementedError

    def suggest(self) -> Suggestion | None:
        if self.spent >= self.problem.budget or len(self.answers) >= self.space.n_configs:
            return None
        for _ in range(self.config["patience"]):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # e.g. CMA-ES sampling categoricals apart
                trial = self.study.ask(self.distributions)
            config_id = self.grid.nearest(trial.params)
            if config_id in self.answers or config_id in self.pending:
                self._tell(trial, *self.answers.get(config_id, (math.nan, [])))
                self.memory_answers += 1
                continue
            self.pending[config_id] = trial
            phase = "init" if len(self.answers) < self._n_startup() else "search"
            return Suggestion(config_id, 1.0, phase=phase, info={"trial": trial.number})
        return None

    def _observe(self, suggestion: Suggestion, observation: Observation) -> None:
        trial = self.pending.pop(suggestion.config_id)
        value = (getattr(observation, self.problem.objective.metric) if self.constrained
                 else penalised_objective(self.problem, observation))
        self.answers[suggestion.config_id] = (value, constraint_values(self.problem,
                                                                       observation))
        self._tell(trial, *self.answers[suggestion.config_id])

    def _tell(self, trial, value: float, constraints: list[float]) -> None:
        from optuna.trial import TrialState

        if math.isnan(value) or any(math.isnan(c) for c in constraints):
            self.study.tell(trial, state=TrialState.FAIL)   # e.g. a run pending elsewhere
            return
        if self.constrained:
            for c, v in zip(self.problem.constraints, constraints):
                trial.set_constraint(str(c), v)
        self.study.tell(trial, value)

    def _n_startup(self) -> int:
        return self.config.get("n_startup_trials", 0)

    def recommend(self) -> int | None:
        return self.best_observed()


class OptunaTPE(OptunaPeer):
    name = "optuna-tpe"
    summary = "Optuna's TPE sampler (constraints) over the table [peers extra]"
    params = OptunaPeer.params + (
        Param("n_startup_trials", 10, "random trials before TPE", low=0),)

    def sampler(self, optuna):
        return optuna.samplers.TPESampler(seed=self.seed,
                                          n_startup_trials=self.config["n_startup_trials"])


class OptunaGP(OptunaPeer):
    name = "optuna-gp"
    summary = "Optuna's GP sampler (constraints; needs torch) over the table [peers extra]"
    modules = ("optuna", "torch", "greenlet")
    params = OptunaPeer.params + (
        Param("n_startup_trials", 10, "random trials before the GP", low=0),)

    def sampler(self, optuna):
        return optuna.samplers.GPSampler(seed=self.seed,
                                         n_startup_trials=self.config["n_startup_trials"])


class OptunaCmaEs(OptunaPeer):
    name = "optuna-cmaes"
    summary = ("Optuna's CMA-ES sampler (no constraint mechanism: penalised objective; "
               "categoricals sampled at random) over the table [peers extra]")
    modules = ("optuna", "cmaes")
    constrained = False

    def sampler(self, optuna):
        return optuna.samplers.CmaEsSampler(seed=self.seed, warn_independent_sampling=False,
                                            independent_sampler=optuna.samplers.RandomSampler(
                                                seed=self.seed))


class OptunaRandom(OptunaPeer):
    name = "optuna-random"
    summary = "Optuna's random sampler over the table (nearest configuration) [peers extra]"

    def sampler(self, optuna):
        return optuna.samplers.RandomSampler(seed=self.seed)
