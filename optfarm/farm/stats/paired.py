"""Paired comparisons of per-seed values, shared by the board (``optfarm.farm.board``) and the
gate (``optfarm.farm.gate``): equality up to the last bits of a float (``same``), the seed-by-seed
differences a signed-rank test reads (``paired_differences``), and Holm's step-down with
Tarone's count of testable hypotheses (``holm_tarone``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["FLOAT_TOLERANCE", "holm_tarone", "paired_differences", "same"]

FLOAT_TOLERANCE = 1e-12


def same(a, b) -> np.ndarray:
    """Whether ``a`` and ``b`` are equal up to ``FLOAT_TOLERANCE`` relative (inf = inf too;
    0 and a subnormal too): the last bits of a float that another CPU's kernels round
    differently."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore"):
        close = (
            np.abs(a - b)
            <= FLOAT_TOLERANCE * np.maximum(np.abs(a), np.abs(b)) + np.finfo(float).tiny
        )
    return (a == b) | (close & np.isfinite(a) & np.isfinite(b))


def paired_differences(current: np.ndarray, base: np.ndarray) -> np.ndarray:
    """``current - base`` seed by seed (both as badness), finite for the signed-rank test:
    equal values (inf = inf too, and values within ``FLOAT_TOLERANCE`` relative: ``same``)
    give 0, and a difference involving inf (a target reached on one side only) gets a
    magnitude above every finite one, so it ranks highest."""
    current, base = np.asarray(current, dtype=float), np.asarray(base, dtype=float)
    with np.errstate(invalid="ignore"):
        d = np.where(same(current, base), 0.0, current - base)
    finite = np.abs(d[np.isfinite(d)])
    beyond = 2.0 * (finite.max() if finite.size else 0.0) + 1.0
    return np.where(np.isinf(d), np.sign(d) * beyond, d)


def holm_tarone(p: Sequence[float], p_min: Sequence[float], alpha: float) -> np.ndarray:
    """Holm's step-down procedure with Tarone's count of the testable hypotheses (Hommel &
    Krummenauer 1998): at each step, with the hypotheses not yet rejected, K is the smallest
    number such that at most K of them can reach ``alpha / K`` at all (``p_min``, each test's
    smallest attainable p-value); the smallest p-value is rejected when it is <= alpha / K.
    Returns adjusted p-values: the running maximum of p x K over the steps (capped at 1), so
    that a hypothesis is rejected exactly when its value is <= ``alpha``. With every
    ``p_min`` = 0 this is Holm's procedure."""
    p, p_min = np.asarray(p, dtype=float), np.asarray(p_min, dtype=float)
    order = np.argsort(p, kind="stable")
    out = np.ones_like(p)
    running = 0.0
    for step, i in enumerate(order):
        remaining = p_min[order[step:]]
        k = next(
            k for k in range(1, len(remaining) + 1) if np.count_nonzero(remaining <= alpha / k) <= k
        )
        running = max(running, p[i] * k)
        out[i] = min(running, 1.0)
    return out
