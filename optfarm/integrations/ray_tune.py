"""A farm optimizer as a Ray Tune searcher: Lynceus, TrimTuner-DT or Guindani's variant D
choosing the configurations of a Ray Tune experiment over a finite cloud-configuration grid.

    search = OptfarmSearch("lynceus", space, problem, seed=0, la=2)
    def job(config):
        run = config["optfarm"]                   # fidelity (dataset size) and time_cap
        seconds, dollars, finished = run_my_job(config["vm"], config["workers"],
                                                time_cap=run["time_cap"])
        tune.report({"time": seconds, "cost": dollars, "timed_out": not finished})
    tune.Tuner(job, tune_config=tune.TuneConfig(search_alg=search, num_samples=-1)).fit()
    print(search.recommendation())

Contract:
- a trial's config is the chosen configuration ({dimension: value}) plus ``config["optfarm"]``
  = {"config_id", "fidelity", "time_cap"} (``time_cap`` None: no cap);
- the trial's last result reports ``time`` (seconds) and ``cost`` of the job, ``accuracy``
  when the problem needs it, and ``timed_out: True`` when the job stopped itself at
  ``time_cap`` (the searcher hands the cap to the job; Tune's schedulers are not involved);
- one trial at a time (the farm optimizers are sequential): ``suggest`` returns None while a
  trial runs, and ``Searcher.FINISHED`` when the optimizer stops, so ``num_samples=-1`` runs
  until then; an errored trial is not told;
- ``save``/``restore`` pickle the optimizer and the running trial (Tune writes the file under
  a temporary name and renames it).
"""

from __future__ import annotations

import pickle
from typing import Any

from ray.tune.search import Searcher

from optfarm.optimizers.registry import make_optimizer
from optfarm.oracle.contract import Suggestion
from optfarm.oracle.problem import Problem
from optfarm.oracle.space import SearchSpace

from .observations import observation_from

__all__ = ["OptfarmSearch"]


class OptfarmSearch(Searcher):
    """A Ray Tune searcher that asks the farm optimizer ``optimizer`` (a name of ``farm
    optimizers``, with its ``params``) for each trial's configuration. The metric is the
    problem's objective (``cost`` to minimise, or ``accuracy`` to maximise). ``evaluations`` is
    the run's trial budget (``num_samples``) when it has one: as ``farm run --iterations``, the
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
        super().__init__(
            metric=problem.objective.metric,
            mode="min" if problem.objective.direction == "min" else "max",
        )
        self.space = space
        self.problem = problem
        self.optimizer = make_optimizer(
            optimizer, space, problem, seed, evaluations=evaluations, **params
        )
        self._running: dict[str, Suggestion] = {}

    def recommendation(self) -> dict[str, Any] | None:
        """The configuration the optimizer would deploy now."""
        rec = self.optimizer.recommend()
        return None if rec is None else self.space.config(rec.config_id)

    # -- Ray Tune's searcher interface ---------------------------------------------------------
    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        """The problem fixes metric and mode; a Tune ``param_space`` is not used (the space
        is the searcher's)."""
        return metric in (None, self.metric) and mode in (None, self.mode) and not config

    def suggest(self, trial_id: str) -> dict | None:
        if self._running:
            return None
        s = self.optimizer.suggest()
        if s is None:
            return Searcher.FINISHED
        self._running[trial_id] = s
        return {
            **self.space.config(s.config_id),
            "optfarm": {"config_id": s.config_id, "fidelity": s.fidelity, "time_cap": s.time_cap},
        }

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        s = self._running.pop(trial_id, None)
        if s is None or error or result is None:
            return
        self.optimizer.observe(
            s,
            observation_from(
                result,
                timed_out=bool(result.get("timed_out", False)),
                where=f"OptfarmSearch: trial {trial_id} result",
            ),
        )

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump((self.optimizer, self._running), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.optimizer, self._running = pickle.load(f)
