"""Lynceus: budget-aware, long-sighted constrained BO with timeouts, and its relatives.

``Lynceus`` follows Algorithms 1-2 of [Lynceus]: an LHS bootstrap of N = max(3% of |space|,
#dimensions) configurations (robust default: at least 2 and at most max(d + 2, 20), see
``bootstrap_size``); then at each step the budget filter Gamma (configurations whose
cost stays within the remaining budget with probability >= 0.99), the exploration paths of
every x in Gamma with look-ahead LA (``optfarm.optimizers.lookahead``; on a table too large for
every x, the ``first_steps`` best by EIc per predicted cost: ours, see ``_first_steps``), the
argmax of R_x / C_x, and the stops: Gamma empty, or marginal reward (the largest EIc in
Gamma below 1% of the incumbent cost, "EIc below 1% for all unexplored configurations", Sec. IV-A),
tested, as the classic criterion it cites is [Alipourfard17], only once ``stop_after`` (6)
configurations have run, one of them chosen by the model (``STOP_AFTER``: the paper tests it
right after the bootstrap, which on the CherryPick and Scout jobs is a model of 2-3 runs);
robust rule beside the paper's: neither stop ends a run without a recommendation (no configuration
observed feasible yet) while untested configurations and budget remain; it goes on with the
argmax of EIc over Gamma, or, Gamma empty, the cheapest predicted untested configuration
(a 1-D space of 20 configurations stopped after its one bootstrap run otherwise). Runs of
configurations are timed out once they cost more than the incumbent (Sec. V-B); what the model
is fed for a timed-out run is the ``timeout`` policy of Sec. VI-E:

- ``none``: no time cap, the full run is observed;
- ``tg``: cap at C(x*)/U(x), feed E[C(x) | C(x) > C(x*)] of the cost model (truncated Gaussian);
- ``ideal``: the same cap (so the same charge) but feed the run's true full cost: the
  suggestion sets ``reveal_full_cost`` and the loop adds the full cost to the observation
  as ``full_cost`` (a simulation-only oracle, as in the paper);
- ``no-info``: cap at 2 C(x*)/U(x) (iTuned), feed nothing;
- ``max-cost``: cap at C(x*)/U(x), feed the largest cost seen so far;
- ``linear``: cap at C(x*)/U(x), extrapolate the accuracy curve seen so far
  (``Observation.accuracy_curve``, one point every ``curve_interval_s``) linearly to
  ``target_accuracy`` and feed (that time) x U(x).

The recommendation is the cheapest *fully run* configuration observed to meet the constraints.

The model and the look-ahead follow the paper where it is explicit; ``ABLATION_PARAMS`` switch
each place where the paper or its authors' code does otherwise (Weka random trees, the code's
sigma, a full refit per simulated state, a fixed simulated incumbent, the code's quadrature,
the discounted path cost, argmax R). Neither alone nor together do they give the paper's
five-fold look-ahead gain on the TF jobs (issue 20: with the defaults the sub-path after a
first step barely depends on that step, so R/C is EIc/USD damped by near-constant terms; the
random trees give LA=1 a 2x gain by making LA=0 worse); see docs/results/lynceus-lookahead.md.

Variants in this module: ``LynceusToBudget`` (its stopping rule off: runs to the budget),
``EIcUSD`` (LA = 0, no timeout: BO with EIc per predicted dollar),
``Obol`` (seed 004: no timeout, finite budget, 5 random initial samples, path cost discounted
by gamma too, LA up to 5) and ``CherryPickTrees`` (argmax EIc with the same trees, budget
filter and initial samples, the baseline of seed 004).

References:
    [Lynceus] Casimiro et al. Lynceus: Cost-efficient tuning and provisioning of data analytic
        jobs. ICDCS 2020. Sec. IV-V, Algorithms 1-2, Sec. VI.
    [OBOL] Casimiro et al., seed 004 (Portuguese), the budget-limited precursor.
    [Alipourfard17] Alipourfard et al. CherryPick, NSDI 2017 (its stop: EI below a threshold
        once N = 6 configurations have run, as Mendes19 Sec. 2.4.2 reports it).
    [Mendes19] P. Mendes. MSc thesis, IST Lisbon, 2019.
    [Code] marialcasimiro/Lynceus-ICDCS: Lynceus.java (utility, optimized_policy),
        weka/ensemble/EnsembleClassifier.java, gh/NormalGaussHermiteQuadrature.java.
    [Geurts06] Geurts, Ernst, Wehenkel. Extremely randomized trees. Machine Learning 2006.
"""

from __future__ import annotations

import math

import numpy as np

from optfarm.oracle.contract import Observation, TimeoutPlan
from optfarm.oracle.problem import ProblemError

from .acquisition.analytic import (
    gauss_hermite,
    reference_without_feasible,
    truncated_gaussian_mean,
)
from .acquisition.cost_aware import timeout_cap
from .base import (
    MemoryUse,
    Optimizer,
    Param,
    Recommendation,
    Suggestion,
    derive,
    fixed,
    init_share,
    stopped_at_cap,
)
from .lookahead import PathContext, Switches, explore_chunk, level_predictions
from .models.trees import default_max_features
from .seeds import drawn_seed

__all__ = [
    "ABLATION_PARAMS",
    "TIMEOUT_POLICIES",
    "CherryPickTrees",
    "EIcUSD",
    "Lynceus",
    "LynceusToBudget",
    "Obol",
    "bootstrap_size",
]

TIMEOUT_POLICIES = ("none", "tg", "ideal", "no-info", "max-cost", "linear")

# Candidates x first steps a step explores by default (``first_steps``): every table of the papers
# explores all its first steps (TrimTuner's 1,440 (x, s) candidates of Nephele: 2.07 million), a
# table of 10,000 configurations 250, of 50,000 50; a path costs O(candidates), so a step's cost
# stays about constant beyond (docs/results/lynceus-scale.md).
PATH_WORK = 2_500_000

# Runs before the marginal-reward stop is tested (and one of them model-guided): CherryPick's
# N = 6 [Alipourfard17, via Mendes19 Sec. 2.4.2], the classic criterion Lynceus cites (Sec. IV-A);
# without it the stop fired on a model of the 2-3-run bootstrap of the CherryPick and Scout
# jobs (issue 41).
STOP_AFTER = 6

COMMON_PARAMS = (  # shared by Lynceus, OBOL and Nephele
    Param("k", 3, "Gauss-Hermite nodes per simulated cost", low=1, high=10),
    Param("gamma", 0.9, "discount of future rewards along a path", low=0.0, high=1.0),
    Param("n_trees", 10, "trees in the bagging ensemble", low=1, high=200),
    Param("max_features", 0, "features tried per split (0: floor(log2 d) + 1)", low=0),
    Param("std_floor", 1e-3, "predictive std floor, relative to the targets' std", low=0.0),
    Param("stop_threshold", 0.01, "stop when every EIc is below this x incumbent cost", low=0.0),
    Param(
        "stop_after",
        STOP_AFTER,
        "the stop_threshold stop is tested only once this many configurations have run, one "
        "of them chosen by the model (CherryPick's N)",
        low=1,
    ),
    Param("path_chunks", 4, "chunks of first-step candidates handed to the executor", low=1),
    Param(
        "first_steps",
        0,
        "first steps whose paths are explored: every x in Gamma (the "
        "paper) up to this many, beyond it the ones with the largest EIc per predicted cost "
        f"(0: {PATH_WORK:,} / candidates, so every table of the papers explores all)",
        low=0,
    ),
)

# Where the paper [Lynceus] and the authors' code (marialcasimiro/Lynceus-ICDCS: Lynceus.java
# utility()/optimized_policy(), weka/ensemble/EnsembleClassifier.java, gh/
# NormalGaussHermiteQuadrature.java) differ from our defaults or from each other; each switch
# can be turned on alone (the look-ahead ablation of sweeps/lynceus-lookahead-ablation.yaml).
ABLATION_PARAMS = (
    Param(
        "trees",
        "extra",
        "extra: random thresholds [Geurts06]; random: Weka RandomTree, best "
        "split of K random features (paper, EnsembleClassifier)",
        choices=("extra", "random"),
    ),
    Param(
        "sigma",
        "floor",
        "floor: ddof 0, >= std_floor; authors: ddof 1, 10 x mean where all "
        "trees agree (EnsembleClassifier)",
        choices=("floor", "authors"),
    ),
    Param(
        "refit",
        "leaf",
        "simulated state's model: leaf: regrow the simulated point's leaf; "
        "full: regrow every tree (utility())",
        choices=("leaf", "full"),
    ),
    Param(
        "path_incumbent",
        "update",
        "EIc reference in a simulated state: update: simulated "
        "run may become it (utility()); fixed: the real one",
        choices=("update", "fixed"),
    ),
    Param(
        "gh",
        "normalised",
        "normalised: mu + sd t_i, weights sum 1 (Alg. 2); authors: "
        "values / sqrt(pi), weights sum sqrt(pi), nodes <= 0 dropped",
        choices=("normalised", "authors"),
    ),
    Param(
        "path_cost",
        "paper",
        "paper: C += w_i c (Alg. 2 l. 18); discounted: C += gamma w_i c (utility(), OBOL)",
        choices=("paper", "discounted"),
    ),
    Param(
        "first_step",
        "ratio",
        "ratio: argmax R/C (Alg. 1 l. 28); reward: argmax R",
        choices=("ratio", "reward"),
    ),
)


class Lynceus(Optimizer):
    """Lynceus [Lynceus Alg. 1-2]: see the module docstring."""

    name = "lynceus"
    summary = "budget-aware look-ahead BO on bagged trees with timeouts (Lynceus, ICDCS'20)"
    version = 2  # issue 41: the stop tested only after stop_after runs, one model-guided
    # trees over the observations, per-candidate arrays (docs/results/memory.md)
    memory = MemoryUse(fixed=180e6, per_config=500)
    params = (
        Param("la", 2, "look-ahead window (extra steps after the first)", low=0, high=3),
        Param("timeout", "tg", "timeout policy for sub-optimal runs", choices=TIMEOUT_POLICIES),
        *COMMON_PARAMS,
        Param(
            "n_init",
            0,
            "bootstrap size (0: max(3% of the space, d), at least 2, at most max(d + 2, 20)); "
            "at most init_share of the run's evaluations",
            low=0,
        ),
        init_share(),
        Param("init", "lhs", "bootstrap design", choices=("lhs", "random")),
        Param(
            "target_accuracy", 0.85, "accuracy the linear policy extrapolates to", low=0.0, high=1.0
        ),
        Param("curve_interval_s", 30.0, "seconds between accuracy-curve points (linear)", low=0.0),
        *ABLATION_PARAMS,
    )

    @classmethod
    def stops_itself(cls, config) -> bool:
        return config["stop_threshold"] > 0  # NextConfig's EIc test [Lynceus Alg. 1 l. 27]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._setup_candidates()
        self._untested = np.ones(len(self._cand_config), dtype=bool)
        self._cost_rows: list[int] = []
        self._cost_y: list[float] = []
        self._acc_rows: list[int] = []
        self._acc_y: list[float] = []
        self._init_queue: list[int] | None = None
        t, cost, quality = self._posed_constraints()
        self._time_max = t.threshold if t else math.inf
        self._cost_max = cost.threshold if cost else math.inf
        # A constraint on accuracy or any other metric m is modelled by the second ensemble
        # [Lynceus Sec. IV-A: P(feasible) of each constraint]: it learns s x m and requires
        # s x m >= s x threshold, s = +1 for ">=" (accuracy >= a) and -1 for "<=" (rmsd <= r).
        self._quality = quality[0] if quality else None
        self._sign = 1.0 if self._quality is None or self._quality.op == ">=" else -1.0
        self._acc_min = self._sign * self._quality.threshold if quality else -math.inf
        self._gh = gauss_hermite(self.config["k"])
        if self.config["gh"] == "authors":  # weights summing to sqrt(pi), see _switches
            self._gh = (self._gh[0], self._gh[1] * math.sqrt(math.pi))
        self._gha = gauss_hermite(self._k_acc())

    def _posed_constraints(self):
        """The problem's time and cost constraints (or None) and its other constraints (at
        most one: one model of it); ProblemError for a problem Lynceus cannot pose."""
        c = self.problem
        t, cost = c.constraint_on("time"), c.constraint_on("cost")
        if c.objective.metric != "cost" or c.objective.direction != "min":
            raise ProblemError(f"{self.name}: the objective must be 'min cost', got {c.objective}")
        for con in (t, cost):
            if con is not None and con.op != "<=":
                raise ProblemError(
                    f"{self.name}: constraint {con} is not supported (expected "
                    f"{con.metric}<=threshold)"
                )
        quality = [x for x in c.constraints if x.metric not in ("time", "cost")]
        if len(quality) > 1:
            raise ProblemError(
                f"{self.name}: at most one constraint besides time and cost "
                f"(one model of it), got {[str(x) for x in quality]}"
            )
        return t, cost, quality

    # -- candidates --------------------------------------------------------------------------
    def _setup_candidates(self) -> None:
        """Candidates are the configurations at full data size (s = 1)."""
        n = self.space.n_configs
        self._cand_config = np.arange(n)
        self._cand_fid = np.ones(n)
        self._features = np.ascontiguousarray(self.space.features, dtype=float)
        self._price = np.ascontiguousarray(self.space.price_per_s, dtype=float)

    def _k_acc(self) -> int:
        return 1

    def _n_trees_acc(self) -> int:
        return self.config["n_trees"]

    def _candidate(self, config_id: int, fidelity: float) -> int:
        return int(config_id)

    def _suggestion(self, cand: int, **kwargs) -> Suggestion:
        return Suggestion(int(self._cand_config[cand]), float(self._cand_fid[cand]), **kwargs)

    # -- Algorithm 1 ------------------------------------------------------------------------
    def _bootstrap(self) -> list[int]:
        """N configurations by LHS (``bootstrap_size``, or ``n_init``) [Lynceus Sec. VI-B], at
        most ``init_share`` of the run's evaluations (``Optimizer.initial_design``)."""
        n = self.initial_design(
            self.config["n_init"]
            or bootstrap_size(self.space.n_configs, len(self.space.dimensions)),
            least=2,
        )
        if self.config["init"] == "random":
            return [int(c) for c in self.rng.permutation(len(self._cand_config))[:n]]
        return self.lhs_configs(n)

    def suggest(self) -> Suggestion | None:
        remaining = self.problem.budget - self.spent
        if remaining <= 0:
            return self.stopped("budget")
        if self._init_queue is None:
            self._init_queue = self._bootstrap()
        while self._init_queue:
            cand = self._init_queue.pop(0)
            if self._untested[cand]:
                return self._suggestion(cand, phase="init")
        if not self._untested.any() or not self._cost_y:
            return self.stopped("exhausted")
        return self.next_config(remaining)

    def next_config(self, remaining: float) -> Suggestion | None:
        """NextConfig [Lynceus Alg. 1 l. 22-31]."""
        ctx = self._context(remaining)
        mu, sd, _, _, eic, _ = level_predictions(ctx)
        gamma_set = np.flatnonzero(eic >= 0)
        answered = self.recommend() is not None
        if len(gamma_set) == 0:
            if answered:
                return self.stopped("budget")  # nothing fits the remaining budget
            cand = int(np.flatnonzero(self._untested)[np.argmin(mu[self._untested])])
            return self._suggestion(cand, phase="search", info={"no_answer_yet": True})
        ystar = self._ei_reference(ctx, sd)
        if (
            answered
            and self._may_stop()
            and eic[gamma_set].max() < self.config["stop_threshold"] * ystar
        ):
            return self.stopped("converged")
        if ctx.la == 0:
            reward, cost = eic[gamma_set], mu[gamma_set]
        else:
            gamma_set = self._first_steps(gamma_set, eic, mu)
            chunks = [c for c in np.array_split(gamma_set, self.config["path_chunks"]) if len(c)]
            rc = np.vstack(self.executor.map(explore_chunk, chunks, ctx))
            reward, cost = rc[:, 0], rc[:, 1]
        score = self._path_score(reward, cost)
        j = int(np.argmax(score))
        cand = int(gamma_set[j])
        info = {
            "reward": float(reward[j]),
            "path_cost": float(cost[j]),
            "eic": float(eic[cand]),
            "mu_cost": float(mu[cand]),
            "sd_cost": float(sd[cand]),
            "incumbent_cost": ctx.best,
        }
        return self._with_timeout(cand, mu[cand], sd[cand], ctx.best, info)

    def _may_stop(self) -> bool:
        """The marginal-reward stop is tested only on a model fitted beyond the initial design:
        once ``stop_after`` configurations have run, one of them model-guided."""
        guided = any(s.phase == "search" for s, _ in self.history)
        return guided and len(self.history) >= self.config["stop_after"]

    def _path_score(self, reward: np.ndarray, cost: np.ndarray) -> np.ndarray:
        """R / C (Alg. 1 l. 28), or R with ``first_step="reward"``."""
        if self.config["first_step"] == "ratio":
            return reward / np.maximum(cost, 1e-300)
        return reward

    def _first_steps(self, gamma_set: np.ndarray, eic: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """The first steps whose paths are explored, in index order: all of Gamma [Lynceus
        Sec. V-A, approximation 1] while it holds at most ``first_steps`` (0: ``PATH_WORK`` /
        candidates); beyond, that many with the best path score of look-ahead 0 (EIc per
        predicted cost): ours, not the paper's, which never met a space of 10^4 (the
        pre-filter of the same authors' TrimTuner, CEA, ranks by a cheap score the same way)."""
        n = self.config["first_steps"] or max(1, PATH_WORK // len(self._cand_config))
        if len(gamma_set) <= n:
            return gamma_set
        rank = np.argsort(-self._path_score(eic[gamma_set], mu[gamma_set]), kind="stable")
        return np.sort(gamma_set[rank[:n]])

    def _ei_reference(self, ctx: PathContext, sd: np.ndarray) -> float:
        """y*: the incumbent's cost, or the worst observed cost + 3 max sigma over the
        untested candidates when no feasible run is known [Lynceus Sec. IV-A]."""
        if math.isfinite(ctx.best):
            return ctx.best
        return reference_without_feasible(ctx.worst, sd[self._untested])

    def _context(self, remaining: float) -> PathContext:
        rows = np.asarray(self._cost_rows, dtype=np.int64)
        acc_rows = np.asarray(self._acc_rows, dtype=np.int64)
        has_acc = math.isfinite(self._acc_min) and len(acc_rows) > 0
        d = self._features.shape[1]
        return PathContext(
            Xc=self._features[rows],
            yc=np.asarray(self._cost_y, dtype=float),
            nc=len(rows),
            Xa=self._features[acc_rows] if has_acc else np.zeros((0, d)),
            ya=np.asarray(self._acc_y, dtype=float) if has_acc else np.zeros(0),
            na=len(acc_rows) if has_acc else 0,
            F=self._features,
            price=self._price,
            untested=self._untested.copy(),
            budget=float(remaining),
            time_max=self._time_max,
            cost_max=self._cost_max,
            acc_min=self._acc_min,
            best=self._incumbent_cost(),
            worst=float(max(self._cost_y)),
            gh_t=self._gh[0],
            gh_w=self._gh[1],
            gha_t=self._gha[0],
            gha_w=self._gha[1],
            la=self.config["la"],
            gamma=self.config["gamma"],
            discount_cost=self.config["path_cost"] == "discounted",
            key=drawn_seed(self.rng),
            n_trees=self.config["n_trees"],
            n_trees_acc=self._n_trees_acc(),
            max_features=default_max_features(d, self.config["max_features"] or None),
            floor_rel=self.config["std_floor"],
            switches=self._switches(),
        )

    def _switches(self) -> Switches:
        """The ablation switches (ABLATION_PARAMS) as the look-ahead kernel takes them."""
        c = self.config
        authors_gh = c["gh"] == "authors"
        return Switches(
            best_split=c["trees"] == "random",
            authors_sd=c["sigma"] == "authors",
            full_refit=c["refit"] == "full",
            fixed_incumbent=c["path_incumbent"] == "fixed",
            gh_scale=1.0 / math.sqrt(math.pi) if authors_gh else 1.0,
            skip_nonpositive=authors_gh,
        )

    # -- timeouts (Sec. V-B, VI-E) ---------------------------------------------------------
    def _with_timeout(self, cand: int, mu: float, sd: float, best: float, info: dict) -> Suggestion:
        policy = self.config["timeout"]
        cap = None
        if policy != "none":
            factor = 2.0 if policy == "no-info" else 1.0
            cap = timeout_cap(best, float(self._price[cand]), factor)
        plan = None if cap is None else TimeoutPlan(policy, mu, sd, best)
        return self._suggestion(
            cand,
            time_cap=cap,
            phase="search",
            info=info,
            timeout=plan,
            reveal_full_cost=cap is not None and policy == "ideal",
        )

    def _observe(self, suggestion: Suggestion, observation: Observation) -> None:
        cand = self._candidate(suggestion.config_id, suggestion.fidelity)
        self._untested[cand] = False
        capped = stopped_at_cap(suggestion, observation)
        fed = self._fed_cost(suggestion, observation, cand) if capped else observation.cost
        if fed is not None:
            self._cost_rows.append(cand)
            self._cost_y.append(float(fed))
        metric = "accuracy" if self._quality is None else self._quality.metric
        value = observation.value(metric)
        if not capped and math.isfinite(value):
            self._acc_rows.append(cand)
            self._acc_y.append(self._sign * float(value))

    def _fed_cost(self, suggestion: Suggestion, obs: Observation, cand: int) -> float | None:
        """The cost the model learns for a run stopped by its time cap (policy table above),
        as the suggestion's ``TimeoutPlan`` says. A run the harness's deadline stopped before
        Lynceus' own cap is fed by that cap's policy; one Lynceus set no cap for (bootstrap,
        ``none``, no incumbent yet) as ``max-cost`` feeds: it cost more than the stop shows."""
        plan = suggestion.timeout
        if (
            plan is None
        ):  # a cap Lynceus did not set: the harness's deadline (optfarm.farm.run.loop)
            return max(max(self._cost_y, default=obs.cost), obs.cost)  # as max-cost feeds
        policy = plan.policy
        tg = float(truncated_gaussian_mean(plan.cost_mu, plan.cost_sigma, plan.incumbent_cost))
        if policy == "tg":
            return tg
        if policy == "ideal":
            if obs.full_cost is None:
                raise ValueError(
                    f"{self.name}: timeout 'ideal' needs the loop to reveal "
                    "the full_cost of a timed-out run"
                )
            return float(obs.full_cost)
        if policy == "no-info":
            return None
        if policy == "max-cost":
            return float(max(self._cost_y))
        return self._linear_cost(obs, cand, tg)

    def _linear_cost(self, obs: Observation, cand: int, fallback: float) -> float:
        """LINEAR: extend the accuracy curve linearly to the target accuracy [Lynceus VI-E];
        a least-squares line over the points seen (or the line through the origin and the
        last point); the truncated-Gaussian value when the curve gives no usable slope."""
        target = self.config["target_accuracy"]
        curve = np.asarray(obs.accuracy_curve, dtype=float)
        curve = curve[np.isfinite(curve)]
        times = self.config["curve_interval_s"] * np.arange(1, len(curve) + 1)
        t_full = math.nan
        if len(curve) >= 2 and np.ptp(curve) > 0:
            slope, icpt = np.polyfit(times, curve, 1)
            if slope > 0:
                t_full = (target - icpt) / slope
        if not math.isfinite(t_full) and len(curve) and curve[-1] > 0:
            t_full = obs.time * target / curve[-1]
        if not math.isfinite(t_full):
            return fallback
        return max(t_full, obs.time) * float(self._price[cand])

    # -- recommendation ---------------------------------------------------------------------
    def _incumbent_cost(self) -> float:
        best = self.best_observed()
        if best is None:
            return math.inf
        return min(
            o.cost for s, o in self.history if s.config_id == best and math.isclose(s.fidelity, 1.0)
        )

    def recommend(self) -> Recommendation | None:
        """The cheapest fully run configuration observed to meet the constraints."""
        return self.recommend_best_observed()


def bootstrap_size(n_configs: int, n_dims: int, cap: int = 20) -> int:
    """Bootstrap size: the paper's max(3% of the space, d) [Lynceus Sec. VI-B], at least 2
    (the paper's rule gave one run on a 20-configuration 1-D space: a model of one point)
    and at most max(d + 2, ``cap``) (3% of 9,000 configurations, 270 runs, is a whole
    budget of LHS); never above the space. The floor is not d + 2: that would move the
    paper's own runs on the Scout (d = 3, 69 configurations: 3 -> 5) and CherryPick jobs
    (d = 2: 2 -> 4); every dataset optfarm ships keeps its size (TensorFlow 384: 12,
    synthetic 360: 11, Scout: 3, CherryPick: 2-3, TrimTuner 288: 9)."""
    paper = max(math.ceil(0.03 * n_configs), n_dims)
    return min(n_configs, max(2, min(paper, max(n_dims + 2, cap))))


class LynceusToBudget(Lynceus):
    """Lynceus run to its budget: its own stopping rule (every EIc below ``stop_threshold`` x
    the incumbent's cost, Sec. IV-A) off, so that a board reading runs at large budgets
    compares it there, beside the published Lynceus that stops itself (after a median of 6.5
    evaluations on the CherryPick jobs, issue 33)."""

    name = "lynceus-to-budget"
    summary = "Lynceus without its stopping rule: runs until its budget (stop_threshold 0)"
    version = 1  # its stop is off: issue 41's stop_after changes none of its runs
    params = derive(Lynceus.params, stop_threshold=fixed(0.0))


class EIcUSD(Lynceus):
    """EIc/USD: Lynceus with LA = 0 and no timeout, i.e. BO maximising EIc per predicted
    dollar on the same trees [Lynceus Sec. VI]."""

    name = "eic-usd"
    summary = "BO with EIc per predicted cost on bagged trees (Lynceus with LA=0, no timeout)"
    params = derive(Lynceus.params, la=fixed(0), timeout={"default": "none"})


class Obol(Lynceus):
    """OBOL [OBOL]: budget-limited look-ahead (depth 0..5), no timeout, 5 random initial
    samples, future rewards *and* costs discounted by gamma; it stops only when no
    configuration fits the remaining budget (Alg. 2 l. 4: the marginal-reward stop off)."""

    name = "obol"
    summary = "budget-limited look-ahead BO on bagged trees (OBOL, seed 004)"
    memory = MemoryUse(fixed=140e6, per_config=500)  # docs/results/memory.md
    params = derive(
        Lynceus.params,
        la={"doc": "look-ahead depth", "high": 5},
        timeout=fixed("none"),
        init=fixed("random"),
        target_accuracy=fixed(0.85),
        curve_interval_s=fixed(30.0),
        n_init={"default": 5, "low": 1, "doc": "random initial samples"},
        path_cost=fixed("discounted"),
        stop_threshold={
            "default": 0.0,
            "doc": "stop when every EIc is below this x incumbent "
            "cost (0: the paper's, only the budget stops it)",
        },
    )


class CherryPickTrees(Obol):
    """The baseline of seed 004: argmax EIc (CherryPick-style, greedy) with the same trees,
    budget filter and random initial samples as OBOL."""

    name = "cherrypick-trees"
    summary = "greedy argmax EIc on bagged trees with the budget filter (OBOL's baseline)"
    params = derive(
        Obol.params,
        la=fixed(0),
        k=fixed(1),
        gamma=fixed(0.0),
        path_chunks=fixed(1),
        first_step=fixed("reward"),
    )
