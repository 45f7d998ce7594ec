"""Ridge regression of the job time, the ML model of Guindani et al.'s hybrid BO.

The paper (Sec. 4) fits ``T_hat(x) = x^T beta`` by Ridge regression on every configuration
run so far, retrained at each iteration, following Maros et al. (2019) who found Ridge the
most accurate model of Spark job times. Our features (a *choice*, the paper gives none beyond
"x"): for every ordered numeric dimension with positive values (VM or core counts, RAM) both
the value ``v`` and its reciprocal ``1/v`` — an Amdahl-like ``a + b v + c / v`` time law —
and one-hot columns for categorical dimensions. Columns are standardised before the fit so
that one penalty ``alpha`` suits every dimension.

References:
    [Guindani] Guindani, Ardagna, Guglielmi. Bayesian optimization for cloud resource
        management through machine learning. Sec. 3 (T_hat retrained each iteration), Sec. 4
        (Ridge).
    [Maros19] Maros et al. Machine learning for performance prediction of Spark cloud
        applications. IEEE CLOUD 2019.
"""

from __future__ import annotations

import copy

import numpy as np
from sklearn.linear_model import Ridge

from optfarm.oracle.space import SearchSpace

__all__ = ["RidgeModel", "reciprocal_features"]


def reciprocal_features(space: SearchSpace) -> np.ndarray:
    """(n_configs, p) design matrix of the time model: ``v`` and ``1/v`` for each ordered
    dimension whose values are positive numbers, one-hot columns for the other dimensions
    (categorical, or ordinal with non-positive values: their [0, 1] encoding)."""
    columns = []
    for d in space.dimensions:
        values = np.asarray(space.configs[d.name])
        numeric = d.kind != "categorical" and all(
            isinstance(v, (int, float, np.integer, np.floating))
            and not isinstance(v, bool)
            and v > 0
            for v in d.values
        )
        if numeric:
            v = values.astype(float)
            columns += [v[:, None], 1.0 / v[:, None]]
        else:
            columns.append(d.encode(values))
    return np.hstack(columns) if columns else np.zeros((space.n_configs, 0))


class RidgeModel:
    """Ridge regression with standardised inputs (scikit-learn ``Ridge``), under the
    surrogate protocol: ``fit(X, y)``, ``predict(X) -> (mean, std)``, ``with_points``.

    ``std`` is the root-mean-square training residual (the same for every input): Ridge has
    no predictive variance of its own, and the hybrid BO uses only the mean.
    """

    def __init__(self, alpha: float = 1.0):
        if not alpha >= 0:
            raise ValueError(f"RidgeModel: alpha must be >= 0, got {alpha!r}")
        self.alpha = alpha

    def fit(self, X, y) -> RidgeModel:
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        if X.ndim != 2 or y.shape != (len(X),) or len(X) == 0:
            raise ValueError(
                f"RidgeModel.fit: X must be (n, p) and y (n,) with n >= 1, got "
                f"{X.shape} and {y.shape}"
            )
        if not (np.isfinite(X).all() and np.isfinite(y).all()):
            raise ValueError("RidgeModel.fit: X and y must be finite")
        self.X_, self.y_ = X, y
        self.loc_ = X.mean(axis=0)
        spread = X.std(axis=0)
        self.scale_ = np.where(spread > 0, spread, 1.0)
        self.ridge_ = Ridge(alpha=self.alpha).fit((X - self.loc_) / self.scale_, y)
        resid = y - self.ridge_.predict((X - self.loc_) / self.scale_)
        self.rmse_ = float(np.sqrt(np.mean(resid**2)))
        return self

    def predict(self, X) -> tuple[np.ndarray, np.ndarray]:
        if not hasattr(self, "ridge_"):
            raise RuntimeError("RidgeModel.predict called before fit")
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != len(self.loc_):
            raise ValueError(
                f"RidgeModel.predict: expected (n, {len(self.loc_)}) inputs, got {X.shape}"
            )
        mean = self.ridge_.predict((X - self.loc_) / self.scale_)
        return mean, np.full(len(X), self.rmse_)

    def with_points(self, X, y) -> RidgeModel:
        """A copy refitted on the training data plus (X, y); this model is unchanged."""
        return copy.copy(self).fit(
            np.vstack([self.X_, np.asarray(X, dtype=float)]),
            np.concatenate([self.y_, np.asarray(y, dtype=float)]),
        )
