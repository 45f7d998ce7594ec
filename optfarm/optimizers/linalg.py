"""Linear algebra the models and acquisition functions share: a Cholesky factor made to
succeed by a growing diagonal jitter, relative to the matrix's scale."""

from __future__ import annotations

import numpy as np

__all__ = ["cholesky_jittered", "cholesky_with_jitter", "diagonal_scale"]


def diagonal_scale(A: np.ndarray) -> float:
    """The scale jitter is relative to: the mean of diag(A), or 1 when it is not positive."""
    scale = float(np.mean(np.diag(A)))
    return scale if scale > 0 else 1.0


def cholesky_with_jitter(
    A: np.ndarray, what: str, jitter: float = 0.0, tries: int = 8
) -> np.ndarray:
    """Lower Cholesky factor of ``A + j I``, trying ``j = jitter x s`` first (s:
    ``diagonal_scale(A)``), then ``1e-10 s`` if that was 0, ten times more after each
    failure, ``tries`` attempts in all. Raises ``LinAlgError`` naming ``what`` when none
    succeeds (non-finite inputs, typically)."""
    return cholesky_jittered(A, what, jitter, tries)[0]


def cholesky_jittered(
    A: np.ndarray, what: str, jitter: float = 0.0, tries: int = 8
) -> tuple[np.ndarray, float]:
    """``cholesky_with_jitter`` and the jitter ``j`` it added (0: the factor of ``A``)."""
    scale = diagonal_scale(A)
    j = jitter * scale
    eye = np.eye(len(A))
    for _ in range(tries):
        try:
            return np.linalg.cholesky(A + j * eye), j
        except np.linalg.LinAlgError:
            j = 1e-10 * scale if j == 0.0 else 10.0 * j
    raise np.linalg.LinAlgError(
        f"{what} is not positive definite even with a jitter of {j / 10:.1e} (non-finite inputs?)"
    )
