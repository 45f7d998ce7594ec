"""The regression gate tested on itself: a catalogue of plausible regressions (mutations of a
paper's key mechanism) and neutral changes (new random streams, reordered work), each applied
to the code in memory; ``farm regress --mutations`` reruns the gate's runs under each one and
reports which the gate catches (``farm.report.regress``).

A mutation patches a function or method for the duration of a ``with`` block. Runs go to
worker processes forked inside the block (they inherit the patch); only the runs of the
optimizers a mutation touches are rerun, the others keep the baseline's values. A hook that no
longer exists (a refactor renamed it) is an error naming the hook, never a silent pass.

Regressions are expected to be caught, unless the gate's sweeps do not exercise the mechanism
(e.g. a budget filter with no budget): ``exercised_by`` names what a spec needs for that.
Neutral changes must pass: they draw new seeds from the same distributions.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

__all__ = ["MUTATIONS", "Mutation", "MutationResult", "affects", "format_mutation_table",
           "mutation_table", "patched", "run_forked", "run_mutation"]


@dataclass(frozen=True)
class Mutation:
    """One change of the code: ``patch`` is a context manager factory that applies it."""

    name: str
    kind: str                          # "regression" | "neutral"
    optimizers: tuple[str, ...]        # whose runs it can change ("*": every optimizer)
    what: str
    patch: Callable[[], contextlib.AbstractContextManager]
    exercised_by: str = ""             # what a sweep needs to exercise it, if not obvious


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
        return replace(original(self, remaining), budget=math.inf)
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


def _new_rng_stream(original):
    def __init__(self, space, problem, seed=0, *a, **k):
        original(self, space, problem, seed, *a, **k)
        self.rng = np.random.default_rng([int(seed), 7919])
    return __init__


def _new_noise_stream(original):
    def execute(oracle, suggestion, rng):
        return original(oracle, suggestion, np.random.default_rng(rng.integers(2 ** 63)))
    return execute


def _shuffled_lhs(original):
    def lhs_configs(self, n, candidates=None):
        chosen = original(self, n, candidates)
        return [chosen[i] for i in np.random.default_rng(len(chosen)).permutation(len(chosen))]
    return lhs_configs


def _lhs_own_stream(original):
    def lhs_configs(self, n, candidates=None):
        rng, self.rng = self.rng, np.random.default_rng([self.seed, 104729])
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

MUTATIONS: tuple[Mutation, ...] = (
    # -- regressions: a paper's key mechanism broken --------------------------------------------
    Mutation("lynceus-lookahead-off", "regression", ("lynceus", "nephele", "obol"),
             "look-ahead depth forced to 0 (greedy EIc/USD) [Lynceus Sec. IV-B]",
             lambda: patched("optimizers.lynceus:Lynceus.__init__",
                             _after_init(_force_config("la", 0)))),
    Mutation("lynceus-budget-filter-off", "regression", ("lynceus", "obol", "cherrypick-trees"),
             "the 99% budget filter Gamma lets every configuration through [Lynceus Alg. 1]",
             lambda: patched("optimizers.lynceus:Lynceus._context", _no_budget_filter),
             exercised_by="a finite exploration budget (OBOL's spec)"),
    Mutation("lynceus-timeout-off", "regression", ("lynceus",),
             "the TG timeout policy replaced by no timeout [Lynceus Sec. IV-C]",
             lambda: patched("optimizers.lynceus:Lynceus.__init__",
                             _after_init(_set_config("timeout", "tg", "none")))),
    Mutation("gauss-hermite-one-node", "regression", LYNCEUS,
             "Gauss-Hermite quadrature with 1 node instead of K (paths see no spread)",
             lambda: patched("optimizers.lynceus:gauss_hermite", _gauss_hermite_one_node)),
    Mutation("eic-feasibility-ignored", "regression", ("eic", "eic-usd-gp"),
             "EIc's probability of feasibility ignored (plain EI) [CherryPick, Lynceus Eq. 1]",
             lambda: patched("optimizers.bo:constraints_log_pf", _no_feasibility)),
    Mutation("cea-filter-random", "regression", ("trimtuner",),
             "TrimTuner's CEA filter replaced by the random filter [TrimTuner Sec. IV-B]",
             lambda: patched("optimizers.trimtuner:TrimTuner.__init__",
                             _after_init(_set_config("filter", "cea", "random")))),
    Mutation("trimtuner-incumbent-swapped", "regression", ("trimtuner",),
             "TrimTuner's incumbent rule swapped (authors' CEA rule -> paper-text rule)",
             lambda: patched("optimizers.trimtuner:TrimTuner.__init__",
                             _after_init(_set_config("incumbent_rule", "cea", "feasible")))),
    Mutation("guindani-ml-correction-off", "regression", ("guindani",),
             "Guindani's ML correction of EIc off: every variant behaves as A [Guindani Sec. 3]",
             lambda: patched("optimizers.guindani:ml_corrected", _no_ml_correction)),
    Mutation("gp-hyperparameters-frozen", "regression", GP_FAMILY,
             "GP hyperparameters frozen at their prior defaults (no ML fit, no MCMC)",
             _chain(lambda: patched("optimizers.models.gp:GaussianProcess._optimise",
                                    _frozen_theta),
                    lambda: patched("optimizers.models.gp:GaussianProcess._sample",
                                    _frozen_samples))),
    Mutation("bootstrap-not-latin", "regression", ("*",),
             "the LHS bootstrap replaced by the first configurations in table order",
             lambda: patched("optimizers.base:Optimizer.lhs_configs", _first_configs)),
    Mutation("lynceus-stops-early", "regression", ("lynceus",),
             "Lynceus' marginal-EIc stop at 10% of the incumbent's cost instead of 1%",
             lambda: patched("optimizers.lynceus:Lynceus.__init__",
                             _after_init(_set_config("stop_threshold", 0.01, 0.10)))),
    Mutation("oracle-mean", "regression", ("*",),
             "the oracle's noise draw replaced by the mean of the repeated measurements",
             lambda: patched("oracle.oracle:Oracle.__init__",
                             _after_init(lambda self: setattr(self, "aggregate", "mean"))),
             exercised_by="datasets with repeated, noisy measurements (synthetic, guindani)"),
    # -- neutral: new random streams, reordered work -------------------------------------------
    Mutation("optimizer-random-stream", "neutral", ("*",),
             "each optimizer's random generator drawn from another stream of its seed",
             lambda: patched("optimizers.base:Optimizer.__init__", _new_rng_stream)),
    Mutation("oracle-noise-stream", "neutral", ("*",),
             "the oracle's noise draws from another stream",
             lambda: patched("farm.run.loop:execute", _new_noise_stream)),
    Mutation("bootstrap-order", "neutral", ("*",),
             "the bootstrap configurations run in another order",
             lambda: patched("optimizers.base:Optimizer.lhs_configs", _shuffled_lhs)),
    Mutation("bootstrap-stream", "neutral", ("*",),
             "the Latin hypercube drawn from a stream of its own",
             lambda: patched("optimizers.base:Optimizer.lhs_configs", _lhs_own_stream)),
    Mutation("ei-terms-reordered", "neutral", ("eic", "eic-usd-gp", "bo-ei"),
             "expected improvement with its floating-point terms summed in another order",
             lambda: patched("optimizers.bo:expected_improvement", _reordered_ei)),
)


def affects(mutation: Mutation, optimizer: str) -> bool:
    return "*" in mutation.optimizers or optimizer in mutation.optimizers


def _run(spec):
    from farm.run.loop import run_one

    return run_one(spec).summary


def run_forked(runs: Sequence, workers: int = 2) -> list[dict]:
    """The summaries of ``runs`` (``RunSpec``s) in ``workers`` processes forked from this one
    (so they run the code as it is patched here now)."""
    if workers <= 1 or len(runs) <= 1:
        return [_run(spec) for spec in runs]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(_run, runs, chunksize=1)


def run_mutation(mutation: Mutation, runs: Sequence, workers: int = 2) -> list[dict]:
    """The summaries of ``runs`` under ``mutation``."""
    with mutation.patch():
        return run_forked(runs, workers)


@dataclass
class MutationResult:
    mutation: Mutation
    n_runs: int
    wall_s: float
    flagged: list          # the gate's REGRESSION rows
    strongest: object      # the affected row with the smallest Holm p-value (or None)

    @property
    def caught(self) -> bool:
        return bool(self.flagged)


def mutation_table(runs: Sequence, baseline: dict, mutations: Sequence[Mutation],
                   workers: int = 2, alpha: float = 0.05, tolerance: float = 0.10,
                   min_effect: float = 0.64,
                   progress: Callable[[str], None] | None = None) -> list[MutationResult]:
    """For each mutation: rerun the affected ``runs`` under it and run the gate against
    ``baseline``, the entries of unaffected optimizers keeping the baseline's values (what
    unmutated code reproduces exactly: ``farm regress`` checks that)."""
    import time

    from farm.report.regress import compare, quality_values

    out = []
    for m in mutations:
        affected = [r for r in runs if affects(m, r.optimizer)]
        t0 = time.perf_counter()
        mutated = quality_values(run_mutation(m, affected, workers)) if affected else {}
        wall = time.perf_counter() - t0
        rows = compare(baseline, {**baseline, **mutated}, alpha=alpha, tolerance=tolerance,
                       min_effect=min_effect)
        touched = [r for r in rows if r.key in mutated and r.verdict != "not run"]
        strongest = min(touched, key=lambda r: (r.p_holm, -r.effect), default=None)
        out.append(MutationResult(m, len(affected), wall,
                                  [r for r in rows if r.verdict == "REGRESSION"], strongest))
        if progress is not None:
            progress(f"{m.name}: {len(affected)} runs in {wall:.0f} s, "
                     f"{'CAUGHT' if out[-1].caught else 'not caught'}"
                     + (f" ({strongest.key}: {strongest.quality}, A {strongest.effect:.2f}, "
                        f"p {strongest.p_holm:.2g})" if strongest else ""))
    return out


def format_mutation_table(results: Sequence[MutationResult]) -> str:
    """One row per mutation, then the detection and false-alarm rates."""
    cols = ("mutation", "kind", "runs", "verdict", "strongest evidence", "A", "p (Holm)")
    rows = []
    for r in results:
        s = r.strongest
        if r.n_runs == 0:
            verdict = "not in this gate"
        elif r.mutation.kind == "regression":
            verdict = "caught" if r.caught else "missed"
        else:
            verdict = "FALSE ALARM" if r.caught else "passed"
        evidence = "-" if s is None else f"{s.key}: {s.quality} {_pct(s.change)}"
        rows.append((r.mutation.name, r.mutation.kind, str(r.n_runs), verdict, evidence,
                     "-" if s is None else f"{s.effect:.2f}",
                     "-" if s is None else f"{s.p_holm:.2g}"))
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in rows]
    for r in results:
        if r.mutation.kind == "regression" and not r.caught and r.mutation.exercised_by:
            lines.append(f"{r.mutation.name}: exercised only by {r.mutation.exercised_by}")
    reg = [r for r in results if r.mutation.kind == "regression" and r.n_runs]
    neu = [r for r in results if r.mutation.kind == "neutral" and r.n_runs]
    if reg:
        lines.append(f"\ndetection rate: {sum(r.caught for r in reg)}/{len(reg)} regressions "
                     "caught")
    if neu:
        lines.append(f"false-alarm rate: {sum(r.caught for r in neu)}/{len(neu)} neutral "
                     "changes flagged")
    return "\n".join(lines)


def _pct(v: float) -> str:
    if math.isnan(v):
        return "-"
    return ("+inf" if v > 0 else "-inf") if math.isinf(v) else f"{v:+.0%}"
