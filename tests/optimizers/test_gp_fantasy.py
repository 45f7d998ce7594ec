"""The closed-form rank-1 fantasy against refitting the Cholesky factors with the point added
(``GaussianProcess.with_points``), on MCMC and ML hyperparameters, with and without the
FABOLAS basis; the candidates' covariances with the rows against the joint posterior."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import solve_triangular

from optfarm.optimizers.models.gp import GaussianProcess
from optfarm.optimizers.models.gp_fantasy import CandidateCovariances, RowPosterior, _solve_lower


def _fitted(basis, hyper):
    rng = np.random.default_rng(7)
    X = rng.uniform(size=(14, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 1] ** 2 - 0.5 * X[:, 2] + 0.05 * rng.standard_normal(14)
    gp = GaussianProcess(basis=basis, hyper=hyper, burn_in=20, chain_length=20, seed=1)
    return gp.fit(X, y), rng


@pytest.mark.parametrize("basis,hyper", [("loss", "mcmc"), (None, "ml"), ("cost", "ml")])
def test_fantasy_equals_refitting_with_the_point(basis, hyper):
    gp, rng = _fitted(basis, hyper)
    rows = RowPosterior(gp, rng.uniform(size=(30, 3)))
    X_cand = rng.uniform(size=(5, 3))
    cands = CandidateCovariances(rows, X_cand)
    for j, y in enumerate([-1.0, 0.0, 0.4, 2.5, 0.1]):
        ids = np.array([0, 3, 7, 29]) if j % 2 else np.arange(30)
        mean, std = cands.fantasy_predict(j, y, ids)
        ref_mean, ref_std = gp.with_points(X_cand[j : j + 1], [y]).predict(rows.X_rows[ids])
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(std, ref_std, rtol=1e-8, atol=1e-10)
    # the fantasy moved the prediction next to it, and the model itself is unchanged
    assert not np.allclose(
        cands.fantasy_predict(3, 2.5, np.arange(30))[0], gp.predict(rows.X_rows)[0]
    )
    assert gp._n == 14


def test_candidate_covariances_are_the_joint_posteriors():
    gp, rng = _fitted("loss", "mcmc")
    X_rows, X_cand = rng.uniform(size=(6, 3)), rng.uniform(size=(4, 3))
    mean, var, cross = CandidateCovariances(RowPosterior(gp, X_rows), X_cand).scaled()
    means, covs = gp.predict_per_sample(np.vstack([X_rows, X_cand]), full_cov=True)
    np.testing.assert_allclose(mean, means[:, 6:], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(var, np.diagonal(covs, axis1=1, axis2=2)[:, 6:], atol=1e-10)
    np.testing.assert_allclose(cross, covs[:, 6:, :6], atol=1e-10)


def test_triangular_solves_equal_scipys_bit_for_bit():
    """The per-sample solves call LAPACK as ``solve_triangular`` does: the same values, also
    for a strided right-hand side (the candidates' kernel rows, transposed)."""
    gp, rng = _fitted("loss", "mcmc")
    X, L, _ = gp.factors()
    K = gp.kernel_per_sample(rng.uniform(size=(6, 3)), X).transpose(0, 2, 1)  # (S, n, 6)
    reference = np.stack([solve_triangular(L_s, K_s, lower=True) for L_s, K_s in zip(L, K)])
    np.testing.assert_array_equal(_solve_lower(L, K), reference)
