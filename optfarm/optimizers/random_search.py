"""Random search: uniform over untested configurations at full data size (the baseline of
every paper in seeds/)."""

from __future__ import annotations

import numpy as np

from .base import Optimizer, Param, Recommendation, Suggestion

__all__ = ["RandomSearch"]


class RandomSearch(Optimizer):
    """Draw an untested configuration uniformly at random; stop when all are tested or the
    exploration budget is spent.

    Recommends the best configuration observed to meet the constraints.
    """

    name = "random"
    summary = "uniform over untested configurations (s = 1)"
    has_model = False
    params = (Param("n_init", 1, "configurations counted as the initial phase", low=0),)

    def suggest(self) -> Suggestion | None:
        untested = np.flatnonzero(~self.tested())
        if len(untested) == 0:
            return self.stopped("exhausted")
        if self.spent >= self.problem.budget:
            return self.stopped("budget")
        phase = "init" if len(self.history) < self.config["n_init"] else "search"
        return Suggestion(int(self.rng.choice(untested)), 1.0, phase=phase)

    def recommend(self) -> Recommendation | None:
        return self.recommend_best_observed()
