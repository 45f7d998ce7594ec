"""Gaussian-process regression with george kernels, fitted by maximum likelihood or sampled
by emcee MCMC over the kernel hyperparameters.

Usage::

    from optfarm.optimizers.models.gp import GaussianProcess

    gp = GaussianProcess(basis="loss", hyper="mcmc", seed=3)   # FABOLAS kernel, MCMC
    gp.fit(X, y)                        # X (n, d); with ``basis`` the LAST column is s in [0, 1]
    mean, std = gp.predict(Xq)          # latent f, averaged over hyperparameter samples
    mean, cov = gp.predict_joint(R)     # joint moments (representer points)
    means, covs = gp.predict_per_sample(R, full_cov=True)  # one row per hyperparameter sample
    fantasy = gp.with_points(Xf, yf)    # conditioned copy, same hyperparameters (no refit)

Model. ``f ~ GP(0, k)`` on targets normalised to zero mean / unit variance, ``y = f + eps``,
``eps ~ N(0, noise)``. The kernel is an amplitude times a Matern 5/2 kernel with one length
scale per input dimension (ARD). With ``basis`` set, the last input column is the dataset
size s (normalised log2 scale, 1 = full data) and the kernel is FABOLAS' product kernel
[Klein17, Sec. 3.2] ``amp * k52(x, x') * phi(s)^T diag(1, b) phi(s')`` with
``phi(s) = (1, (1 - s)^2)`` for a loss (``basis="loss"``) or ``(1, s)`` for a cost
(``basis="cost"``); the first basis weight is fixed to 1 (the amplitude already scales it).

Hyperparameters (all in log space): log amplitude, log squared length scale per Matern
dimension (george's ``metric``), [log b], log noise variance. Priors as in RoBO/FABOLAS
[Klein17]: log-normal(0, 1) amplitude, flat length scales and b within bounds, horseshoe noise
(scale 0.1). ``hyper="ml"`` maximises log marginal likelihood + log prior (MAP, i.e. maximum
likelihood regularised by those weak priors) with scipy L-BFGS-B, from the previous optimum
plus ``n_restarts`` random starts drawn with the model's own generator. ``hyper="mcmc"``
runs emcee's affine-invariant ensemble [Foreman-Mackey13] with ``n_walkers`` walkers (default
3 x #hyperparameters, rounded up to even), ``burn_in`` steps on the first fit and
``chain_length`` steps on every fit (warm-started from the last positions on refits), and keeps
each walker's final position as one hyperparameter sample (TrimTuner/RoBO: 100 / 100); emcee
asks for all the walkers' log posteriors of a step in one NumPy call (``gp_posterior``), which
george's kernels (``_log_posterior``) check. Predictions average over samples: mean of means,
variance = mean of variances + variance of means.

Beyond ``LARGE_N`` = 100 observations (more than any run of the papers' tables makes; a
board's runs on large tables make hundreds) a step would cost tens of CPU-seconds, as every
walker is a sample and is re-sampled at every observation (an EIc step at n = 250 on 9,216
configurations: 44 CPU-s). There the MCMC model keeps ``LARGE_N_SAMPLES`` of the walkers'
positions, evenly spaced, as Spearmint's integrated EI [Snoek12] keeps 10 samples, and
re-samples its hyperparameters only once the observations have grown by ``RESAMPLE_GROWTH``
since the last sampling: in between the kept samples are conditioned on every observation (the
exact posterior under them), as the hyperparameters' posterior moves little with one more
point among hundreds (docs/results/gp-fits.md, "Large n"). While the samples are kept,
``predict_rows`` keeps the posterior variances at every row of a caller's table too and
brings them up to date at the next fit by the observations appended (``gp_table.py``): the
kernel between the observations and the table instead of a triangular solve with it (an EIc
step at its 1,006th evaluation on 9,216 configurations: 10.8 -> 3.5 CPU-s, the same choices;
docs/results/gp-fits.md, "Kept variances").

The conditioning and the predictions compute the kernel with ``gp_kernels.cross`` (compiled,
george's values to the last bit on every CPU, without george's per-pair calls through its
kernel tree); the maximum-likelihood fit and the reference log posterior call george's kernels
(with their gradients).

Numerical safety: a noise floor ``noise_floor`` and an escalating diagonal jitter make the
Cholesky factorisation succeed with duplicate inputs; constant targets are normalised with
scale 1.

References:
    [Klein17] Klein et al. Fast Bayesian optimization of machine learning hyperparameters on
        large datasets (FABOLAS). AISTATS 2017.
    [Rasmussen06] Rasmussen, Williams. Gaussian Processes for Machine Learning, Alg. 2.1.
    [Foreman-Mackey13] emcee: the MCMC hammer. PASP 2013.
    [Snoek12] Snoek, Larochelle, Adams. Practical Bayesian optimization of machine learning
        algorithms. NeurIPS 2012, Sec. 3.2 (integrated acquisition over MCMC samples).
"""

from __future__ import annotations

import copy
import functools
import math

import emcee
import numpy as np
from george import kernels
from scipy.linalg import cho_solve, solve_triangular
from scipy.optimize import minimize

from ..linalg import cholesky_jittered, cholesky_with_jitter
from ..seeds import drawn_seed
from . import gp_kernels
from .gp_posterior import HORSESHOE_SCALE, Design, log_posterior
from .gp_table import TableVariances, variance_drop

__all__ = ["PREDICT_BLOCK", "GaussianProcess", "mixture_moments"]

_LOG_2PI = math.log(2.0 * math.pi)
# Bounds (log space) of the hyperparameters; also the support of the flat priors.
_AMP_BOUNDS = (-10.0, 5.0)
_METRIC_BOUNDS = (-8.0, 6.0)  # log squared length scale: l in [0.018, 20] on [0, 1] inputs
_BASIS_BOUNDS = (-8.0, 5.0)
_NOISE_BOUNDS = (-14.0, 0.0)  # noise variance of the normalised targets in [8e-7, 1]
# rows per block of a prediction: more than any table of the papers has (1,440 (x, s) pairs), so
# theirs are predicted in one block, as before the blocks
PREDICT_BLOCK = 8192
# Large n: beyond LARGE_N observations the MCMC model keeps at most LARGE_N_SAMPLES samples and
# re-samples once the observations have grown by RESAMPLE_GROWTH since the last sampling.
LARGE_N = 100
LARGE_N_SAMPLES = 12
RESAMPLE_GROWTH = 1.25


def mixture_moments(means: np.ndarray, variances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std of the equal-weight mixture of Gaussians over hyperparameter samples
    (axis 0): mean of means; variance = mean of variances + variance of means."""
    var = variances.mean(axis=0) + means.var(axis=0)
    return means.mean(axis=0), np.sqrt(np.maximum(var, 0.0))


def _evenly_spaced(walkers: np.ndarray, most: int | None) -> np.ndarray:
    """At most ``most`` of the walkers' positions, every k-th (all of them for None)."""
    if most is None or len(walkers) <= most:
        return walkers
    return walkers[:: math.ceil(len(walkers) / most)]


class GaussianProcess:
    """GP regressor: Matern 5/2 ARD x amplitude, optional FABOLAS basis over the last column.

    Args:
        basis: None, ``"loss"`` (phi(s) = (1, (1-s)^2)) or ``"cost"`` (phi(s) = (1, s)).
        hyper: ``"ml"`` (L-BFGS-B on the log posterior) or ``"mcmc"`` (emcee samples).
        n_restarts: random restarts of the ML optimisation (besides the warm start).
        burn_in, chain_length, n_walkers: emcee settings (``n_walkers=None``: 3 x #hyper,
            even).
        max_samples: keep at most this many of the walkers' final positions as samples,
            evenly spaced, at every sampling (None: every walker up to ``LARGE_N``
            observations); for a caller that scores each sample over a large table.
        noise_floor: minimum noise variance added to the normalised targets.
        seed: int or numpy Generator; the model's only source of randomness.
    """

    def __init__(
        self,
        basis: str | None = None,
        hyper: str = "ml",
        n_restarts: int = 2,
        burn_in: int = 100,
        chain_length: int = 100,
        n_walkers: int | None = None,
        max_samples: int | None = None,
        noise_floor: float = 1e-6,
        seed=0,
    ):
        if basis not in (None, "loss", "cost"):
            raise ValueError(f"GP basis {basis!r} is not None, 'loss' or 'cost'")
        if hyper not in ("ml", "mcmc"):
            raise ValueError(f"GP hyper {hyper!r} is not 'ml' or 'mcmc'")
        self.basis = basis
        self.hyper = hyper
        self.n_restarts = int(n_restarts)
        self.burn_in = int(burn_in)
        self.chain_length = int(chain_length)
        self.n_walkers = n_walkers
        self.max_samples = max_samples
        self.noise_floor = float(noise_floor)
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.theta_ = None  # (S, p) hyperparameter samples (S = 1 for ML)
        self._walkers = None  # last emcee positions (warm start)
        self._sampled_n = 0  # observations at the last MCMC sampling
        self._table: TableVariances | None = None  # predict_rows' variances, kept

    # -- kernel -------------------------------------------------------------------------------
    def _build_kernel(self, d: int):
        """The george kernel over the transformed inputs (d columns)."""
        n_x = d - 1 if self.basis else d
        if n_x < 1:
            raise ValueError(
                f"GP: inputs have {d} column(s); need at least one configuration "
                "column besides the dataset size"
            )
        # george's ConstantKernel sums over its axes: give each constant a single axis
        k = kernels.ConstantKernel(0.0, ndim=d, axes=[0]) * kernels.Matern52Kernel(
            metric=np.ones(n_x), ndim=d, axes=list(range(n_x))
        )
        if self.basis:
            env = kernels.ConstantKernel(0.0, ndim=d, axes=[d - 1]) + kernels.ConstantKernel(
                0.0, ndim=d, axes=[d - 1]
            ) * kernels.DotProductKernel(ndim=d, axes=[d - 1])
            env.freeze_parameter("k1:log_constant")  # first basis weight fixed to 1
            k = k * env
        return k

    def _transform(self, X: np.ndarray) -> np.ndarray:
        """Replace the s column by the basis feature phi_2(s)."""
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != self._d:
            raise ValueError(f"GP: expected inputs of shape (n, {self._d}), got {X.shape}")
        if not self.basis:
            return X
        s = X[:, -1]
        z = (1.0 - s) ** 2 if self.basis == "loss" else s
        return np.column_stack([X[:, :-1], z])

    def _bounds(self) -> np.ndarray:
        n_x = self._d - 1 if self.basis else self._d
        rows = [_AMP_BOUNDS] + [_METRIC_BOUNDS] * n_x
        if self.basis:
            rows.append(_BASIS_BOUNDS)
        rows.append(_NOISE_BOUNDS)
        return np.array(rows)

    def _set(self, theta: np.ndarray) -> float:
        """Load kernel parameters into george's kernel; returns the noise variance."""
        self._kernel.set_parameter_vector(theta[:-1])
        return self._noise(theta)

    def _noise(self, theta: np.ndarray) -> float:
        """The noise variance of hyperparameter vector ``theta`` (floored)."""
        return math.exp(theta[-1]) + self.noise_floor

    def _cross(self, i: int, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """k(A, B) under hyperparameter sample ``i``, without the noise (george's values)."""
        return gp_kernels.cross(self.theta_[i : i + 1], A, B, bool(self.basis))[0]

    # -- likelihood ---------------------------------------------------------------------------
    def _log_prior(self, theta: np.ndarray) -> float:
        """``gp_posterior.log_prior`` of one vector, in scalar arithmetic: the maximum-likelihood
        fit amplifies the last bits of its objective (a vectorised exp differs there)."""
        b = self._bounds()
        if np.any(theta < b[:, 0]) or np.any(theta > b[:, 1]):
            return -np.inf
        amp = -0.5 * theta[0] ** 2  # log-normal(0, 1) amplitude
        noise = math.log(math.log1p(3.0 * (HORSESHOE_SCALE / math.exp(theta[-1])) ** 2))
        return amp + noise

    def _grad_log_prior(self, theta: np.ndarray) -> np.ndarray:
        g = np.zeros_like(theta)
        g[0] = -theta[0]
        u = 3.0 * (HORSESHOE_SCALE / math.exp(theta[-1])) ** 2
        g[-1] = (-2.0 * u / (1.0 + u)) / math.log1p(u)
        return g

    def _log_likelihood(self, theta: np.ndarray, grad: bool = False):
        noise = self._set(theta)
        K = self._kernel.get_value(self._Xt) + noise * np.eye(self._n)
        try:
            L = cholesky_with_jitter(K, "GP: covariance matrix")
        except np.linalg.LinAlgError:
            return (-np.inf, np.zeros_like(theta)) if grad else -np.inf
        alpha = cho_solve((L, True), self._yn)
        ll = -0.5 * self._yn @ alpha - np.log(np.diag(L)).sum() - 0.5 * self._n * _LOG_2PI
        if not grad:
            return ll
        inner = np.outer(alpha, alpha) - cho_solve((L, True), np.eye(self._n))
        dK = self._kernel.get_gradient(self._Xt)  # (n, n, p-1)
        g = 0.5 * np.einsum("ij,jik->k", inner, dK)
        g_noise = 0.5 * np.trace(inner) * (noise - self.noise_floor)
        return ll, np.append(g, g_noise)

    def _log_posterior(self, theta: np.ndarray) -> float:
        """Log posterior of one hyperparameter vector through george's kernels: the reference
        that ``gp_posterior.log_posterior`` (what emcee's walkers ask) is tested against."""
        lp = self._log_prior(theta)
        if not np.isfinite(lp):
            return -np.inf
        ll = self._log_likelihood(theta)
        return lp + ll if np.isfinite(ll) else -np.inf

    # -- fitting ------------------------------------------------------------------------------
    def fit(self, X, y) -> GaussianProcess:
        """Fit (ML) or sample (MCMC) the hyperparameters on (X, y); returns self."""
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float).ravel()
        if X.ndim != 2 or len(X) != len(y) or len(y) == 0:
            raise ValueError(f"GP.fit: X {X.shape} and y {y.shape} do not match (need n >= 1)")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
            raise ValueError("GP.fit: inputs and targets must be finite")
        if self.theta_ is not None and X.shape[1] != self._d:
            self.theta_, self._walkers = None, None
        self._d = X.shape[1]
        self._kernel = self._build_kernel(self._d)
        self._X, self._y = X, y
        self._Xt = self._transform(X)
        self._n = len(y)
        self.y_mean_ = float(y.mean())
        std = float(y.std())
        self.y_scale_ = std if std > 1e-12 * max(1.0, abs(self.y_mean_)) else 1.0
        self._yn = (y - self.y_mean_) / self.y_scale_
        self.theta_ = self._hyperparameters()
        self._condition()
        return self

    def _hyperparameters(self) -> np.ndarray:
        """The hyperparameter samples (S, p) for the observations just loaded: the ML optimum;
        every walker, sampled anew (at most ``max_samples`` of them, evenly spaced); or beyond
        ``LARGE_N`` observations, the kept samples until the observations have grown by
        ``RESAMPLE_GROWTH``, then ``LARGE_N_SAMPLES`` of the walkers sampled anew, evenly
        spaced."""
        if self.hyper == "ml":
            return self._optimise()[None, :]
        if self._n <= LARGE_N:
            return _evenly_spaced(self._sample(), self.max_samples)
        kept = self.theta_ is not None and self._sampled_n > LARGE_N
        if kept and self._n < RESAMPLE_GROWTH * self._sampled_n:
            return self.theta_
        most = (
            LARGE_N_SAMPLES if self.max_samples is None else min(LARGE_N_SAMPLES, self.max_samples)
        )
        return _evenly_spaced(self._sample(), most)

    def _default_theta(self) -> np.ndarray:
        b = self._bounds()
        theta = np.zeros(len(b))  # unit amplitude, squared length scales and b
        theta[-1] = math.log(1e-3)
        return np.clip(theta, b[:, 0], b[:, 1])

    def _random_theta(self, n: int) -> np.ndarray:
        """Draws from the prior (flat parts uniform on their bounds)."""
        b = self._bounds()
        theta = self.rng.uniform(b[:, 0], b[:, 1], size=(n, len(b)))
        theta[:, 0] = np.clip(self.rng.normal(0.0, 1.0, n), *_AMP_BOUNDS)
        theta[:, -1] = self.rng.uniform(math.log(1e-6), math.log(1e-2), n)
        return theta

    def _optimise(self) -> np.ndarray:
        start = self.theta_[0] if self.theta_ is not None else self._default_theta()
        starts = np.vstack([start, self._random_theta(self.n_restarts)])
        bounds = self._bounds()

        def objective(theta):
            ll, g = self._log_likelihood(theta, grad=True)
            if not np.isfinite(ll):
                return 1e25, np.zeros_like(theta)
            return -(ll + self._log_prior(theta)), -(g + self._grad_log_prior(theta))

        best, best_value = start, np.inf
        for s in starts:
            res = minimize(
                objective, s, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": 200}
            )
            if np.isfinite(res.fun) and res.fun < best_value:
                best, best_value = res.x, float(res.fun)
        return np.asarray(best, dtype=float)

    def _sample(self) -> np.ndarray:
        p = len(self._bounds())
        n_walkers = self.n_walkers or 3 * p
        n_walkers += n_walkers % 2
        walkers_log_posterior = functools.partial(
            log_posterior,
            design=Design(self._Xt, bool(self.basis)),
            y=self._yn,
            bounds=self._bounds(),
            noise_floor=self.noise_floor,
        )
        sampler = emcee.EnsembleSampler(n_walkers, p, walkers_log_posterior, vectorize=True)
        sampler.random_state = np.random.RandomState(drawn_seed(self.rng, 2**32)).get_state()
        if self._walkers is None or self._walkers.shape != (n_walkers, p):
            start = self._random_theta(n_walkers)
            steps = self.burn_in + self.chain_length
        else:
            start, steps = self._walkers, self.chain_length
        # emcee 3 refuses to start from walkers it finds nearly linearly dependent (condition
        # number above 1e8), as the warm-started ensemble can become once hundreds of
        # observations concentrate the posterior; the reference implementation (RoBO, on
        # emcee 2) had no such check and moved them on, as this does
        state = sampler.run_mcmc(start, steps, skip_initial_state_check=True)
        self._walkers = np.asarray(state.coords)
        self._sampled_n = self._n
        return self._walkers.copy()

    def _condition(self) -> None:
        """Cholesky factors and weights for every hyperparameter sample (closed form)."""
        S = len(self.theta_)
        self._L = np.empty((S, self._n, self._n))
        self._alpha = np.empty((S, self._n))
        self.noise_ = np.empty(S)
        jittered = False
        for i, theta in enumerate(self.theta_):
            noise = self._noise(theta)
            K = self._cross(i, self._Xt, self._Xt) + noise * np.eye(self._n)
            self._L[i], jitter = cholesky_jittered(K, "GP: covariance matrix")
            jittered |= jitter > 0.0
            self._alpha[i] = cho_solve((self._L[i], True), self._yn)
            self.noise_[i] = noise
        self._jittered = jittered  # some factor is not that of its matrix

    # -- prediction ---------------------------------------------------------------------------
    def _check_fitted(self):
        if self.theta_ is None:
            raise RuntimeError("GP: call fit(X, y) before predicting")

    def predict_per_sample(self, X, full_cov: bool = False, noise: bool = False):
        """Posterior of f at X under each hyperparameter sample, in target units.

        Returns ``means`` (S, m) and ``vars`` (S, m), or ``covs`` (S, m, m) when ``full_cov``.
        ``noise`` adds the observation noise (predictive of y rather than f). Without
        ``full_cov`` the rows go through in blocks of ``PREDICT_BLOCK``, so that the
        temporaries are (n, block), whatever the number of rows.
        """
        self._check_fitted()
        Xq = self._transform(X)
        m = len(Xq)
        S = len(self.theta_)
        means = np.empty((S, m))
        out = np.empty((S, m, m) if full_cov else (S, m))
        for i, theta in enumerate(self.theta_):
            noise_var = self._noise(theta)
            if full_cov:
                means[i], out[i] = self._sample_joint(i, Xq, noise_var if noise else 0.0)
                continue
            for b in range(0, m, PREDICT_BLOCK):
                rows = slice(b, b + PREDICT_BLOCK)
                Ks = self._cross(i, self._Xt, Xq[rows])  # (n, block)
                means[i, rows] = Ks.T @ self._alpha[i]
                var = self._variance(i, Xq[rows], Ks)
                out[i, rows] = np.maximum(var, 0.0) + (noise_var if noise else 0.0)
        scale2 = self.y_scale_**2
        return means * self.y_scale_ + self.y_mean_, out * scale2

    def _variance(self, i: int, Xq: np.ndarray, Ks: np.ndarray) -> np.ndarray:
        """The posterior variance of f (unclamped, normalised) at the transformed rows ``Xq``
        under hyperparameter sample ``i``, ``Ks`` = k(X, Xq)."""
        V = solve_triangular(self._L[i], Ks, lower=True)
        prior = gp_kernels.diagonal(self.theta_[i : i + 1], Xq, bool(self.basis))[0]
        return prior - np.einsum("ij,ij->j", V, V)

    def predict_rows(self, table, rows):
        """``predict(table[rows])``, for a caller that predicts at rows of one table fit after
        fit. While the hyperparameter samples are kept from fit to fit (beyond ``LARGE_N``
        observations) the posterior variances at every row of ``table`` are kept too, and the
        next fit brings them up to date by the observations it appended (``gp_table``): a
        prediction then costs the kernel between the observations and the table, not a
        triangular solve with it. The same moments up to rounding; up to ``LARGE_N`` the very
        arithmetic of ``predict``."""
        self._check_fitted()
        if not (self.hyper == "mcmc" and self._sampled_n > LARGE_N):  # samples not kept
            return self.predict(np.asarray(table)[rows])
        means, variances = self._table_moments(self._transform(table))
        return mixture_moments(
            means[:, rows] * self.y_scale_ + self.y_mean_,
            np.maximum(variances[:, rows], 0.0) * self.y_scale_**2,
        )

    def _table_moments(self, Xq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Means and unclamped variances (S, m) of f, normalised, at the transformed table
        ``Xq``: the variances brought up to date from the kept ones when they hold for these
        observations (``TableVariances.holds_for``), else computed afresh; kept in turn."""
        S, m = len(self.theta_), len(Xq)
        kept = self._table
        if self._jittered or kept is None or not kept.holds_for(Xq, self.theta_, self._Xt):
            kept = None
        means, variances = np.empty((S, m)), np.empty((S, m))
        for i in range(S):
            for b in range(0, m, PREDICT_BLOCK):
                rows = slice(b, b + PREDICT_BLOCK)
                Ks = self._cross(i, self._Xt, Xq[rows])  # (n, block)
                means[i, rows] = Ks.T @ self._alpha[i]
                if kept is None:
                    variances[i, rows] = self._variance(i, Xq[rows], Ks)
                else:
                    drop = variance_drop(self._L[i], len(kept.observed), Ks)
                    variances[i, rows] = kept.variances[i, rows] - drop
        fresh = TableVariances(Xq.copy(), self.theta_, self._Xt, variances)
        self._table = None if self._jittered else fresh
        return means, variances

    def _sample_joint(self, i: int, Xq: np.ndarray, noise_var: float):
        """Mean (m,) and covariance (m, m) of f (+ ``noise_var`` on the diagonal) at the
        transformed rows ``Xq`` under hyperparameter sample ``i`` (loaded), normalised."""
        Ks = self._cross(i, self._Xt, Xq)  # (n, m)
        V = solve_triangular(self._L[i], Ks, lower=True)
        cov = self._cross(i, Xq, Xq) - V.T @ V
        if noise_var:
            cov[np.diag_indices(len(Xq))] += noise_var
        return Ks.T @ self._alpha[i], cov

    def predict(self, X, noise: bool = False):
        """Predictive mean and std at X (n, d), averaged over hyperparameter samples."""
        return mixture_moments(*self.predict_per_sample(X, noise=noise))

    def predict_joint(self, X, noise: bool = False):
        """Joint predictive mean (m,) and covariance (m, m) at X: the moments of the mixture
        over hyperparameter samples (mean of covariances + covariance of means). The
        covariances are summed one sample at a time: two (m, m) arrays, never S of them."""
        self._check_fitted()
        Xq = self._transform(X)
        S = len(self.theta_)
        means = np.empty((S, len(Xq)))
        total = np.zeros((len(Xq), len(Xq)))
        for i, theta in enumerate(self.theta_):
            noise_var = self._noise(theta)
            means[i], cov = self._sample_joint(i, Xq, noise_var if noise else 0.0)
            total += cov * self.y_scale_**2
        means = means * self.y_scale_ + self.y_mean_
        mean = means.mean(axis=0)
        centred = means - mean
        return mean, total / S + centred.T @ centred / S

    # -- pieces for closed-form updates outside the model ---------------------------------------
    def factors(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The training inputs (n, d) and, per hyperparameter sample, the lower Cholesky factor
        (S, n, n) of K + noise I and the weights K^-1 y (S, n) of the normalised targets."""
        self._check_fitted()
        return self._X, self._L, self._alpha

    def kernel_diagonal_per_sample(self, X) -> np.ndarray:
        """The prior variances k(x, x) (S, m) at the rows of X under each hyperparameter
        sample (normalised target scale, no noise): the diagonal of ``kernel_per_sample(X,
        X)`` without the (m, m) matrices."""
        self._check_fitted()
        return gp_kernels.diagonal(self.theta_, self._transform(X), bool(self.basis))

    def kernel_per_sample(self, X, Y) -> np.ndarray:
        """The prior kernel k(X, Y) (S, m, q) under each hyperparameter sample (normalised
        target scale, no noise): george's values, all samples in one compiled pass
        (``gp_kernels.cross``)."""
        self._check_fitted()
        return gp_kernels.cross(
            self.theta_, self._transform(X), self._transform(Y), bool(self.basis)
        )

    # -- fantasies ----------------------------------------------------------------------------
    def with_points(self, X, y) -> GaussianProcess:
        """A copy conditioned on the extra points (X, y) with the same hyperparameter samples
        and target normalisation (closed-form posterior, no refit); self is unchanged."""
        self._check_fitted()
        X = np.atleast_2d(np.asarray(X, dtype=float))
        y = np.atleast_1d(np.asarray(y, dtype=float)).ravel()
        if len(X) != len(y) or not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
            raise ValueError(
                f"GP.with_points: X {X.shape} and y {y.shape} must match and be finite"
            )
        new = copy.copy(self)
        new._kernel = self._build_kernel(self._d)
        new._X = np.vstack([self._X, X])
        new._y = np.concatenate([self._y, y])
        new._Xt = np.vstack([self._Xt, self._transform(X)])
        new._n = len(new._y)
        new._yn = (new._y - self.y_mean_) / self.y_scale_
        new._table = None  # self's, for self's observations
        new._condition()
        return new

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_kernel", None)  # rebuilt on load (george kernels hold C++ state)
        return state

    def __setstate__(self, state):
        state.setdefault("_table", None)  # saved before predict_rows kept variances
        state.setdefault("_jittered", True)  # unknown: the variances computed afresh
        self.__dict__.update(state)
        if "_d" in state:
            self._kernel = self._build_kernel(self._d)
