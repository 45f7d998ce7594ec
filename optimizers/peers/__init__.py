"""Peers: the optimizers a user would reach for instead of the papers' ones (Optuna's TPE, GP,
CMA-ES and random samplers; SMAC3's HPO facade), wrapped as farm optimizers over a dataset's
table. They need the optional extra ``pip install 'optfarm[peers]'`` and import their library
only when built."""

from .optuna_peers import OptunaCmaEs, OptunaGP, OptunaRandom, OptunaTPE
from .smac_facade import SmacHPO

__all__ = ["OptunaTPE", "OptunaGP", "OptunaCmaEs", "OptunaRandom", "SmacHPO"]
