"""The Optuna peers: Optuna's TPE, GP, CMA-ES and random samplers as farm optimizers (``pip
install 'optfarm[peers]'``), the optimizers a user would reach for instead of the papers'
ones, over the same table.

Each peer drives an in-memory Optuna study with the sampler's own ask/tell API, as
``table_peer.TablePeer`` says (memory answers, ``patience``), over Optuna's native
distributions: a categorical dimension is a ``CategoricalDistribution`` of its values, an
ordinal or numeric one an ``IntDistribution`` over the ranks of its measured values (Optuna
has no ordinal distribution; an integer keeps the order, and every rank is a value the table
measured; CMA-ES samples integers natively, with its margin, and is restarted from a random
mean with a doubled population when it stops bringing new configurations: IPOP,
``OptunaCmaEs``). A combination the table never measured is told as a pruned trial
(``TrialState.PRUNED``): TPE ranks pruned trials below every complete one, so it learns to
avoid the region; the GP and CMA-ES samplers ignore them, as they do failed trials.
Constraints go through Optuna's own mechanism, ``Trial.set_constraint`` (Optuna 5; TPE and
GP read them: relative violations, <= 0 feasible); CMA-ES has no constraint mechanism and is
told the penalised objective; random search ignores values. The sampler's seed is the run's (CMA-ES:
children of it, one pair per restart, ``optfarm.optimizers.seeds``).
Optuna is imported when a peer is built, never when the registry lists it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

from optfarm.oracle.problem import Problem
from optfarm.oracle.space import SearchSpace

from ..base import MemoryUse, Param
from ..seeds import spawned_seed
from .optuna_private import told_cma_state
from .table_peer import TablePeer

__all__ = ["OptunaTPE", "OptunaGP", "OptunaCmaEs", "OptunaRandom"]


class OptunaPeer(TablePeer):
    """An Optuna sampler over the dataset's table."""

    modules = ("optuna",)
    memory = MemoryUse(fixed=10e6, per_config=1.5e3)  # docs/results/memory.md

    def __init__(
        self, space: SearchSpace, problem: Problem, seed: int = 0, executor=None, **params: Any
    ):
        super().__init__(space, problem, seed, executor, **params)
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)  # no line per trial
        self.configurations = 0  # configurations run or running at the last ask
        self.ranked = {
            name: values for name, kind, values in self.grid.parameters() if kind == "ordinal"
        }
        self.distributions = {
            name: (
                optuna.distributions.CategoricalDistribution(values)
                if kind == "categorical"
                else optuna.distributions.IntDistribution(0, len(values) - 1)
            )
            for name, kind, values in self.grid.parameters()
        }
        self.studies = [self.new_study()]  # CMA-ES: one per restart

    @property
    def study(self):
        """The study the sampler asks in now."""
        return self.studies[-1]

    def trials(self, states=None) -> list:
        """Every trial of the run, over its studies, in order: a trial's index is the
        ``trial`` a suggestion's info names."""
        return [
            t for study in self.studies for t in study.get_trials(deepcopy=False, states=states)
        ]

    def new_study(self):
        """An in-memory study with the peer's sampler, in the problem's direction."""
        import optuna

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = self.sampler(optuna)
        direction = "minimize" if self.problem.objective.direction == "min" else "maximize"
        return optuna.create_study(direction=direction, sampler=sampler)

    def sampler(self, optuna):
        """The Optuna sampler, seeded with the run's seed."""
        raise NotImplementedError

    def new_since_last_ask(self) -> int:
        """Configurations run or running that came since the previous ask (called once an
        ask): 0 when that ask brought none (one already run, or one the table never measured)."""
        configurations = len(self.answers) + len(self.pending)
        new, self.configurations = configurations - self.configurations, configurations
        return new

    def ask(self) -> tuple[Any, Mapping[str, Any], int]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. CMA-ES sampling categoricals apart
            trial = self.study.ask(self.distributions)
        # an ordinal parameter's value is the rank of the dimension's value
        point = {
            name: self.ranked[name][v] if name in self.ranked else v
            for name, v in trial.params.items()
        }
        earlier = sum(len(study.get_trials(deepcopy=False)) for study in self.studies[:-1])
        return trial, point, earlier + trial.number

    def reject(self, trial) -> None:
        from optuna.trial import TrialState

        trial.study.tell(trial, state=TrialState.PRUNED)

    def tell(self, trial, value: float, constraints: list[float]) -> None:
        from optuna.trial import TrialState

        if math.isnan(value) or any(math.isnan(c) for c in constraints):
            trial.study.tell(trial, state=TrialState.FAIL)  # e.g. a run pending elsewhere
            return
        if self.constrained:
            for c, v in zip(self.problem.constraints, constraints):
                trial.set_constraint(str(c), v)
        trial.study.tell(trial, value)  # the trial's own study (CMA-ES: maybe not the current)

    def startup(self) -> int:
        """The sampler's random start (``n_startup_trials``, where its table has one), at most
        ``init_share`` of the run's evaluations."""
        declared = any(p.name == "n_startup_trials" for p in self.params)
        return self.initial_design(self.config["n_startup_trials"] if declared else 0, least=0)


class OptunaTPE(OptunaPeer):
    name = "optuna-tpe"
    summary = "Optuna's TPE sampler (constraints) over the table"
    params = TablePeer.params + (Param("n_startup_trials", 10, "random trials before TPE", low=0),)

    def sampler(self, optuna):
        return optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=self.startup())


class OptunaGP(OptunaPeer):
    """Optuna's GP sampler; after an ask that brought no new configuration (one already run,
    answered from memory, or a combination the table never measured, which the GP ignores),
    the next point is drawn at random over the space, until one brings a new configuration,
    as scikit-optimize's ``Optimizer`` replaces a point it has evaluated before by a random
    one. Converged, the GP proposed the same configurations again, refitting itself at every
    ask: on guindani-kmeans seed 0 its 11th configuration took 111 asks and 91 s, and a run
    had not ended after 13 minutes."""

    name = "optuna-gp"
    memory = MemoryUse(fixed=285e6, per_config=1.5e3)  # torch (docs/results/memory.md)
    summary = "Optuna's GP sampler (constraints; needs torch) over the table [peers extra]"
    modules = ("optuna", "torch", "greenlet")
    params = TablePeer.params + (
        Param("n_startup_trials", 10, "random trials before the GP", low=0),
    )

    def sampler(self, optuna):
        return optuna.samplers.GPSampler(seed=self.seed, n_startup_trials=self.startup())

    def ask(self) -> tuple[Any, Mapping[str, Any], int]:
        if self.new_since_last_ask() == 0 and self.trials():
            self.study.enqueue_trial(self.random_point())  # its params skip the GP
        return super().ask()

    def random_point(self) -> dict[str, Any]:
        """A point drawn uniformly over each distribution (Optuna's external values)."""
        return {
            name: (
                dist.choices[self.rng.integers(len(dist.choices))]
                if hasattr(dist, "choices")
                else int(self.rng.integers(dist.low, dist.high + 1))
            )
            for name, dist in self.distributions.items()
        }


class OptunaCmaEs(OptunaPeer):
    """Optuna's CMA-ES sampler, restarted from a random mean with a doubled population
    whenever it has stopped bringing new configurations (IPOP: Auger and Hansen, "A Restart
    CMA Evolution Strategy With Increasing Population Size", CEC 2005).

    Optuna runs no restart since 4.4 (``restart_strategy`` falls back to None; the peers pin
    Optuna 5.0), and without one a run went wrong both ways on the leaderboard's tables:
    converged, it proposed configurations already run until it gave up (cherrypick-kmeans,
    after 13-29 of the table's 47 configurations, at 50x its mean configuration cost);
    diverged, it overflowed. The divergence: the margin leaves an integer dimension's internal
    coordinate unbounded, and where the objective seen by CMA-ES is dominated by the
    categorical dimensions (sampled at random beside it), nothing pulls the mean back: on
    scout-join_bigdata_spark seed 1 (50x) its step size grew from 0.17 to 1e21 in 380
    generations, and cmaes refused the next one ("Abs of all param values must be less than
    1e+32").

    The peer restarts CMA-ES when cmaes' own ``should_stop`` fires on the state Optuna keeps
    with each generation (flat values, tolx, divergence as tolxup, no-effect axis or
    coordinate, conditioning), or when no new configuration has come for ``stagnation`` asks.
    A restart is a new study whose sampler has twice the population, a mean drawn uniformly
    over the space and the first start's step size (Optuna's ``min_range / 6``), as IPOP
    restarts and as Optuna's own ``restart_strategy`` did until 4.4 (its ``x0`` "is sampled
    uniformly within the search space domain for each restart"); configurations already run
    are answered from memory. Each restart starting at the space's centre, as it did before,
    and pycma's ``tolstagnation`` horizon (which grows with the population past the peer's
    patience), made CMA-ES give up on guindani-kmeans (20 configurations, one dimension) in
    10 of 10 runs after 15-19 configurations: three restarts converged back to the same
    configurations and never proposed the table's ends."""

    name = "optuna-cmaes"
    memory = MemoryUse(fixed=70e6, per_config=1.5e3)  # docs/results/memory.md
    summary = (
        "Optuna's CMA-ES sampler (no constraint mechanism: penalised objective; "
        "integers with margin, IPOP restarts, categoricals sampled at random) over the "
        "table"
    )
    modules = ("optuna", "cmaes")
    constrained = False

    def __init__(self, *args, **params: Any):
        self.restarts = 0
        self.popsize: int | None = None  # cmaes' default (4 + 3 ln n) until a restart
        self.x0: dict[str, float] | None = None  # the space's centre until a restart
        self.stuck = 0  # asks since the last new configuration
        self.state = None  # the CMA-ES state after the last generation told
        super().__init__(*args, **params)

    def sampler(self, optuna):
        # restart k's CMA-ES and its sampler of the categoricals draw children 2k and 2k + 1
        # of the run's seed: no stream is shared with another restart or another seed's run
        cma_seed, random_seed = (spawned_seed(self.seed, 2 * self.restarts + i) for i in (0, 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # x0: deprecated, kept until 6.0
            return optuna.samplers.CmaEsSampler(
                x0=self.x0,
                seed=cma_seed,
                warn_independent_sampling=False,
                with_margin=True,
                popsize=self.popsize,
                independent_sampler=optuna.samplers.RandomSampler(seed=random_seed),
            )

    def ask(self) -> tuple[Any, Mapping[str, Any], int]:
        self.stuck = 0 if self.new_since_last_ask() > 0 else self.stuck + 1
        told = self.told_state()
        self.state = self.state if told is None else told
        dim = len(self.ranked)  # CMA-ES's dimensions; categoricals are sampled at random
        popsize = self.popsize or 4 + math.floor(3 * math.log(max(dim, 1)))  # cmaes' default
        if dim and (
            (self.state is not None and self.state.should_stop())
            or self.stuck > stagnation(dim, popsize, self.config["patience"])
        ):
            self.restarts += 1
            self.popsize = 2 * popsize
            self.x0 = {
                name: float(self.rng.uniform(0, len(values) - 1))
                for name, values in self.ranked.items()
            }
            self.studies.append(self.new_study())
            self.state = None
            self.stuck = 0
        return super().ask()

    def told_state(self):
        """The CMA-ES state Optuna stored with the study's latest trial (pickled in its
        system attributes when that trial's ask told CMA-ES a generation), or None."""
        trials = self.study.get_trials(deepcopy=False)
        return told_cma_state(self.study.sampler, trials[-1]) if trials else None


class OptunaRandom(OptunaPeer):
    name = "optuna-random"
    summary = "Optuna's random sampler over the table's dimensions"
    has_model = False

    def sampler(self, optuna):
        return optuna.samplers.RandomSampler(seed=self.seed)


def stagnation(dim: int, popsize: int, patience: int) -> int:
    """Asks without a new configuration after which CMA-ES has stagnated: the generations
    over which cmaes and the BIPOP-CMA-ES test equal values, ``10 + ceil(30 n / popsize)``
    (Hansen, "Benchmarking a BI-Population CMA-ES on the BBOB-2009 Function Testbed",
    EqualFunValues; cmaes' ``tolfun`` history), of ``popsize`` asks each; a run's best value
    stays flat while no new configuration comes. At most half the peer's patience, so that
    CMA-ES restarts before the peer gives up (pycma's ``tolstagnation``, ``100 + 100 n^1.5 /
    popsize`` generations, was 3,300 asks at the population of 32 that guindani-kmeans
    reached, beyond the patience of 2,000). Counted in asks, not in generations told: a
    restart whose mean falls where the table measured nothing tells CMA-ES no generation
    (every ask is a pruned trial, which it ignores)."""
    generations = 10 + math.ceil(30 * dim / popsize)
    return min(generations * popsize, patience // 2)
