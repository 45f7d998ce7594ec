"""FABOLAS [Klein17] as TrimTuner's baseline [TrimTuner Sec. IV]: information gain about the
optimum at s = 1 per unit predicted cost, with GP models (FABOLAS product kernel) on
log(1 - accuracy) and log(cost), ignoring the constraints.

It shares TrimTuner's machinery (``trimtuner.py``) with the constraint factor removed:
alpha_F(x, s) = IG(x, s) / C(x, s) (the overhead term is 0, as in TrimTuner). The acquisition
is maximised by DIRECT over the (x, s) box by default (RoBO's maximiser), snapped to untested
pairs, with an evaluation budget of beta x #untested. Bootstrap: TrimTuner's (one random
configuration at the four sub-sampled sizes; *choice*, so both start alike). Incumbent: the
lowest predicted loss at s = 1 among the configurations evaluated at any size, whatever it
costs (so it may violate the cost cap).

References:
    [Klein17] Klein et al. Fast Bayesian optimization of machine learning hyperparameters on
        large datasets. AISTATS 2017, Sec. 3.
    [TrimTuner] Mendes et al. TrimTuner, MASCOTS 2020, Sec. IV.
"""

from __future__ import annotations

from .base import derive, fixed
from .trimtuner import TrimTuner

__all__ = ["Fabolas"]


class Fabolas(TrimTuner):
    """Unconstrained information gain per cost over (x, s)."""

    name = "fabolas"
    summary = "FABOLAS: information gain per cost over (x, s), no constraints"
    # the incumbent: the lowest predicted loss among evaluated configurations (with no
    # constraints every configuration has P(feasible) = 1 >= 0.5)
    params = derive(
        TrimTuner.params,
        model=fixed("gp"),
        n_trees=fixed(10),
        filter={"default": "direct"},
        incumbent=fixed("tested"),
        incumbent_rule=fixed("feasible"),
        incumbent_pf=fixed(0.5),
    )
    factor = "none"

    def _model_problem(self):
        return self.problem.with_overrides(constraints=())
