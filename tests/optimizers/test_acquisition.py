"""Every acquisition piece against closed forms, scipy, or Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from optimizers.acquisition import (
    expected_improvement,
    gauss_hermite,
    incumbent_for_eic,
    log_probability_of_feasibility,
    reference_without_feasible,
    timeout_cap,
    truncated_gaussian_mean,
)
from optimizers.models._kernels import _score_level

from .acquisition_reference import (
    bivariate_gauss_hermite,
    constrained_ei,
    eic_on_cost,
    eic_per_cost,
    probability_of_feasibility,
)


def test_ei_closed_form_value():
    # BoTorch's reference: mean -0.5, var 1, best 0 (maximisation) -> 0.19780; by symmetry the
    # same for minimisation at mean 0.5, best 0.
    assert expected_improvement(0.5, 1.0, 0.0) == pytest.approx(0.19780, abs=1e-5)


def test_ei_matches_numerical_integral():
    mu, sigma, best = np.array([1.0, 2.0, 0.3]), np.array([0.5, 2.0, 0.1]), 1.2
    got = expected_improvement(mu, sigma, best)
    for g, m, s in zip(got, mu, sigma):
        want = integrate.quad(lambda y, m=m, s=s: max(best - y, 0) * stats.norm.pdf(y, m, s),
                              m - 12 * s, m + 12 * s, points=[best])[0]
        assert g == pytest.approx(want, rel=1e-7, abs=1e-12)


def test_ei_zero_sigma_and_extremes_are_finite():
    assert expected_improvement(np.array([1.0, 3.0]), np.zeros(2), 2.0).tolist() == [1.0, 0.0]
    v = expected_improvement(np.array([1e9, -1e9, 0.0]), np.array([1e-9, 1e9, 1e-300]), 0.0)
    assert np.isfinite(v).all() and (v >= 0).all()


def test_probability_of_feasibility_against_scipy():
    mu, sigma = np.array([1.0, 5.0, -2.0]), np.array([1.0, 0.5, 3.0])
    np.testing.assert_allclose(probability_of_feasibility(mu, sigma, 2.0),
                               stats.norm.cdf(2.0, mu, sigma), rtol=1e-12)
    np.testing.assert_allclose(probability_of_feasibility(mu, sigma, 2.0, ">="),
                               stats.norm.sf(2.0, mu, sigma), rtol=1e-12)
    # log form stays finite far in the tail where the plain product underflows
    assert np.isfinite(log_probability_of_feasibility(100.0, 1.0, 0.0))
    assert log_probability_of_feasibility(100.0, 1.0, 0.0) == pytest.approx(
        stats.norm.logcdf(-100.0), rel=1e-10)


def test_constrained_ei_is_ei_times_pf():
    mu, sigma = np.array([1.0, 2.0]), np.array([0.5, 1.0])
    lpf = log_probability_of_feasibility(mu, sigma, 1.5)
    np.testing.assert_allclose(constrained_ei(mu, sigma, 1.2, lpf),
                               expected_improvement(mu, sigma, 1.2) * stats.norm.cdf(1.5, mu, sigma))


def test_eic_on_cost_uses_time_constraint_on_cost_model():
    # P(T <= T_max) = P(C <= T_max U(x)) [Lynceus Sec. IV-A]
    mu, sigma, price = np.array([2.0, 4.0]), np.array([1.0, 1.0]), np.array([0.01, 0.02])
    got = eic_on_cost(mu, sigma, 3.0, price, time_max=200.0)
    want = expected_improvement(mu, sigma, 3.0) * stats.norm.cdf(200.0 * price, mu, sigma)
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(eic_per_cost(got, mu), want / mu)
    with pytest.raises(ValueError, match="positive"):
        eic_per_cost(got, np.array([1.0, 0.0]))


def test_incumbent_rules():
    obs, feas = np.array([5.0, 3.0, 9.0]), np.array([False, True, False])
    assert incumbent_for_eic(obs, feas, np.array([1.0, 2.0])) == 3.0
    assert incumbent_for_eic(obs, np.zeros(3, bool), np.array([1.0, 2.0])) == 9.0 + 3 * 2.0
    assert incumbent_for_eic(obs, np.zeros(3, bool), np.array([1.0]), rule="best") == 3.0
    assert reference_without_feasible(9.0, np.array([1.0, 2.0])) == 9.0 + 3 * 2.0
    assert reference_without_feasible(9.0, np.zeros(0)) == 9.0


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_gauss_hermite_moments(k):
    t, w = gauss_hermite(k)
    assert w.sum() == pytest.approx(1.0)
    # exact for polynomials of degree <= 2k - 1: E[Y^2] = 1, E[Y^4] = 3 for N(0, 1)
    assert (w * t).sum() == pytest.approx(0.0, abs=1e-12)
    if k >= 2:
        assert (w * t ** 2).sum() == pytest.approx(1.0)
    if k >= 3:
        assert (w * t ** 4).sum() == pytest.approx(3.0)
    # scaled nodes approximate E[f(mu + sigma Y)]: E[exp(Y)] = e^{1/2}
    if k >= 5:
        assert (w * np.exp(t)).sum() == pytest.approx(math.exp(0.5), rel=1e-4)


def test_gauss_hermite_three_nodes_known_values():
    t, w = gauss_hermite(3)
    np.testing.assert_allclose(t, [-math.sqrt(3), 0.0, math.sqrt(3)], atol=1e-12)
    np.testing.assert_allclose(w, [1 / 6, 2 / 3, 1 / 6])


def test_bivariate_gauss_hermite():
    tc, ta, w = bivariate_gauss_hermite(3, 1)
    np.testing.assert_allclose(tc, [-math.sqrt(3), 0.0, math.sqrt(3)], atol=1e-12)
    np.testing.assert_allclose(ta, 0.0, atol=1e-12)
    np.testing.assert_allclose(w, [1 / 6, 2 / 3, 1 / 6])
    tc, ta, w = bivariate_gauss_hermite(3, 3)
    assert w.sum() == pytest.approx(1.0)
    # E[Yc^2 Ya^2] = 1 and E[Yc Ya] = 0 for independent standard normals
    assert (w * tc ** 2 * ta ** 2).sum() == pytest.approx(1.0)
    assert (w * tc * ta).sum() == pytest.approx(0.0, abs=1e-12)


def test_truncated_gaussian_mean_against_scipy():
    mu, sigma, lower = np.array([1.0, 0.0, 5.0]), np.array([2.0, 1.0, 0.5]), 1.5
    want = [stats.truncnorm.mean((lower - m) / s, np.inf, loc=m, scale=s)
            for m, s in zip(mu, sigma)]
    np.testing.assert_allclose(truncated_gaussian_mean(mu, sigma, lower), want, rtol=1e-10)
    # far tail: tends to the bound from above, no overflow
    far = truncated_gaussian_mean(0.0, 1.0, 40.0)
    assert 40.0 < far < 40.1


def test_timeout_cap():
    assert timeout_cap(2.0, 0.01) == pytest.approx(200.0)
    assert timeout_cap(2.0, 0.01, factor=2.0) == pytest.approx(400.0)
    assert timeout_cap(math.inf, 0.01) is None


def test_lookahead_kernel_scores_match_the_scipy_pieces():
    """The numba EIc of the look-ahead kernel equals eic_on_cost x accuracy PF, with the
    budget filter Gamma (P(C <= budget) >= 0.99) and the Lynceus incumbent rule."""
    rng = np.random.default_rng(0)
    m = 50
    mu, sd = rng.uniform(1, 5, m), rng.uniform(0.1, 2, m)
    mu_a, sd_a = rng.uniform(0.7, 0.95, m), rng.uniform(0.01, 0.1, m)
    price = rng.uniform(0.005, 0.02, m)
    untested = rng.random(m) < 0.8
    eic = np.empty(m)
    for best, worst, budget in ((2.5, 6.0, np.inf), (np.inf, 6.0, 4.0)):
        arg = _score_level(mu, sd, mu_a, sd_a, True, price, 300.0, np.inf, 0.85, untested,
                           budget, best, worst, eic)
        # the kernel's numba copy of the no-feasible rule agrees with the Python definition
        ystar = best if np.isfinite(best) else reference_without_feasible(worst, sd[untested])
        want = eic_on_cost(mu, sd, ystar, price, time_max=300.0,
                           log_pf_other=log_probability_of_feasibility(mu_a, sd_a, 0.85, ">="))
        gamma = untested & (stats.norm.cdf(budget, mu, sd) >= 0.99)
        np.testing.assert_allclose(eic[gamma], want[gamma], rtol=1e-9, atol=1e-14)
        assert (eic[~gamma] == -1).all()
        assert arg == np.flatnonzero(gamma)[np.argmax(want[gamma])]
