"""The test reference of the numba look-ahead kernel (``optfarm/optimizers/lookahead_kernels.py``):
the cost-aware acquisition of the Lynceus family written out over the closed forms of
``optfarm.optimizers.acquisition.analytic``, vectorised with numpy and scipy. The optimizers use the
kernel; ``test_acquisition.py`` checks that the two agree.

References:
    [Gardner14] Gardner et al. Bayesian optimization with inequality constraints. ICML 2014
        (constrained EI = EI x probability of feasibility).
    [Lynceus] Casimiro et al. Lynceus, ICDCS 2020: Sec. IV-A (EIc with the time constraint
        expressed on the cost model, P(C(x) <= T_max U(x))), Sec. VI (EIc/USD: EIc per
        predicted dollar, the LA = 0 baseline).
    [Mendes19] P. Mendes, MSc thesis, IST 2019, ch. 3 (Nephele: bivariate quadrature over
        cost and accuracy).
"""

from __future__ import annotations

import numpy as np

from optfarm.optimizers.acquisition.analytic import (
    expected_improvement,
    gauss_hermite,
    log_probability_of_feasibility,
)


def probability_of_feasibility(mu, sigma, threshold, op="<="):
    """P(G <= threshold) (or >=) for G ~ N(mu, sigma^2); a step function where sigma = 0."""
    return np.exp(log_probability_of_feasibility(mu, sigma, threshold, op))


def constrained_ei(mu, sigma, best, log_pf=0.0):
    """EIc [Gardner14]: EI x product of the constraints' feasibility probabilities, given
    as the sum of their logs (``log_pf``)."""
    return expected_improvement(mu, sigma, best) * np.exp(log_pf)


def eic_on_cost(mu, sigma, best, price=None, time_max=np.inf, cost_max=np.inf, log_pf_other=0.0):
    """EIc of a cost model [Lynceus Sec. IV-A]: EI(best) x P(C <= T_max U(x)) x
    P(C <= C_max) x exp(log_pf_other) (e.g. an accuracy model's feasibility)."""
    mu, sigma = np.asarray(mu, dtype=float), np.asarray(sigma, dtype=float)
    log_pf = np.asarray(log_pf_other, dtype=float) + np.zeros_like(mu)
    if np.isfinite(time_max):
        log_pf = log_pf + log_probability_of_feasibility(mu, sigma, time_max * np.asarray(price))
    if np.isfinite(cost_max):
        log_pf = log_pf + log_probability_of_feasibility(mu, sigma, cost_max)
    return constrained_ei(mu, sigma, best, log_pf)


def eic_per_cost(eic, mu_cost):
    """EIc/USD [Lynceus Sec. VI]: constrained EI per predicted dollar of running the
    candidate."""
    mu_cost = np.asarray(mu_cost, dtype=float)
    if np.any(mu_cost <= 0):
        raise ValueError("eic_per_cost: predicted costs must be positive")
    return np.asarray(eic, dtype=float) / mu_cost


def bivariate_gauss_hermite(k_cost: int, k_acc: int):
    """Tensor-product quadrature for independent (cost, accuracy) Gaussians
    [Mendes19 ch. 3]: standard-normal node pairs (t_c, t_a) of shape (k_cost x k_acc,) and
    weights summing to 1; scale as (mu_c + sd_c t_c, mu_a + sd_a t_a)."""
    tc, wc = gauss_hermite(k_cost)
    ta, wa = gauss_hermite(k_acc)
    return (np.repeat(tc, k_acc), np.tile(ta, k_cost), np.outer(wc, wa).ravel())
