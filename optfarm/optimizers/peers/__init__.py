"""Peers: the optimizers a user would reach for instead of the papers' ones (Optuna's TPE, GP,
CMA-ES and random samplers; SMAC3's HPO facade), wrapped as farm optimizers over a dataset's
table. Optuna's TPE, CMA-ES and random samplers come with the default install; its GP sampler
(torch) and SMAC3 need the extra ``pip install 'optfarm[peers]'``. Each imports its library
only when built."""

from .optuna_peers import OptunaCmaEs, OptunaGP, OptunaRandom, OptunaTPE
from .smac_facade import SmacHPO

__all__ = ["OptunaTPE", "OptunaGP", "OptunaCmaEs", "OptunaRandom", "SmacHPO"]
