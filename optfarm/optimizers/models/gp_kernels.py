"""The GP's kernel compiled (numba), computed as george computes it, to the last bit, on every
machine.

The kernel is ``gp.GaussianProcess``'s: ``amp * k52(x, x') * (1 + b phi(s) phi(s'))`` with ARD
squared length scales M_j [Klein17, Sec. 3.2]. george evaluates it in C++ through its kernel
tree, one pair of rows at a time: r^2 = sum_j (a_j - b_j)^2 exp(-log M_j) in axis order,
r = sqrt(5 r^2), the Matern 5/2 ``(1 + r + 5 r^2 / 3) exp(-r)``, times the amplitude, times
``1 + b (phi phi')`` with a basis; every exponential is the C library's ``exp``. ``cross``
does the same operations in the same order, its exponentials the C library's too (numba
calls it, as Python's ``math.exp`` does), so its values equal george's bit for bit
(tests/optimizers/test_gp.py). NumPy's ``exp`` would not do: on a CPU with AVX-512 it takes a
vectorised ``exp`` that differs from the C library's in the last bit for about 5% of
arguments, and a different last bit can move an argmax, and a paper's run with it.

The predictions at every configuration of a large table ask for (training points x rows)
kernel blocks under every hyperparameter sample at each step; ``cross`` gives all samples in
one compiled pass, without george's per-pair calls through its kernel tree. emcee's walkers ask
for the square matrices of the training inputs under every walker of a half-step
(``gp_posterior``); ``gram`` gives them, each pair computed once and mirrored, the values
``cross`` gives for the same inputs.

References:
    [Klein17] Klein et al. FABOLAS. AISTATS 2017, Sec. 3.2.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

__all__ = ["cross", "diagonal", "gram"]


def _scalars(theta: np.ndarray, n_x: int, basis: bool) -> tuple[np.ndarray, ...]:
    """Per sample: the amplitude, the inverse squared length scales and the basis weight b,
    each exponentiated as george's kernels do when their parameters are set (the C
    library's ``exp``: ``math.exp``)."""
    amp = np.array([math.exp(t) for t in theta[:, 0]])
    inv = np.array([[math.exp(-t) for t in row] for row in theta[:, 1 : 1 + n_x]])
    b = np.array([math.exp(t) for t in theta[:, 1 + n_x]]) if basis else np.empty(0)
    return amp, inv.reshape(len(theta), n_x), b


@nb.njit(cache=True, inline="always")
def _matern52(amp, r2):  # pragma: no cover - compiled
    """``amp`` times the Matern 5/2 at the scaled squared distance ``r2``, in george's order
    of operations: r = sqrt(5 r^2), ``(1 + r + 5 r^2 / 3) exp(-r)``."""
    r = math.sqrt(5.0 * r2)
    return amp * ((1.0 + r + 5.0 * r2 / 3.0) * math.exp(-r))


@nb.njit(cache=True)
def _cross(A, BT, n_x, amp, inv, b, out):  # pragma: no cover - compiled
    """``out[w, i, k]`` = k(A[i], B[k]) under sample w, ``BT`` = B transposed (columns x
    rows). Each value's sum over the inputs runs in george's order; the loops run over B's
    rows innermost, so the CPU adds many values' terms at once, each its own sum."""
    basis = len(b) > 0
    r2 = np.empty(BT.shape[1])
    for w in range(len(amp)):
        for i in range(A.shape[0]):
            r2[:] = 0.0
            for j in range(n_x):
                a, v, column = A[i, j], inv[w, j], BT[j]
                for k in range(len(r2)):
                    d = a - column[k]
                    r2[k] += d * d * v
            for k in range(len(r2)):
                value = _matern52(amp[w], r2[k])
                if basis:
                    value = value * (1.0 + b[w] * (A[i, n_x] * BT[n_x, k]))
                out[w, i, k] = value


@nb.njit(cache=True)
def _gram(AT, n_x, amp, inv, b, out):  # pragma: no cover - compiled
    """``out[w]`` = k(A, A) under sample w, ``AT`` = A transposed: the lower triangle computed
    as ``_cross`` computes it (the pair's squared differences are the same either way round),
    then mirrored."""
    basis = len(b) > 0
    n = AT.shape[1]
    r2 = np.empty(n)
    for w in range(len(amp)):
        for i in range(n):
            r2[: i + 1] = 0.0
            for j in range(n_x):
                a, v, column = AT[j, i], inv[w, j], AT[j]
                for k in range(i + 1):
                    d = a - column[k]
                    r2[k] += d * d * v
            for k in range(i + 1):
                value = _matern52(amp[w], r2[k])
                if basis:
                    value = value * (1.0 + b[w] * (AT[n_x, i] * AT[n_x, k]))
                out[w, i, k] = value
        for i in range(n):
            for k in range(i):
                out[w, k, i] = out[w, i, k]


def cross(theta: np.ndarray, A: np.ndarray, B: np.ndarray, basis: bool) -> np.ndarray:
    """The kernel k(A, B) (W, len(A), len(B)) under each row of ``theta`` (W, p), from the
    transformed inputs ``A`` and ``B`` (``basis``: their last column is the basis feature),
    without the noise: george's values."""
    theta = np.atleast_2d(np.asarray(theta, dtype=float))
    n_x = A.shape[1] - (1 if basis else 0)
    out = np.empty((len(theta), len(A), len(B)))
    A = np.ascontiguousarray(A, dtype=float)
    BT = np.ascontiguousarray(np.asarray(B, dtype=float).T)
    _cross(A, BT, n_x, *_scalars(theta, n_x, basis), out)
    return out


def gram(theta: np.ndarray, A: np.ndarray, basis: bool) -> np.ndarray:
    """``cross(theta, A, A, basis)``, symmetric by construction, at half the kernel
    evaluations: the Gram matrices (W, len(A), len(A)) of the transformed inputs ``A``."""
    theta = np.atleast_2d(np.asarray(theta, dtype=float))
    n_x = A.shape[1] - (1 if basis else 0)
    out = np.empty((len(theta), len(A), len(A)))
    AT = np.ascontiguousarray(np.asarray(A, dtype=float).T)
    _gram(AT, n_x, *_scalars(theta, n_x, basis), out)
    return out


def diagonal(theta: np.ndarray, A: np.ndarray, basis: bool) -> np.ndarray:
    """k(a, a) (W, len(A)) at each row of ``A`` under each row of ``theta``: the amplitude
    (the Matern part is 1 at distance 0), times ``1 + b phi(s)^2`` with a basis."""
    theta = np.atleast_2d(np.asarray(theta, dtype=float))
    n_x = A.shape[1] - (1 if basis else 0)
    amp, _, b = _scalars(theta, n_x, basis)
    K = np.repeat(amp[:, None], len(A), axis=1)
    if basis:
        K *= 1.0 + b[:, None] * (A[:, -1] * A[:, -1])[None]
    return K
