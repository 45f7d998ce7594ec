"""A small synthetic cloud job for the adapter tests: the synthetic dataset's analytic model
run as a job (mean of its noisy repeated measurements, so a job is deterministic, as the
farm's ``aggregate="mean"``), stopped at a time cap as a real job would be, and the farm run
it should match."""

from __future__ import annotations

import functools
import math
from typing import Any

from optfarm.farm.run.loop import run_one
from optfarm.farm.run.spec import RunSpec
from optfarm.oracle import Constraint, Dimension, Objective, Problem, SearchSpace
from optfarm.oracle.oracle import Observation, Oracle
from optfarm.oracle.synthetic import FLAVORS, WORKERS, make_synthetic

OPTIMIZER, SEED, PARAMS, EVALUATIONS = "lynceus", 0, {"la": 1}, 40


@functools.cache
def oracle() -> Oracle:
    return Oracle(make_synthetic(), aggregate="mean")


def run_job(config: dict[str, Any], fidelity: float, time_cap: float | None) -> Observation:
    """Run the job on ``config`` at dataset size ``fidelity`` for at most ``time_cap`` s."""
    o = oracle()
    return o.run(o.space.index(config), fidelity, None, time_cap)


def farm_run():
    """``farm run`` of the same optimizer and seed on the same job: its trace."""
    spec = RunSpec("synthetic", OPTIMIZER, SEED, PARAMS, iterations=EVALUATIONS, aggregate="mean")
    return run_one(spec, oracle()).trace


def evaluations_to(cnos: list[float], feasible: list[bool], target: float = 1.1) -> int | None:
    """1-based evaluation at which the recommendation first is feasible with CNO <= target."""
    return next(
        (
            i + 1
            for i, (c, f) in enumerate(zip(cnos, feasible))
            if f and c <= target + 1e-12 and not math.isnan(c)
        ),
        None,
    )


# -- the documentation's job (docs/guide/ask-tell.md states the convention) --------------------
# the synthetic job's settings a documented example does not choose
DOC_FIXED = {"learning_rate": 1e-4, "batch_size": 64, "synchronism": "sync"}
DOC_TIME_LIMIT = 3600.0  # seconds: 7 of the 20 (flavour, workers) configurations meet it


def doc_space_problem() -> tuple[SearchSpace, Problem]:
    """The ``space`` and ``problem`` a documented block uses without defining them: the
    synthetic job's VM flavours x worker counts (its price model), cost minimised under a
    one-hour limit."""
    space = SearchSpace.product(
        [
            Dimension("vm_flavor", "categorical", tuple(FLAVORS)),
            Dimension("n_workers", "ordinal", WORKERS, log=True),
        ],
        price_per_s=lambda c: (c["n_workers"] + 1) * FLAVORS[c["vm_flavor"]][1] / 3600,
    )
    problem = Problem(
        Objective("cost", "min"), (Constraint("time", "<=", DOC_TIME_LIMIT),), budget=20.0
    )
    return space, problem


def run_my_job(config: dict[str, Any], time_cap: float | None = None) -> tuple[float, float, bool]:
    """The documented examples' ``run_my_job`` on the synthetic job: the configuration (its
    ``DOC_FIXED`` settings added) run on the whole data, stopped at ``time_cap``; (seconds,
    dollars, whether it finished)."""
    obs = run_job({**DOC_FIXED, **config}, 1.0, time_cap)
    return obs.time, obs.cost, not obs.timed_out
