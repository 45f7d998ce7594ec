"""The george GP: posterior against a direct numpy computation, MCMC samples, fantasies,
numerical safety; the walkers' batched log posterior against george's (to 1e-10, and the same
walker positions on the papers' tables)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import optfarm.optimizers.models.gp as gp_module
import optfarm.optimizers.models.gp_posterior as gp_posterior
from optfarm.optimizers.models.gp import GaussianProcess
from optfarm.optimizers.models.gp_posterior import Design, log_posterior
from optfarm.oracle.formats import FORMATS
from optfarm.oracle.oracle import Oracle


def _data(n=25, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=n)
    return X, y, rng.random((7, d))


def _numpy_kernel(A, B, theta, basis):
    """Matern 5/2 ARD x amplitude [x (1 + b phi2(s) phi2(s'))], written out by hand."""
    n_x = A.shape[1] - (1 if basis else 0)
    ls2 = np.exp(theta[1 : 1 + n_x])
    diff = A[:, None, :n_x] - B[None, :, :n_x]
    r = np.sqrt(5.0 * (diff**2 / ls2).sum(-1))
    k = np.exp(theta[0]) * (1 + r + r**2 / 3) * np.exp(-r)
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
    np.testing.assert_allclose(s**2, variances.mean(0) + means.var(0))
    again = GaussianProcess(basis="loss", hyper="mcmc", burn_in=20, chain_length=20, seed=3)
    np.testing.assert_array_equal(again.fit(X, y).theta_, gp.theta_)


def test_beyond_large_n_a_few_samples_are_kept_and_resampled_as_observations_grow(monkeypatch):
    """Beyond LARGE_N observations: at most LARGE_N_SAMPLES samples, kept (and conditioned on
    every observation) until the observations have grown by RESAMPLE_GROWTH; up to LARGE_N
    every walker is a sample, sampled anew at every fit."""
    monkeypatch.setattr(gp_module, "LARGE_N", 20)
    monkeypatch.setattr(gp_module, "LARGE_N_SAMPLES", 4)
    X, y, Xq = _data(n=40)
    gp = GaussianProcess(hyper="mcmc", burn_in=10, chain_length=10, seed=2)
    walkers = len(gp.fit(X[:20], y[:20]).theta_)
    assert walkers == 3 * 5 + 1  # every walker, n = LARGE_N
    before = gp.theta_.copy()
    assert not np.array_equal(gp.fit(X[:20], y[:20]).theta_, before)  # sampled anew
    sampled = gp.fit(X[:21], y[:21]).theta_.copy()  # n > LARGE_N: thinned, sampled anew
    assert len(sampled) == 4 and gp._sampled_n == 21
    np.testing.assert_array_equal(sampled, gp._walkers[:: -(-walkers // 4)])
    for n in (22, 26):  # below 1.25 x 21: the same samples, conditioned on all n points
        gp.fit(X[:n], y[:n])
        np.testing.assert_array_equal(gp.theta_, sampled)
        assert gp._n == n and gp._L.shape == (4, n, n)
        means, _ = gp.predict_per_sample(Xq)
        again = GaussianProcess(hyper="ml").fit(X[:n], y[:n])
        again.theta_ = sampled[:1]
        again._condition()
        np.testing.assert_allclose(means[0], again.predict(Xq)[0], rtol=1e-10)
    gp.fit(X[:27], y[:27])  # 27 >= 1.25 x 21: sampled anew
    assert len(gp.theta_) == 4 and gp._sampled_n == 27
    assert not np.array_equal(gp.theta_, sampled)


def test_max_samples_keeps_that_many_walkers_evenly_spaced_at_every_sampling():
    X, y, _ = _data(n=30)
    gp = GaussianProcess(hyper="mcmc", burn_in=10, chain_length=10, max_samples=4, seed=2)
    walkers = len(gp.fit(X, y)._walkers)
    assert walkers == 16 and len(gp.theta_) == 4
    np.testing.assert_array_equal(gp.theta_, gp._walkers[::4])
    assert gp.predict_per_sample(X[:3])[0].shape == (4, 3)
    first = gp.theta_.copy()
    assert len(gp.fit(X[:25], y[:25]).theta_) == 4 and not np.array_equal(gp.theta_, first)


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
    np.testing.assert_allclose(
        m, Ks.T @ np.linalg.solve(K, yn) * gp.y_scale_ + gp.y_mean_, rtol=1e-6, atol=1e-8
    )
    assert gp._n == 20  # the original is untouched
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


# -- the walkers' log posterior: batched NumPy against george --------------------------------
def _thetas(gp, n, rng):
    """Hyperparameter vectors around the prior's bounds (about half outside) and the fit's."""
    b = gp._bounds()
    return np.vstack([rng.uniform(b[:, 0] - 2, b[:, 1] + 2, size=(n, len(b))), gp.theta_])


@pytest.mark.parametrize("basis", [None, "loss", "cost"])
def test_walkers_log_posterior_equals_georges_to_1e10(basis):
    X, y, _ = _data(n=40, d=4, seed=5)
    gp = GaussianProcess(basis=basis, hyper="mcmc", burn_in=10, chain_length=10, seed=2)
    gp.fit(X, y)
    theta = _thetas(gp, 300, np.random.default_rng(1))
    reference = np.array([gp._log_posterior(t) for t in theta])
    batched = log_posterior(
        theta, Design(gp._Xt, bool(basis)), gp._yn, gp._bounds(), gp.noise_floor
    )
    inside = np.isfinite(reference)
    assert 50 < inside.sum() < len(theta) - 50
    np.testing.assert_array_equal(np.isfinite(batched), inside)
    np.testing.assert_allclose(batched[inside], reference[inside], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("basis", [None, "loss", "cost"])
def test_kernels_of_every_sample_equal_georges_bit_for_bit(basis):
    """``kernel_per_sample`` / ``kernel_diagonal_per_sample`` (all samples in one compiled
    pass, ``gp_kernels``) give george's values exactly, one george call per sample being the
    reference, also the square matrix of the training inputs the predictions factor and the
    walkers' Gram matrices (``gp_kernels.gram``, each pair computed once); on a CPU whose
    NumPy ``exp`` is vectorised differently (AVX-512) too: the kernel takes the C library's."""
    X, y, Q = _data(n=30, d=4, seed=3)
    gp = GaussianProcess(basis=basis, hyper="mcmc", burn_in=10, chain_length=10, seed=4)
    gp.fit(X, y)
    Q = np.vstack([Q, X[:3]])  # distance 0 included
    cross, diag, gram = [], [], []
    for theta in gp.theta_:
        gp._set(theta)
        cross.append(gp._kernel.get_value(gp._transform(X), gp._transform(Q)))
        diag.append(gp._kernel.get_value(gp._transform(Q), diag=True))
        gram.append(gp._kernel.get_value(gp._Xt))
    np.testing.assert_array_equal(gp.kernel_per_sample(X, Q), np.array(cross))
    np.testing.assert_array_equal(gp.kernel_diagonal_per_sample(Q), np.array(diag))
    np.testing.assert_array_equal(Design(gp._Xt, bool(basis)).gram(gp.theta_), np.array(gram))
    gp._set(gp.theta_[1])
    np.testing.assert_array_equal(gp._cross(1, gp._Xt, gp._Xt), gp._kernel.get_value(gp._Xt))


@pytest.mark.parametrize("basis", [None, "cost"])
def test_predictions_are_georges_to_the_last_bit(basis):
    """The predictions (blocks, one sample at a time) are those george's kernels give, bit
    for bit: the papers' runs depend on an argmax over them."""
    X, y, Q = _data(n=30, d=4, seed=5)
    gp = GaussianProcess(basis=basis, hyper="mcmc", burn_in=10, chain_length=10, seed=6)
    gp.fit(X, y)
    Xt, Qt = gp._Xt, gp._transform(Q)
    for i, theta in enumerate(gp.theta_):
        noise = gp._set(theta)
        L = np.linalg.cholesky(gp._kernel.get_value(Xt) + noise * np.eye(len(X)))
        np.testing.assert_array_equal(gp._L[i], L)
        Ks = gp._kernel.get_value(Xt, Qt)
        V = gp_module.solve_triangular(L, Ks, lower=True)
        means, variances = gp.predict_per_sample(Q)
        mean = (Ks.T @ gp._alpha[i]) * gp.y_scale_ + gp.y_mean_
        var = gp._kernel.get_value(Qt, diag=True) - np.einsum("ij,ij->j", V, V)
        np.testing.assert_array_equal(means[i], mean)
        np.testing.assert_array_equal(variances[i], np.maximum(var, 0.0) * gp.y_scale_**2)
        _, cov = gp._sample_joint(i, Qt, 0.0)
        np.testing.assert_array_equal(cov, gp._kernel.get_value(Qt) - V.T @ V)


def test_a_refit_moves_on_walkers_that_emcee_finds_dependent():
    """A warm start from an ensemble emcee 3 calls dependent (it raised "Initial state has a
    large condition number" after hundreds of observations on cloud-grid-9216, ending the run)
    samples on, as the reference's emcee 2 did."""
    X, y, Q = _data(n=20, d=2)
    gp = GaussianProcess(hyper="mcmc", burn_in=10, chain_length=10, seed=2).fit(X, y)
    walkers = gp._walkers
    spread = np.linspace(-1e-3, 1e-3, len(walkers))[:, None] * np.ones(walkers.shape[1])
    gp._walkers = walkers[:1] + spread  # every walker on one line
    gp.fit(np.vstack([X, Q[:1]]), np.append(y, 0.5))
    assert np.all(np.isfinite(gp.theta_)) and len(gp.theta_) == len(walkers)
    assert np.all(np.isfinite(gp.predict(Q)[0]))


def test_walkers_out_of_bounds_get_minus_inf_without_a_likelihood(monkeypatch):
    X, y, _ = _data(n=20, d=2)
    gp = GaussianProcess(basis="loss", seed=0).fit(X, y)
    theta = _thetas(gp, 40, np.random.default_rng(3))
    b = gp._bounds()
    outside = np.any((theta < b[:, 0]) | (theta > b[:, 1]), axis=1)
    computed = []
    gram = Design.gram
    monkeypatch.setattr(Design, "gram", lambda self, t: computed.append(t) or gram(self, t))
    lp = log_posterior(theta, Design(gp._Xt, True), gp._yn, b, gp.noise_floor)
    assert np.all(lp[outside] == -np.inf) and np.all(np.isfinite(lp[~outside]))
    np.testing.assert_array_equal(np.vstack(computed), theta[~outside])


def test_a_covariance_that_needs_a_jitter_gets_the_references_value():
    """A batch holding a singular covariance (duplicated inputs, no noise) falls back to
    ``cholesky_with_jitter`` for each matrix, as george's path does."""
    X = np.repeat(np.array([[0.1, 0.2], [0.5, 0.9], [0.3, 0.7]]), 3, axis=0)
    y = np.arange(len(X), dtype=float) / len(X)
    gp = GaussianProcess(seed=0).fit(X, y)
    gp.noise_floor = 0.0
    theta = np.vstack([gp.theta_[0], gp.theta_[0]])
    theta[1, -1] = -60.0  # noise variance 1e-26: singular
    K = Design(gp._Xt, False).gram(theta) + np.exp(theta[:, -1])[:, None, None] * np.eye(9)
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(K[1])
    reference = [gp._log_likelihood(t) for t in theta]
    assert np.all(np.isfinite(reference))
    np.testing.assert_allclose(gp_posterior._log_likelihood(K, gp._yn), reference, rtol=1e-10)


def _real_data(shared_datasets, fmt, name, n, seed):
    """Features (with the data-size column when the table has one) and log costs of ``n``
    random measured configurations of a paper's table."""
    dataset = next(d for d in FORMATS[fmt](shared_datasets / fmt) if d.name == name)
    oracle = Oracle(dataset)
    rng = np.random.default_rng(seed)
    ids = rng.choice(len(oracle.space.features), size=n, replace=False)
    fids = rng.choice(oracle.space.fidelities, size=n) if oracle.space.has_fidelity else None
    cost = [
        oracle.true_value(int(i), 1.0 if fids is None else float(f), "cost")
        for i, f in zip(ids, fids if fids is not None else [None] * n)
    ]
    return oracle.space.feature_rows(ids, fids), np.log(cost)


@pytest.mark.slow  # george's posterior walker by walker, 5 real-data fits: minutes
@pytest.mark.parametrize(
    "fmt, name, basis, seeds",
    [
        ("cherrypick", "cherrypick-kmeans", None, (0, 1, 2)),
        ("trimtuner", "trimtuner-cnn", "loss", (0,)),
        ("trimtuner", "trimtuner-cnn", "cost", (0,)),
    ],
)
def test_walker_positions_on_real_data_equal_georges(
    shared_datasets, monkeypatch, fmt, name, basis, seeds
):
    """emcee with every walker's log posterior in one NumPy call ends in the same positions,
    on the first fit (burn-in) and on a warm-started refit, as emcee calling george's
    posterior walker by walker: the same hyperparameter samples, so the same choices."""
    for seed in seeds:
        X, y = _real_data(shared_datasets, fmt, name, 24, seed)
        batched = GaussianProcess(basis=basis, hyper="mcmc", seed=seed)
        reference = GaussianProcess(basis=basis, hyper="mcmc", seed=seed)
        for n in (16, 24):
            batched.fit(X[:n], y[:n])
            with monkeypatch.context() as m:
                m.setattr(
                    gp_module,
                    "log_posterior",
                    lambda theta, **_: np.array([reference._log_posterior(t) for t in theta]),  # noqa: B023
                )
                reference.fit(X[:n], y[:n])
            np.testing.assert_array_equal(batched.theta_, reference.theta_)
