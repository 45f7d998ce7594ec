"""A farm optimizer as an Optuna sampler: Lynceus, TrimTuner-DT or Guindani's variant D inside
an Optuna study over a finite space of cloud configurations.

    sampler = OptfarmSampler("lynceus", space, problem, seed=0, la=2)
    def objective(trial):
        vm = trial.suggest_categorical("vm", ["m5.large", "m5.xlarge"])
        workers = trial.suggest_categorical("workers", [2, 4, 8, 16])
        s = sampler.suggestion(trial)          # dataset size and time cap of this run
        seconds, dollars, finished = run_my_job(vm, workers, time_cap=s.time_cap)
        trial.set_user_attr("time", seconds)   # cost is the objective's value
        if not finished:
            raise optuna.TrialPruned()         # stopped at the cap: a timed-out run
        return dollars
    optuna.create_study(sampler=sampler).optimize(objective, n_trials=60)
    print(sampler.recommendation())

Contract:
- each ``trial.suggest_*`` call names a dimension of ``space`` and gets the value of the
  configuration the optimizer chose (its distribution must hold that value);
- the objective returns the problem's objective metric (cost or accuracy) and sets the job's
  other measurements as user attributes (``time`` always; ``cost``, ``accuracy`` when they are
  not the returned value or a constraint needs them);
- time caps (Lynceus' timeout policies): the job reads ``sampler.suggestion(trial).time_cap``,
  stops itself there, sets ``time`` and ``cost`` of the stopped run and raises
  ``optuna.TrialPruned``: the optimizer is told a timed-out run (Optuna's pruning as the stop);
- a failed trial is not told (the optimizer may choose that configuration again);
- each told trial carries the problem's constraint values the way Optuna's own samplers
  store a ``constraints_func``'s (the trial's ``constraints`` system attribute: one relative
  violation per constraint, <= 0 when the run met it), so ``study.best_trial`` and
  ``best_params`` are the best feasible trial;
- when the optimizer stops, right after the trial it was last told, the sampler ends the
  study (``Study.stop``): no job runs after that. Outside ``optimize`` (``study.ask()``), a
  trial asked after the stop gets the recommendation (``recommended(trial)`` is then
  true), which is not told to the optimizer.
The farm optimizers choose one job at a time: run the study with ``n_jobs=1``.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from optfarm.optimizers.peers.grid import constraint_values
from optfarm.optimizers.peers.optuna_private import set_constraints
from optfarm.optimizers.registry import make_optimizer
from optfarm.oracle.contract import Suggestion
from optfarm.oracle.problem import Problem
from optfarm.oracle.space import SearchSpace

from .observations import observation_from

__all__ = ["OptfarmSampler"]


class OptfarmSampler(optuna.samplers.BaseSampler):
    """An Optuna sampler that asks the farm optimizer ``optimizer`` (a name of ``farm
    optimizers``, with its ``params``) for each trial's configuration. ``evaluations`` is the
    study's trial budget (``n_trials``) when it has one: as ``farm run --iterations``, the
    optimizer's initial design then takes at most its ``init_share`` of it."""

    def __init__(
        self,
        optimizer: str,
        space: SearchSpace,
        problem: Problem,
        seed: int = 0,
        evaluations: int | None = None,
        **params: Any,
    ):
        self.space = space
        self.problem = problem
        self.optimizer = make_optimizer(
            optimizer, space, problem, seed, evaluations=evaluations, **params
        )
        self._suggestions: dict[int, Suggestion] = {}  # trial number -> what it runs
        self._next: Suggestion | None = None  # asked after the last trial: the next one's
        self._stopped = False  # the optimizer stopped (suggest gave None)
        self._recommended: set[int] = set()  # trials that run the recommendation (not told)

    def suggestion(self, trial: optuna.Trial | FrozenTrial) -> Suggestion:
        """The farm suggestion a trial runs: ``config_id``, ``fidelity`` (dataset size),
        ``time_cap`` (None: no cap)."""
        return self._suggestions[trial.number]

    def recommended(self, trial: optuna.Trial | FrozenTrial) -> bool:
        """The trial runs the optimizer's recommendation (it had stopped): not told to it."""
        return trial.number in self._recommended

    def recommendation(self) -> dict[str, Any] | None:
        """The configuration the optimizer would deploy now."""
        rec = self.optimizer.recommend()
        return None if rec is None else self.space.config(rec.config_id)

    # -- Optuna's sampler interface ------------------------------------------------------------
    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        s, self._next = self._next or (None if self._stopped else self.optimizer.suggest()), None
        self._stopped = s is None
        if s is None:
            rec = self.optimizer.recommend()
            if rec is None:
                raise RuntimeError(
                    f"OptfarmSampler: {self.optimizer.name} stopped before "
                    "any configuration met the constraints"
                )
            s = Suggestion(rec.config_id, rec.fidelity)
            self._recommended.add(trial.number)
            try:
                study.stop()
            except RuntimeError:  # study.ask() outside optimize(): see recommended()
                pass
        self._suggestions[trial.number] = s

    def infer_relative_search_space(self, study, trial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        return {}

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        config = self.space.config(self._suggestions[trial.number].config_id)
        if param_name not in config:
            raise ValueError(
                f"OptfarmSampler: parameter {param_name!r} is not a dimension of "
                f"the search space ({', '.join(self.space.names)})"
            )
        value = config[param_name]
        holds = (
            value in param_distribution.choices
            if isinstance(param_distribution, CategoricalDistribution)
            else param_distribution.low <= value <= param_distribution.high
        )
        if not holds:
            raise ValueError(
                f"OptfarmSampler: parameter {param_name!r}: the configuration's "
                f"value {value!r} is outside {param_distribution}"
            )
        return value

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values
    ) -> None:
        s = self._suggestions.get(trial.number)
        if s is None or trial.number in self._recommended or state == TrialState.FAIL:
            return
        metrics = dict(trial.user_attrs)
        if state == TrialState.COMPLETE:
            metrics[self.problem.objective.metric] = values[0]
        where = f"OptfarmSampler: trial {trial.number}" + (
            " (pruned)" if state == TrialState.PRUNED else ""
        )
        observation = observation_from(
            metrics, timed_out=state == TrialState.PRUNED, where=where + " user attribute"
        )
        self.optimizer.observe(s, observation)
        if self.problem.constraints:  # as Optuna's samplers store a constraints_func's
            set_constraints(study, trial, constraint_values(self.problem, observation))
        self._next = self.optimizer.suggest()
        if self._next is None:  # stopped: end the study before another job runs
            self._stopped = True
            try:
                study.stop()
            except RuntimeError:  # study.ask() outside optimize(): the next ask gets the
                pass  # recommendation
