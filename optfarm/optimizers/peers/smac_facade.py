"""SMAC3's hyperparameter-optimisation facade (random forest + log EI, Sobol initial design)
as a farm optimizer (``pip install 'optfarm[peers]'``), driven by SMAC's ask/tell API over
the table as ``table_peer.TablePeer`` says (memory answers, ``patience``), in ConfigSpace's
native form: a categorical dimension is a ``Categorical`` hyperparameter, an ordinal or
numeric one an ``OrdinalHyperparameter`` over its measured values. A combination the table
never measured is told as a crashed trial (``StatusType.CRASHED``, as SMAC's own runner
reports a target function that failed, at the worst cost told so far: ``reject``). SMAC
itself never proposes a configuration twice: when its acquisition and then its random draws
find only configurations it has proposed, ``retries`` times, it raises
``ConfigurationSpaceExhaustedException``; its config selector is given the peer's
``patience`` as ``retries`` (SMAC's default, 16, ended its runs on guindani-kmeans after 14
of the 20 configurations), and the exception ends the run as the patience does.

SMAC minimises one cost and has no constraint mechanism: it is told the penalised objective
(``grid.penalised_objective``; negated when the problem maximises accuracy). The scenario is
deterministic (one measurement per configuration, as the farm runs it), seeded with the run's
seed, and sized by ``n_trials``, the evaluations a user would plan: SMAC's initial design is
a quarter of it at most. Costs are told in units of the first value observed (``scale``):
SMAC's log-scaled cost encoder subtracts 1e-10 from the smallest cost before its log, which
rounds away at Guindani's costs of order 1e7 (VM x ms) and gives log(0) = -inf. SMAC
writes its run history into a temporary folder that goes with the optimizer. SMAC is imported
when the peer is built, never when the registry lists it.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping
from typing import Any

from optfarm.oracle.problem import Problem
from optfarm.oracle.space import SearchSpace

from ..base import MemoryUse, Param
from .table_peer import TablePeer

__all__ = ["SmacHPO"]


class SmacHPO(TablePeer):
    name = "smac-hpo"
    memory = MemoryUse(fixed=285e6, per_config=1.5e3)  # docs/results/memory.md
    summary = (
        "SMAC3's HPO facade (random forest, log EI; penalised objective) over the "
        "table [peers extra]"
    )
    modules = ("smac", "ConfigSpace")
    constrained = False
    resumable = False  # SMAC's intensifier asks through a generator, which pickle cannot hold
    params = TablePeer.params + (
        Param(
            "n_trials",
            0,
            "evaluations the scenario plans, which sizes SMAC's initial "
            "design (a quarter at most); 0: the run's evaluation budget, else 100",
            low=0,
        ),
    )

    def __init__(
        self, space: SearchSpace, problem: Problem, seed: int = 0, executor=None, **params: Any
    ):
        super().__init__(space, problem, seed, executor, **params)
        from ConfigSpace import Categorical, ConfigurationSpace, OrdinalHyperparameter
        from smac import HyperparameterOptimizationFacade, Scenario

        cs = ConfigurationSpace(seed=self.seed)
        cs.add(
            [
                Categorical(name, values)
                if kind == "categorical"
                else OrdinalHyperparameter(name, values)
                for name, kind, values in self.grid.parameters()
            ]
        )
        self._folder = tempfile.TemporaryDirectory(prefix="optfarm-smac-")
        self.scenario = Scenario(
            cs,
            deterministic=True,
            n_trials=self.n_trials(),
            seed=self.seed,
            output_directory=self._folder.name,
        )
        # SMAC gives up after `retries` draws of configurations it has proposed (16 by
        # default: on guindani-kmeans seed 0 after 14 of the 20); the peer's patience instead
        selector = HyperparameterOptimizationFacade.get_config_selector(
            self.scenario, retries=self.config["patience"]
        )
        self.smac = HyperparameterOptimizationFacade(
            self.scenario,
            _never_called,
            config_selector=selector,
            overwrite=True,
            acquisition_maximizer=seeded_maximizer(self.scenario),
            logging_level=40,
        )
        self._asked = 0
        self.scale: float | None = None  # the magnitude of the first value observed
        self.worst: float | None = None  # the largest cost told SMAC

    def ask(self) -> tuple[Any, Mapping[str, Any], int] | None:
        from smac.main.exceptions import ConfigurationSpaceExhaustedException

        try:
            info = self.smac.ask()
        except ConfigurationSpaceExhaustedException:  # `patience` draws found nothing new
            return None
        self._asked += 1
        point = {k: v.item() if hasattr(v, "item") else v for k, v in info.config.items()}
        return info, point, self._asked - 1

    def tell(self, info, value: float, constraints: list[float]) -> None:
        from smac.runhistory.dataclasses import TrialValue

        if math.isnan(value):  # a run pending elsewhere
            self.reject(info)
            return
        if self.scale is None:
            self.scale = abs(value) or 1.0
        sign = 1.0 if self.problem.objective.direction == "min" else -1.0
        cost = sign * value / self.scale
        self.worst = cost if self.worst is None else max(self.worst, cost)
        self.smac.tell(info, TrialValue(cost=cost))

    def reject(self, info) -> None:
        """A crashed trial at the worst cost told so far (before any: the first value's unit,
        or accuracy 0 when maximising): SMAC's default crash cost, inf, turns its log-scaled
        cost encoder's targets into NaN."""
        from smac.runhistory.dataclasses import TrialValue
        from smac.runhistory.enumerations import StatusType

        first = 1.0 if self.problem.objective.direction == "min" else 0.0
        self.smac.tell(
            info,
            TrialValue(cost=first if self.worst is None else self.worst, status=StatusType.CRASHED),
        )

    def n_trials(self) -> int:
        return self.config["n_trials"] or self.evaluations or 100

    def startup(self) -> int:
        """SMAC's HPO default: 10 Sobol points per parameter, at most a quarter of n_trials."""
        return min(10 * len(self.grid.searched), self.n_trials() // 4)


def seeded_maximizer(scenario):
    """SMAC's HPO acquisition maximizer (local and sorted random search) whose local search
    starts from its start points in an order fixed by the seed.

    SMAC 2.3 gathers the local search's start points into a ``set`` of ``Configuration``s,
    whose hash is that of their ``repr`` string, so their order (and with it which neighbours
    each start draws from the seeded generator) changed with the process's
    ``PYTHONHASHSEED``: seed 0 on cherrypick-kmeans gave a different sequence in every
    process, identical ones under one ``PYTHONHASHSEED`` (tests/optimizers/test_peers.py,
    "SMAC repeatable"). Sorting the start points by their vectors makes the order the seed's."""
    from smac import HyperparameterOptimizationFacade

    maximizer = HyperparameterOptimizationFacade.get_acquisition_maximizer(scenario)
    local = maximizer._local_search  # private: SMAC builds it inside the maximizer
    starts = local._get_init_points_from_previous_configs

    def ordered_starts(*args, **kwargs):
        return sorted(starts(*args, **kwargs), key=lambda c: tuple(c.get_array().tolist()))

    local._get_init_points_from_previous_configs = ordered_starts
    return maximizer


def _never_called(config, seed: int = 0) -> float:
    """SMAC's facade wants a target function; the ask/tell loop never calls it."""
    raise RuntimeError("smac-hpo is driven by ask/tell")
