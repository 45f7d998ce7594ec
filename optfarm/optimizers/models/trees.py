"""Bagging ensemble of randomized regression trees with Gaussian predictions.

Each tree is an unpruned extremely-randomized tree [Geurts06] grown on a bootstrap resample
of the training set; the prediction at x is N(mean, std) of the per-tree outputs, with a small
std floor where all trees agree. This is the cost model of Lynceus [Lynceus Sec. IV-A] (10
trees) and Nephele [Mendes19 ch. 3] (5 trees).

The trees are a compact numba implementation, not scikit-learn: the Lynceus look-ahead refits
the model thousands of times per step (once per fantasised point), and a refit plus a
prediction over every candidate must take microseconds. Trees are grown with the queries
routed along (no node is stored); each tree keeps the leaf of every query and training row,
so that a fantasised point is added by a *cheap refit* (``insert_point``): the point joins
each tree's bootstrap with a Poisson(1) multiplicity and only the leaf it falls in is regrown
(the splits above are kept, as in online random forests). Randomness comes from a
counter-based generator (splitmix64) keyed by an integer, so a fit is a pure function of
(X, y, key): the same key gives the same forest whatever process computes it.
The kernels also grow Weka-style RandomTrees (``best_split``: the best midpoint among K random
features, the trees of the Lynceus authors' code); Lynceus exposes them as ``trees=random``.

References:
    [Geurts06] Geurts, Ernst, Wehenkel. Extremely randomized trees. Machine Learning 2006.
    [Lynceus] Casimiro et al. Lynceus, ICDCS 2020, Sec. IV-A.
    [Mendes19] P. Mendes, MSc thesis, IST 2019, ch. 3 (Nephele).
"""

from __future__ import annotations

import math

import numpy as np

from .tree_kernels import forest_outputs, gaussian_summary, std_floor

__all__ = ["TreeEnsemble", "default_max_features"]


def default_max_features(d: int, max_features: int | None = None) -> int:
    """Features tried per split: ``max_features`` or Weka RandomTree's floor(log2 d) + 1."""
    if max_features is not None:
        return max(1, int(max_features))
    return int(math.log2(d)) + 1 if d > 0 else 1


class TreeEnsemble:
    """Bagging ensemble of extra-trees with Gaussian predictions (the model protocol:
    ``fit``, ``predict -> (mean, std)``, ``predict_rows``, ``with_points``).

    Args:
        n_trees: ensemble size (Lynceus 10, Nephele 5).
        max_features: features tried per split (None: floor(log2 d) + 1, the default of
            Weka's RandomTree that Lynceus used).
        std_floor: the predictive std is at least this fraction of the targets' std.
        seed: integer key of the forest's randomness; a fit is a pure function of
            (X, y, seed).
    """

    def __init__(
        self,
        n_trees: int = 10,
        max_features: int | None = None,
        std_floor: float = 1e-3,
        seed: int = 0,
    ):
        if n_trees < 1:
            raise ValueError(f"n_trees must be >= 1, got {n_trees}")
        self.n_trees = int(n_trees)
        self.max_features = max_features
        self.std_floor = float(std_floor)
        self.seed = int(seed) & 0xFFFFFFFFFFFFFFFF

    def fit(self, X, y) -> TreeEnsemble:
        X = np.ascontiguousarray(X, dtype=float)
        y = np.ascontiguousarray(y, dtype=float)
        if X.ndim != 2 or y.shape != (X.shape[0],) or len(y) == 0:
            raise ValueError(
                f"fit needs X (n, d) and y (n,) with n >= 1, got {X.shape} and {y.shape}"
            )
        if not (np.isfinite(X).all() and np.isfinite(y).all()):
            raise ValueError("fit: X and y must be finite")
        self.X_, self.y_ = X, y
        self.floor_ = std_floor(y, len(y), self.std_floor)
        return self

    def tree_outputs(self, Q) -> np.ndarray:
        """(n_trees, len(Q)) per-tree predictions at the rows of Q."""
        if not hasattr(self, "X_"):
            raise RuntimeError("TreeEnsemble.predict called before fit")
        Q = np.ascontiguousarray(Q, dtype=float)
        if Q.ndim != 2 or Q.shape[1] != self.X_.shape[1]:
            raise ValueError(f"predict: expected {self.X_.shape[1]} features, got shape {Q.shape}")
        out = np.empty((self.n_trees, len(Q)))
        forest_outputs(
            self.X_,
            self.y_,
            len(self.y_),
            np.uint64(self.seed),
            self.n_trees,
            default_max_features(self.X_.shape[1], self.max_features),
            Q,
            out,
        )
        return out

    def predict(self, Q):
        """Predictive (mean, std) at the rows of Q, each of shape (len(Q),)."""
        out = self.tree_outputs(Q)
        mean, std = np.empty(out.shape[1]), np.empty(out.shape[1])
        gaussian_summary(out, self.floor_, mean, std)
        return mean, std

    def predict_rows(self, table, rows):
        """``predict(table[rows])``: the trees keep nothing of it from one fit to the next."""
        return self.predict(np.asarray(table)[rows])

    def with_points(self, X, y) -> TreeEnsemble:
        """A copy refitted on the training set plus the (fantasised) points (X, y)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        clone = TreeEnsemble(self.n_trees, self.max_features, self.std_floor, self.seed)
        return clone.fit(np.vstack([self.X_, X]), np.concatenate([self.y_, np.ravel(y)]))
