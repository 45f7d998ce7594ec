"""The ask/tell optimizer interface shared by every algorithm (its data types, ``Suggestion``,
``Observation`` and ``Recommendation``, are the contract's: ``optfarm.oracle.contract``).

    opt = make_optimizer("lynceus", space, problem, seed=0, la=2)
    while (s := opt.suggest()) is not None:
        obs = run_the_job(s.config_id, s.fidelity, time_cap=s.time_cap)
        opt.observe(s, obs)
    best = opt.recommend()          # Recommendation(config_id, fidelity) or None

The benchmark loop of ``farm`` and a user tuning a real job use the same calls. Each optimizer
owns a ``numpy.random.Generator`` made from its seed, so a seed fixes the whole run.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from optfarm.oracle.contract import Observation, Recommendation, Suggestion
from optfarm.oracle.problem import Problem
from optfarm.oracle.space import SearchSpace
from optfarm.oracle.spelling import did_you_mean

from .executor import Executor, SerialExecutor

# Suggestion, Recommendation (and Observation) are the contract's, ``optfarm.oracle.contract``
__all__ = [
    "INIT_SHARE",
    "init_share",
    "MemoryUse",
    "Param",
    "Suggestion",
    "Recommendation",
    "Optimizer",
    "ParameterError",
    "MissingExtra",
    "derive",
    "fixed",
    "decision_margin",
    "stopped_at_cap",
]


class ParameterError(ValueError):
    """An optimizer parameter is unknown or out of its allowed range."""


class MissingExtra(ParameterError):
    """The optimizer wraps a library of an optional extra that is not installed (bad input:
    the command line exits 2 with this one-line message)."""


@dataclass(frozen=True)
class Param:
    """One optimizer parameter: default, type, and allowed values or range. A ``fixed``
    parameter is one a variant pins to its default (``farm optimizers`` shows it as fixed):
    passing that value is accepted, any other is an error."""

    name: str
    default: Any
    doc: str = ""
    choices: tuple | None = None
    low: float | None = None
    high: float | None = None
    fixed: bool = False

    def validate(self, optimizer: str, value: Any) -> Any:
        """``value`` as this parameter's type (a string parsed, an int as a float where the
        default is one); ParameterError naming the optimizer, the parameter, the value and
        what is allowed."""
        value = self._typed(optimizer, value)
        if self.fixed and value != self.default:
            raise ParameterError(
                f"{optimizer}: parameter {self.name!r} is fixed at {self.default!r}, got {value!r}"
            )
        if self.choices is not None and value not in self.choices:
            raise ParameterError(
                f"{optimizer}: parameter {self.name!r} = {value!r} is not one "
                f"of {list(self.choices)}"
            )
        if self.low is not None and value < self.low or self.high is not None and value > self.high:
            raise ParameterError(
                f"{optimizer}: parameter {self.name!r} = {value!r} is outside "
                f"[{self.low}, {self.high}]"
            )
        return value

    def _typed(self, optimizer: str, value: Any) -> Any:
        """``value`` converted to the default's type, or ParameterError."""
        kind = type(self.default)
        if self.default is not None and kind is not str and isinstance(value, str):
            value = _parse_scalar(value, kind, optimizer, self.name)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if self.default is not None and not isinstance(value, kind):
            raise ParameterError(
                f"{optimizer}: parameter {self.name!r} must be {kind.__name__}, got {value!r}"
            )
        return value

    def allowed(self) -> str:
        if self.fixed:
            return "fixed"
        if self.choices is not None:
            return "|".join(map(str, self.choices))
        if self.low is not None or self.high is not None:
            low, high = ("" if b is None else b for b in (self.low, self.high))
            return f"[{low}, {high}]"
        return type(self.default).__name__


# the largest share of a run's evaluation budget an initial design takes by default
INIT_SHARE = 0.25


def init_share() -> Param:
    """The ``init_share`` parameter of every optimizer with an initial design
    (``Optimizer.initial_design``)."""
    return Param(
        "init_share",
        INIT_SHARE,
        "largest share of the run's evaluation budget "
        "(--iterations) its initial design takes; 1: no cap (the papers' sizes, which "
        "their specs pin)",
        low=0.0,
        high=1.0,
    )


def fixed(value: Any) -> dict[str, Any]:
    """The change that pins a parameter to ``value`` (for ``derive``)."""
    return {"default": value, "fixed": True}


def derive(params: tuple[Param, ...], **changes: Mapping[str, Any]) -> tuple[Param, ...]:
    """A variant's parameter table: ``params`` in order, each named one with its fields
    replaced, e.g. ``derive(Lynceus.params, la=fixed(0), timeout={"default": "none"})``.
    Nothing is dropped, so the base class can read every parameter it knows."""
    names = {p.name for p in params}
    unknown = sorted(set(changes) - names)
    if unknown:
        raise ValueError(
            f"derive: no parameter {unknown[0]!r} to change (parameters: "
            f"{', '.join(sorted(names))})"
        )
    return tuple(replace(p, **changes[p.name]) if p.name in changes else p for p in params)


def _closest_param(word: str, params: tuple[Param, ...]) -> str:
    """A "did you mean" for a mistyped parameter: by its name, else by the words of its doc
    (``lookahead`` -> ``la``, documented as the "look-ahead window")."""
    hint = did_you_mean(word, [p.name for p in params])
    if hint:
        return hint

    def squash(text: str) -> str:
        return "".join(ch for ch in text.lower() if ch.isalnum())

    described = [
        p.name
        for p in params
        if len(squash(word)) >= 4
        and any(
            squash(w).startswith(squash(word))
            or squash(word).startswith(squash(w))
            and len(squash(w)) >= 4
            for w in p.doc.split()
        )
    ]
    return f" (did you mean {described[0]!r}?)" if len(described) == 1 else ""


def _parse_scalar(text: str, kind: type, optimizer: str, name: str):
    try:
        if kind is bool:
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise ValueError
        if kind is float and text.lower() in ("inf", "infinity"):
            return math.inf
        return kind(text)
    except ValueError:
        raise ParameterError(
            f"{optimizer}: parameter {name!r} must be {kind.__name__}, got {text!r}"
        ) from None


@dataclass(frozen=True)
class MemoryUse:
    """What one run of an optimizer holds in memory at its peak beyond its process and the
    oracle, in bytes, as a function of the n configurations of the table it runs on: ``fixed
    + per_config x n + per_pair x n^2`` (``fixed``: the libraries it loads and its models;
    ``per_config``: arrays over the configurations; ``per_pair``: matrices over pairs of them,
    e.g. a GP's joint posterior over every configuration). A plain declaration, read by the
    farm to place runs where they fit (``optfarm.farm.runtime.memory``); the numbers are
    fitted to measured maximum resident sizes (docs/results/memory.md)."""

    fixed: float = 0.0
    per_config: float = 0.0
    per_pair: float = 0.0

    def bytes(self, n_configs: int) -> float:
        return self.fixed + self.per_config * n_configs + self.per_pair * float(n_configs) ** 2


def decision_margin(values) -> float:
    """How clearly the largest of ``values`` won: (top - runner-up) / |top|, 0 for an exact
    tie, inf without a runner-up. A margin of ~1e-12 is a decision that bit-level differences
    of the numerics (another BLAS) may flip."""
    v = np.sort(np.asarray(values, dtype=float).ravel())
    if len(v) < 2:
        return math.inf
    gap = float(v[-1] - v[-2])
    return gap / abs(float(v[-1])) if gap > 0 else 0.0


def stopped_at_cap(suggestion: Suggestion, observation: Observation) -> bool:
    """The run was stopped by the time cap it ran under (the optimizer's own, or the
    harness's deadline, ``optfarm.farm.run.loop.Stepper.under_deadline``): its time and cost
    are what it spent until the cap, lower bounds of what it would have taken (censored)."""
    cap = suggestion.time_cap
    return cap is not None and observation.timed_out and observation.time >= cap * (1 - 1e-9)


class Optimizer(ABC):
    """Base class: stores the space, problem, seed, executor and validated parameters.

    Subclasses declare ``name`` and ``params`` and implement ``suggest``, ``observe`` and
    ``recommend``; a variant derives its table from its parent's (``derive``), overriding
    defaults or fixing values, so ``self.config`` always holds every parameter.
    ``self.rng`` is the optimizer's only source of randomness.
    """

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    uses_fidelity: ClassVar[bool] = False
    # recommends a (configuration, dataset size) pair to deploy at that size (Nephele), so the
    # farm credits its best run at any size, not only at s = 1 (optfarm.farm.run.recommendation)
    recommends_fidelity: ClassVar[bool] = False
    repeats: ClassVar[bool] = False  # may suggest a configuration it has already run
    # its ``search`` steps are chosen by a model (random search's are drawn blindly: the
    # gate's model-guided share leaves such optimizers out)
    has_model: ClassVar[bool] = True
    version: ClassVar[int] = 1  # in every run key: bump only when results change on purpose
    # a run's peak memory beyond its process and the oracle (the farm places runs by it)
    memory: ClassVar[MemoryUse] = MemoryUse()
    # its state pickles mid-run, so a run resumes from its checkpoint
    # (optfarm.farm.run.checkpoint); False: a stopped run starts again from its first step
    resumable: ClassVar[bool] = True

    def __init__(
        self,
        space: SearchSpace,
        problem: Problem,
        seed: int = 0,
        executor: Executor | None = None,
        evaluations: int | None = None,
        **params: Any,
    ):
        self.space = space
        self.problem = problem
        self.seed = int(seed)
        # the run's evaluation budget when it has one (the loop's --iterations), which the
        # initial design takes at most ``init_share`` of
        self.evaluations = evaluations
        self.rng = np.random.default_rng(self.seed)
        self.executor = executor or SerialExecutor()
        self.config = self.resolve_params(params)
        self.history: list[tuple[Suggestion, Observation]] = []
        # why suggest() returned None, the run's ``stop_reason``: "converged" (its own
        # stopping rule), "budget" (its exploration budget), "exhausted" (nothing left to
        # run), "gave up: N repeats" (a peer whose library kept proposing what it had run)
        self.stop_reason = "converged"

    @classmethod
    def resolve_params(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``params``, each validated; unknown names are errors."""
        known = {p.name: p for p in cls.params}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ParameterError(
                f"{cls.name}: unknown parameter {unknown[0]!r}"
                f"{_closest_param(unknown[0], cls.params)} (parameters: "
                f"{', '.join(known) or 'none'})"
            )
        return {
            n: (p.validate(cls.name, params[n]) if n in params else p.default)
            for n, p in known.items()
        }

    @classmethod
    def stops_itself(cls, config: Mapping[str, Any]) -> bool:
        """Whether a run with the resolved parameters ``config`` has a stopping rule of its
        own besides the budget and running out of configurations (``farm run`` limits the
        evaluations of one that has none)."""
        return False

    @abstractmethod
    def suggest(self) -> Suggestion | None:
        """The next (configuration, fidelity) to run, or None when the optimizer stops."""

    def observe(self, suggestion: Suggestion, observation: Observation) -> None:
        """Record the outcome of running ``suggestion``; an observation with a NaN or
        infinite time or cost, or an infinite accuracy (NaN: not measured), is rejected
        before anything is recorded."""
        for name in ("time", "cost"):
            value = getattr(observation, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"{self.name}: observation {name} = {value!r} is not a "
                    "finite non-negative number"
                )
        if math.isinf(observation.accuracy):
            raise ValueError(
                f"{self.name}: observation accuracy = {observation.accuracy!r} "
                "is not finite (NaN if not measured)"
            )
        self.history.append((suggestion, observation))
        self._observe(suggestion, observation)

    def initial_design(self, n: int, least: int = 1) -> int:
        """The size of an initial design of ``n`` runs in this run: at most ``init_share`` of
        the evaluation budget (at least ``least``), ``n`` without a budget or a share."""
        declared = any(p.name == "init_share" for p in self.params)
        share = self.config["init_share"] if declared else None
        if self.evaluations is None or share is None:
            return n
        return min(n, max(least, math.floor(share * self.evaluations)))

    def stopped(self, reason: str) -> None:
        """``suggest``'s None, with why the optimizer stops (``stop_reason``)."""
        self.stop_reason = reason
        return None

    def _observe(self, suggestion: Suggestion, observation: Observation) -> None:  # noqa: B027
        """Hook for subclasses that update models as observations arrive (optional)."""

    @abstractmethod
    def recommend(self) -> Recommendation | None:
        """What the optimizer would deploy now (None if it has nothing yet)."""

    # -- helpers shared by the algorithms ---------------------------------------------------
    @property
    def spent(self) -> float:
        """Exploration cost charged so far."""
        return float(sum(o.cost for _, o in self.history))

    def tested(self, fidelity: float | None = 1.0) -> np.ndarray:
        """Boolean mask (n_configs,) of configurations already run at ``fidelity``
        (any fidelity if None)."""
        mask = np.zeros(self.space.n_configs, dtype=bool)
        for s, _ in self.history:
            if fidelity is None or math.isclose(s.fidelity, fidelity):
                mask[s.config_id] = True
        return mask

    def observed_feasible(self, observation: Observation) -> bool:
        """The observed run met every constraint (a timed-out run never does)."""
        if observation.timed_out:
            return False
        return all(bool(c.holds(observation.value(c.metric))) for c in self.problem.constraints)

    def best_observed(self, fidelity: float = 1.0) -> int | None:
        """The best configuration run at ``fidelity`` that was observed feasible."""
        obj = self.problem.objective
        best, best_value = None, math.inf
        for s, o in self.history:
            if not math.isclose(s.fidelity, fidelity) or not self.observed_feasible(o):
                continue
            value = o.value(obj.metric)
            value = value if obj.direction == "min" else -value
            if value < best_value:
                best, best_value = s.config_id, value
        return best

    def recommend_best_observed(self) -> Recommendation | None:
        """The recommendation of most algorithms: the best configuration run at full size
        and observed feasible."""
        best = self.best_observed()
        return None if best is None else Recommendation(best)

    def lhs_configs(self, n: int, candidates: np.ndarray | None = None) -> list[int]:
        """``n`` distinct configurations by Latin hypercube sampling (scipy.stats.qmc) over
        the feature space, each mapped to the nearest not-yet-chosen candidate."""
        from scipy.stats import qmc

        ids = np.arange(self.space.n_configs) if candidates is None else np.asarray(candidates)
        n = min(n, len(ids))
        feats = self.space.features[ids]
        lo, hi = feats.min(axis=0), feats.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        points = qmc.LatinHypercube(d=feats.shape[1], seed=self.rng).random(n)
        unit = (feats - lo) / span
        free = np.ones(len(ids), dtype=bool)
        chosen = []
        for p in points:
            dist = np.where(free, ((unit - p) ** 2).sum(axis=1), np.inf)
            j = int(np.argmin(dist))
            free[j] = False
            chosen.append(int(ids[j]))
        return chosen


def describe(cls: type[Optimizer]) -> list[dict[str, Any]]:
    """Rows of ``farm optimizers``: each parameter, its default, allowed values and meaning."""
    return [
        {"name": p.name, "default": p.default, "allowed": p.allowed(), "doc": p.doc}
        for p in cls.params
    ]
