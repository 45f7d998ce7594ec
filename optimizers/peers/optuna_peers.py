"""The Optuna peers: Optuna's TPE, GP, CMA-ES and random samplers as farm optimizers (``pip
install 'optfarm[peers]'``), the optimizers a user would reach for instead of the papers'
ones, over the same table.

Each peer drives an in-memory Optuna study with the sampler's own ask/tell API, as
``table_peer.TablePeer`` says (memory answers, ``patience``), over Optuna's native
distributions: a categorical dimension is a ``CategoricalDistribution`` of its values, an
ordinal or numeric one an ``IntDistribution`` over the ranks of its measured values (Optuna
has no ordinal distribution; an integer keeps the order, and every rank is a value the table
measured; CMA-ES samples integers natively, with its margin, and restarts with a doubled
population once it has converged (IPOP), its own way to use the budget left; Optuna 5 marks
``restart_strategy`` deprecated, to move to OptunaHub, and still runs it). A combination the table never
measured is told as a pruned trial (``TrialState.PRUNED``): TPE ranks pruned trials below
every complete one, so it learns to avoid the region; the GP and CMA-ES samplers ignore them,
as they do failed trials. Constraints go through Optuna's own mechanism, ``Trial.set_constraint`` (Optuna 5; TPE and
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
        self.ranked = {name: values for name, kind, values in self.grid.parameters()
                       if kind == "ordinal"}
        self.distributions = {
            name: (optuna.distributions.CategoricalDistribution(values) if kind == "categorical"
                   else optuna.distributions.IntDistribution(0, len(values) - 1))
            for name, kind, values in self.grid.parameters()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            warnings.simplefilter("ignore", FutureWarning)   # CMA-ES' restart_strategy
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
        # an ordinal parameter's value is the rank of the dimension's value
        point = {name: self.ranked[name][v] if name in self.ranked else v
                 for name, v in trial.params.items()}
        return trial, point, trial.number

    def reject(self, trial) -> None:
        from optuna.trial import TrialState

        self.study.tell(trial, state=TrialState.PRUNED)

    def tell(self, trial, value: float, constraints: list[float]) -> None:
        from optuna.trial import TrialState

        if math.isnan(value) or any(math.isnan(c) for c in constraints):
            self.study.tell(trial, state=TrialState.FAIL)   # e.g. a run pending elsewhere
            return
        if self.constrained:
            for c, v in zip(self.problem.constraints, constraints):
                trial.set_constraint(str(c), v)
        self.study.tell(trial, value)

    def startup(self) -> int:
        """The sampler's random start (``n_startup_trials``, where its table has one), at most
        ``init_share`` of the run's evaluations."""
        declared = any(p.name == "n_startup_trials" for p in self.params)
        return self.initial_design(self.config["n_startup_trials"] if declared else 0, least=0)


class OptunaTPE(OptunaPeer):
    name = "optuna-tpe"
    summary = "Optuna's TPE sampler (constraints) over the table [peers extra]"
    params = TablePeer.params + (
        Param("n_startup_trials", 10, "random trials before TPE", low=0),)

    def sampler(self, optuna):
        return optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=self.startup())


class OptunaGP(OptunaPeer):
    name = "optuna-gp"
    summary = "Optuna's GP sampler (constraints; needs torch) over the table [peers extra]"
    modules = ("optuna", "torch", "greenlet")
    params = TablePeer.params + (
        Param("n_startup_trials", 10, "random trials before the GP", low=0),)

    def sampler(self, optuna):
        return optuna.samplers.GPSampler(seed=self.seed, n_startup_trials=self.startup())


class OptunaCmaEs(OptunaPeer):
    name = "optuna-cmaes"
    summary = ("Optuna's CMA-ES sampler (no constraint mechanism: penalised objective; "
               "integers with margin, IPOP restarts, categoricals sampled at random) over the "
               "table "
               "[peers extra]")
    modules = ("optuna", "cmaes")
    constrained = False

    def sampler(self, optuna):
        return optuna.samplers.CmaEsSampler(seed=self.seed, warn_independent_sampling=False,
                                            with_margin=True, restart_strategy="ipop",
                                            independent_sampler=optuna.samplers.RandomSampler(
                                                seed=self.seed))


class OptunaRandom(OptunaPeer):
    name = "optuna-random"
    summary = "Optuna's random sampler over the table's dimensions [peers extra]"

    def sampler(self, optuna):
        return optuna.samplers.RandomSampler(seed=self.seed)
