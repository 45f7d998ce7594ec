"""The run loop: one ``Stepper`` drives every optimizer run (``run_one``, ``farm bench``, the
tests): bootstrap, then suggest -> oracle.run -> observe until the optimizer stops, the
budget or iteration limit is reached, or the incumbent meets the spec's ``until`` target, one
trace row per evaluation; with the spec's ``deadline`` every run is stopped at the problem's
deadline (``Stepper``).

Each row's ``incumbent_*`` columns are the configuration the farm credits (the best tested
feasible one by the run's own observations, ``optfarm.farm.run.recommendation.TestedIncumbent``),
its ``pick_*`` columns the optimizer's own recommendation.

Oracle time is simulated (the job time from the data), never slept. The recommendation
latency of a step is observe() of the previous observation + suggest()
(``optfarm.farm.run.metrics``); the first step's is the warm-up (imports, numba compilation), kept
apart.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, cast

import numpy as np
import pyarrow as pa

from optfarm.farm.run.checkpoint import Checkpoint, RunState
from optfarm.farm.run.metrics import recommendation_quality, summarize, target_check
from optfarm.farm.run.recommendation import TestedIncumbent
from optfarm.farm.run.spec import RunSpec
from optfarm.optimizers.base import Optimizer
from optfarm.optimizers.blas import OneThread
from optfarm.optimizers.executor import Executor
from optfarm.optimizers.registry import make_optimizer
from optfarm.optimizers.seeds import keyed_generator
from optfarm.oracle.contract import Observation, Suggestion
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.registry import load

__all__ = [
    "PICK_COLUMNS",
    "RunResult",
    "STATISTICS_COLUMNS",
    "Step",
    "Stepper",
    "TIMING_COLUMNS",
    "TRACE_SCHEMA",
    "execute",
    "incumbent",
    "run_one",
]

TRACE_SCHEMA = pa.schema(
    [
        ("run_key", pa.string()),
        ("dataset", pa.string()),
        ("optimizer", pa.string()),
        ("params", pa.string()),
        ("seed", pa.int64()),
        ("step", pa.int64()),
        ("phase", pa.string()),
        ("config_id", pa.int64()),
        ("config", pa.string()),
        ("fidelity", pa.float64()),
        ("time", pa.float64()),
        ("cost", pa.float64()),
        ("accuracy", pa.float64()),
        ("timed_out", pa.bool_()),
        ("cum_exploration_cost", pa.float64()),
        ("cum_exploration_time", pa.float64()),
        ("incumbent_config_id", pa.int64()),
        ("incumbent_cno", pa.float64()),
        ("incumbent_accuracy_c", pa.float64()),
        ("incumbent_feasible", pa.bool_()),
        ("recommendation_latency_s", pa.float64()),
        ("model_fit_s", pa.float64()),
        ("incumbent_fidelity", pa.float64()),
        ("incumbent_cno_raw", pa.float64()),
        ("warmup_s", pa.float64()),
        # the optimizer's own recommendation (``Optimizer.recommend``), beside the credited
        # incumbent above (``optfarm.farm.run.recommendation``); statistics read it only where a
        # paper's statistic is defined on every optimizer's own pick
        ("pick_config_id", pa.int64()),
        ("pick_fidelity", pa.float64()),
        ("pick_cno", pa.float64()),
        ("pick_cno_raw", pa.float64()),
        ("pick_accuracy_c", pa.float64()),
        ("pick_feasible", pa.bool_()),
        # the observed values of the dataset's named metrics (``DatasetMeta.named_metrics``;
        # empty for a run stopped by its time cap or a dataset that measures none)
        ("metrics", pa.map_(pa.string(), pa.float64())),
    ]
)
# the columns that are measured, not computed: they differ between two runs of one spec
TIMING_COLUMNS = ("recommendation_latency_s", "model_fit_s", "warmup_s")
# the columns the statistics of a report read (``optfarm.farm.report.analysis.analyse``), run_key
# first
STATISTICS_COLUMNS = (
    "run_key",
    "cum_exploration_cost",
    "cum_exploration_time",
    "incumbent_cno",
    "incumbent_accuracy_c",
    "incumbent_feasible",
    "recommendation_latency_s",
    "model_fit_s",
)
# the optimizer's own pick's, which the statistics read when present (absent from traces stored
# before the farm credited only tested configurations: their incumbent columns hold the pick)
PICK_COLUMNS = ("pick_cno", "pick_accuracy_c", "pick_feasible")


@dataclass(frozen=True)
class RunResult:
    summary: dict
    trace: pa.Table
    # CPU-seconds the run spent before it resumed from its checkpoint, in earlier processes
    # (``optfarm.farm.run.checkpoint``): a run's CPU is this and what its last process measured
    cpu_s_before: float = 0.0


def execute(oracle: Oracle, suggestion: Suggestion, rng: np.random.Generator) -> Observation:
    """Run ``suggestion`` on the oracle as the benchmark loop does: at its fidelity, under its
    time cap, granting its ``snapshots`` and ``reveal_full_cost`` requests (``Suggestion``)."""
    obs = oracle.run(suggestion.config_id, suggestion.fidelity, rng, suggestion.time_cap)
    if suggestion.snapshots:
        obs = replace(
            obs,
            snapshots={f: oracle.run(suggestion.config_id, f, rng) for f in suggestion.snapshots},
        )
    if obs.timed_out and suggestion.reveal_full_cost:
        obs = replace(
            obs, full_cost=oracle.true_value(suggestion.config_id, suggestion.fidelity, "cost")
        )
    return obs


def incumbent(optimizer: Optimizer) -> tuple[int | None, float]:
    """The optimizer's recommendation as (config_id, fidelity); (None, 1.0) without one."""
    rec = optimizer.recommend()
    return (None, 1.0) if rec is None else (rec.config_id, rec.fidelity)


@dataclass(frozen=True)
class Step:
    """One evaluation: what was suggested, what the oracle measured, and the seconds the
    optimizer took to recommend it (observe of the previous observation + suggest; the
    first step's is the warm-up) and to observe it."""

    suggestion: Suggestion
    observation: Observation
    latency_s: float
    observe_s: float


class Stepper:
    """Drives ``optimizer`` on ``oracle`` as every run does: ``suggest_and_run`` (the
    optimizer's suggest, then the suggestion run on the oracle), ``observe`` (the optimizer's),
    or both with ``step``. It owns the oracle's noise stream, seeded apart from the
    optimizer's (``[seed, 7]``), and the cumulative exploration cost and time.

    With ``deadline`` the harness stops every run at the problem's deadline (its ``time <=
    T``: ``Problem.deadline``), whatever the optimizer: a run still going at T is stopped
    there and charged as a job runner would charge it, T x its price (the oracle's time cap,
    ``timed_out``); an optimizer's own time cap (Lynceus' timeout policies) applies on top,
    the earlier of the two stopping the run. The optimizer observes the suggestion as run,
    so it sees the cap that stopped the run."""

    def __init__(self, optimizer: Optimizer, oracle: Oracle, seed: int, deadline: bool = False):
        self.optimizer = optimizer
        self.oracle = oracle
        self.deadline = oracle.problem.deadline if deadline else None
        self.noise = keyed_generator(seed, 7)  # the oracle's draws
        self.spent = 0.0
        self.elapsed = 0.0
        self.steps = 0
        self._observe_s = 0.0  # the last observe(), part of the next recommendation

    def suggest_and_run(self) -> tuple[Suggestion, Observation, float] | None:
        """The next suggestion as run (its time cap lowered to the deadline, if that came
        first), its observation, and the recommendation latency; None when the optimizer
        stops."""
        t0 = time.perf_counter()
        suggestion = self.optimizer.suggest()
        latency = self._observe_s + time.perf_counter() - t0
        if suggestion is None:
            return None
        run = self.under_deadline(suggestion)
        return run, execute(self.oracle, run, self.noise), latency

    def under_deadline(self, suggestion: Suggestion) -> Suggestion:
        """``suggestion`` as the harness runs it: its time cap lowered to the deadline."""
        cap = suggestion.time_cap
        if self.deadline is None or cap is not None and cap <= self.deadline:
            return suggestion
        return replace(suggestion, time_cap=self.deadline)

    def observe(self, suggestion: Suggestion, observation: Observation) -> float:
        """Observe; returns the seconds observe() took."""
        t0 = time.perf_counter()
        self.optimizer.observe(suggestion, observation)
        self._observe_s = time.perf_counter() - t0
        self.spent += observation.cost
        self.elapsed += observation.time
        self.steps += 1
        return self._observe_s

    def step(self) -> Step | None:
        """One suggest -> run -> observe; None when the optimizer stops."""
        ran = self.suggest_and_run()
        if ran is None:
            return None
        suggestion, observation, latency = ran
        return Step(suggestion, observation, latency, self.observe(suggestion, observation))

    def stop_reason(self, iterations: int | None = None) -> str | None:
        """ "iterations" or "budget" when the run must stop before the next step, else None."""
        if iterations is not None and self.steps >= iterations:
            return "iterations"
        if self.spent >= self.oracle.problem.budget:
            return "budget"
        return None


def run_one(
    spec: RunSpec,
    oracle: Oracle | None = None,
    executor: Executor | None = None,
    on_step: Callable[[dict], None] | None = None,
    checkpoint: Checkpoint | None = None,
) -> RunResult:
    """Run one optimizer run as ``spec`` says. ``oracle`` (already built over the spec's
    dataset and problem) saves loading; ``executor`` carries the optimizer's inner work;
    ``on_step`` is given each trace row as it is made (progress); with ``checkpoint`` the run
    resumes from it when it holds one and writes it as it goes
    (``optfarm.farm.run.checkpoint``). The run keeps every numeric library of the process on
    one thread (``optfarm.optimizers.blas.OneThread``): the farm's parallelism is across runs."""
    with OneThread() as threads:
        try:
            return _run(spec, oracle, executor, on_step, threads, checkpoint)
        except Exception as e:
            if checkpoint is not None and checkpoint.resumed:  # a retry starts afresh
                checkpoint.set_aside(f"the run resumed from it failed ({type(e).__name__})")
            raise


def _oracle(spec: RunSpec) -> Oracle:
    """The oracle over the resolved ``spec``'s dataset and problem."""
    dataset = load(spec.dataset)
    aggregate = cast(Literal["sample", "mean"], spec.aggregate)  # Oracle checks it
    return Oracle(dataset, spec.problem(dataset), aggregate=aggregate)


def _optimizer(spec: RunSpec, oracle: Oracle, executor: Executor | None) -> Optimizer:
    """A fresh optimizer of the resolved ``spec`` over ``oracle``."""
    return make_optimizer(
        spec.optimizer,
        oracle.space,
        oracle.problem,
        spec.seed,
        executor,
        evaluations=spec.design_evaluations,
        **spec.params,
    )


def _run(
    spec: RunSpec,
    oracle: Oracle | None,
    executor: Executor | None,
    on_step: Callable[[dict], None] | None,
    threads: OneThread,
    checkpoint: Checkpoint | None,
) -> RunResult:
    spec = spec.resolved()
    c0 = time.process_time()
    oracle, state = _resumed(spec, oracle, executor, checkpoint)
    opt, stepper, credited, rows = state.optimizer, state.stepper, state.credited, state.rows
    warmup = state.warmup
    reached = None if spec.until is None else target_check(oracle, spec.until)
    run_columns = _run_columns(spec)
    while (stop := stepper.stop_reason(spec.iterations)) is None:
        if checkpoint is not None and checkpoint.due():
            cpu_s = state.cpu_s + time.process_time() - c0
            checkpoint.save(RunState(opt, stepper, credited, rows, warmup, cpu_s), oracle, executor)
        threads.refresh()  # a library the optimizer loaded last step (torch on its first ask)
        step = stepper.step()
        if step is None:
            stop = opt.stop_reason  # converged, budget, exhausted, gave up: N repeats
            break
        s, obs = step.suggestion, step.observation
        credited.add(s.config_id, s.fidelity, obs)
        inc, inc_fid = credited.best()
        quality = recommendation_quality(oracle, inc, inc_fid)
        columns = _step_columns(oracle, opt, stepper, step, len(rows), (inc, inc_fid), quality)
        if warmup is None:
            warmup = step.latency_s
        rows.append({**run_columns, **columns})
        if on_step is not None:
            on_step(rows[-1])
        if reached is not None and reached(quality):
            stop = "target"
            break
    trace = pa.Table.from_pylist(rows, schema=TRACE_SCHEMA)
    summary = summarize(spec, oracle, trace, credited, incumbent(opt), stop, warmup)
    return RunResult(summary, trace, state.cpu_s)


def _resumed(
    spec: RunSpec, oracle: Oracle | None, executor: Executor | None, checkpoint: Checkpoint | None
) -> tuple[Oracle, RunState]:
    """The oracle (loaded when not given) and the run's start: its checkpoint's state when it
    holds one, else a fresh optimizer, stepper and credited incumbent."""
    if oracle is None:
        oracle = _oracle(spec)
    saved = None if checkpoint is None else checkpoint.load(oracle, executor)
    if saved is not None:
        return oracle, saved
    opt = _optimizer(spec, oracle, executor)
    if checkpoint is not None and not opt.resumable:
        checkpoint.off()
    stepper = Stepper(opt, oracle, spec.seed, spec.deadline)
    credited = TestedIncumbent(oracle.problem, any_fidelity=opt.recommends_fidelity)
    return oracle, RunState(opt, stepper, credited, [], None)


def _run_columns(spec: RunSpec) -> dict:
    """The trace columns every row of the run shares: which run it is."""
    return {
        "run_key": spec.run_key,
        "dataset": spec.dataset,
        "optimizer": spec.optimizer,
        "params": json.dumps(spec.params, sort_keys=True, default=str),
        "seed": spec.seed,
    }


def _step_columns(
    oracle: Oracle,
    opt: Optimizer,
    stepper: Stepper,
    step: Step,
    n: int,
    credited: tuple[int | None, float],
    quality: dict,
) -> dict:
    """The trace columns of the run's ``n``-th step: what ran and what it measured, the
    credited incumbent (``credited``, of ``quality``) and the optimizer's own pick."""
    s, obs = step.suggestion, step.observation
    inc, inc_fid = credited
    pick, pick_fid = incumbent(opt)
    picked = (
        quality
        if (pick, pick_fid) == (inc, inc_fid)
        else recommendation_quality(oracle, pick, pick_fid)
    )
    return {
        "step": n,
        "phase": s.phase,
        "config_id": s.config_id,
        "config": json.dumps(oracle.space.config(s.config_id)),
        "fidelity": s.fidelity,
        "time": obs.time,
        "cost": obs.cost,
        "accuracy": obs.accuracy,
        "timed_out": obs.timed_out,
        "cum_exploration_cost": stepper.spent,
        "cum_exploration_time": stepper.elapsed,
        "incumbent_config_id": inc,
        "incumbent_cno": quality.get("cno", math.nan),
        "incumbent_cno_raw": quality.get("cno_raw", math.nan),
        "incumbent_accuracy_c": quality.get("accuracy_c", math.nan),
        "incumbent_feasible": quality["feasible"],
        "incumbent_fidelity": inc_fid,
        "recommendation_latency_s": math.nan if n == 0 else step.latency_s,
        "warmup_s": step.latency_s if n == 0 else math.nan,
        "model_fit_s": step.observe_s,
        "pick_config_id": pick,
        "pick_fidelity": pick_fid,
        "pick_cno": picked.get("cno", math.nan),
        "pick_cno_raw": picked.get("cno_raw", math.nan),
        "pick_accuracy_c": picked.get("accuracy_c", math.nan),
        "pick_feasible": picked["feasible"],
        "metrics": {k: float(v) for k, v in obs.metrics.items()},
    }
