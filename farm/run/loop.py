"""The serial benchmark loop: bootstrap, then suggest -> oracle.run -> observe until the
optimizer stops or the budget or iteration limit is reached, one trace row per evaluation.

Oracle time is simulated (the job time from the data), never slept. The time ``suggest``
takes is the recommendation latency.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from farm.run.metrics import summarize
from farm.run.spec import RunSpec
from optimizers.base import Suggestion
from optimizers.executor import Executor
from optimizers.registry import make_optimizer
from oracle.oracle import Observation, Oracle
from oracle.registry import load

__all__ = ["RunResult", "execute", "run_one", "TRACE_SCHEMA"]

TRACE_SCHEMA = pa.schema([
    ("run_key", pa.string()), ("dataset", pa.string()), ("optimizer", pa.string()),
    ("params", pa.string()), ("seed", pa.int64()), ("step", pa.int64()),
    ("phase", pa.string()), ("config_id", pa.int64()), ("config", pa.string()),
    ("fidelity", pa.float64()), ("time", pa.float64()), ("cost", pa.float64()),
    ("accuracy", pa.float64()), ("timed_out", pa.bool_()),
    ("cum_exploration_cost", pa.float64()), ("cum_exploration_time", pa.float64()),
    ("incumbent_config_id", pa.int64()), ("incumbent_cno", pa.float64()),
    ("incumbent_accuracy_c", pa.float64()), ("incumbent_feasible", pa.bool_()),
    ("recommendation_latency_s", pa.float64()), ("model_fit_s", pa.float64()),
    ("incumbent_fidelity", pa.float64()),
])


@dataclass(frozen=True)
class RunResult:
    summary: dict
    trace: pa.Table


def execute(oracle: Oracle, suggestion: Suggestion, rng: np.random.Generator) -> Observation:
    """Run ``suggestion`` on the oracle as the benchmark loop does: at its fidelity, under its
    time cap, plus what the simulation grants some algorithms:

    - ``info["snapshots"]``: one training run also measured these smaller dataset sizes
      (TrimTuner's bootstrap); they are not charged and come back in ``extra["snapshots"]``
      as {s: Observation};
    - ``info["reveal_full"]`` (Lynceus' IDEAL timeout policy): a capped run is charged as
      capped, and ``extra["full_cost"]`` tells what the full run would have cost.
    """
    obs = oracle.run(suggestion.config_id, suggestion.fidelity, rng, suggestion.time_cap)
    if suggestion.info.get("snapshots"):
        snapshots = {f: oracle.run(suggestion.config_id, f, rng)
                     for f in suggestion.info["snapshots"]}
        obs = replace(obs, extra={**obs.extra, "snapshots": snapshots})
    if obs.timed_out and suggestion.info.get("reveal_full"):
        obs = replace(obs, extra={**obs.extra, "full_cost": oracle.true_value(
            suggestion.config_id, suggestion.fidelity, "cost")})
    return obs


def run_one(spec: RunSpec, oracle: Oracle | None = None,
            executor: Executor | None = None,
            on_step: Callable[[dict], None] | None = None) -> RunResult:
    """Run one optimizer run as ``spec`` says. ``oracle`` (already built over the spec's
    dataset and problem) saves loading; ``executor`` carries the optimizer's inner work;
    ``on_step`` is given each trace row as it is made (progress)."""
    spec = spec.resolved()
    if oracle is None:
        dataset = load(spec.dataset)
        oracle = Oracle(dataset, spec.problem(dataset), aggregate=spec.aggregate)
    problem = oracle.problem
    space = oracle.space
    opt = make_optimizer(spec.optimizer, space, problem, spec.seed, executor, **spec.params)
    noise = np.random.default_rng([spec.seed, 7])  # the oracle's draws, apart from the optimizer's
    key, params = spec.run_key, json.dumps(spec.params, sort_keys=True, default=str)
    rows: list[dict] = []
    cum_cost = cum_time = 0.0
    stop = "optimizer"
    while True:
        if spec.iterations is not None and len(rows) >= spec.iterations:
            stop = "iterations"
            break
        if cum_cost >= problem.budget:
            stop = "budget"
            break
        t0 = time.perf_counter()
        suggestion = opt.suggest()
        latency = time.perf_counter() - t0
        if suggestion is None:
            break
        obs = execute(oracle, suggestion, noise)
        t1 = time.perf_counter()
        opt.observe(suggestion, obs)
        fit = time.perf_counter() - t1
        cum_cost += obs.cost
        cum_time += obs.time
        inc = opt.recommend()
        # an optimizer over dataset sizes (Nephele) recommends a (config_id, fidelity) pair
        inc, inc_fid = inc if isinstance(inc, tuple) else (inc, 1.0)
        is_cno = problem.metric == "cno"
        rows.append({
            "run_key": key, "dataset": spec.dataset, "optimizer": spec.optimizer,
            "params": params, "seed": spec.seed, "step": len(rows), "phase": suggestion.phase,
            "config_id": suggestion.config_id,
            "config": json.dumps(space.config(suggestion.config_id)),
            "fidelity": suggestion.fidelity, "time": obs.time, "cost": obs.cost,
            "accuracy": obs.accuracy, "timed_out": obs.timed_out,
            "cum_exploration_cost": cum_cost, "cum_exploration_time": cum_time,
            "incumbent_config_id": inc,
            "incumbent_cno": oracle.cno(inc, inc_fid) if is_cno else math.nan,
            "incumbent_accuracy_c": math.nan if is_cno else oracle.accuracy_c(inc),
            "incumbent_feasible": oracle.is_feasible(inc, inc_fid),
            "incumbent_fidelity": inc_fid,
            "recommendation_latency_s": latency, "model_fit_s": fit,
        })
        if on_step is not None:
            on_step(rows[-1])
    trace = pa.Table.from_pylist(rows, schema=TRACE_SCHEMA)
    return RunResult(summarize(spec, oracle, trace, opt.recommend(), stop), trace)
