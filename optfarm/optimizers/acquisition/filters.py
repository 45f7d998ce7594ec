"""Filters: which of the untested (x, s) pairs an expensive acquisition is evaluated on
[TrimTuner Sec. III-B, Sec. IV-B].

Every filter works on the finite candidate set (rows of a feature matrix) and spends at most
``k = max(1, ceil(beta x n))`` acquisition evaluations, and at most ``most`` when given (the
papers' tables never reach TrimTuner's cap: 10% of 1,440 (x, s) pairs is 144):

- ``cea``: the k candidates with the largest Constrained Expected Accuracy
  CEA(x, s) = A(x, s) x P(constraints hold at (x, s)) (cheap: model means only).
- ``random``: k candidates drawn uniformly (the optimizer's generator).
- ``none``: every candidate.
- ``direct`` / ``cmaes``: the black-box optimizers FABOLAS uses to maximise its acquisition
  (DIRECT, scipy.optimize.direct; CMA-ES, the ``cma`` package) run on the continuous box
  spanned by the candidates' features; each point they ask for is snapped to the nearest
  candidate (Euclidean in feature space), and they stop once k distinct candidates have been
  evaluated. The acquisition is what they maximise, so the subset is what they visited.

``select`` returns the evaluated candidate indices and their acquisition values; the caller
takes the argmax. ``evaluate(indices) -> values`` is batched (CMA-ES hands over a whole
population at a time, so it can go through the optimizer's executor).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..seeds import drawn_seed

__all__ = ["FILTERS", "n_selected", "cea", "select"]

FILTERS = ("cea", "direct", "cmaes", "random", "none")


def n_selected(n: int, beta: float, most: int | None = None) -> int:
    """Number of candidates a filter keeps out of n: max(1, ceil(beta n)), at most n and at
    most ``most`` (None: no cap)."""
    k = min(n, max(1, math.ceil(beta * n - 1e-9)))
    return k if most is None else max(1, min(k, most))


def cea(quality, log_pf):
    """CEA = predicted quality (accuracy) x probability of feasibility [TrimTuner Eq. 6]."""
    return np.asarray(quality, dtype=float) * np.exp(log_pf)


def select(
    method: str,
    features: np.ndarray,
    beta: float,
    evaluate: Callable[[np.ndarray], np.ndarray],
    rng: np.random.Generator,
    scores: np.ndarray | None = None,
    most: int | None = None,
):
    """Evaluate the acquisition on the subset of candidates (rows of ``features``) chosen by
    ``method``; returns (indices, values). ``scores`` are the CEA values (method ``cea``);
    ``most`` caps the evaluations (``n_selected``)."""
    n = len(features)
    k = n_selected(n, beta, most)
    if method == "none":
        idx = np.arange(n)
    elif method == "random":
        idx = np.sort(rng.choice(n, size=k, replace=False))
    elif method == "cea":
        if scores is None or len(scores) != n:
            raise ValueError("filter 'cea' needs one CEA score per candidate")
        idx = np.sort(np.argsort(-np.asarray(scores), kind="stable")[:k])
    elif method in ("direct", "cmaes"):
        return _search(method, np.asarray(features, dtype=float), k, evaluate, rng)
    else:
        raise ValueError(f"unknown filter {method!r} (filters: {', '.join(FILTERS)})")
    return idx, np.asarray(evaluate(idx), dtype=float)


class _Budget(Exception):
    """Raised inside DIRECT's callback once k distinct candidates were evaluated."""


def _search(method, features, k, evaluate, rng):
    lo, hi = features.min(axis=0), features.max(axis=0)
    free = hi > lo  # constant columns carry no information
    span = np.where(free, hi - lo, 1.0)
    unit = (features - lo) / span

    snap = _Snap(unit, free)
    seen: dict[int, float] = {}

    def values_of(idx):
        new = [int(i) for i in dict.fromkeys(idx.tolist()) if int(i) not in seen]
        new = new[: max(k - len(seen), 0)]
        if new:
            seen.update(zip(new, np.asarray(evaluate(np.array(new)), dtype=float).tolist()))
        return np.array([seen.get(int(i), -np.inf) for i in idx])

    dim = int(free.sum())
    if dim == 0:  # every candidate looks the same
        values_of(np.array([0]))
        return _finish(seen)
    if method == "direct":
        _direct(lambda x: values_of(snap(x)), seen, k, dim)
    else:
        _cmaes(lambda xs: values_of(snap(xs)), seen, k, dim, rng)
    return _finish(seen)


class _Snap:
    """The nearest candidate (Euclidean over the ``free`` columns of the unit-scaled features
    ``unit``) to each point, the first row on a tie, as an argmin over every row would give.
    One matrix-vector product gives every squared distance up to rounding (|u|^2 - 2 u.p +
    |p|^2); the rows within rounding of the least then get theirs as that argmin computes
    them. Memory is O(rows), and a point costs one pass over the features, not three."""

    def __init__(self, unit: np.ndarray, free: np.ndarray):
        self.unit, self.free = unit, free
        self.U = np.ascontiguousarray(unit[:, free])
        self.norms = np.einsum("ij,ij->i", self.U, self.U)
        self.tol = 1e-9 * (1.0 + float(self.norms.max(initial=0.0)))

    def __call__(self, points) -> np.ndarray:
        return np.array([self._nearest(p) for p in np.atleast_2d(points)])

    def _nearest(self, point: np.ndarray) -> int:
        size = float(point @ point)
        approx = self.norms - 2.0 * (self.U @ point) + size
        near = np.flatnonzero(approx <= approx.min() + self.tol * (1.0 + size))
        full = np.zeros(self.unit.shape[1])
        full[self.free] = point
        return int(near[np.argmin(((self.unit[near] - full) ** 2)[:, self.free].sum(-1))])


def _direct(values_at, seen: dict, k: int, dim: int) -> None:
    """DIRECT (locally biased) over the unit box until ``k`` candidates are evaluated."""
    from scipy.optimize import direct

    def f(x):
        if len(seen) >= k:
            raise _Budget
        v = values_at(x)[0]
        return -v if np.isfinite(v) else 0.0

    try:
        direct(f, [(0.0, 1.0)] * dim, maxfun=50 * k + 100, locally_biased=True)
    except _Budget:
        pass


def _cmaes(values_at, seen: dict, k: int, dim: int, rng) -> None:
    """CMA-ES over the unit box, restarted from a random point when it stops, until ``k``
    candidates are evaluated or 50 generations in a row find none new."""
    import cma

    es = cma.CMAEvolutionStrategy(
        np.full(dim, 0.5),
        0.3,
        {"bounds": [0.0, 1.0], "verbose": -9, "seed": drawn_seed(rng, 2**31 - 1, 1)},
    )
    stalls = 0
    while len(seen) < k and stalls < 50:
        before = len(seen)
        xs = es.ask()
        v = values_at(np.array(xs))
        es.tell(xs, [-(x if np.isfinite(x) else 0.0) for x in v])
        stalls = stalls + 1 if len(seen) == before else 0
        if es.stop():
            es = cma.CMAEvolutionStrategy(
                rng.random(dim),
                0.3,
                {"bounds": [0.0, 1.0], "verbose": -9, "seed": drawn_seed(rng, 2**31 - 1, 1)},
            )


def _finish(seen):
    idx = np.array(sorted(seen), dtype=np.int64)
    return idx, np.array([seen[i] for i in idx.tolist()], dtype=float)
