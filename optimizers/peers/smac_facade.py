"""SMAC3's hyperparameter-optimisation facade (random forest + log EI, Sobol initial design)
as a farm optimizer (``pip install 'optfarm[peers]'``), driven by SMAC's ask/tell API over
the table as ``table_peer.TablePeer`` says (nearest configuration, memory answers,
``patience``).

SMAC minimises one cost and has no constraint mechanism: it is told the penalised objective
(``grid.penalised_objective``; negated when the problem maximises accuracy). The scenario is
deterministic (one measurement per configuration, as the farm runs it), seeded with the run's
seed, and sized by ``n_trials``, the evaluations a user would plan: SMAC's initial design is
a quarter of it at most. Costs are told in units of the first value observed (``scale``):
SMAC's log-scaled cost encoder subtracts 1e-10 from the smallest cost before its log, which
rounds away at Guindani's costs of order 1e7 (VM x ms) and gives log(0) = -inf. SMAC writes its run history into a temporary folder that goes with
the optimizer. SMAC is imported when the peer is built, never when the registry lists it.
"""

from __future__ import annotations

import math
import tempfile
from typing import Any, Mapping

from oracle.problem import Problem
from oracle.space import SearchSpace

from ..base import Param
from .table_peer import TablePeer

__all__ = ["SmacHPO"]


class SmacHPO(TablePeer):
    name = "smac-hpo"
    summary = ("SMAC3's HPO facade (random forest, log EI; penalised objective) over the "
               "table [peers extra]")
    modules = ("smac", "ConfigSpace")
    constrained = False
    params = TablePeer.params + (
        Param("n_trials", 100, "evaluations the scenario plans (sizes the initial design)",
              low=1),)

    def __init__(self, space: SearchSpace, problem: Problem, seed: int = 0, executor=None,
                 **params: Any):
        super().__init__(space, problem, seed, executor, **params)
        from ConfigSpace import Categorical, ConfigurationSpace, Float
        from smac import HyperparameterOptimizationFacade, Scenario

        cs = ConfigurationSpace(seed=self.seed)
        cs.add([Categorical(name, choices) if kind == "categorical" else Float(name, (0.0, 1.0))
                for name, kind, choices in self.grid.parameters()])
        self._folder = tempfile.TemporaryDirectory(prefix="optfarm-smac-")
        scenario = Scenario(cs, deterministic=True, n_trials=self.config["n_trials"],
                            seed=self.seed, output_directory=self._folder.name)
        self.smac = HyperparameterOptimizationFacade(
            scenario, _never_called, overwrite=True, logging_level=40)
        self._asked = 0
        self.scale: float | None = None   # the magnitude of the first value observed

    def ask(self) -> tuple[Any, Mapping[str, Any], int]:
        info = self.smac.ask()
        self._asked += 1
        point = {k: v.item() if hasattr(v, "item") else v for k, v in info.config.items()}
        return info, point, self._asked - 1

    def tell(self, info, value: float, constraints: list[float]) -> None:
        from smac.runhistory.dataclasses import TrialValue
        from smac.runhistory.enumerations import StatusType

        if math.isnan(value):   # a run pending elsewhere
            self.smac.tell(info, TrialValue(cost=math.inf, status=StatusType.CRASHED))
            return
        if self.scale is None:
            self.scale = abs(value) or 1.0
        sign = 1.0 if self.problem.objective.direction == "min" else -1.0
        self.smac.tell(info, TrialValue(cost=sign * value / self.scale))

    def startup(self) -> int:
        """SMAC's HPO default: 10 Sobol points per parameter, at most a quarter of n_trials."""
        return min(10 * len(self.grid.searched), self.config["n_trials"] // 4)


def _never_called(config, seed: int = 0) -> float:
    """SMAC's facade wants a target function; the ask/tell loop never calls it."""
    raise RuntimeError("smac-hpo is driven by ask/tell")
