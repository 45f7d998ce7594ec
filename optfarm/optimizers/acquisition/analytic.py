"""Closed-form acquisition pieces over Gaussian predictions, vectorised over candidates.

Conventions: every function takes arrays of predictive means ``mu`` and standard deviations
``sigma`` (same shape, one entry per candidate) and works for *minimisation*; maximise by
passing ``-mu`` and ``-best``.

References:
    [Jones98] Jones, Schonlau, Welch. Efficient global optimization of expensive black-box
        functions. J. Global Optim. 1998 (EI).
    [Gardner14] Gardner et al. Bayesian optimization with inequality constraints. ICML 2014
        (constrained EI = EI x probability of feasibility).
    [Lynceus] Casimiro et al. Lynceus, ICDCS 2020, Sec. IV-A (EIc, incumbent rule without a
        feasible observation, truncated-Gaussian timeout feedback, Gauss-Hermite branches).
"""

from __future__ import annotations

import numpy as np
from scipy.special import erfcx, log_ndtr, ndtr

__all__ = [
    "expected_improvement",
    "log_expected_improvement",
    "log_probability_of_feasibility",
    "constraints_log_pf",
    "incumbent_for_eic",
    "reference_without_feasible",
    "gauss_hermite",
    "truncated_gaussian_mean",
]

_SQRT2 = np.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / np.sqrt(2.0 * np.pi)
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
# h(z) z^2 / phi(z) - 1 as a power series in 1/z^2: 0, -3, 15, -105, ... ((-1)^k (2k+1)!!)
_TAIL_SERIES = np.concatenate([[0.0], np.cumprod(-np.arange(3.0, 22.0, 2.0))])


def expected_improvement(mu, sigma, best):
    """EI for minimisation [Jones98]: E[max(best - Y, 0)], Y ~ N(mu, sigma^2).

    ``(best - mu) Phi(z) + sigma phi(z)`` with ``z = (best - mu) / sigma``;
    ``sigma = 0`` gives ``max(best - mu, 0)``.
    """
    mu, sigma = np.asarray(mu, dtype=float), np.asarray(sigma, dtype=float)
    diff = best - mu
    safe = np.where(sigma > 0, sigma, 1.0)
    z = diff / safe
    ei = diff * ndtr(z) + safe * _INV_SQRT_2PI * np.exp(-0.5 * z * z)
    return np.where(sigma > 0, np.maximum(ei, 0.0), np.maximum(diff, 0.0))


def log_expected_improvement(mu, sigma, best):
    """log EI for minimisation, finite wherever EI > 0 even when EI underflows.

    ``EI = sigma h(z)``, ``z = (best - mu) / sigma``, ``h(z) = z Phi(z) + phi(z)``; for
    ``z < -20`` the asymptotic series ``h(z) ~ phi(z) / z^2 (1 - 3/z^2 + 15/z^4 - 105/z^6
    ...)`` to its tenth term (the next one is below 1e-17 there; Abramowitz & Stegun
    26.2.12 for the Mills ratio ``(1 - Phi(x)) / phi(x)``, of which ``h(-x) / phi(x) = 1 - x``
    times it). Against log h computed to 50 digits: the series is within 3.3e-13 below -20;
    the direct form above it loses digits to the cancellation of ``z Phi(z)`` and ``phi(z)``,
    within 1.3e-12 above -10 and 2.0e-11 between -20 and -10 (8.0e-12 at -20).
    ``sigma = 0`` gives ``log max(best - mu, 0)``.
    """
    mu, sigma = np.asarray(mu, dtype=float), np.asarray(sigma, dtype=float)
    safe = np.where(sigma > 0, sigma, 1.0)
    z = (best - mu) / safe
    with np.errstate(divide="ignore", invalid="ignore"):
        zc = np.maximum(z, -20.0)
        direct = np.log(np.maximum(zc * ndtr(zc) + np.exp(-0.5 * zc * zc - _LOG_SQRT_2PI), 0.0))
        zt = np.minimum(z, -20.0)
        tail = (
            -0.5 * zt * zt
            - _LOG_SQRT_2PI
            - 2.0 * np.log(-zt)
            + np.log1p(np.polynomial.polynomial.polyval(1.0 / (zt * zt), _TAIL_SERIES))
        )
        log_h = np.where(z >= -20.0, direct, tail)
        degenerate = np.log(np.maximum(best - mu, 0.0))
    return np.where(sigma > 0, np.log(safe) + log_h, degenerate)


def log_probability_of_feasibility(mu, sigma, threshold, op="<="):
    """log P(G op threshold), computed with ``log_ndtr`` so that products of many small
    feasibility probabilities stay finite."""
    mu, sigma = np.asarray(mu, dtype=float), np.asarray(sigma, dtype=float)
    margin = (threshold - mu) if op == "<=" else (mu - threshold)
    safe = np.where(sigma > 0, sigma, 1.0)
    return np.where(sigma > 0, log_ndtr(margin / safe), np.where(margin >= 0, 0.0, -np.inf))


def constraints_log_pf(constraints, pred):
    """log P(every constraint holds), the constraints independent: the sum over
    ``constraints`` [(metric, op, threshold), ...] of ``log_probability_of_feasibility`` under
    the predictions ``pred`` {metric: (mu, sigma)} (``models.targets.Targets`` holds both on
    its model scale). 0 everywhere without constraints [Gardner14]."""
    total = 0.0
    for metric, op, threshold in constraints:
        mu, sigma = pred[metric]
        total = total + log_probability_of_feasibility(mu, sigma, threshold, op)
    return np.zeros(len(next(iter(pred.values()))[0])) + total


def incumbent_for_eic(observed, feasible, sigma_untested, rule="lynceus"):
    """The EI reference value y* for minimisation.

    Args:
        observed: (n,) observed objective values.
        feasible: (n,) bool, which observations met the constraints.
        sigma_untested: (m,) predictive std over the untested candidates.
        rule: ``"lynceus"`` [Lynceus]: the best feasible observed value; with none yet, the
            worst observed value + 3 x the largest std over the untested candidates.
            ``"best"``: the best of all observed values (Guindani et al.'s text).
    """
    observed = np.asarray(observed, dtype=float)
    feasible = np.asarray(feasible, dtype=bool)
    if rule == "best":
        return float(observed.min())
    if rule != "lynceus":
        raise ValueError(f"incumbent rule {rule!r} is not 'lynceus' or 'best'")
    if feasible.any():
        return float(observed[feasible].min())
    return reference_without_feasible(float(observed.max()), sigma_untested)


def reference_without_feasible(worst, sigma_untested):
    """y* while no observation is feasible [Lynceus Sec. IV-A]: the worst observed value + 3
    x the largest predictive std over the untested candidates (0 without any), so that EI
    still ranks them. (The look-ahead kernel, ``lookahead_kernels._score_level``, has its own
    numba copy; ``tests/optimizers/test_acquisition.py`` checks that the two agree.)"""
    spread = float(np.max(sigma_untested)) if np.size(sigma_untested) else 0.0
    return float(worst) + 3.0 * spread


def gauss_hermite(k: int):
    """K Gauss-Hermite nodes and weights for E[f(Y)], Y ~ N(0, 1): returns (t, w) with
    ``E[f(Y)] ~= sum_i w_i f(t_i)``, ``t = sqrt(2) x hermgauss nodes`` and
    ``w = hermgauss weights / sqrt(pi)`` (summing to 1). Scale as ``mu + sigma * t``.
    The Lynceus authors' code (NormalGaussHermiteQuadrature.java) divides the values by
    sqrt(pi) instead and keeps weights summing to sqrt(pi); Lynceus reproduces that only under
    its ablation switch ``gh="authors"`` (``optfarm/optimizers/lynceus.py``), never by default."""
    t, w = np.polynomial.hermite.hermgauss(k)
    return _SQRT2 * t, w / np.sqrt(np.pi)


def truncated_gaussian_mean(mu, sigma, lower):
    """E[Y | Y > lower] for Y ~ N(mu, sigma^2): ``mu + sigma phi(a) / (1 - Phi(a))`` with
    ``a = (lower - mu) / sigma``, computed as ``mu + sigma sqrt(2/pi) / erfcx(a / sqrt 2)`` so
    it stays exact for large a (it tends to ``lower``). [Lynceus] Sec. IV-C, "TG" timeout."""
    mu, sigma = np.asarray(mu, dtype=float), np.asarray(sigma, dtype=float)
    safe = np.where(sigma > 0, sigma, 1.0)
    a = (lower - mu) / safe
    mean = mu + safe * np.sqrt(2.0 / np.pi) / erfcx(a / _SQRT2)
    return np.where(sigma > 0, mean, np.maximum(mu, lower))
