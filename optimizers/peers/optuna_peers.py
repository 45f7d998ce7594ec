"""Optuna's samplers as farm optimizers (``pip install 'optfarm[peers]'``): the optimizers a
user would reach for instead of the papers' ones, over the same table.

Each peer drives an in-memory Optuna study with the sampler's own ask/tell API, as
``table_peer.TablePeer`` says (nearest configuration, memory answers, ``patience``).
Constraints go through Optuna's own mechanism, ``Trial.set_constraint`` (Optuna 5; TPE and
GP read them: relative violations, <= 0 feasible); CMA-ES has no constraint mechanism and is
told the penalised objective; random search ignores values. The sampler's seed is the run's.
Optuna is imported when a peer is built, never when the registry lists it.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Mapping

from oracle.problem import Problem
from oracle.space import SearchSpace

from ..base import Param
from .table_peer import TablePeer

__all__ = ["OptunaTPE", "OptunaGP", "OptunaCmaEs", "OptunaRandom"]


class OptunaPeer(TablePeer):
    """An Optuna sampler over the dataset's table."""

    modules = ("optuna",)

    def __init__(self, space: SearchSpace, problem: Problem, seed: int = 0, executor=None,
                 **params: Any):
        super().__init__(space, problem, seed, executor, **params)
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)  # no line per trial
        self.distributions = {
            name: (optuna.distributions.CategoricalDistribution(choices) if kind == "categorical"
                   else optuna.distributions.FloatDistribution(0.0, 1.0))
            for name, kind, choices in self.grid.parameters()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = self.sampler(optuna)
        direction = "minimize" if problem.objective.direction == "min" else "maximize"
        self.study = optuna.create_study(direction=direction, sampler=sampler)

    def sampler(self, optuna):
        """The Optuna sampler, seeded with the run's seed."""
        raise NotImplementedError

    def ask(self) -> tuple[Any, Mapping[str, Any], int]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # e.g. CMA-ES sampling categoricals apart
            trial = self.study.ask(self.distributions)
        return trial, trial.params, trial.number

    def tell(self, trial, value: float, constraints: list[float]) -> None:
        from optuna.trial import TrialState

        if math.isnan(value) or any(math.isnan(c) for c in constraints):
            self.study.tell(trial, state=TrialState.FAIL)   # e.g. a run pending elsewhere
            return
        if self.constrained:
            for c, v in zip(self.problem.constraints, constraints):
                trial.set_constraint(str(c), v)
        self.study.tell(trial, value)


class OptunaTPE(OptunaPeer):
    name = "optuna-tpe"
    summary = "Optuna's TPE sampler (constraints) over the table [peers extra]"
    params = TablePeer.params + (
        Param("n_startup_trials", 10, "random trials before TPE", low=0),)

    def sampler(self, optuna):
        return optuna.samplers.TPESampler(seed=self.seed,
                                          n_startup_trials=self.config["n_startup_trials"])

    def startup(self) -> int:
        return self.config["n_startup_trials"]


class OptunaGP(OptunaPeer):
    name = "optuna-gp"
    summary = "Optuna's GP sampler (constraints; needs torch) over the table [peers extra]"
    modules = ("optuna", "torch", "greenlet")
    params = TablePeer.params + (
        Param("n_startup_trials", 10, "random trials before the GP", low=0),)

    def sampler(self, optuna):
        return optuna.samplers.GPSampler(seed=self.seed,
                                         n_startup_trials=self.config["n_startup_trials"])

    def startup(self) -> int:
        return self.config["n_startup_trials"]


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
