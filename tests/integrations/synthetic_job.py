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
from optfarm.oracle.oracle import Observation, Oracle
from optfarm.oracle.synthetic import make_synthetic

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
