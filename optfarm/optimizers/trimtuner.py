"""TrimTuner [TrimTuner]: maximise the accuracy at full data size s = 1 subject to a cost cap,
testing cheaper sub-sampled (x, s) pairs.

Algorithm 1 of the paper, per iteration:
1. fit the accuracy and cost models (GP with the FABOLAS kernel, or a bagging ensemble of 10
   extra-trees) on log(1 - accuracy) and log(cost) over (x, s) (s on the normalised log2
   scale of ``SearchSpace.feature_rows``); a run stopped at its time cap (a board's
   deadline) is censored, its time and cost fed at ``PAR_K`` = 2 times what it spent
   (``models/targets.py``);
2. filter the untested (x, s) pairs (CEA top beta by default, ``acquisition/filters.py``);
3. on the kept pairs evaluate
       alpha_T(x, s) = P(new incumbent feasible | fantasy) x IG(x, s) / C(x, s)
   where IG is the information gain about argmax_x A(x, 1) over representer points
   (``acquisition/entropy.py``, Monte Carlo p_max) and the constraint factor comes from the
   models conditioned on (x, s, predicted means) (one fantasy per candidate, never shared;
   for the GP by the closed-form rank-1 update of its Cholesky factor,
   ``models/gp_fantasy.py``, the trees refitted);
4. run the argmax and pick the incumbent at s = 1 (the same rule picks the fantasised
   incumbent of step 3).

The incumbent. The paper's text (Alg. 1 line 19, Sec. III-A step 3) takes the configuration
with the best predicted accuracy among those predicted feasible (``incumbent_rule=feasible``,
feasible meaning P(constraints hold) >= ``incumbent_pf``). The authors' code, which produced
the paper's figures, takes the configuration with the best CEA = predicted accuracy x
P(feasible) (``incumbent_rule=cea``, the default): it trades a point of predicted accuracy
for confidence in the cost cap, which matters because the cost at s = 1 is extrapolated from
sub-sampled runs and is often underestimated (on trimtuner-cnn, 10 seeds x 44 iterations, the
final Accuracy_C is 0.979 / 0.960 with ``cea`` against 0.966 / 0.930 with ``feasible``, GP /
DT). Only configurations already tested (at any s) are eligible, as in the authors' code:
trees cannot extrapolate to untested regions, and an untested configuration with a flattering
prediction would otherwise become the recommendation; ``incumbent=all`` follows the paper's
text.

Bootstrap: one random configuration at every sub-sampled size {1/60, 1/10, 1/4, 1/2}; a single
training run snapshots the smaller sizes, so the optimizer suggests the largest (s = 1/2) run
with ``Suggestion.snapshots`` naming the others; the farm loop runs them for free and hands
their observations back in ``observation.snapshots`` ({s: Observation}).

Candidate evaluations go through ``self.executor.map``, one chunk of candidates per worker
of the executor (the farm's Ray executor runs them as Ray tasks; serially, one chunk): a chunk
computes the posterior at the rows its candidates' incumbents may be once for all its
candidates, n^2 per row and hyperparameter sample, so on a large table a step costs less the
fewer the chunks (TrimTuner's at its 1,000th evaluation on cloud-grid-9216: 14.5 CPU-s in one
chunk, 22.8 in chunks of 16, docs/results/scale.md). Every random number a candidate uses is
either shared (common random numbers in the context) or drawn from a generator keyed by the
candidate's index, so the result depends neither on the executor nor on the chunks. What
every candidate shares is computed once per suggestion in the context: the representer draws
of each hyperparameter sample and the GP posterior at the representers.

Large tables. Nothing is the size of configurations x configurations, and memory is bounded
by (hyperparameter samples x chunk x (training points + rows of a block)): the representers
are chosen by joint draws over at most ``representer_pool`` configurations (every
configuration of the papers' tables; on a larger one, those with the largest expected
improvement over the best predicted mean, as entropy search draws its representer points from
a measure that favours likely minimisers [Hennig12 Sec. 2.3; Klein17 samples them by EI]);
the filter keeps at most ``max_candidates`` (x, s) pairs (the 144 that 10% of the papers'
1,440 pairs gives, instead of 10% of any table); each candidate's fantasy scans the rows its
incumbent may be in blocks of ``ROW_BLOCK`` (``acquisition.incumbent.IncumbentScan``); the
GP predicts in blocks (``models.gp.PREDICT_BLOCK``).

CPU on large tables. Each step scores every hyperparameter sample of the GP: the predictions
at every configuration, the representers' joint posterior and each candidate's information
gain. The GP keeps every emcee walker as a sample, 3 x its hyperparameters as the authors' code
sets its walkers: 72 on a table of 22 features, where a 25-evaluation run at 9,216
configurations takes about 110 CPU-s. ``hyper_samples`` k scores at most k of them, evenly
spaced, as the GP does beyond ``LARGE_N`` observations on any table and as Spearmint's
integrated acquisition keeps 10 [Snoek12]: 12 makes that run about 4x cheaper, but in 4 seeds
of 50 evaluations it found the feasible region in 2 where every walker found it in 4, so it is
not the default (docs/results/scale.md).

References:
    [TrimTuner] Mendes, Casimiro, Romano, Garlan. TrimTuner, MASCOTS 2020, Sec. III, Alg. 1.
    [Klein17] Klein et al. FABOLAS, AISTATS 2017, Sec. 3.3.
    [Hennig12] Hennig, Schuler. Entropy search for information-efficient global optimization.
        JMLR 2012, Sec. 2.3 (representer points).
    [Snoek12] Snoek, Larochelle, Adams. Practical Bayesian optimization of machine learning
        algorithms. NeurIPS 2012, Sec. 3.2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .acquisition.analytic import constraints_log_pf, expected_improvement, gauss_hermite
from .acquisition.entropy import (
    RepresenterDraws,
    information_gain_gp,
    information_gain_refit,
    joint_samples,
    pmax_from_samples,
)
from .acquisition.filters import FILTERS, cea, select
from .acquisition.incumbent import IncumbentScan, choose_incumbent
from .base import (
    MemoryUse,
    Optimizer,
    Param,
    Recommendation,
    Suggestion,
    decision_margin,
    stopped_at_cap,
)
from .blas import single_threaded
from .models.gp import GaussianProcess
from .models.gp_fantasy import CandidateCovariances, RowPosterior
from .models.targets import Targets
from .models.trees import TreeEnsemble
from .seeds import drawn_seed, keyed_generator

__all__ = ["ROW_BLOCK", "TrimTuner"]

# rows per block of a fantasy's incumbent scan: more than any table of the papers has
# configurations (384), so theirs are scanned in one block
ROW_BLOCK = 2048


@dataclass
class _Context:
    """Everything a candidate's acquisition needs (shipped once per suggestion)."""

    targets: Targets
    model: str  # "gp" | "dt"
    X_cand: np.ndarray  # (n, d+1) candidate inputs
    pred_mean: dict  # metric -> (n,) model-scale means at the candidates
    pred_std: np.ndarray  # (n,) objective std at the candidates (dt fantasies)
    rep: np.ndarray  # (R,) representer configurations (rows of X_full)
    draws: list  # gp: RepresenterDraws per hyperparameter sample
    rep_rows: RowPosterior | None  # gp: the objective's posterior at the representers
    X_full: np.ndarray  # (n_configs, d+1) every configuration at s = 1
    cand_config: np.ndarray  # (n,) configuration of each candidate
    inc_ids: np.ndarray | None  # configurations the incumbent may be (None: all)
    z: np.ndarray  # (M, R) common normals
    e_seed: int  # candidate c's own normals: keyed_generator(e_seed, c)
    t: np.ndarray  # Gauss-Hermite nodes / weights
    w: np.ndarray
    factor: str  # "none" | "pf" (TrimTuner) | "cea" (Fabulinus)
    incumbent_rule: str  # "cea" | "feasible"
    min_pf: float


@single_threaded
def acquisition_chunk(ctx: _Context, idx: np.ndarray) -> np.ndarray:
    """(len(idx), 3) rows of (alpha, information gain, constraint factor) for the candidates
    ``idx``; a pure function of (ctx, idx)."""
    idx = np.asarray(idx, dtype=np.int64)
    if ctx.model == "gp":
        gain = _gains_gp(ctx, idx, CandidateCovariances(ctx.rep_rows, ctx.X_cand[idx]))
    else:
        gain = _gains_dt(ctx, idx)
    if ctx.factor == "none":
        factor = np.ones(len(idx))
    elif ctx.model == "gp":
        factor = _factors_gp(ctx, idx)
    else:
        factor = np.array([_factor(ctx, _scanned(ctx, [_fantasy_dt(ctx, c)])) for c in idx])
    cost = np.exp(ctx.pred_mean["cost"][idx])
    alpha = factor * np.maximum(gain, 0.0) / cost
    return np.column_stack([alpha, gain, factor])


def _gains_gp(ctx: _Context, idx: np.ndarray, cands: CandidateCovariances) -> np.ndarray:
    """IG of each candidate, averaged over the objective's hyperparameter samples; ``cands``:
    the candidates' covariances with the representers."""
    obj = ctx.targets.models[ctx.targets.objective]
    M = len(ctx.z)
    e = np.column_stack([keyed_generator(ctx.e_seed, c).standard_normal(M) for c in idx])
    means, variances, cross = cands.scaled()
    gains = np.zeros(len(idx))
    for s, draws in enumerate(ctx.draws):
        gains += information_gain_gp(
            draws,
            cross[s].T,
            means[s],
            variances[s],
            obj.noise_[s] * obj.y_scale_**2,
            e,
            ctx.t,
            ctx.w,
        )
    return gains / len(ctx.draws)


def _gains_dt(ctx: _Context, idx: np.ndarray) -> np.ndarray:
    obj = ctx.targets.models[ctx.targets.objective]
    return np.array(
        [
            information_gain_refit(
                obj,
                ctx.X_cand[c],
                ctx.pred_mean[ctx.targets.objective][c],
                ctx.pred_std[c],
                ctx.X_full[ctx.rep],
                ctx.z,
                ctx.t,
                ctx.w,
            )
            for c in idx
        ]
    )


def _incumbent_rows(ctx: _Context, c: int) -> np.ndarray:
    """The configurations (rows of X_full) the incumbent after a fantasy at c may be."""
    if ctx.inc_ids is None:
        return np.arange(len(ctx.X_full))
    return np.union1d(ctx.inc_ids, ctx.cand_config[c])


def _factors_gp(ctx: _Context, idx: np.ndarray) -> np.ndarray:
    """The constraint factor of each candidate of ``idx``, its fantasy by the closed-form
    rank-1 update (``models/gp_fantasy.py``): the rows any of their incumbents may be go
    through in blocks of ``ROW_BLOCK``, each candidate's incumbent scanned over its own."""
    t = ctx.targets
    X = ctx.X_cand[idx]
    rows = (
        np.arange(len(ctx.X_full))
        if ctx.inc_ids is None
        else np.union1d(ctx.inc_ids, ctx.cand_config[idx])
    )
    scans = [IncumbentScan(ctx.incumbent_rule, ctx.min_pf) for _ in idx]
    for b in range(0, len(rows), ROW_BLOCK):
        block = rows[b : b + ROW_BLOCK]
        cands = {
            m: CandidateCovariances(RowPosterior(t.models[m], ctx.X_full[block]), X)
            for m in t.metrics
        }
        for j, c in enumerate(idx):
            at = _block_positions(ctx, block, c)
            pred = {m: cands[m].fantasy_predict(j, float(ctx.pred_mean[m][c]), at) for m in cands}
            _scan(ctx, scans[j], pred)
    return np.array([_factor(ctx, scan) for scan in scans])


def _block_positions(ctx: _Context, block: np.ndarray, c: int) -> np.ndarray:
    """Where, in ``block`` (sorted rows of X_full), the rows candidate c's incumbent may be
    are."""
    if ctx.inc_ids is None:
        return np.arange(len(block))
    own = _incumbent_rows(ctx, c)
    return np.searchsorted(block, own[(own >= block[0]) & (own <= block[-1])])


def _fantasy_dt(ctx: _Context, c: int) -> dict:
    """{metric: (mean, std)} at the incumbent rows after the fantasy at candidate c: the
    models refitted with it."""
    fantasy = ctx.targets.with_points(
        ctx.X_cand[c : c + 1], {m: v[c : c + 1] for m, v in ctx.pred_mean.items()}
    )
    return fantasy.predict(ctx.X_full[_incumbent_rows(ctx, c)])


def _scan(ctx: _Context, scan: IncumbentScan, pred: dict) -> None:
    """Hand the predictions ``pred`` ({metric: (mean, std)}) of the models conditioned on a
    fantasy, at a block of rows, to the scan for its incumbent [TrimTuner Alg. 1 line 19]."""
    t = ctx.targets
    mean = pred[t.objective][0]
    if len(mean):
        scan.add(t.quality(mean), mean, constraints_log_pf(t.constraints, pred))


def _scanned(ctx: _Context, blocks) -> IncumbentScan:
    scan = IncumbentScan(ctx.incumbent_rule, ctx.min_pf)
    for pred in blocks:
        _scan(ctx, scan, pred)
    return scan


def _factor(ctx: _Context, scan: IncumbentScan) -> float:
    """P(the incumbent after a fantasy is feasible) [TrimTuner Sec. III-A, steps 1-4], the
    incumbent being the one ``scan`` chose among the predictions of the models conditioned on
    the fantasy; Fabulinus multiplies by its predicted accuracy [Mendes19 Eq. 4.5]."""
    pf = math.exp(scan.log_pf)
    return pf * scan.quality if ctx.factor == "cea" else pf


class TrimTuner(Optimizer):
    """TrimTuner (GP or DT models, CEA or other filters); see the module docstring."""

    name = "trimtuner"
    summary = "information gain per cost x P(feasible incumbent), sub-sampled (x, s)"
    # the GP's joint posterior over at most representer_pool (512) configurations per
    # hyperparameter sample, (40, 512, 512) = 84 MB, the candidates' covariances with them
    # (40, 144, 512) = 24 MB, and its mixture; n_mc draws per configuration (docs/results/
    # memory.md; 389 MB max RSS in all for 20 evaluations at 9,216 configurations)
    memory = MemoryUse(fixed=325e6, per_config=16e3)
    uses_fidelity = True
    params = (
        Param(
            "model",
            "gp",
            "surrogates: gp (george, FABOLAS kernel) or dt (10 extra-trees)",
            choices=("gp", "dt"),
        ),
        Param("filter", "cea", "which untested (x, s) get the acquisition", choices=FILTERS),
        Param("beta", 0.1, "fraction of untested (x, s) the filter keeps", low=0.0, high=1.0),
        Param(
            "hyper",
            "mcmc",
            "GP hyperparameters: emcee samples or maximum likelihood",
            choices=("mcmc", "ml"),
        ),
        Param(
            "hyper_samples",
            0,
            "emcee positions scored as hyperparameter samples each step: 0 every walker (3 x "
            "the GP's hyperparameters, as the authors' code), k at most k of them, evenly "
            "spaced (faster on large tables, and found less: docs/results/scale.md)",
            low=0,
        ),
        Param("burn_in", 100, "emcee burn-in steps (first fit)", low=0),
        Param("chain_length", 100, "emcee steps per fit", low=1),
        Param("n_representers", 50, "representer configurations at s = 1", low=2),
        Param("n_mc", 1000, "Monte Carlo draws for p_max", low=10),
        Param("gh_nodes", 5, "Gauss-Hermite nodes over the fantasised observation", low=1),
        Param(
            "max_candidates",
            144,
            "most (x, s) pairs the filter keeps per step (10% of the papers' 1,440 pairs is 144)",
            low=1,
        ),
        Param(
            "representer_pool",
            512,
            "configurations at s = 1 whose joint draws choose the representers: all of a "
            "table of at most this many (every table of the papers), else those with the "
            "largest EI over the best predicted mean",
            low=2,
        ),
        Param("n_trees", 10, "trees in the dt ensemble", low=1),
        Param(
            "incumbent",
            "tested",
            "incumbent chosen among configurations tested at any s "
            "(the authors' code) or among all",
            choices=("tested", "all"),
        ),
        Param(
            "incumbent_rule",
            "cea",
            "incumbent at s = 1: best predicted accuracy x "
            "P(feasible) (cea, the authors' code) or best predicted accuracy among the "
            "predicted feasible (feasible, the paper's text)",
            choices=("cea", "feasible"),
        ),
        Param(
            "incumbent_pf",
            0.5,
            "with incumbent_rule=feasible, the P(constraints hold) an "
            "incumbent needs (0.5: feasible by predicted means)",
            low=1e-6,
            high=1.0,
        ),
    )
    factor = "pf"  # constraint factor of the acquisition

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._runs: list[tuple[int, float, float, float, float, bool]] = []
        self._targets: Targets | None = None
        self._model_seed = drawn_seed(self.rng)
        self._model_rng = np.random.default_rng(self._model_seed)
        self._bootstrap = self._bootstrap_plan()
        self._incumbent_cache: tuple[int, Recommendation | None] = (-1, None)

    # -- problem and models ---------------------------------------------------------------------
    def _model_problem(self):
        return self.problem

    def _make_model(self, basis: str):
        cfg = self.config
        if cfg["model"] == "dt":
            return TreeEnsemble(n_trees=cfg["n_trees"], seed=self._model_seed)
        return GaussianProcess(
            basis=basis if self.space.has_fidelity else None,
            hyper=cfg["hyper"],
            burn_in=cfg["burn_in"],
            chain_length=cfg["chain_length"],
            max_samples=cfg["hyper_samples"] or None,
            seed=self._model_rng,
        )

    def _inputs(self, ids, fids) -> np.ndarray:
        return self.space.feature_rows(ids, fids if self.space.has_fidelity else None)

    def _fit(self) -> None:
        if self._targets is None:
            self._targets = Targets(self._model_problem(), self._make_model)
        runs = np.array(self._runs, dtype=float)
        observed = {"time": runs[:, 2], "cost": runs[:, 3], "accuracy": runs[:, 4]}
        censored = runs[:, 5] > 0  # stopped at the cap: time and cost fed at PAR_K x
        self._targets.fit(self._inputs(runs[:, 0].astype(int), runs[:, 1]), observed, censored)

    # -- bootstrap ------------------------------------------------------------------------------
    def _bootstrap_plan(self) -> list[Suggestion]:
        """One random configuration at the largest sub-sampled size, snapshotting the smaller
        ones [TrimTuner Sec. IV-A]."""
        return [self._snapshot_run(int(self.rng.integers(self.space.n_configs)))]

    def _snapshot_run(self, config_id: int) -> Suggestion:
        sub = [s for s in self.space.fidelities if s < 1.0]
        if not sub:
            return Suggestion(config_id, 1.0, phase="init")
        return Suggestion(config_id, sub[-1], phase="init", snapshots=tuple(sub[:-1]))

    @single_threaded
    def _observe(self, suggestion: Suggestion, observation) -> None:
        self._runs.append(
            (
                suggestion.config_id,
                suggestion.fidelity,
                observation.time,
                observation.cost,
                observation.accuracy,
                stopped_at_cap(suggestion, observation),
            )
        )
        for s, obs in dict(observation.snapshots).items():
            self._runs.append(
                (suggestion.config_id, float(s), obs.time, obs.cost, obs.accuracy, False)
            )
        self._fit()

    # -- suggestion -------------------------------------------------------------------------------
    def _untested(self) -> tuple[np.ndarray, np.ndarray]:
        fids = np.asarray(self.space.fidelities)
        done = np.zeros((self.space.n_configs, len(fids)), dtype=bool)
        for cid, s, *_ in self._runs:
            done[cid, int(np.argmin(np.abs(fids - s)))] = True
        cid, fi = np.nonzero(~done)
        return cid, fids[fi]

    @single_threaded
    def suggest(self) -> Suggestion | None:
        if self.spent >= self.problem.budget:
            return self.stopped("budget")
        if len(self.history) < len(self._bootstrap):
            return self._bootstrap[len(self.history)]
        cids, fids = self._untested()
        if len(cids) == 0:
            return self.stopped("exhausted")
        ctx, scores = self._context(cids, fids)
        idx, values = select(
            self.config["filter"],
            ctx.X_cand,
            self.config["beta"],
            lambda i: self._evaluate(ctx, i),
            self.rng,
            scores,
            self.config["max_candidates"],
        )
        best = int(np.argmax(values))
        c = int(idx[best])
        return Suggestion(
            int(cids[c]),
            float(fids[c]),
            phase="search",
            info={
                "acquisition": float(values[best]),
                "n_evaluated": len(idx),
                "filter": self.config["filter"],
            },
            margin=decision_margin(values),
        )

    def _evaluate(self, ctx: _Context, idx: np.ndarray) -> np.ndarray:
        workers = max(1, min(len(idx), getattr(self.executor, "workers", 1)))
        chunks = np.array_split(idx, workers)
        rows = self.executor.map(acquisition_chunk, chunks, ctx)
        return np.concatenate(rows)[:, 0]

    def _context(self, cids, fids) -> tuple[_Context, np.ndarray]:
        t = self._targets
        X = self._inputs(cids, fids)
        X_full = self._inputs(np.arange(self.space.n_configs), np.ones(self.space.n_configs))
        full_objective = None
        if self.space.has_fidelity:
            pred = t.predict(X)
        else:  # every candidate is a configuration at s = 1: one prediction serves the pool too
            full = t.predict_rows(X_full, slice(None))  # variances kept beyond 100 observations
            pred = {m: (mean[cids], std[cids]) for m, (mean, std) in full.items()}
            full_objective = full[t.objective]
        obj_mean, obj_std = pred[t.objective]
        scores = cea(t.quality(obj_mean), constraints_log_pf(t.constraints, pred))
        rep = self._representers(X_full, full_objective)
        z = self.rng.standard_normal((self.config["n_mc"], len(rep)))
        factor = self.factor if t.constraints else "none"
        draws, rep_rows = [], None
        if self.config["model"] == "gp":
            obj = t.models[t.objective]
            draws = [
                RepresenterDraws.of(mean, cov, z)
                for mean, cov in zip(*obj.predict_per_sample(X_full[rep], full_cov=True))
            ]
            rep_rows = RowPosterior(obj, X_full[rep])
        gh_t, gh_w = gauss_hermite(self.config["gh_nodes"])
        ctx = _Context(
            targets=t,
            model=self.config["model"],
            X_cand=X,
            pred_mean={m: pred[m][0] for m in t.metrics},
            pred_std=obj_std,
            rep=rep,
            draws=draws,
            rep_rows=rep_rows,
            X_full=X_full,
            z=z,
            e_seed=drawn_seed(self.rng),
            t=gh_t,
            w=gh_w,
            factor=factor,
            incumbent_rule=self.config["incumbent_rule"],
            min_pf=self.config["incumbent_pf"],
            cand_config=np.asarray(cids),
            inc_ids=self._incumbent_pool(),
        )
        return ctx, scores

    def _representers(self, X_full: np.ndarray, full_objective: tuple | None = None) -> np.ndarray:
        """The n_representers configurations at s = 1 most likely to be the optimum (Monte
        Carlo p_max over the representer pool, ties by predicted mean); ``full_objective``:
        the objective's (mean, std) at X_full when already predicted."""
        n = min(self.config["n_representers"], len(X_full))
        obj = self._targets.models[self._targets.objective]
        pool = self._representer_pool(obj, X_full, full_objective)
        z = self.rng.standard_normal((self.config["n_mc"], len(pool)))
        if self.config["model"] == "gp":
            mean, cov = obj.predict_joint(X_full[pool])
            samples = joint_samples(mean, cov, z)
        else:
            mean, std = obj.predict(X_full[pool])
            samples = mean[None, :] + std[None, :] * z
        p = pmax_from_samples(samples)
        order = np.lexsort((mean, -p))
        return np.sort(pool[order[:n]])

    def _representer_pool(
        self, obj, X_full: np.ndarray, full_objective: tuple | None = None
    ) -> np.ndarray:
        """The configurations (rows of X_full) the representers are drawn from: all of them
        up to ``representer_pool``, else that many with the largest expected improvement over
        the lowest predicted mean, ties by predicted mean [Hennig12 Sec. 2.3]."""
        size = self.config["representer_pool"]
        if len(X_full) <= size:
            return np.arange(len(X_full))
        mean, std = obj.predict(X_full) if full_objective is None else full_objective
        ei = expected_improvement(mean, std, mean.min())
        return np.sort(np.lexsort((mean, -ei))[:size])

    # -- recommendation ---------------------------------------------------------------------------
    @single_threaded
    def recommend(self) -> Recommendation | None:
        if self._targets is None:
            return None
        n, cached = self._incumbent_cache
        if n == len(self._runs):
            return cached
        inc = Recommendation(self._recommend())
        self._incumbent_cache = (len(self._runs), inc)
        return inc

    def _incumbent_pool(self) -> np.ndarray | None:
        """Configurations the incumbent may be: those tested at any size, or None (all)."""
        if self.config["incumbent"] == "all":
            return None
        return np.unique([cid for cid, *_ in self._runs]).astype(np.int64)

    def _recommend(self) -> int:
        """The incumbent at s = 1 within the incumbent pool [TrimTuner Alg. 1 line 19]."""
        pool = self._incumbent_pool()
        ids = np.arange(self.space.n_configs) if pool is None else pool
        t = self._targets
        pred = t.predict(self._inputs(ids, np.ones(len(ids))))
        mean = pred[t.objective][0]
        return int(
            ids[
                choose_incumbent(
                    self.config["incumbent_rule"],
                    t.quality(mean),
                    mean,
                    constraints_log_pf(t.constraints, pred),
                    self.config["incumbent_pf"],
                )
            ]
        )
