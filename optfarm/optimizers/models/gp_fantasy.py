"""A fitted GP's posterior at fixed rows, and how one fantasised observation at a candidate
moves it: the closed-form rank-1 update entropy search's fantasies need [TrimTuner Sec. III-A,
Mendes19 Eq. 4.5], instead of refitting the Cholesky factors with the point added.

Adding the point x with target y to the training set borders the lower Cholesky factor L of
K + noise I (per hyperparameter sample) by one row ``(l^T, d)`` with

    l = L^-1 k(X, x),      d^2 = k(x, x) + noise - l^T l,

the rank-1 extension that leaves L itself unchanged. The posterior at a row q follows without
forming the new factor (Schur complement):

    c_q      = k(q, x) - V_q^T l                      (current posterior covariance of q and x)
    mean'(q) = mean(q) + c_q (y - mean(x)) / d^2
    var'(q)  = var(q) - c_q^2 / d^2

with V_q = L^-1 k(X, q). These are the posterior moments a refit on the n + 1 points with the
same hyperparameters gives (``GaussianProcess.with_points``), up to rounding, as long as the
model's factor needed no jitter. The same pieces give the candidates' covariances with the
rows, which the information gain about the representers (some of the rows) uses.

Usage::

    rows = RowPosterior(gp, X_rows)              # e.g. the representers, or a block of configs
    cands = CandidateCovariances(rows, X_chunk)  # once per chunk of candidates
    mean, std = cands.fantasy_predict(j, y, ids) # rows ``ids`` after observing y at X_chunk[j]

Memory is (samples x n x rows) for the rows and (samples x chunk x (n + rows)) for a chunk:
a caller with many rows hands them over in blocks (``trimtuner._factors_gp``).

Everything is on the model's normalised target scale inside; ``fantasy_predict`` returns
the model's units, averaged over hyperparameter samples as ``GaussianProcess.predict``.

References:
    [Rasmussen06] Rasmussen, Williams. Gaussian Processes for Machine Learning, Sec. 2.2, A.3.
    [TrimTuner] Mendes et al. TrimTuner, MASCOTS 2020, Sec. III-A.
    [Mendes19] P. Mendes, MSc thesis, IST 2019, ch. 4.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dtrtrs

from .gp import GaussianProcess, mixture_moments

__all__ = ["CandidateCovariances", "RowPosterior"]


def _solve_lower(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """L^-1 B for each sample: L (S, n, n) lower triangular (C-ordered), B (S, n, m). LAPACK's
    triangular solve called as ``scipy.linalg.solve_triangular(L_s, B_s, lower=True)`` calls
    it for a C-ordered factor (the transposed upper system), so the values are the same,
    without that function's checks, which cost more than the solve at these sizes."""
    out = np.empty(B.shape)
    for s, (L_s, B_s) in enumerate(zip(L, B)):
        out[s], info = dtrtrs(L_s.T, B_s, lower=0, trans=1)
        if info:
            raise np.linalg.LinAlgError(f"singular triangular factor (LAPACK info {info})")
    return out


class RowPosterior:
    """The posterior of ``gp`` at the rows ``X_rows`` per hyperparameter sample (normalised):
    ``V`` (S, n, q) = L^-1 k(X, rows), ``mean`` and ``var`` (S, q)."""

    def __init__(self, gp: GaussianProcess, X_rows: np.ndarray):
        X, self.L, self.alpha = gp.factors()
        self.gp, self.X_train, self.X_rows = gp, X, np.asarray(X_rows, dtype=float)
        K = gp.kernel_per_sample(X, self.X_rows)  # (S, n, q)
        self.V = _solve_lower(self.L, K)
        self.mean = np.einsum("snq,sn->sq", K, self.alpha)
        prior = gp.kernel_diagonal_per_sample(self.X_rows)
        self.var = prior - np.einsum("snq,snq->sq", self.V, self.V)


class CandidateCovariances:
    """Candidates' posterior (normalised, per sample) jointly with the rows of ``rows``:
    ``mean`` and ``var`` (S, C) of f at the candidates, ``cross`` (S, C, q) their covariance
    with the rows, ``d2`` (S, C) = var + noise (the bordered factor's new diagonal, squared)."""

    def __init__(self, rows: RowPosterior, X_cand: np.ndarray):
        gp = rows.gp
        X_cand = np.atleast_2d(np.asarray(X_cand, dtype=float))
        n, q = len(rows.X_train), len(rows.X_rows)
        K = gp.kernel_per_sample(X_cand, np.vstack([rows.X_train, rows.X_rows, X_cand]))
        l = _solve_lower(rows.L, K[:, :, :n].transpose(0, 2, 1))  # noqa: E741  (S, n, C): the docstring's l
        self.rows = rows
        self.mean = np.einsum("scn,sn->sc", K[:, :, :n], rows.alpha)
        self.var = np.diagonal(K[:, :, n + q :], axis1=1, axis2=2) - np.einsum("snc,snc->sc", l, l)
        self.d2 = self.var + gp.noise_[:, None]
        self.cross = K[:, :, n : n + q] - np.einsum("snc,snq->scq", l, rows.V)

    def scaled(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean, var, cross) in the model's units, per sample."""
        gp = self.rows.gp
        scale2 = gp.y_scale_**2
        return self.mean * gp.y_scale_ + gp.y_mean_, self.var * scale2, self.cross * scale2

    def fantasy_predict(self, j: int, y: float, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and std (model units, mixture over samples) of f at the rows ``ids`` after
        observing ``y`` (model units) at candidate ``j``, with the same hyperparameters."""
        gp, rows = self.rows.gp, self.rows
        c = self.cross[:, j, ids]  # (S, len(ids))
        y_n = (y - gp.y_mean_) / gp.y_scale_
        step = ((y_n - self.mean[:, j]) / self.d2[:, j])[:, None]
        mean = rows.mean[:, ids] + c * step
        var = np.maximum(rows.var[:, ids] - c * c / self.d2[:, j][:, None], 0.0)
        return mixture_moments(mean * gp.y_scale_ + gp.y_mean_, var * gp.y_scale_**2)
