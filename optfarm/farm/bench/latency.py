"""Recommendation latency benchmark (``farm bench``): how long ``suggest()`` takes at fixed
points of a real run, next to what the papers report.

For each case (optimizer, parameters, dataset) one run is driven with a fixed seed by the run
loop's ``optfarm.farm.run.loop.Stepper`` (suggest -> oracle.run -> observe). At point ``n`` the run
has made ``n - 1`` observations and the oracle has run the ``n``-th suggestion; the optimizer
is deep-copied ``repeats`` times (after one untimed warm-up copy per case and executor, at
every point until one whose suggestion is model-based: numba compilation happens in the
model, which a bootstrap suggestion never runs; Ray workers) and each copy times ``observe(n-th
observation)`` (the model refits some optimizers do as data arrive) then ``suggest()`` (the latency
the run loop records), so the timed suggestion is the one made after ``n`` observations. ``total`` =
observe + suggest is the papers' "time to recommend the next configuration"
(``optfarm.farm.run.metrics``; the warm-up copy's total is reported apart, ``warmup_s``); ratio =
paper / our median total (wall), for model-based (search-phase) suggestions only. CPU seconds of the
process are reported beside the wall times: on a shared machine they are what a run would take on a
core of its own. Copies share nothing with the driven run, so timing never changes the run, and
every copy must suggest the same configuration (a mismatch is reported; with the Ray executor
this also checks that the executor does not change results). Points a run never reaches (the
optimizer stopped, the budget ran out, or reaching them would exceed ``max_drive_s``) are reported,
not timed; suggestions made in a bootstrap phase are flagged.

One core: the measuring process (``optfarm.farm.cli.bench_process``) is a fresh interpreter started
with OMP/OPENBLAS/MKL/NUMBA/... thread counts set to 1 (``ONE_THREAD_ENV``) before numpy loads
and pinned to one CPU with ``os.sched_setaffinity``. With ``--executor ray`` the interpreter is
not pinned (its Ray workers inherit the affinity of the process that starts them) but every
process keeps one BLAS/numba thread; each point is then timed serially and through the farm's
Ray executor with ``workers`` CPUs, and the speed-up is serial / Ray (median suggest).

``--runs K`` times K whole runs per case instead and extrapolates a sweep's CPU hours
(``sweep_estimate``); by default the Lynceus TF comparison.

References: [Lynceus] seeds/002 Table II; [TrimTuner] seeds/001 Tables III-IV
(``optfarm.farm.report.papers``).
"""

from __future__ import annotations

import copy
import functools
import gc
import math
import os
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optfarm.farm.report.papers import paper_latency
from optfarm.farm.run.loop import Stepper
from optfarm.farm.run.metrics import quantile
from optfarm.optimizers.blas import ONE_THREAD_ENV

__all__ = [
    "BenchCase",
    "DEFAULT_CASES",
    "ONE_THREAD_ENV",
    "parse_cases",
    "bench",
    "bench_case",
    "format_rows",
    "json_default",
    "machine_info",
    "LYNCEUS_TF_SWEEP",
    "sweep_estimate",
]


@dataclass(frozen=True)
class BenchCase:
    """One optimizer with parameters on one dataset."""

    optimizer: str
    dataset: str
    params: Mapping[str, Any] = field(default_factory=dict)


# The set: Lynceus LA 0-3 on lynceus-rnn (Lynceus Table II), TrimTuner DT and GP with
# CEA 10% and EIc on trimtuner-rnn (TrimTuner Tables III-IV).
DEFAULT_CASES: tuple[BenchCase, ...] = (
    *(BenchCase("lynceus", "lynceus-rnn", {"la": la}) for la in (0, 1, 2, 3)),
    BenchCase("trimtuner", "trimtuner-rnn", {"model": "dt", "filter": "cea", "beta": 0.1}),
    BenchCase("trimtuner", "trimtuner-rnn", {"model": "gp", "filter": "cea", "beta": 0.1}),
    BenchCase("eic", "trimtuner-rnn"),
)
_HOME_DATASET = {
    "lynceus": "lynceus-rnn",
    "eic-usd": "lynceus-rnn",
    "obol": "lynceus-rnn",
    "cherrypick-trees": "lynceus-rnn",
    "trimtuner": "trimtuner-rnn",
    "eic": "trimtuner-rnn",
    "fabolas": "trimtuner-rnn",
    "fabulinus": "trimtuner-rnn",
    "nephele": "trimtuner-rnn",
}


def parse_cases(optimizers: str | None, datasets: str | None) -> list[BenchCase]:
    """Cases from the command line: ``optimizers`` is ``name[:key=value...]`` separated by
    commas (``lynceus:la=2,trimtuner:model=dt:beta=0.1``); with ``datasets`` every optimizer
    runs on every dataset, without it each on its paper dataset (synthetic if none). Neither:
    ``DEFAULT_CASES``."""
    dsets = [d.strip() for d in datasets.split(",") if d.strip()] if datasets else []
    if not optimizers:
        cases = list(DEFAULT_CASES)
        return [c for c in cases if c.dataset in dsets] if dsets else cases
    cases = []
    for item in (s.strip() for s in optimizers.split(",")):
        if not item:
            continue
        name, *pairs = item.split(":")
        params = _parse_params(item, pairs)
        for d in dsets or [_HOME_DATASET.get(name, "synthetic")]:
            cases.append(BenchCase(name.strip(), d, params))
    if not cases:
        raise ValueError(f"--optimizers {optimizers!r} names no optimizer")
    return cases


def _parse_params(item: str, pairs: Sequence[str]) -> dict[str, str]:
    """``key=value`` pairs of one ``--optimizers`` item as a dict."""
    params = {}
    for p in pairs:
        if "=" not in p:
            raise ValueError(f"--optimizers: {p!r} in {item!r} is not of the form key=value")
        k, v = p.split("=", 1)
        params[k.strip()] = v.strip()
    return params


def _timed(fn) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of this process, result) of ``fn()``."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def _time_point(opt, pending, repeats: int, executor, warm_up: bool) -> dict[str, Any]:
    """Time observe(pending) + suggest() on ``repeats`` deep copies of ``opt``, after one
    untimed copy when ``warm_up`` (numba compilation, Ray workers' imports)."""
    sug, sug_cpu, obs, total, total_cpu, picks, phases = [], [], [], [], [], set(), set()
    warmup = None
    for k in range(repeats + warm_up):
        c = copy.deepcopy(opt)
        if executor is not None:
            c.executor = executor
        t_obs, c_obs, _ = _timed(functools.partial(c.observe, *pending))
        t_sug, c_sug, s = _timed(c.suggest)
        picks.add(None if s is None else (s.config_id, round(float(s.fidelity), 12)))
        phases.add("stop" if s is None else s.phase)
        if k < warm_up:
            warmup = t_obs + t_sug
            continue
        sug.append(t_sug)
        sug_cpu.append(c_sug)
        obs.append(t_obs)
        total.append(t_obs + t_sug)
        total_cpu.append(c_obs + c_sug)
    # the copies' timings, every one of them (latency_stats would drop the first as a run's
    # warm-up: the warm-up copy is already apart)
    suggest, recommend = (
        {"median": float(np.median(v)), "p90": quantile(v, 0.9)} for v in (sug, total)
    )
    return {
        "suggest_median_s": suggest["median"],
        "suggest_p90_s": suggest["p90"],
        "suggest_cpu_median_s": float(np.median(sug_cpu)),
        "observe_median_s": float(np.median(obs)),
        "total_median_s": recommend["median"],
        "total_p90_s": recommend["p90"],
        "total_cpu_median_s": float(np.median(total_cpu)),
        "suggestion": next(iter(picks)) if len(picks) == 1 else None,
        "phase": "/".join(sorted(phases)),
        "warmup_s": warmup,
        "consistent": len(picks) == 1,
    }


def bench_case(
    case: BenchCase,
    points: Sequence[int],
    repeats: int,
    seed: int = 0,
    executors: Mapping[str, Any] | None = None,
    max_drive_s: float = math.inf,
) -> list[dict[str, Any]]:
    """Rows (one per point and executor) for one case. ``executors`` maps a label to an
    executor for the timed copies (None: the optimizer's own serial one); the run itself is
    always driven serially, so every executor sees the same states. A point whose drive would
    take the case past ``max_drive_s`` seconds (estimated from the last timed step) is
    reported as skipped."""
    executors = dict(executors or {"serial": None})
    opt, stepper, paper = _start_run(case, seed)
    base = _base_row(case, seed, repeats, paper)
    rows: list[dict[str, Any]] = []
    drive_s, stopped, step_s, warm = 0.0, None, 0.0, set()
    for point in sorted(set(points)):
        ahead = point - 1 - len(opt.history)
        if stopped is None and drive_s + ahead * step_s > max_drive_s:
            stopped = f"--max-drive-s {max_drive_s:g} (about {ahead * step_s:.0f} s more needed)"
        t0 = time.perf_counter()
        pending, stopped = _drive_to(stepper, opt, point, stopped)
        drive_s += time.perf_counter() - t0
        if pending is None:
            rows.append(
                {
                    **base,
                    "at": point,
                    "executor": "-",
                    "status": "skipped",
                    "note": f"stopped by {stopped} after {len(opt.history)} observations",
                }
            )
            continue
        timed = _time_executors(
            opt, pending, repeats, executors, warm, paper, {**base, "at": point}, drive_s
        )
        rows.extend(timed)
        step_s = timed[0]["total_median_s"]
        stepper.observe(*pending)
    return rows


def _start_run(case: BenchCase, seed: int):
    """(optimizer, stepper, paper latency or None) of a fresh run of ``case``."""
    from optfarm.farm.run.spec import RunSpec
    from optfarm.optimizers.registry import make_optimizer
    from optfarm.oracle.oracle import Oracle
    from optfarm.oracle.registry import load

    spec = RunSpec(case.dataset, case.optimizer, seed=seed, params=dict(case.params)).resolved()
    dataset = load(spec.dataset)
    oracle = Oracle(dataset, spec.problem(dataset), aggregate=spec.aggregate)
    opt = make_optimizer(
        spec.optimizer, oracle.space, oracle.problem, spec.seed, None, **spec.params
    )
    paper = paper_latency(spec.optimizer, spec.params, spec.dataset)
    return opt, Stepper(opt, oracle, spec.seed), paper


def _base_row(case: BenchCase, seed: int, repeats: int, paper) -> dict[str, Any]:
    """The columns every row of ``case`` shares."""
    return {
        "optimizer": case.optimizer,
        "params": _params_text(case.params),
        "dataset": case.dataset,
        "seed": seed,
        "repeats": repeats,
        "paper_s": paper.seconds if paper else None,
        "paper_ref": paper.ref if paper else None,
        "paper_machine": paper.machine if paper else None,
    }


def _drive_to(stepper: Stepper, opt, point: int, stopped: str | None):
    """Step the run until it has ``point - 1`` observations, then suggest and run the
    ``point``-th configuration: (its pending observation or None, why the run stopped or
    None)."""
    while stopped is None and len(opt.history) < point - 1:
        stopped = stepper.stop_reason()
        if stopped is None and stepper.step() is None:
            stopped = "optimizer"
    if stopped is None:
        stopped = stepper.stop_reason()
    if stopped is not None:
        return None, stopped
    ran = stepper.suggest_and_run()
    if ran is None:
        return None, "optimizer"
    return ran[:2], None


def _time_executors(
    opt,
    pending,
    repeats: int,
    executors: Mapping[str, Any],
    warm: set,
    paper,
    base: dict[str, Any],
    drive_s: float,
) -> list[dict[str, Any]]:
    """One row per executor for one point (the first executor's is the serial reference);
    adds to ``warm`` the labels whose warm-up ran the model."""
    rows, serial = [], None
    for label, executor in executors.items():
        timing = _time_point(opt, pending, repeats, executor, warm_up=label not in warm)
        if "search" in timing["phase"]:  # the model ran (and compiled) in the warm-up
            warm.add(label)
        compared = paper is not None and timing["phase"] == "search"
        row = {
            **base,
            "executor": label,
            "status": "ok",
            **timing,
            "ratio": paper.seconds / timing["total_median_s"] if compared else None,
            "drive_s": drive_s,
        }
        notes = [] if timing["consistent"] else ["copies suggested different configs"]
        if timing["phase"] != "search":
            notes.append(f"{timing['phase']} phase: not a model-based suggestion")
        if serial is None:
            serial = timing
        else:
            row["speedup"] = serial["suggest_median_s"] / timing["suggest_median_s"]
            row["same_as_serial"] = (
                timing["suggestion"] == serial["suggestion"]
                and timing["consistent"]
                and serial["consistent"]
            )
            if not row["same_as_serial"]:
                notes.append("differs from the serial suggestion")
        row["note"] = "; ".join(notes)
        rows.append(row)
    return rows


def _params_text(params: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items())


def bench(
    cases: Sequence[BenchCase],
    points: Sequence[int],
    repeats: int,
    seed: int = 0,
    executor: str = "serial",
    workers: int = 2,
    max_drive_s: float = math.inf,
    progress=None,
) -> list[dict[str, Any]]:
    """Every case at every point. Cases whose optimizer is not registered or whose dataset is
    not in the cache, and default cases whose optimizer lacks one of their parameters, are
    reported as skipped rows with a note (a bad parameter the user gave is a ParameterError).
    ``executor="ray"`` also times each point through the farm's Ray executor."""
    from optfarm.optimizers.registry import OPTIMIZERS, get
    from optfarm.oracle.registry import available

    if repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {repeats}")
    if not points or min(points) < 1:
        raise ValueError(f"--at points must be positive integers, got {list(points)}")
    if executor not in ("serial", "ray"):
        raise ValueError(f"--executor {executor!r} is not serial or ray")
    executors: dict[str, Any] = {"serial": None}
    if executor == "ray":
        executors[f"ray x{workers}"] = _ray_executor(workers)
    have = set(available())
    rows = []
    for case in cases:
        base = {
            "optimizer": case.optimizer,
            "params": _params_text(case.params),
            "dataset": case.dataset,
            "status": "skipped",
        }
        if case.optimizer not in OPTIMIZERS:
            rows.append({**base, "note": "optimizer not registered"})
            continue
        known = {p.name for p in get(case.optimizer).params}
        unknown = sorted(set(case.params) - known)
        if unknown and case in DEFAULT_CASES:
            rows.append({**base, "note": f"{case.optimizer} has no parameter {unknown[0]!r}"})
            continue
        if case.dataset not in have:
            rows.append(
                {**base, "note": f"dataset not fetched (farm datasets fetch {case.dataset})"}
            )
            continue
        new = bench_case(case, points, repeats, seed, executors, max_drive_s)
        rows.extend(new)
        if progress:
            for r in new:
                progress(r)
    return rows


# The Lynceus TF comparison (Lynceus Sec. VI, Fig. 5): 3 TF jobs x Lynceus / EIc-USD / random.
LYNCEUS_TF_SWEEP: tuple[BenchCase, ...] = tuple(
    BenchCase(opt, f"lynceus-{job}")
    for job in ("cnn", "multilayer", "rnn")
    for opt in ("lynceus", "eic-usd", "random")
)


def sweep_estimate(
    cases: Sequence[BenchCase], runs: int, sweep_seeds: int, progress=None
) -> list[dict[str, Any]]:
    """Whole runs of each case (seeds 0..runs-1, as ``farm run`` runs them) timed on this
    process, and the case's share of a sweep of ``sweep_seeds`` seeds: mean CPU time of a
    run x seeds. CPU time, not wall time, because the machine may be shared: on one
    single-threaded core of its own a run takes its CPU time, and a sweep on W such workers
    takes about the sum over cases / W, plus the farm's overhead."""
    from optfarm.farm.run.loop import run_one
    from optfarm.farm.run.spec import RunSpec

    if runs < 1 or sweep_seeds < 1:
        raise ValueError(f"--runs and --sweep-seeds must be >= 1, got {runs}, {sweep_seeds}")
    rows = []
    for case in cases:
        walls, cpus, evals, suggest = [], [], [], []
        for seed in range(runs):
            c0, t0 = time.process_time(), time.perf_counter()
            result = run_one(RunSpec(case.dataset, case.optimizer, seed, dict(case.params)))
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            evals.append(result.summary["n_evaluations"])
            suggest.append(
                float(
                    np.nansum(
                        np.concatenate(
                            [
                                result.trace.column(c).to_numpy()
                                for c in ("recommendation_latency_s", "warmup_s")
                            ]
                        )
                    )
                )
            )
        row = {
            "optimizer": case.optimizer,
            "params": _params_text(case.params),
            "dataset": case.dataset,
            "runs": runs,
            "run_mean_s": float(np.mean(walls)),
            "run_max_s": float(np.max(walls)),
            "run_cpu_mean_s": float(np.mean(cpus)),
            "evaluations_mean": float(np.mean(evals)),
            "suggest_share": float(np.sum(suggest) / np.sum(walls)),
            "sweep_seeds": sweep_seeds,
            "sweep_cpu_s": float(np.mean(cpus)) * sweep_seeds,
        }
        rows.append(row)
        if progress:
            progress(row)
    return rows


def _ray_executor(workers: int):
    """The farm's Ray executor on a local Ray runtime with ``workers`` CPUs (loopback)."""
    from optfarm.farm.runtime.ray_runtime import RayExecutor, init_ray

    init_ray(num_cpus=workers)
    return RayExecutor()


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on: CPU, cores usable, load, thread settings."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu
            )
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "loadavg": list(os.getloadavg()),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "threads": {k: os.environ.get(k) for k in ONE_THREAD_ENV},
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


COLUMNS = (
    "optimizer",
    "params",
    "dataset",
    "at",
    "executor",
    "suggest_med",
    "suggest_p90",
    "suggest_cpu",
    "observe_med",
    "total_med",
    "total_cpu",
    "paper",
    "ratio",
    "speedup",
    "note",
)


def format_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows for the printed table: seconds with units, ratio = paper / our total."""

    def sec(v):
        return None if v is None else (f"{v * 1e3:.1f} ms" if v < 1 else f"{v:.3g} s")

    out = []
    for r in rows:
        paper = r.get("paper_s")
        out.append(
            {
                "optimizer": r["optimizer"],
                "params": r.get("params") or "-",
                "dataset": r["dataset"],
                "at": r.get("at"),
                "executor": r.get("executor"),
                "suggest_med": sec(r.get("suggest_median_s")),
                "suggest_p90": sec(r.get("suggest_p90_s")),
                "suggest_cpu": sec(r.get("suggest_cpu_median_s")),
                "observe_med": sec(r.get("observe_median_s")),
                "total_med": sec(r.get("total_median_s")),
                "total_cpu": sec(r.get("total_cpu_median_s")),
                "paper": None if paper is None else f"{sec(paper)} ({r['paper_ref']})",
                "ratio": None if r.get("ratio") is None else f"{r['ratio']:.3g}x",
                "speedup": None if r.get("speedup") is None else f"{r['speedup']:.2f}x",
                "note": r.get("note") or None,
            }
        )
    return out


def json_default(o):
    """The rows' numpy scalars and tuples as JSON."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serialisable: {o!r}")
