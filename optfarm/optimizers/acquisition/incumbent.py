"""The model's incumbent at s = 1: which configuration the surrogate models predict is best,
among the rows of one prediction [TrimTuner Alg. 1 line 19, Sec. III-B].

References:
    [TrimTuner] Mendes, Casimiro, Romano, Garlan. TrimTuner, MASCOTS 2020.
"""

from __future__ import annotations

import math

import numpy as np

from .filters import cea

__all__ = ["incumbent", "cea_incumbent", "choose_incumbent"]


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
