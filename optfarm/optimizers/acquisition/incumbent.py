"""The model's incumbent at s = 1: which configuration the surrogate models predict is best,
among the rows of one prediction [TrimTuner Alg. 1 line 19, Sec. III-B].

References:
    [TrimTuner] Mendes, Casimiro, Romano, Garlan. TrimTuner, MASCOTS 2020.
"""

from __future__ import annotations

import math

import numpy as np

from .filters import cea

__all__ = ["IncumbentScan", "incumbent", "cea_incumbent", "choose_incumbent"]


def incumbent(objective_mean: np.ndarray, log_pf: np.ndarray, min_pf: float) -> int:
    """Index of the best predicted objective among rows with P(feasible) >= ``min_pf``; the
    most probably feasible row when there is none [TrimTuner Alg. 1 line 19]."""
    ok = log_pf >= math.log(min_pf) - 1e-12
    if ok.any():
        return int(np.argmin(np.where(ok, objective_mean, np.inf)))
    return int(np.argmax(log_pf))


def cea_incumbent(quality: np.ndarray, log_pf: np.ndarray) -> int:
    """Index of the row with the best constrained expected accuracy, predicted quality x
    P(feasible): the incumbent rule of the TrimTuner authors' code, which trades a little
    predicted accuracy for confidence that the cap holds [TrimTuner Sec. III-B, CEA]."""
    return int(np.argmax(cea(quality, log_pf)))


def choose_incumbent(
    rule: str, quality: np.ndarray, objective_mean: np.ndarray, log_pf: np.ndarray, min_pf: float
) -> int:
    """Index of the incumbent among rows predicted at s = 1 under ``rule``: "cea", the best
    predicted accuracy x P(feasible) (the authors' code), or "feasible", the best predicted
    objective among rows with P(feasible) >= ``min_pf`` (the paper's text)."""
    if rule == "cea":
        return cea_incumbent(quality, log_pf)
    return incumbent(objective_mean, log_pf, min_pf)


class IncumbentScan:
    """``choose_incumbent`` over rows handed over in blocks, in order: the row one call over
    all of them would choose (finite predictions), with O(block) memory. Each block's own
    choice competes with the best so far: under "cea" the larger quality x P(feasible) wins;
    under "feasible" a row meeting ``min_pf`` beats any other, then the lower predicted
    objective, and among rows that do not meet it the higher P(feasible). Ties keep the
    earlier row, as ``np.argmax`` / ``np.argmin`` do."""

    def __init__(self, rule: str, min_pf: float):
        self.rule, self.min_pf = rule, min_pf
        self._key: tuple | None = None
        self.quality = self.log_pf = math.nan  # of the row chosen so far

    def add(self, quality: np.ndarray, objective_mean: np.ndarray, log_pf: np.ndarray) -> None:
        """One block of rows: predicted quality, objective mean and log P(feasible)."""
        j = choose_incumbent(self.rule, quality, objective_mean, log_pf, self.min_pf)
        if self.rule == "cea":
            key: tuple = (float(cea(quality, log_pf)[j]),)
        elif log_pf[j] >= math.log(self.min_pf) - 1e-12:
            key = (1, -float(objective_mean[j]))
        else:
            key = (0, float(log_pf[j]))
        if self._key is None or key > self._key:
            self._key, self.quality, self.log_pf = key, float(quality[j]), float(log_pf[j])
