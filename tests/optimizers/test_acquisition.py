"""Every acquisition piece against closed forms, scipy, or Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from optfarm.optimizers.acquisition import (
    expected_improvement,
    gauss_hermite,
    incumbent_for_eic,
    log_probability_of_feasibility,
    reference_without_feasible,
    timeout_cap,
    truncated_gaussian_mean,
)
from optfarm.optimizers.lookahead_kernels import _score_level

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
        want = integrate.quad(
            lambda y, m=m, s=s: max(best - y, 0) * stats.norm.pdf(y, m, s),
            m - 12 * s,
            m + 12 * s,
            points=[best],
        )[0]
        assert g == pytest.approx(want, rel=1e-7, abs=1e-12)


def test_ei_zero_sigma_and_extremes_are_finite():
    assert expected_improvement(np.array([1.0, 3.0]), np.zeros(2), 2.0).tolist() == [1.0, 0.0]
    v = expected_improvement(np.array([1e9, -1e9, 0.0]), np.array([1e-9, 1e9, 1e-300]), 0.0)
    assert np.isfinite(v).all() and (v >= 0).all()


def test_probability_of_feasibility_against_scipy():
    mu, sigma = np.array([1.0, 5.0, -2.0]), np.array([1.0, 0.5, 3.0])
    np.testing.assert_allclose(
        probability_of_feasibility(mu, sigma, 2.0), stats.norm.cdf(2.0, mu, sigma), rtol=1e-12
    )
    np.testing.assert_allclose(
        probability_of_feasibility(mu, sigma, 2.0, ">="), stats.norm.sf(2.0, mu, sigma), rtol=1e-12
    )
    # log form stays finite far in the tail where the plain product underflows
    assert np.isfinite(log_probability_of_feasibility(100.0, 1.0, 0.0))
    assert log_probability_of_feasibility(100.0, 1.0, 0.0) == pytest.approx(
        stats.norm.logcdf(-100.0), rel=1e-10
    )


def test_constrained_ei_is_ei_times_pf():
    mu, sigma = np.array([1.0, 2.0]), np.array([0.5, 1.0])
    lpf = log_probability_of_feasibility(mu, sigma, 1.5)
    np.testing.assert_allclose(
        constrained_ei(mu, sigma, 1.2, lpf),
        expected_improvement(mu, sigma, 1.2) * stats.norm.cdf(1.5, mu, sigma),
    )


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
        assert (w * t**2).sum() == pytest.approx(1.0)
    if k >= 3:
        assert (w * t**4).sum() == pytest.approx(3.0)
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
    assert (w * tc**2 * ta**2).sum() == pytest.approx(1.0)
    assert (w * tc * ta).sum() == pytest.approx(0.0, abs=1e-12)


def test_truncated_gaussian_mean_against_scipy():
    mu, sigma, lower = np.array([1.0, 0.0, 5.0]), np.array([2.0, 1.0, 0.5]), 1.5
    want = [
        stats.truncnorm.mean((lower - m) / s, np.inf, loc=m, scale=s) for m, s in zip(mu, sigma)
    ]
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
        arg = _score_level(
            mu, sd, mu_a, sd_a, True, price, 300.0, np.inf, 0.85, untested, budget, best, worst, eic
        )
        # the kernel's numba copy of the no-feasible rule agrees with the Python definition
        ystar = best if np.isfinite(best) else reference_without_feasible(worst, sd[untested])
        want = eic_on_cost(
            mu,
            sd,
            ystar,
            price,
            time_max=300.0,
            log_pf_other=log_probability_of_feasibility(mu_a, sd_a, 0.85, ">="),
        )
        gamma = untested & (stats.norm.cdf(budget, mu, sd) >= 0.99)
        np.testing.assert_allclose(eic[gamma], want[gamma], rtol=1e-9, atol=1e-14)
        assert (eic[~gamma] == -1).all()
        assert arg == np.flatnonzero(gamma)[np.argmax(want[gamma])]


# log h(z), h(z) = z Phi(z) + phi(z) (EI at sigma = 1), from mpmath at 60 digits, once
# (mpmath.log(z * mpmath.ncdf(z) + mpmath.npdf(z)) with mp.dps = 60), stored so that the
# test needs no mpmath: z every 0.5 on [-40, 5] and around the series' switch at z = -20
LOG_H = [
    (-40.0, -808.29856835662),
    (-39.5, -788.3984583506532),
    (-39.0, -768.7480296928501),
    (-38.5, -749.3472742078229),
    (-38.0, -730.1961834021138),
    (-37.5, -711.2947484475127),
    (-37.0, -692.6429601632705),
    (-36.5, -674.2408089971152),
    (-36.0, -656.0882850049788),
    (-35.5, -638.1853778293226),
    (-35.0, -620.532076675948),
    (-34.5, -603.128370289162),
    (-34.0, -585.9742469251563),
    (-33.5, -569.0696943234434),
    (-33.0, -552.4146996761789),
    (-32.5, -536.0092495951777),
    (-32.0, -519.8533300764163),
    (-31.5, -503.94692646178567),
    (-31.0, -488.2900233978372),
    (-30.5, -472.88260479123596),
    (-30.3, -466.7894892428666),
    (-30.0, -457.724653760598),
    (-29.5, -442.8161525843589),
    (-29.0, -428.1570826442731),
    (-28.5, -413.74742436409997),
    (-28.0, -399.58715714297807),
    (-27.5, -385.6762592829265),
    (-27.0, -372.01470790984536),
    (-26.5, -358.60247888730413),
    (-26.0, -345.439546722318),
    (-25.5, -332.525884462205),
    (-25.0, -319.86146358149597),
    (-24.5, -307.4462538577302),
    (-24.0, -295.2802232348049),
    (-23.5, -283.3633376723602),
    (-23.0, -271.69556097946116),
    (-22.5, -260.27685463058054),
    (-22.0, -249.10717756158823),
    (-21.5, -238.1864859430982),
    (-21.0, -227.51473292810905),
    (-20.5, -217.09186837038314),
    (-20.01, -207.11888089308223),
    (-20.000000001, -206.91783852952437),
    (-20.0, -206.9178385094251),
    (-19.999999999, -206.91783848932585),
    (-19.99, -206.71689563670066),
    (-19.5, -196.99258561722834),
    (-19.0, -187.31604760112668),
    (-18.5, -177.888157556096),
    (-18.0, -168.70884325865197),
    (-17.5, -159.7780265930435),
    (-17.0, -151.09562289868288),
    (-16.5, -142.66154022561176),
    (-16.0, -134.4756784821748),
    (-15.5, -126.53792845584127),
    (-15.0, -118.84817068411358),
    (-14.5, -111.40627414748852),
    (-14.0, -104.21209475021381),
    (-13.5, -97.26547354675925),
    (-13.0, -90.56623466202204),
    (-12.5, -84.11418284068544),
    (-12.0, -77.90910054500735),
    (-11.5, -71.95074449949851),
    (-11.0, -66.2388415539191),
    (-10.5, -60.77308370067394),
    (-10.0, -55.55312203612235),
    (-9.5, -50.578559393519754),
    (-9.0, -45.84894129266903),
    (-8.5, -41.36374474000802),
    (-8.0, -37.12236426169263),
    (-7.5, -33.1240943455347),
    (-7.0, -29.368107183141277),
    (-6.5, -25.853424209777895),
    (-6.0, -22.578879392169796),
    (-5.5, -19.543071452824105),
    (-5.0, -16.74430116266099),
    (-4.5, -14.18048838186834),
    (-4.0, -11.849061577550662),
    (-3.5, -9.746810037765387),
    (-3.0, -7.869686059603029),
    (-2.5, -6.212541645443513),
    (-2.0, -4.768783523917114),
    (-1.5, -3.52993592080571),
    (-1.0, -2.4851210257126413),
    (-0.5, -1.6205162643873199),
    (-0.1, -1.047153314072846),
    (0.0, -0.9189385332046728),
    (0.1, -0.7964313395507471),
    (0.5, -0.3598276837450638),
    (0.9, 0.00043104417378205087),
    (1.0, 0.08002621884930694),
    (1.5, 0.4248145567622593),
    (2.0, 0.6973835457882284),
    (2.5, 0.9170920655921645),
    (3.0, 1.0987396653277077),
    (3.5, 1.2527796771896116),
    (4.0, 1.3862961474329032),
    (4.5, 1.5040775510456057),
    (5.0, 1.6094379231264313),
]


def test_log_expected_improvement_is_within_1e_10_of_mpmath_on_z_from_minus_40_to_5():
    """Issue 35: the 3-term series below z = -20 was 1.6e-6 off in log h there. Now within
    1e-10 of the exact log h (so EI within 1e-10 relative, and log EI far inside 1e-10
    relative) on both branches."""
    from optfarm.optimizers.acquisition.analytic import log_expected_improvement

    z, exact = np.array(LOG_H).T
    got = log_expected_improvement(-z, 1.0, 0.0)
    assert np.abs(got - exact).max() <= 1e-10
    assert (np.abs(got - exact) / np.abs(exact)).max() <= 1e-10
    # sigma scales EI: log EI = log sigma + log h((best - mu) / sigma)
    assert log_expected_improvement(-3.0 * z, 3.0, 0.0) == pytest.approx(
        exact + math.log(3.0), abs=1e-10
    )
