"""Fabulinus [Mendes19, ch. 4]: constrained entropy search over (x, s) with GP models.

ES_C(x, s) = a_F(x, s) x CEA'(x, s) (Eq. 4.4), where a_F is FABOLAS' information gain per unit
cost and CEA'(x, s) = A(x_inc, 1) x P(C(x_inc, 1) <= C_max) for the incumbent x_inc of the
models refitted with the fantasy (x, s, A(x, s), C(x, s)) (Eq. 4.5). The incumbent is the s = 1
configuration with the best predicted accuracy among those feasible with probability > 0.99
(over all configurations, Sec. 4.2).
Candidates: the top beta by CEA (Sec. 4.2.2). Bootstrap: 3% of the space by LHS, each
configuration at every sub-sampled size (one run at the largest sub-sampled size snapshotting
the smaller ones, as TrimTuner's bootstrap; *choice*).

It is TrimTuner's machinery (``trimtuner.py``) with these three differences.

References:
    [Mendes19] P. Mendes, MSc thesis, IST 2019, ch. 4 (Alg. 4-5, Eq. 4.4-4.5) and ch. 7.
"""

from __future__ import annotations

import math

from .base import Param, Suggestion, derive, fixed
from .trimtuner import TrimTuner

__all__ = ["Fabulinus"]


class Fabulinus(TrimTuner):
    """Information gain per cost x CEA of the post-fantasy incumbent."""

    name = "fabulinus"
    summary = "Fabulinus: constrained entropy search (IG/cost x CEA of the new incumbent)"
    params = derive(
        TrimTuner.params,
        model=fixed("gp"),
        n_trees=fixed(10),
        incumbent={"default": "all"},
        incumbent_rule={"default": "feasible"},
        incumbent_pf={"default": 0.99},
    ) + (
        Param(
            "init_fraction", 0.03, "fraction of the space in the LHS bootstrap", low=0.0, high=1.0
        ),
    )
    factor = "cea"

    def _bootstrap_plan(self) -> list[Suggestion]:
        n = max(1, math.ceil(self.config["init_fraction"] * self.space.n_configs))
        return [self._snapshot_run(c) for c in self.lhs_configs(n)]
