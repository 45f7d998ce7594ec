"""The george GP: posterior against a direct numpy computation, MCMC samples, fantasies,
numerical safety."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from optimizers.models.gp import GaussianProcess


def _data(n=25, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=n)
    return X, y, rng.random((7, d))


def _numpy_kernel(A, B, theta, basis):
    """Matern 5/2 ARD x amplitude [x (1 + b phi2(s) phi2(s'))], written out by hand."""
    n_x = A.shape[1] - (1 if basis else 0)
    ls2 = np.exp(theta[1:1 + n_x])
    diff = A[:, None, :n_x] - B[None, :, :n_x]
    r = np.sqrt(5.0 * (diff ** 2 / ls2).sum(-1))
    k = np.exp(theta[0]) * (1 + r + r ** 2 / 3) * np.exp(-r)
    if basis:
        phi = (lambda s: (1 - s) ** 2) if basis == "loss" else (lambda s: s)
        k = k * (1 + np.exp(theta[1 + n_x]) * np.outer(phi(A[:, -1]), phi(B[:, -1])))
    return k


@pytest.mark.parametrize("basis", [None, "loss", "cost"])
def test_posterior_matches_direct_numpy_computation(basis):
    X, y, Xq = _data()
    gp = GaussianProcess(basis=basis, seed=1).fit(X, y)
    theta = gp.theta_[0]
    noise = np.exp(theta[-1]) + gp.noise_floor
    yn = (y - y.mean()) / y.std()
    K = _numpy_kernel(X, X, theta, basis) + noise * np.eye(len(X))
    Ks = _numpy_kernel(X, Xq, theta, basis)
    mean = Ks.T @ np.linalg.solve(K, yn)
    cov = _numpy_kernel(Xq, Xq, theta, basis) - Ks.T @ np.linalg.solve(K, Ks)
    m, s = gp.predict(Xq)
    np.testing.assert_allclose(m, mean * y.std() + y.mean(), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(s, np.sqrt(np.diag(cov)) * y.std(), rtol=1e-5, atol=1e-8)
    mj, cj = gp.predict_joint(Xq)
    np.testing.assert_allclose(cj, cov * y.var(), rtol=1e-5, atol=1e-8)


def test_ml_fit_beats_default_hyperparameters_and_predicts_well():
    X, y, Xq = _data(n=40)
    gp = GaussianProcess(seed=0).fit(X, y)
    assert gp._log_posterior(gp.theta_[0]) >= gp._log_posterior(gp._default_theta())
    truth = np.sin(3 * Xq[:, 0]) + Xq[:, 1] ** 2
    m, s = gp.predict(Xq)
    assert np.max(np.abs(m - truth)) < 0.15


def test_mcmc_returns_finite_distinct_samples_and_averages_predictions():
    X, y, Xq = _data()
    gp = GaussianProcess(basis="loss", hyper="mcmc", burn_in=20, chain_length=20, seed=3)
    gp.fit(X, y)
    p = gp.theta_.shape[1]
    assert p == 1 + (X.shape[1] - 1) + 1 + 1
    assert gp.theta_.shape[0] == 3 * p + (3 * p) % 2
    assert np.all(np.isfinite(gp.theta_))
    assert len(np.unique(gp.theta_, axis=0)) == len(gp.theta_)
    means, variances = gp.predict_per_sample(Xq)
    m, s = gp.predict(Xq)
    np.testing.assert_allclose(m, means.mean(0))
    np.testing.assert_allclose(s ** 2, variances.mean(0) + means.var(0))
    again = GaussianProcess(basis="loss", hyper="mcmc", burn_in=20, chain_length=20, seed=3)
    np.testing.assert_array_equal(again.fit(X, y).theta_, gp.theta_)


def test_with_points_equals_conditioning_on_all_data_with_the_same_hyperparameters():
    X, y, Xq = _data()
    gp = GaussianProcess(basis="cost", seed=0).fit(X[:20], y[:20])
    fantasy = gp.with_points(X[20:], y[20:])
    theta = gp.theta_[0]
    noise = np.exp(theta[-1]) + gp.noise_floor
    yn = (y - gp.y_mean_) / gp.y_scale_
    K = _numpy_kernel(X, X, theta, "cost") + noise * np.eye(len(X))
    Ks = _numpy_kernel(X, Xq, theta, "cost")
    m, _ = fantasy.predict(Xq)
    np.testing.assert_allclose(m, Ks.T @ np.linalg.solve(K, yn) * gp.y_scale_ + gp.y_mean_,
                               rtol=1e-6, atol=1e-8)
    assert gp._n == 20      # the original is untouched
    _, s_before = gp.predict(X[20:])
    _, s_after = fantasy.predict(X[20:])
    assert np.all(s_after < s_before)


def test_duplicates_and_constant_targets_are_safe():
    X = np.repeat(np.array([[0.1, 0.2], [0.5, 0.9]]), 4, axis=0)
    y = np.full(len(X), 2.5)
    for hyper in ("ml", "mcmc"):
        gp = GaussianProcess(hyper=hyper, burn_in=5, chain_length=5, seed=0).fit(X, y)
        m, s = gp.predict(np.array([[0.1, 0.2], [0.3, 0.3]]))
        assert np.all(np.isfinite(m)) and np.all(np.isfinite(s))
        np.testing.assert_allclose(m, 2.5, atol=1e-6)
    one = GaussianProcess(seed=0).fit(np.array([[0.3, 0.3]]), np.array([1.0]))
    assert np.all(np.isfinite(one.predict(np.array([[0.3, 0.3], [0.9, 0.1]]))[1]))


def test_pickles_and_rejects_bad_input():
    X, y, Xq = _data()
    gp = GaussianProcess(basis="loss", seed=0).fit(X, y)
    clone = pickle.loads(pickle.dumps(gp))
    np.testing.assert_array_equal(clone.predict(Xq)[0], gp.predict(Xq)[0])
    with pytest.raises(ValueError, match="finite"):
        GaussianProcess().fit(X, np.where(np.arange(len(y)) == 0, np.nan, y))
    with pytest.raises(ValueError, match="shape"):
        gp.predict(Xq[:, :2])
    with pytest.raises(ValueError, match="basis"):
        GaussianProcess(basis="linear")
    with pytest.raises(RuntimeError, match="fit"):
        GaussianProcess().predict(Xq)
