"""Posterior variances kept over a fixed table of candidates, for a GP whose hyperparameter
samples stay the same from one fit to the next (``gp.py``, beyond ``LARGE_N`` observations).

A prediction at m candidates from n observations costs a triangular solve ``L^-1 k(X, Xq)``
(n^2 m per hyperparameter sample): at 9,216 configurations and n = 600 observations, 64% of an
EIc step. With the hyperparameters and the first n0 observations unchanged, the solve need
not be made again: partition the Cholesky factor of the n = n0 + k observations

    L = [[L11, 0], [L21, L22]],   L11 the factor of the first n0,

then ``V = L^-1 Ks`` is ``V1 = L11^-1 Ks1`` (the last fit's) over ``V2 = L22^-1 (Ks2 - B^T Ks1)``
with ``B = L11^-T L21^T`` (n0 x k), and the posterior variance ``k(x, x) - |V[:, x]|^2`` drops
by ``|V2[:, x]|^2`` [Rasmussen06, Sec. 2.2 and A.3, the partitioned inverse]. A fit appending
k observations then costs ``B^T Ks1`` (n0 k m) and a k x k solve, besides the kernel
``k(X, Xq)`` that the posterior mean needs anyway. (Entropy search's fantasies,
``gp_fantasy.py``, border the factor the same way for one hypothetical point, keeping ``V``
for a few hundred rows; here the rows are a whole table and only their variances are kept.)

The variances are kept unclamped in the model's normalised units (they do not depend on the
targets, only on the inputs and the hyperparameters), with the inputs and hyperparameters they
hold for; ``TableVariances.holds_for`` says whether a fit can update them. A factor that needed a
diagonal jitter (``linalg.cholesky_jittered``) is not the factor of the first n0 observations
under the same matrix: its variances are computed afresh.

References:
    [Rasmussen06] Rasmussen, Williams. Gaussian Processes for Machine Learning, 2006.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

__all__ = ["TableVariances", "variance_drop"]


@dataclass
class TableVariances:
    """The posterior variances ``variances`` (S, m) at the transformed table ``table`` (m, d)
    under the hyperparameter samples ``theta`` (S, p), given the transformed observations
    ``observed`` (n0, d), none of whose factors needed a jitter."""

    table: np.ndarray
    theta: np.ndarray
    observed: np.ndarray
    variances: np.ndarray

    def holds_for(self, table: np.ndarray, theta: np.ndarray, observed: np.ndarray) -> bool:
        """Whether these variances can be brought up to ``observed``: the same table and
        hyperparameters, and observations that begin with the ones they were computed from."""
        return (
            np.array_equal(table, self.table)
            and np.array_equal(theta, self.theta)
            and np.array_equal(observed[: len(self.observed)], self.observed)
        )


def variance_drop(L: np.ndarray, n0: int, Ks: np.ndarray) -> np.ndarray:
    """``|V2|^2`` per column: how much the posterior variances at the columns of ``Ks`` =
    k(X, Xq) (n, block) fall when the observations n0..n join the first n0, ``L`` the lower
    Cholesky factor of all n (module docstring)."""
    if n0 == len(L):
        return np.zeros(Ks.shape[1])
    B = solve_triangular(L[:n0, :n0], L[n0:, :n0].T, lower=True, trans="T")  # (n0, k)
    V2 = solve_triangular(L[n0:, n0:], Ks[n0:] - B.T @ Ks[:n0], lower=True)
    return np.einsum("ij,ij->j", V2, V2)
