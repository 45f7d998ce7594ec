"""The regression gate's mutation catalogue (``farm regress --mutations``,
``optfarm.farm.gate.mutations``): plausible regressions, each a paper's key mechanism broken,
and neutral changes (new random streams, reordered work), each applied to the code in memory.

It lives in the checkout, not in the shipped package: its mutations patch the optimizers'
code by name, private methods included (``Lynceus._context``, ``Guindani._incumbent``,
``GaussianProcess._optimise``), which a user's install has no business doing. A hook that no
longer exists (a refactor renamed it) is an error naming the hook, never a silent pass
(``tests/farm/test_regress.py`` applies every mutation).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from optfarm.farm.gate.mutations import Mutation
from optfarm.farm.run.spec import RunSpec
from optfarm.optimizers.seeds import drawn_seed, keyed_generator

__all__ = ["MUTATIONS", "patched"]


@contextlib.contextmanager
def patched(target: str, make: Callable[[Callable], Callable]) -> Iterator[None]:
    """Replace ``module:attr`` or ``module:Class.attr`` by ``make(original)`` in the block."""
    module_name, _, path = target.partition(":")
    owner = importlib.import_module(module_name)
    *parents, attr = path.split(".")
    for p in parents:
        owner = getattr(owner, p)
    if attr not in vars(owner):
        raise LookupError(f"mutation hook {target} does not exist (renamed by a refactor?)")
    original = vars(owner)[attr]
    setattr(owner, attr, make(original))
    try:
        yield
    finally:
        setattr(owner, attr, original)


def _chain(*managers: Callable[[], contextlib.AbstractContextManager]):
    @contextlib.contextmanager
    def both():
        with contextlib.ExitStack() as stack:
            for m in managers:
                stack.enter_context(m())
            yield

    return both


def _after_init(update: Callable):
    """Wrap ``__init__`` so that ``update(self)`` runs after it."""

    def make(original):
        def __init__(self, *a, **k):
            original(self, *a, **k)
            update(self)

        return __init__

    return make


def _set_config(key: str, old, new):
    def update(self):
        if self.config.get(key) == old:
            self.config[key] = new

    return update


def _force_config(key: str, value):
    def update(self):
        self.config[key] = value

    return update


def _no_feasibility(original):
    def constraints_log_pf(constraints, pred):
        return np.zeros_like(original(constraints, pred))

    return constraints_log_pf


def _gauss_hermite_one_node(original):
    return lambda k: original(1)


def _no_budget_filter(original):
    def _context(self, remaining):
        return original(self, remaining)._replace(budget=math.inf)

    return _context


def _frozen_theta(original):
    def _optimise(self):
        return self._default_theta()

    return _optimise


def _frozen_samples(original):
    def _sample(self):
        n = self.n_walkers or 3 * len(self._bounds())
        return np.tile(self._default_theta(), (n + n % 2, 1))

    return _sample


def _first_configs(original):
    def lhs_configs(self, n, candidates=None):
        ids = np.arange(self.space.n_configs) if candidates is None else np.asarray(candidates)
        return [int(i) for i in ids[:n]]

    return lhs_configs


def _no_ml_correction(original):
    return lambda log_eic, t_hat, variant, k, t_max: original(log_eic, t_hat, "a", k, t_max)


def _ml_correction_flipped(original):
    """Guindani's ML correction with its sign flipped, EIc exp(+k T_hat) for exp(-k T_hat):
    the slower configurations favoured (the 1[T_hat <= T_max] exclusion kept)."""

    def ml_corrected(log_eic, t_hat, variant, k, t_max):
        log_g, fallback = original(log_eic, t_hat, variant, k, t_max)
        if variant in ("b", "d") and not fallback:
            log_g = log_g + 2.0 * k * np.maximum(np.asarray(t_hat, dtype=float), 0.0)
        return log_g, fallback

    return ml_corrected


def _second_cheapest(original):
    """Guindani's incumbent: the second-lowest mean observed cost among the feasible
    configurations (the lowest when it is the only one)."""

    def _incumbent(self):
        best = original(self)
        history = self.history
        self.history = [(s, o) for s, o in history if s.config_id != best]
        try:
            second = original(self) if self.history else None
        finally:
            self.history = history
        return best if second is None else second

    return _incumbent


def _stale_gp_once_taboo_full(original):
    """Guindani's cost GP no longer refitted once the taboo queue is full: its posterior is
    the one fitted when the queue filled."""

    def _cost_posterior(self, ids, cost, candidates):
        if len(self.taboo) < self.taboo.q or not getattr(self, "_fitted_once", False):
            self._fitted_once = True
            return original(self, ids, cost, candidates)
        return self.gp.predict(self.space.features[candidates])

    return _cost_posterior


def _representers_of_the_worst(original):
    """TrimTuner's representer statistics on the wrong side: p_max of the samples' maximum,
    so the representers are the configurations most likely to be the worst."""
    return lambda samples: original(-np.asarray(samples))


def _cost_counted_twice(original):
    """TrimTuner's acquisition divided by the predicted cost once more, IG / C^2: the cheapest
    sub-sampled runs win, and few configurations are ever tested at s = 1."""

    def acquisition_chunk(ctx, idx):
        rows = original(ctx, idx)
        rows[:, 0] /= np.exp(ctx.pred_mean["cost"][np.asarray(idx, dtype=np.int64)])
        return rows

    return acquisition_chunk


def _no_information_gain(original):
    """TrimTuner's entropy term removed: every candidate's information gain about the s = 1
    optimum set to 1, so alpha_T = P(feasible incumbent | fantasy) / C(x, s) [TrimTuner Alg. 1,
    step 3, without IG(x, s)]."""

    def gains(ctx, idx, *args):
        return np.ones(len(idx))

    return gains


def _full_size_price(original):
    """TrimTuner's sub-sampling priced away: every candidate (x, s) divided by its
    configuration's predicted cost at s = 1 instead of its own, C(x, 1) for C(x, s), so a
    sub-sampled run is no cheaper to the acquisition than a full one [TrimTuner Alg. 1,
    step 3: alpha_T = P(feasible) x IG(x, s) / C(x, s)]."""

    def acquisition_chunk(ctx, idx):
        idx = np.asarray(idx, dtype=np.int64)
        rows = original(ctx, idx)
        full = ctx.targets.predict(ctx.X_full[ctx.cand_config[idx]])["cost"][0]
        rows[:, 0] *= np.exp(ctx.pred_mean["cost"][idx] - full)
        return rows

    return acquisition_chunk


def _feasibility_flipped(self):
    """The accuracy (quality) constraint modelled on the wrong side: P(a <= A_min) instead of
    P(a >= A_min)."""
    if self._quality is not None:
        self._sign, self._acc_min = -self._sign, -self._acc_min


def _full_size_only(self):
    """Nephele's sub-sampled (x, s) candidates marked tested: only full-size runs (s = 1) are
    left to explore and recommend."""
    if self.uses_fidelity:
        self._untested &= self._cand_fid >= 1.0


def _new_rng_stream(original):
    def __init__(self, space, problem, seed=0, *a, **k):
        original(self, space, problem, seed, *a, **k)
        self.rng = keyed_generator(seed, 7919)

    return __init__


def _new_noise_stream(original):
    def execute(oracle, suggestion, rng):
        return original(oracle, suggestion, np.random.default_rng(drawn_seed(rng)))

    return execute


def _shuffled_lhs(original):
    def lhs_configs(self, n, candidates=None):
        chosen = original(self, n, candidates)
        return [chosen[i] for i in np.random.default_rng(len(chosen)).permutation(len(chosen))]

    return lhs_configs


def _lhs_own_stream(original):
    def lhs_configs(self, n, candidates=None):
        rng, self.rng = self.rng, keyed_generator(self.seed, 104729)
        try:
            return original(self, n, candidates)
        finally:
            self.rng = rng

    return lhs_configs


def _reordered_ei(original):
    from scipy.stats import norm

    def expected_improvement(mu, sigma, best):
        # the same formula, sigma (z Phi(z) + phi(z)), summed and rounded in another order
        mu, sigma = np.asarray(mu, dtype=float), np.asarray(sigma, dtype=float)
        safe = np.where(sigma > 0, sigma, 1.0)
        z = (best - mu) / safe
        ei = safe * (norm.pdf(z) + z * norm.cdf(z))
        return np.where(sigma > 0, np.maximum(ei, 0.0), np.maximum(best - mu, 0.0))

    return expected_improvement


LYNCEUS = ("lynceus", "obol", "nephele", "cherrypick-trees", "eic-usd")
GP_FAMILY = ("eic", "eic-usd-gp", "bo-ei", "trimtuner", "fabolas", "fabulinus", "guindani")


def _param(name: str, test: Callable[[Any], bool]) -> Callable[[RunSpec], bool]:
    return lambda run: test(run.params.get(name))


def _quality_constrained(run: RunSpec) -> bool:
    """Whether the run's problem constrains a metric besides time and cost (Lynceus' second
    ensemble, its probability of feasibility)."""
    from optfarm.oracle.registry import load

    constraints = (
        run.constraints
        if run.constraints is not None
        else [str(c) for c in load(run.dataset).meta.problem.constraints]
    )
    return any(not c.startswith(("time", "cost")) for c in constraints)


def _repeated_measurements(run: RunSpec) -> bool:
    """Whether the run's dataset measured some (configuration, s) more than once: only then
    does the oracle draw noise."""
    return _has_repeats(run.dataset)


@functools.cache
def _has_repeats(name: str) -> bool:
    from optfarm.oracle.registry import load

    dataset = load(name)
    keys = [d.name for d in dataset.meta.dimensions] + ["fidelity"]
    rows = zip(*(dataset.table.column(k).to_pylist() for k in keys))
    return len(set(rows)) < dataset.table.num_rows


_LOOKAHEAD = _param("la", lambda la: bool(la))
# the probe runs: short runs on the built-in synthetic table (no download), 1 run each
_SYN = {"dataset": "synthetic", "seed": 0, "iterations": 16}
_EIC_ML = {**_SYN, "optimizer": "eic", "params": {"hyper": "ml"}, "iterations": 10}
_TRIMTUNER = {
    **_SYN,
    "optimizer": "trimtuner",
    "params": {"model": "dt"},
    "iterations": 8,
    "objective": "max accuracy",
    "constraints": ("cost<=0.5",),
}

MUTATIONS: tuple[Mutation, ...] = (
    # -- regressions: a paper's key mechanism broken --------------------------------------------
    Mutation(
        "lynceus-lookahead-off",
        "regression",
        ("lynceus", "nephele", "obol"),
        "look-ahead depth forced to 0 (greedy EIc/USD) [Lynceus Sec. IV-B]",
        lambda: patched(
            "optfarm.optimizers.lynceus:Lynceus.__init__", _after_init(_force_config("la", 0))
        ),
        probe={**_SYN, "optimizer": "lynceus"},
        when=_LOOKAHEAD,
    ),
    Mutation(
        "lynceus-budget-filter-off",
        "regression",
        ("lynceus", "obol", "cherrypick-trees"),
        "the 99% budget filter Gamma lets every configuration through [Lynceus Alg. 1]",
        lambda: patched("optfarm.optimizers.lynceus:Lynceus._context", _no_budget_filter),
        probe={**_SYN, "optimizer": "cherrypick-trees", "budget": 8.0, "iterations": None},
        when=lambda run: run.budget is not None,
        exercised_by="a finite exploration budget (OBOL's spec)",
    ),
    Mutation(
        "lynceus-timeout-off",
        "regression",
        ("lynceus",),
        "the TG timeout policy replaced by no timeout [Lynceus Sec. IV-C]",
        lambda: patched(
            "optfarm.optimizers.lynceus:Lynceus.__init__",
            _after_init(_set_config("timeout", "tg", "none")),
        ),
        probe={**_SYN, "optimizer": "lynceus"},
        when=_param("timeout", "tg".__eq__),
    ),
    Mutation(
        "gauss-hermite-one-node",
        "regression",
        LYNCEUS,
        "Gauss-Hermite quadrature with 1 node instead of K (paths see no spread)",
        lambda: patched("optfarm.optimizers.lynceus:gauss_hermite", _gauss_hermite_one_node),
        probe={**_SYN, "optimizer": "lynceus"},
        when=_LOOKAHEAD,
    ),
    Mutation(
        "eic-feasibility-ignored",
        "regression",
        ("eic", "eic-usd-gp"),
        "EIc's probability of feasibility ignored (plain EI) [CherryPick, Lynceus Eq. 1]",
        lambda: patched("optfarm.optimizers.bo:constraints_log_pf", _no_feasibility),
        probe=_EIC_ML,
    ),
    Mutation(
        "cea-filter-random",
        "regression",
        ("trimtuner",),
        "TrimTuner's CEA filter replaced by the random filter [TrimTuner Sec. IV-B]",
        lambda: patched(
            "optfarm.optimizers.trimtuner:TrimTuner.__init__",
            _after_init(_set_config("filter", "cea", "random")),
        ),
        probe=_TRIMTUNER,
        when=_param("filter", "cea".__eq__),
    ),
    Mutation(
        "trimtuner-incumbent-swapped",
        "regression",
        ("trimtuner",),
        "TrimTuner's incumbent rule swapped (authors' CEA rule -> paper-text rule)",
        lambda: patched(
            "optfarm.optimizers.trimtuner:TrimTuner.__init__",
            _after_init(_set_config("incumbent_rule", "cea", "feasible")),
        ),
        probe=_TRIMTUNER,
        when=_param("incumbent_rule", "cea".__eq__),
    ),
    Mutation(
        "guindani-ml-correction-off",
        "regression",
        ("guindani",),
        "Guindani's ML correction of EIc off: every variant behaves as A [Guindani Sec. 3]",
        lambda: patched("optfarm.optimizers.guindani:ml_corrected", _no_ml_correction),
        probe={**_SYN, "optimizer": "guindani", "iterations": 8},
        when=_param("variant", "a".__ne__),
    ),
    Mutation(
        "guindani-ml-correction-flipped",
        "regression",
        ("guindani",),
        "Guindani's ML correction exp(-k T_hat) with its sign flipped, exp(+k T_hat): "
        "variants B and D favour the slower configurations [Guindani Sec. 3]",
        lambda: patched("optfarm.optimizers.guindani:ml_corrected", _ml_correction_flipped),
        probe={**_SYN, "optimizer": "guindani", "iterations": 8},
        when=_param("variant", ("b", "d").__contains__),
    ),
    Mutation(
        "guindani-pick-second-cheapest",
        "regression",
        ("guindani",),
        "Guindani recommends (and its recurring job re-runs) the second-cheapest feasible "
        "configuration [Guindani Sec. 3, Algorithm 2]",
        lambda: patched("optfarm.optimizers.guindani:Guindani._incumbent", _second_cheapest),
        probe={**_SYN, "optimizer": "guindani", "iterations": 12},
    ),
    Mutation(
        "guindani-gp-stale-after-taboo",
        "regression",
        ("guindani",),
        "Guindani's cost GP not refitted once the taboo queue is full [Guindani "
        "Algorithm 2, step 4]",
        lambda: patched(
            "optfarm.optimizers.guindani:Guindani._cost_posterior", _stale_gp_once_taboo_full
        ),
        probe={
            **_SYN,
            "optimizer": "guindani",
            "iterations": 16,
            "params": {"q": 2, "min_search": 16},
        },
        exercised_by="a Guindani search longer than its taboo queue",
    ),
    Mutation(
        "trimtuner-representers-flipped",
        "regression",
        ("trimtuner",),
        "TrimTuner's representer points drawn as the configurations most likely to be "
        "the worst (p_max of the samples' maximum) [TrimTuner Sec. IV-A, ES]",
        lambda: patched(
            "optfarm.optimizers.trimtuner:pmax_from_samples", _representers_of_the_worst
        ),
        probe=_TRIMTUNER,
    ),
    Mutation(
        "trimtuner-cost-counted-twice",
        "regression",
        ("trimtuner", "fabulinus"),
        "TrimTuner's information gain divided by the predicted cost twice, IG / C^2 "
        "[TrimTuner Alg. 1, step 3: alpha_T = P(feasible) x IG / C]",
        lambda: patched("optfarm.optimizers.trimtuner:acquisition_chunk", _cost_counted_twice),
        probe=_TRIMTUNER,
    ),
    Mutation(
        "trimtuner-full-size-price",
        "regression",
        ("trimtuner", "fabolas", "fabulinus"),
        "TrimTuner's acquisition prices every candidate (x, s) at its configuration's "
        "predicted full-size cost C(x, 1): sub-sampling no cheaper [TrimTuner Alg. 1, step 3]",
        lambda: patched("optfarm.optimizers.trimtuner:acquisition_chunk", _full_size_price),
        probe=_TRIMTUNER,
        exercised_by="44 evaluations read by the cost until the pick reaches 98% of the "
        "optimum's Accuracy_C (nightly-trimtuner-cost for TrimTuner-DT on CNN, "
        "nightly-fabulinus-cost for Fabulinus on RNN)",
    ),
    Mutation(
        "trimtuner-no-information-gain",
        "regression",
        ("trimtuner", "fabolas", "fabulinus"),
        "TrimTuner's information gain about the s = 1 optimum replaced by 1: the acquisition "
        "is P(feasible incumbent) / C(x, s) [TrimTuner Alg. 1, step 3]",
        _chain(
            lambda: patched("optfarm.optimizers.trimtuner:_gains_dt", _no_information_gain),
            lambda: patched("optfarm.optimizers.trimtuner:_gains_gp", _no_information_gain),
        ),
        probe=_TRIMTUNER,
        exercised_by="44 evaluations read by the tested incumbent's cost to 90% of the "
        "optimum's Accuracy_C (nightly-trimtuner-cost)",
    ),
    Mutation(
        "gp-hyperparameters-frozen",
        "regression",
        GP_FAMILY,
        "GP hyperparameters frozen at their prior defaults (no ML fit, no MCMC)",
        _chain(
            lambda: patched(
                "optfarm.optimizers.models.gp:GaussianProcess._optimise", _frozen_theta
            ),
            lambda: patched(
                "optfarm.optimizers.models.gp:GaussianProcess._sample", _frozen_samples
            ),
        ),
        probe=_EIC_ML,
    ),
    Mutation(
        "bootstrap-not-latin",
        "regression",
        ("*",),
        "the LHS bootstrap replaced by the first configurations in table order",
        lambda: patched("optfarm.optimizers.base:Optimizer.lhs_configs", _first_configs),
        probe={**_SYN, "optimizer": "eic-usd"},
    ),
    Mutation(
        "lynceus-stops-early",
        "regression",
        ("lynceus",),
        "Lynceus' marginal-EIc stop at 10% of the incumbent's cost instead of 1%",
        lambda: patched(
            "optfarm.optimizers.lynceus:Lynceus.__init__",
            _after_init(_set_config("stop_threshold", 0.01, 0.10)),
        ),
        probe={**_SYN, "optimizer": "lynceus", "iterations": 25},
        when=_param("stop_threshold", (0.01).__eq__),
    ),
    Mutation(
        "lynceus-reward-not-per-cost",
        "regression",
        ("lynceus", "obol", "nephele", "eic-usd"),
        "the next configuration chosen by its path's reward R instead of reward per cost "
        "R/C [Lynceus Alg. 1 l. 28]",
        lambda: patched(
            "optfarm.optimizers.lynceus:Lynceus.__init__",
            _after_init(_force_config("first_step", "reward")),
        ),
        probe={**_SYN, "optimizer": "lynceus"},
    ),
    Mutation(
        "lynceus-feasibility-flipped",
        "regression",
        LYNCEUS,
        "the accuracy constraint's probability of feasibility taken on the wrong side, "
        "P(a <= A_min) [Lynceus Sec. IV-A]",
        lambda: patched(
            "optfarm.optimizers.lynceus:Lynceus.__init__", _after_init(_feasibility_flipped)
        ),
        probe={**_SYN, "optimizer": "lynceus"},
        when=_quality_constrained,
        exercised_by="a problem with an accuracy constraint (synthetic, Nephele's part)",
    ),
    Mutation(
        "nephele-full-size-only",
        "regression",
        ("nephele",),
        "Nephele explores and recommends full-size runs only (s = 1): no sub-sampled "
        "configuration [Nephele thesis Sec. 6.3-6.4]",
        lambda: patched(
            "optfarm.optimizers.lynceus:Lynceus.__init__", _after_init(_full_size_only)
        ),
        probe={**_SYN, "optimizer": "nephele"},
    ),
    Mutation(
        "trees-ensemble-of-one",
        "regression",
        LYNCEUS,
        "the bagging ensemble cut to one tree: no spread between trees, sigma at its "
        "floor [Lynceus Sec. IV-A]",
        lambda: patched(
            "optfarm.optimizers.lynceus:Lynceus.__init__", _after_init(_force_config("n_trees", 1))
        ),
        probe={**_SYN, "optimizer": "eic-usd"},
    ),
    Mutation(
        "oracle-mean",
        "regression",
        ("*",),
        "the oracle's noise draw replaced by the mean of the repeated measurements",
        lambda: patched(
            "optfarm.oracle.oracle:Oracle.__init__",
            _after_init(lambda self: setattr(self, "aggregate", "mean")),
        ),
        probe={**_SYN, "optimizer": "eic-usd"},
        when=_repeated_measurements,
        exercised_by="datasets with repeated, noisy measurements (synthetic, guindani)",
    ),
    # -- neutral: new random streams, reordered work -------------------------------------------
    Mutation(
        "optimizer-random-stream",
        "neutral",
        ("*",),
        "each optimizer's random generator drawn from another stream of its seed",
        lambda: patched("optfarm.optimizers.base:Optimizer.__init__", _new_rng_stream),
        probe={**_SYN, "optimizer": "random"},
    ),
    Mutation(
        "oracle-noise-stream",
        "neutral",
        ("*",),
        "the oracle's noise draws from another stream",
        lambda: patched("optfarm.farm.run.loop:execute", _new_noise_stream),
        probe={**_SYN, "optimizer": "eic-usd"},
        when=_repeated_measurements,
    ),
    Mutation(
        "bootstrap-order",
        "neutral",
        ("*",),
        "the bootstrap configurations run in another order",
        lambda: patched("optfarm.optimizers.base:Optimizer.lhs_configs", _shuffled_lhs),
        probe={**_SYN, "optimizer": "eic-usd"},
    ),
    Mutation(
        "bootstrap-stream",
        "neutral",
        ("*",),
        "the Latin hypercube drawn from a stream of its own",
        lambda: patched("optfarm.optimizers.base:Optimizer.lhs_configs", _lhs_own_stream),
        probe={**_SYN, "optimizer": "eic-usd"},
    ),
    Mutation(
        "ei-terms-reordered",
        "neutral",
        ("eic", "eic-usd-gp", "bo-ei"),
        "expected improvement with its floating-point terms summed in another order",
        lambda: patched("optfarm.optimizers.bo:expected_improvement", _reordered_ei),
    ),
)
