"""A leaderboard's price before it runs (``farm leaderboard SPEC --plan``).

The plan counts the runs of the resolved board (``optfarm.farm.sweep.board_spec``) per optimizer and
prices them with CPU seconds per evaluation *measured*, never assumed: each optimizer is
driven here, in this process, for its bootstrap and then ``steps`` model-guided evaluations
on one of the board's tables (seed 0, without the board's budget so that the bootstrap never
uses it up; nothing stored or tracked), and its CPU per evaluation is the mean over the
evaluations after the bootstrap (over every evaluation when it stopped before). A plan
printed with ``--json`` holds that table; ``--step-costs FILE`` prices a board with it
instead of measuring again (e.g. measured once on a quiet machine).

A run's evaluations are estimated as min(configurations of its table, the spec's iteration
limit, its budget / the table's mean configuration cost): the board stops every run at the
budget it sets on the table (``optfarm.farm.sweep.board_spec``), which buys that many evaluations of
configurations of mean cost (an optimizer that finds cheaper ones makes more, one that stops
early fewer). Later steps see
more observations than the measured ones, so model-fitting optimizers cost more per step
late in a run: read the plan as an order of magnitude. Wall time on the cluster: the total
over its CPUs, and never less than the longest single run.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from optfarm.farm.run.loop import Stepper
from optfarm.farm.run.metrics import mean_config_cost
from optfarm.farm.run.spec import RunSpec
from optfarm.optimizers.registry import make_optimizer
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.registry import load

__all__ = ["measure_step_costs", "plan_rows", "wall_hours"]

MAX_BOOTSTRAP = 100  # evaluations a measurement waits for the bootstrap to end


def measure_step_costs(runs: Sequence[RunSpec], steps: int) -> dict[str, dict[str, Any]]:
    """CPU seconds per evaluation of each optimizer of ``runs`` (module docstring), measured
    on the first table it runs on, on its first grid point."""
    first: dict[str, RunSpec] = {}
    for run in runs:
        first.setdefault(run.optimizer, run)
    return {
        name: _measure_one(replace(run.resolved(), budget=None, iterations=None), steps)
        for name, run in first.items()
    }


def _measure_one(run: RunSpec, steps: int) -> dict[str, Any]:
    dataset = load(run.dataset)
    oracle = Oracle(dataset, run.problem(dataset), aggregate=run.aggregate)
    opt = make_optimizer(run.optimizer, oracle.space, oracle.problem, 0, **run.params)
    stepper = Stepper(opt, oracle, 0)
    guided, every = [], []
    while len(guided) < steps and len(every) < steps + MAX_BOOTSTRAP:
        c0 = time.process_time()
        step = stepper.step()
        if step is None:
            break
        cpu = time.process_time() - c0
        every.append(cpu)
        if step.suggestion.phase != "init":
            guided.append(cpu)
    measured = guided or every
    return {
        "dataset": run.dataset,
        "evaluations": len(measured),
        "after_bootstrap": bool(guided),
        "cpu_per_evaluation_s": sum(measured) / max(len(measured), 1),
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _evaluations(run: RunSpec, configs: int, mean_cost: float) -> int:
    """A run's estimated evaluations (module docstring)."""
    cap = run.iterations or math.inf
    # the spec rounds budgets to 6 significant digits: 8 x the mean cost buys 8, not 9
    bought = math.ceil(run.budget / mean_cost * (1 - 1e-6)) if run.budget else math.inf
    return int(min(configs, cap, max(bought, 1)))


def _tables(runs: Sequence[RunSpec]) -> dict[str, tuple[int, float]]:
    """Each table's configurations and mean configuration cost (the mean true cost at s = 1,
    as a run summary's ``mean_config_cost``)."""
    out = {}
    for run in runs:
        if run.dataset not in out:
            dataset = load(run.dataset)
            oracle = Oracle(dataset, run.problem(dataset), aggregate=run.aggregate)
            out[run.dataset] = (oracle.space.n_configs, mean_config_cost(oracle))
    return out


def plan_rows(runs: Sequence[RunSpec], costs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per optimizer: runs, estimated evaluations per run (mean), measured CPU per
    evaluation, estimated CPU hours, and its longest run's CPU seconds."""
    tables = _tables(runs)
    acc: dict[str, dict[str, float]] = defaultdict(
        lambda: {"runs": 0, "evals": 0.0, "longest": 0.0}
    )
    for run in runs:
        n = _evaluations(run, *tables[run.dataset])
        a = acc[run.optimizer]
        a["runs"] += 1
        a["evals"] += n
        a["longest"] = max(a["longest"], n * costs[run.optimizer]["cpu_per_evaluation_s"])
    rows = []
    for name, a in acc.items():
        c = costs[name]
        rows.append(
            {
                "optimizer": name,
                "runs": int(a["runs"]),
                "evaluations_per_run": a["evals"] / a["runs"],
                "cpu_per_evaluation_s": c["cpu_per_evaluation_s"],
                "measured_on": f"{c['dataset']} ({c['evaluations']} evaluations"
                f"{' after the bootstrap' if c['after_bootstrap'] else ''})",
                "cpu_hours": a["evals"] * c["cpu_per_evaluation_s"] / 3600.0,
                "longest_run_s": a["longest"],
            }
        )
    return sorted(rows, key=lambda r: -r["cpu_hours"])


def wall_hours(rows: Sequence[dict[str, Any]], cpus: int) -> float:
    """The board's wall time on ``cpus`` CPUs: total CPU over them, at least the longest run."""
    total = sum(r["cpu_hours"] for r in rows)
    longest = max((r["longest_run_s"] for r in rows), default=0.0) / 3600.0
    return max(total / max(cpus, 1), longest)
