"""The GP's hyperparameter prior and its log posterior for many hyperparameter vectors at once:
every emcee walker of a step in one call (``vectorize=True``) [Foreman-Mackey13], in NumPy.

The model is ``gp.GaussianProcess``'s (see its docstring): kernel ``amp * k52(x, x')`` with ARD
squared length scales, times ``1 + b phi_2(s) phi_2(s')`` with FABOLAS' basis [Klein17, Sec.
3.2], plus the noise variance on the diagonal; the log marginal likelihood is
[Rasmussen06, Alg. 2.1]'s. Written once for a batch of W vectors, the Gram matrices are one
compiled pass (``gp_kernels.gram``: george's values, each pair of inputs once), the Cholesky
factors one batched LAPACK call and ``L^-1 y`` one BLAS triangular solve per walker, instead of
W walks through george's kernel tree. A vector outside the prior's bounds gets -inf without a
likelihood (about half of emcee's proposals). george's kernels stay the reference:
``GaussianProcess._log_posterior`` agrees to 1e-10 (tests/optimizers/test_gp.py).

At hundreds of observations (a board's runs on a large table) the Gram matrices and the solve
were NumPy's: (W, n^2) temporaries of the inputs' squared differences and a general batched
solve (an LU factorisation per walker besides the Cholesky), three quarters of a walker's
likelihood at n = 1,000; compiled, the Cholesky factorisation is most of it
(docs/results/gp-fits.md, "The walkers' likelihood at large n").

References:
    [Klein17] Klein et al. FABOLAS. AISTATS 2017.
    [Rasmussen06] Rasmussen, Williams. Gaussian Processes for Machine Learning, Alg. 2.1.
    [Foreman-Mackey13] emcee: the MCMC hammer. PASP 2013.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg.blas import dtrsv

from ..linalg import cholesky_with_jitter
from . import gp_kernels

__all__ = [
    "HORSESHOE_SCALE",
    "Design",
    "log_posterior",
    "log_prior",
]

_LOG_2PI = math.log(2.0 * math.pi)
HORSESHOE_SCALE = 0.1  # the noise prior's scale [Klein17]


def log_prior(theta: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Log prior of each row of ``theta`` (W, p): log-normal(0, 1) amplitude (``theta[:, 0]``),
    horseshoe noise (``theta[:, -1]``), flat elsewhere; -inf outside ``bounds`` (p, 2)."""
    inside = np.all((theta >= bounds[:, 0]) & (theta <= bounds[:, 1]), axis=1)
    lp = np.full(len(theta), -np.inf)
    t = theta[inside]
    u = 3.0 * (HORSESHOE_SCALE / np.exp(t[:, -1])) ** 2
    lp[inside] = -0.5 * t[:, 0] ** 2 + np.log(np.log1p(u))
    return lp


class Design:
    """The training inputs as the kernel reads them: the transformed inputs ``Xt`` (with a
    basis, its last column is the basis feature phi_2(s))."""

    def __init__(self, Xt: np.ndarray, basis: bool):
        self.n = len(Xt)
        self.Xt = np.asarray(Xt, dtype=float)
        self.basis = basis

    def gram(self, theta: np.ndarray) -> np.ndarray:
        """Kernel matrices (W, n, n) of the rows of ``theta``, without the noise."""
        return gp_kernels.gram(theta, self.Xt, self.basis)


def _cholesky(K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower Cholesky factors of ``K`` (W, n, n) and which of them exist. In one batched call;
    when one needs a jitter, each goes through ``cholesky_with_jitter`` as the reference's does
    (a factor that fails even so is marked missing)."""
    try:
        return np.linalg.cholesky(K), np.ones(len(K), dtype=bool)
    except np.linalg.LinAlgError:
        pass
    L, found = np.empty_like(K), np.ones(len(K), dtype=bool)
    for i, k in enumerate(K):
        try:
            L[i] = cholesky_with_jitter(k, "GP: covariance matrix")
        except np.linalg.LinAlgError:
            L[i], found[i] = np.eye(len(k)), False
    return L, found


def _log_likelihood(K: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Log marginal likelihood of ``y`` under each covariance of ``K`` (W, n, n)
    [Rasmussen06, Alg. 2.1]; -inf where the covariance has no Cholesky factor."""
    L, found = _cholesky(K)
    # L^-1 y, (W, n): each C-ordered factor read by BLAS as its transpose, without a copy
    v = np.array([dtrsv(factor.T, y, lower=0, trans=1) for factor in L])
    log_det = np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)
    ll = -0.5 * np.einsum("wi,wi->w", v, v) - log_det - 0.5 * len(y) * _LOG_2PI
    return np.where(found, ll, -np.inf)


def log_posterior(
    theta: np.ndarray, design: Design, y: np.ndarray, bounds: np.ndarray, noise_floor: float
) -> np.ndarray:
    """Log posterior (up to a constant) of each row of ``theta`` (W, p) given the normalised
    targets ``y`` at ``design``; the last column of ``theta`` is the log noise variance,
    floored by ``noise_floor``. Rows outside ``bounds`` get -inf without a likelihood."""
    lp = log_prior(theta, bounds)
    inside = np.flatnonzero(np.isfinite(lp))
    if len(inside):
        t = theta[inside]
        K = design.gram(t)
        K[:, np.arange(design.n), np.arange(design.n)] += (np.exp(t[:, -1]) + noise_floor)[:, None]
        lp[inside] += _log_likelihood(K, y)
    return lp
