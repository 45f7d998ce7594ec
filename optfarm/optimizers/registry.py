"""Optimizer names -> classes. Modules are imported on first use, so that listing the
optimizers stays cheap and an optimizer's heavy dependencies load only when it runs.

Adding an optimizer is one new module here (a subclass of ``optfarm.optimizers.base.Optimizer``) and
one line in ``OPTIMIZERS``; ``farm optimizers``, ``farm run``, sweeps and the shared test
suite (tests/optimizers/test_common.py) pick it up from there."""

from __future__ import annotations

import importlib
from typing import Any

from optfarm.oracle.problem import Problem
from optfarm.oracle.space import SearchSpace
from optfarm.oracle.spelling import did_you_mean

from .base import Optimizer, ParameterError
from .executor import Executor

__all__ = ["OPTIMIZERS", "available", "get", "is_peer", "make_optimizer"]

# name -> "module:Class": a module of the optimizers package, or a dotted absolute module path
# (an optimizer kept elsewhere, e.g. "mypkg.search:MySearch")
OPTIMIZERS: dict[str, str] = {
    "random": "random_search:RandomSearch",
    "lynceus": "lynceus:Lynceus",
    "lynceus-to-budget": "lynceus:LynceusToBudget",
    "eic-usd": "lynceus:EIcUSD",
    "obol": "lynceus:Obol",
    "cherrypick-trees": "lynceus:CherryPickTrees",
    "nephele": "nephele:Nephele",
    "trimtuner": "trimtuner:TrimTuner",
    "fabulinus": "fabulinus:Fabulinus",
    "fabolas": "fabolas:Fabolas",
    "eic": "bo:EIc",
    "eic-usd-gp": "bo:EIcUSDGP",
    "bo-ei": "bo:BoEI",
    "guindani": "guindani:Guindani",
    # peers (optfarm/optimizers/peers/): Optuna's GP and SMAC need the extra optfarm[peers]
    "optuna-tpe": "optfarm.optimizers.peers.optuna_peers:OptunaTPE",
    "optuna-gp": "optfarm.optimizers.peers.optuna_peers:OptunaGP",
    "optuna-cmaes": "optfarm.optimizers.peers.optuna_peers:OptunaCmaEs",
    "optuna-random": "optfarm.optimizers.peers.optuna_peers:OptunaRandom",
    "smac-hpo": "optfarm.optimizers.peers.smac_facade:SmacHPO",
}


def available() -> list[str]:
    return sorted(OPTIMIZERS)


def is_peer(name: str) -> bool:
    """``name`` is a peer (optfarm/optimizers/peers/: what a user would pick instead of the papers'
    optimizers), known without importing it."""
    return OPTIMIZERS.get(name, "").startswith("optfarm.optimizers.peers.")


def get(name: str) -> type[Optimizer]:
    if name not in OPTIMIZERS:
        raise ParameterError(
            f"unknown optimizer {name!r}{did_you_mean(name, OPTIMIZERS)} "
            "(`farm optimizers` lists them)"
        )
    module, cls = OPTIMIZERS[name].split(":")
    return getattr(
        importlib.import_module(module if "." in module else f"optfarm.optimizers.{module}"), cls
    )


def make_optimizer(
    name: str,
    space: SearchSpace,
    problem: Problem,
    seed: int = 0,
    executor: Executor | None = None,
    evaluations: int | None = None,
    **params: Any,
) -> Optimizer:
    """Build the optimizer ``name`` for ``space`` and ``problem`` (ask/tell API);
    ``evaluations``: the run's evaluation budget, if it has one (``Optimizer.initial_design``)."""
    return get(name)(
        space, problem, seed=seed, executor=executor, evaluations=evaluations, **params
    )
