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
  This is the closed-form rank-1 update of the GP posterior at the representer points. The
  draws of f_R are shared by every candidate (``RepresenterDraws``); the argmin counts over
  the K x M conditioned draws are one numba pass (``winner_counts``) that builds none of
  them.
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

from dataclasses import dataclass

import numba as nb
import numpy as np
import scipy.linalg

from ..linalg import cholesky_with_jitter, diagonal_scale

__all__ = [
    "RepresenterDraws",
    "entropy",
    "information_gain_gp",
    "information_gain_refit",
    "joint_samples",
    "pmax_from_samples",
    "pmax_monte_carlo",
    "winner_counts",
]


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
    idx = np.argmin(F, axis=-1).reshape(-1, M)  # (sets, M) winners
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


@dataclass(frozen=True)
class RepresenterDraws:
    """Joint draws of f at the representers under one posterior (one hyperparameter sample),
    shared by every candidate: ``F = mean_r + z L^T`` (M, R) from the common normals ``z``
    (M, R) and the Cholesky factor ``L`` of the representer covariance, each row's argsort
    ``order``, and ``h0``, the entropy of their p_max."""

    L: np.ndarray
    z: np.ndarray
    F: np.ndarray
    order: np.ndarray
    h0: float

    @classmethod
    def of(cls, mean_r, cov_r, z) -> RepresenterDraws:
        L = _cholesky(np.asarray(cov_r, dtype=float))
        F = np.asarray(mean_r)[None, :] + z @ L.T
        return cls(L, z, F, np.argsort(F, axis=1), float(entropy(pmax_from_samples(F))))


def information_gain_gp(draws, cov_rc, mean_c, var_c, noise, e, t, w):
    """IG about argmin_R f for each candidate c, under one GP posterior (one hyperparameter
    sample), by pathwise conditioning.

    Args:
        draws: ``RepresenterDraws`` of f at the representers under this posterior.
        cov_rc: (R, C) posterior covariance between representers and candidates.
        mean_c, var_c: (C,) posterior mean and variance of f at the candidates.
        noise: observation noise variance (scalar or (C,)).
        e: (M, C) standard normals for y_c (column c is candidate c's own stream, so the
            result does not depend on batching).
        t, w: Gauss-Hermite nodes / weights for a standard normal (``gauss_hermite``).
    Returns:
        (C,) information gains, >= 0 up to Monte Carlo error, exactly 0 when cov_rc[:, c] = 0.
    """
    a = np.linalg.solve(draws.L, cov_rc)  # (R, C): L^-1 C_Rc
    var_y = var_c + noise
    resid = np.sqrt(np.maximum(var_y - np.sum(a * a, axis=0), 0.0))  # (C,)
    y_sample = mean_c[None, :] + draws.z @ a + resid[None, :] * e  # (M, C) joint with F
    gain = (cov_rc / var_y).T  # (C, R)
    y_nodes = mean_c[:, None] + np.sqrt(var_y)[:, None] * t[None, :]  # (C, K)
    counts = winner_counts(draws.F, draws.order, np.ascontiguousarray(y_sample.T), y_nodes, gain)
    h = entropy(counts / len(draws.F))  # (C, K)
    return np.array([draws.h0 - np.dot(w, h_c) for h_c in h])


@nb.njit(cache=True)
def winner_counts(F, order, y_sample, y_nodes, gain):
    """How often each representer is the minimum of the conditioned draws: for candidate c
    and node k, ``counts[c, k, r]`` is the number of draws m whose minimum of
    ``F[m] + (y_nodes[c, k] - y_sample[c, m]) gain[c]`` is at r (the first one on a tie, as
    ``np.argmin``), without the (K, M, R) array of conditioned draws.

    Each value is computed as that array's would be, so the counts are the same. Per draw,
    the representers are visited in increasing ``F[m]`` (``order``) and the visit stops once
    ``F[m, r]`` plus the least the shift can add, ``min(u g_min, u g_max)``, exceeds the best
    value found: rounding is monotone, so no later representer can win or tie.

    Args: F (M, R) draws at the representers and ``order`` (M, R) each row's argsort;
    y_sample (C, M) the joint draws of each candidate's observation; y_nodes (C, K) the
    quadrature values of the observation; gain (C, R) the pathwise-conditioning gain
    C_Rc / var_y of each candidate."""
    M, R = F.shape
    C, K = y_nodes.shape
    counts = np.zeros((C, K, R), dtype=np.int64)
    for c in range(C):
        g_min, g_max = gain[c].min(), gain[c].max()
        for m in range(M):
            for k in range(K):
                u = y_nodes[c, k] - y_sample[c, m]
                least = min(u * g_min, u * g_max)
                best, arg = np.inf, 0
                for j in range(R):
                    r = order[m, j]
                    f = F[m, r]
                    if f + least > best:
                        break
                    v = f + u * gain[c, r]
                    if v < best or (v == best and r < arg):
                        best, arg = v, r
                counts[c, k, arg] += 1
    return counts


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
