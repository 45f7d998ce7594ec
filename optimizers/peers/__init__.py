"""Peers: the optimizers a user would reach for instead of the papers' ones (Optuna's TPE, GP,
CMA-ES and random samplers), wrapped as farm optimizers over a dataset's table. They need the
optional extra ``pip install 'optfarm[peers]'`` and import their library only when built."""

from .optuna_samplers import OptunaCmaEs, OptunaGP, OptunaRandom, OptunaTPE

__all__ = ["OptunaTPE", "OptunaGP", "OptunaCmaEs", "OptunaRandom"]
