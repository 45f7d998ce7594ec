"""Information gain over representer points: Monte Carlo p_max against brute-force sampling,
zero gain for an uninformative candidate, larger for an informative one."""

from __future__ import annotations

import numpy as np

from optfarm.optimizers.acquisition.analytic import gauss_hermite
from optfarm.optimizers.acquisition.entropy import (
    RepresenterDraws,
    entropy,
    information_gain_gp,
    information_gain_refit,
    joint_samples,
    pmax_from_samples,
    pmax_monte_carlo,
)
from optfarm.optimizers.models.gp import GaussianProcess
from optfarm.optimizers.models.trees import TreeEnsemble


def _problem():
    """3 correlated representers and 2 candidates: one correlated with them, one independent."""
    mean_r = np.array([0.0, 0.1, 0.3])
    cov_r = np.array([[1.0, 0.5, 0.2], [0.5, 1.0, 0.4], [0.2, 0.4, 1.0]])
    cov_rc = np.array([[0.8, 0.0], [0.3, 0.0], [0.1, 0.0]])
    mean_c, var_c = np.array([0.05, 0.0]), np.array([1.0, 1.0])
    return mean_r, cov_r, cov_rc, mean_c, var_c


def test_entropy_and_pmax_basics():
    np.testing.assert_allclose(entropy([0.5, 0.5]), np.log(2))
    assert entropy([1.0, 0.0]) == 0.0
    F = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 2.0], [3.0, 2.0, 1.0], [0.0, 5.0, 5.0]])
    np.testing.assert_allclose(pmax_from_samples(F), [0.5, 0.25, 0.25])


def test_pmax_monte_carlo_matches_brute_force_sampling():
    mean_r, cov_r, *_ = _problem()
    z = np.random.default_rng(0).standard_normal((4000, 3))
    p = pmax_monte_carlo(mean_r, cov_r, z)
    brute = np.random.default_rng(1).multivariate_normal(mean_r, cov_r, size=400_000)
    truth = np.bincount(np.argmin(brute, axis=1), minlength=3) / len(brute)
    np.testing.assert_allclose(p, truth, atol=0.025)
    assert abs(p.sum() - 1) < 1e-12


def test_information_gain_matches_brute_force_and_is_zero_when_uninformative():
    mean_r, cov_r, cov_rc, mean_c, var_c = _problem()
    noise = 0.01
    rng = np.random.default_rng(2)
    z, e = rng.standard_normal((4000, 3)), rng.standard_normal((4000, 2))
    t, w = gauss_hermite(20)
    ig = information_gain_gp(
        RepresenterDraws.of(mean_r, cov_r, z), cov_rc, mean_c, var_c, noise, e, t, w
    )
    assert ig[1] == 0.0  # independent of the representers: no gain
    assert ig[0] > 0.05

    # brute force for candidate 0: sample y, condition the Gaussian exactly, p_max by sampling
    brute_rng = np.random.default_rng(3)
    h0 = entropy(pmax_from_samples(brute_rng.multivariate_normal(mean_r, cov_r, 200_000)))
    var_y = var_c[0] + noise
    k = cov_rc[:, 0]
    post_cov = cov_r - np.outer(k, k) / var_y
    hs = []
    for y in brute_rng.normal(mean_c[0], np.sqrt(var_y), 40):
        post_mean = mean_r + k * (y - mean_c[0]) / var_y
        hs.append(
            entropy(pmax_from_samples(brute_rng.multivariate_normal(post_mean, post_cov, 20_000)))
        )
    assert abs(ig[0] - (h0 - np.mean(hs))) < 0.04


def _reference_information_gain(mean_r, cov_r, cov_rc, mean_c, var_c, noise, z, e, t, w):
    """The information gain as it was written before the fused kernel: every conditioned
    draw built as one (K, M, R) array per candidate, p_max by argmin over it."""
    L = np.linalg.cholesky(cov_r + 1e-10 * np.mean(np.diag(cov_r)) * np.eye(len(cov_r)))
    F = mean_r[None, :] + z @ L.T
    h0 = entropy(pmax_from_samples(F))
    a = np.linalg.solve(L, cov_rc)
    var_y = var_c + noise
    resid = np.sqrt(np.maximum(var_y - np.sum(a * a, axis=0), 0.0))
    y_sample = mean_c[None, :] + z @ a + resid[None, :] * e
    gains = np.empty(len(mean_c))
    for c in range(len(mean_c)):
        y_nodes = mean_c[c] + np.sqrt(var_y[c]) * t
        shift = y_nodes[:, None] - y_sample[None, :, c]
        Fy = F[None, :, :] + shift[:, :, None] * (cov_rc[:, c] / var_y[c])[None, None, :]
        winners = np.argmin(Fy, axis=-1)  # (K, M)
        p = np.stack([np.bincount(wk, minlength=len(mean_r)) for wk in winners]) / len(z)
        gains[c] = h0 - np.dot(w, entropy(p))
    return gains


def test_fused_information_gain_equals_the_reference_formula():
    """A hand-made case of 12 representers and 6 candidates (one independent of them, one
    a near-copy of a representer): the fused kernel's gains are the reference's."""
    rng = np.random.default_rng(11)
    B = rng.standard_normal((18, 18))
    joint = B @ B.T / 18 + 0.05 * np.eye(18)
    joint[12, :12] = joint[:12, 12] = 0.0  # candidate 0: independent
    joint[13, :] = joint[:, 13] = joint[3, :]  # candidate 1: representer 3 itself
    joint[13, 13] = joint[3, 3]
    mean = rng.normal(0.0, 0.3, 18)
    mean_r, cov_r = mean[:12], joint[:12, :12]
    cov_rc, mean_c, var_c = joint[:12, 12:], mean[12:], np.diag(joint)[12:]
    z, e = rng.standard_normal((3000, 12)), rng.standard_normal((3000, 6))
    t, w = gauss_hermite(5)
    fused = information_gain_gp(
        RepresenterDraws.of(mean_r, cov_r, z), cov_rc, mean_c, var_c, 0.02, e, t, w
    )
    reference = _reference_information_gain(mean_r, cov_r, cov_rc, mean_c, var_c, 0.02, z, e, t, w)
    np.testing.assert_allclose(fused, reference, rtol=0, atol=1e-12)
    assert fused[0] == 0.0 and fused[1] > 0.05


def test_information_gain_does_not_depend_on_batching():
    mean_r, cov_r, cov_rc, mean_c, var_c = _problem()
    rng = np.random.default_rng(4)
    z, e = rng.standard_normal((500, 3)), rng.standard_normal((500, 2))
    t, w = gauss_hermite(5)
    draws = RepresenterDraws.of(mean_r, cov_r, z)
    both = information_gain_gp(draws, cov_rc, mean_c, var_c, 0.01, e, t, w)
    first = information_gain_gp(draws, cov_rc[:, :1], mean_c[:1], var_c[:1], 0.01, e[:, :1], t, w)
    np.testing.assert_array_equal(both[:1], first)


def test_gp_gain_is_larger_near_the_contested_optimum():
    """On a fitted GP: observing next to the two competing minima is informative; far from
    every representer it is not."""
    X = np.array([[0.0], [0.2], [0.25], [0.5], [0.8]])
    y = np.array([1.0, 0.1, 0.12, 0.9, 1.0])
    gp = GaussianProcess(seed=0).fit(X, y)
    R = np.array([[0.19], [0.22], [0.26]])
    C = np.array([[0.22], [5.0]])
    means, covs = gp.predict_per_sample(np.vstack([R, C]), full_cov=True)
    rng = np.random.default_rng(5)
    t, w = gauss_hermite(7)
    draws = RepresenterDraws.of(means[0, :3], covs[0, :3, :3], rng.standard_normal((2000, 3)))
    ig = information_gain_gp(
        draws,
        covs[0, :3, 3:],
        means[0, 3:],
        np.diag(covs[0])[3:],
        gp.noise_[0] * gp.y_scale_**2,
        rng.standard_normal((2000, 2)),
        t,
        w,
    )
    assert ig[0] > 10 * abs(ig[1])


def test_refit_gain_is_zero_when_the_fantasy_cannot_move_the_model():
    X = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = np.array([0.3, 0.5, 0.1, 0.9])
    forest = TreeEnsemble(n_trees=10, seed=1).fit(X, y)
    z = np.random.default_rng(6).standard_normal((1000, 4))
    t, w = gauss_hermite(3)
    # the fantasy sits at the leaf value it would be predicted with: zero spread -> zero gain
    still = information_gain_refit(forest, X[0], 0.3, 0.0, X, z, t, w)
    moving = information_gain_refit(forest, np.array([0.9, 0.1]), 0.1, 0.5, X, z, t, w)
    assert abs(still) < abs(moving)


def test_joint_samples_have_the_moments_of_a_rank_deficient_covariance():
    rng = np.random.default_rng(0)
    B = rng.standard_normal((40, 3))
    cov = B @ B.T  # rank 3 of 40
    mean = rng.standard_normal(40)
    F = joint_samples(mean, cov, rng.standard_normal((20000, 40)))
    np.testing.assert_allclose(F.mean(axis=0), mean, atol=0.08)
    np.testing.assert_allclose(np.cov(F.T), cov, atol=0.25 * np.abs(cov).max() ** 0.5)
