"""Information gain about the location of the optimum at full data size (entropy search over
representer points), as used by FABOLAS [Klein17], TrimTuner [TrimTuner] and Fabulinus
[Mendes19].

p_max is the distribution of the argmin of f over a finite set of representer points R (here:
configurations at s = 1). We estimate it by **Monte Carlo** over joint posterior samples (not
EPMGP): ``M`` draws of f_R, counted by argmin. The gain of observing y at a candidate c is

    IG(c) = H[p_max] - E_y H[p_max | y],      H[p] = -sum_r p_r log p_r,

with the expectation over y ~ N(mu_c, var_c + noise) by Gauss-Hermite quadrature.

Two ways to get the conditioned samples, both with *common random numbers* (the same standard
normals for every candidate, so that differences between candidates are not Monte Carlo noise,
and a candidate that cannot move f_R gets exactly zero):

- GP (``information_gain_gp``): pathwise conditioning (Matheron's rule): draw joint samples of
  (f_R, y_c) from the current posterior, then ``f_R | y = f_R + C_Rc / (v_c + noise) (y - y_c)``.
  This is the closed-form rank-1 update of the GP posterior at the representer points.
- any model with ``with_points`` (``information_gain_refit``, the tree ensemble of
  TrimTuner-DT): refit with each fantasised y and treat the representer predictions as
  independent Gaussians N(mean_r, std_r).

References:
    [Hennig12] Hennig, Schuler. Entropy search for information-efficient global optimization.
        JMLR 2012.
    [Klein17] Klein et al. FABOLAS, AISTATS 2017, Sec. 3.3 (Eq. 3: IG per unit cost at s = 1).
    [TrimTuner] Mendes et al. TrimTuner, MASCOTS 2020, Sec. III-A (Eq. 5).
    [Mendes19] P. Mendes, MSc thesis, IST 2019, ch. 4 (constrained ES).
    [Wilson20] Wilson et al. Efficiently sampling functions from GP posteriors (pathwise
        conditioning). ICML 2020.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ..linalg import cholesky_with_jitter, diagonal_scale

__all__ = ["entropy", "joint_samples", "pmax_from_samples", "pmax_monte_carlo",
           "information_gain_gp", "information_gain_refit"]


def entropy(p, axis=-1):
    """Shannon entropy (nats) of the distribution(s) ``p`` along ``axis``; 0 log 0 = 0."""
    p = np.asarray(p, dtype=float)
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=axis)


def pmax_from_samples(F):
    """p_max from samples ``F`` (..., M, R): the fraction of the M draws in which each of the R
    representers is the minimum. Returns (..., R).

    Counted with one ``bincount`` over all leading sets (exact counts / M, the same values as
    averaging a (..., M, R) one-hot array, without building it: the hot path of TrimTuner's
    information gain)."""
    F = np.asarray(F)
    M, R = F.shape[-2], F.shape[-1]
    idx = np.argmin(F, axis=-1).reshape(-1, M)                 # (sets, M) winners
    offsets = R * np.arange(len(idx))[:, None]
    counts = np.bincount((idx + offsets).ravel(), minlength=len(idx) * R)
    return counts.reshape(F.shape[:-2] + (R,)) / M


_JITTER = 1e-10  # diagonal jitter of the representer covariance, relative to its scale


def _cholesky(cov):
    return cholesky_with_jitter(cov, "representer covariance", jitter=_JITTER, tries=10)


def joint_samples(mean, cov, z):
    """Samples mean + z A^T of N(mean, cov) with A A^T = cov from its eigendecomposition
    (robust for the rank-deficient covariance of many configurations); ``z`` (M, n) standard
    normals. LAPACK's default symmetric eigensolver can fail to converge on such matrices;
    the relatively robust representations driver (``evr``) is the fall-back."""
    cov = np.asarray(cov, dtype=float)
    cov = cov + _JITTER * diagonal_scale(cov) * np.eye(len(cov))
    try:
        w, V = np.linalg.eigh(cov)
    except np.linalg.LinAlgError:
        w, V = scipy.linalg.eigh(cov, driver="evr")
    return np.asarray(mean)[None, :] + (z * np.sqrt(np.maximum(w, 0.0))) @ V.T


def pmax_monte_carlo(mean, cov, z):
    """p_max of f_R ~ N(mean, cov) from the standard normals ``z`` (M, R) (common random
    numbers). Returns (R,)."""
    L = _cholesky(np.asarray(cov, dtype=float))
    return pmax_from_samples(np.asarray(mean)[None, :] + z @ L.T)


def information_gain_gp(mean_r, cov_r, cov_rc, mean_c, var_c, noise, z, e, t, w):
    """IG about argmin_R f for each candidate c, under one GP posterior (one hyperparameter
    sample), by pathwise conditioning.

    Args:
        mean_r, cov_r: (R,), (R, R) posterior of f at the representers.
        cov_rc: (R, C) posterior covariance between representers and candidates.
        mean_c, var_c: (C,) posterior mean and variance of f at the candidates.
        noise: observation noise variance (scalar or (C,)).
        z: (M, R) standard normals for f_R; e: (M, C) standard normals for y_c (column c is
            candidate c's own stream, so the result does not depend on batching).
        t, w: Gauss-Hermite nodes / weights for a standard normal (``gauss_hermite``).
    Returns:
        (C,) information gains, >= 0 up to Monte Carlo error, exactly 0 when cov_rc[:, c] = 0.
    """
    L = _cholesky(np.asarray(cov_r, dtype=float))
    F = mean_r[None, :] + z @ L.T                                      # (M, R)
    h0 = entropy(pmax_from_samples(F))
    a = np.linalg.solve(L, cov_rc)                                     # (R, C): L^-1 C_Rc
    var_y = var_c + noise
    resid = np.sqrt(np.maximum(var_y - np.sum(a * a, axis=0), 0.0))    # (C,)
    y_sample = mean_c[None, :] + z @ a + resid[None, :] * e            # (M, C) joint with F
    gains = np.empty(len(mean_c))
    for c in range(len(mean_c)):
        gain_vec = cov_rc[:, c] / var_y[c]                              # (R,)
        y_nodes = mean_c[c] + np.sqrt(var_y[c]) * t                    # (K,)
        shift = y_nodes[:, None] - y_sample[None, :, c]                # (K, M)
        Fy = F[None, :, :] + shift[:, :, None] * gain_vec[None, None, :]
        gains[c] = h0 - np.dot(w, entropy(pmax_from_samples(Fy)))
    return gains


def information_gain_refit(model, x_c, mean_c, std_c, X_r, z, t, w):
    """IG about argmin_R for one candidate of a model without a joint posterior (the tree
    ensemble): for each Gauss-Hermite value y_k = mean_c + std_c t_k, refit
    ``model.with_points(x_c, y_k)`` and take p_max of independent N(mean_r, std_r) with the
    common normals ``z`` (M, R)."""
    m0, s0 = model.predict(X_r)
    h0 = entropy(pmax_from_samples(m0[None, :] + s0[None, :] * z))
    h = np.empty(len(t))
    for k, tk in enumerate(t):
        m, s = model.with_points(np.atleast_2d(x_c), [mean_c + std_c * tk]).predict(X_r)
        h[k] = entropy(pmax_from_samples(m[None, :] + s[None, :] * z))
    return float(h0 - np.dot(w, h))
