"""The farm benchmark: what Ray, the actors and the results store add to a sweep, and how
throughput scales with workers.

    farm bench-farm [--runs 200] [--dataset synthetic] [--optimizer random] [--workers 2]


    farm bench-farm --tracking 500,2000,20000 [--iterations 5] [--tracking-server postgresql]
    farm bench-farm --resume 2000,20000 [--iterations 5]

Cases, each over the same ``--runs`` runs (seeds 0..N-1):
  loop        the in-process loop: ``run_one`` over a cached oracle, nothing stored
  farm x1     ``run_sweep`` on a local Ray with one actor in flight (store writes included)
  farm xW     the same with W actors in flight
  resume      ``run_sweep`` again on the finished farm xW sweep: nothing to run (expand, read
              every record, verify what changed, find nothing to do); its cpu_ms_per_run is
              the driver's CPU time per run
Ray's start-up (``ray.init``) is timed apart: it is paid once per sweep, not per run. Each
case runs ``--repeats`` times, interleaved with the others; the table keeps the fastest.
Targets: farm x1 within 10% of the loop; farm x2 at least 1.7x the runs/s of farm x1. The
scaling case needs idle CPUs, so a control is timed alongside (``machine_speedup``: W plain
CPU-bound processes against one) and printed with the machine's load average: on a shared
machine the farm's speed-up should be read against it.

With ``--tracking SIZES`` it times instead what MLflow tracking (the default sqlite store in the
output folder) costs: for each size, a sweep with tracking off, then the same sweep with it on
(runs/s, and the per-run cost of the first and the last tenth of the runs: when a run was
stored, or with tracking when it was logged, so the drain of the logger's queue counts; with
tracking also the stored runs' tenths, and ``drain_s``: from the last run stored to the last
logged. The logger writes what is queued in batches, so a backlog (e.g. while the sqlite store
is created) is logged faster than the runs arrive, and the logged tenths read the logger's
pace, the stored ones the sweep's), then
a resume of the finished tracked sweep (``resume_s``: expand, verify every record and trace,
find nothing to run or log). Targets: tracking on >= half the runs/s of tracking off at 2,000
runs; last tenth within 10% of the first at 20,000; resume of 20,000 runs < 10 s. With
``--tracking-server postgresql`` the same sweeps are also tracked to a team's server: ``mlflow
server`` backed by its own PostgreSQL cluster on 127.0.0.1 (``optfarm.farm.bench.tracking_server``;
``--tracking-uri URI``: an existing server): the row "postgresql" through the server's REST
API, "postgresql-db" into the server's database (MLflow's database tracking URI),
"postgresql-app" through a second such server that runs optfarm's MLflow app (``mlflow server
--app-name optfarm``, ``optfarm.farm.tracking.mlflow_server_app``), beside "sqlite".

With ``--resume SIZES`` it times, for each size, a sweep with tracking off, then a resume of it
as ``farm sweep`` runs one (``resume_s``: files unchanged since written are not hashed again,
``optfarm.farm.store.store.VerifiedFiles``) and one with ``--verify`` (``verify_s``: every record
and trace hashed), each with the driver's CPU time, then ``farm report`` of it (``report_s``,
``report_cpu_s``, ``report_rss_mb``: its peak memory). Targets for 20,000 runs: resume < 10 s;
report < 20 s and < 500 MB.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

__all__ = ["machine_speedup", "report_cost", "resume_cost", "run", "tracking_cost"]


def _spec(dataset: str, optimizer: str, runs: int, iterations: int | None, in_flight: int):
    from optfarm.farm.sweep.spec import parse_spec

    return parse_spec(
        {
            "name": f"bench-{in_flight}",
            "datasets": [dataset],
            "optimizers": [optimizer],
            "seeds": runs,
            "limits": {"iterations": iterations},
            "runtime": {"max_in_flight": in_flight, "max_retries": 0},
            "tracking": {"enabled": False},
        }
    )


def _loop(spec) -> tuple[float, float, float]:
    from optfarm.farm.run.loop import run_one
    from optfarm.farm.runtime.serial import OracleCache
    from optfarm.farm.sweep.spec import expand
    from optfarm.oracle.registry import load

    runs = expand(spec)
    oracles = OracleCache(load)
    oracles.get(runs[0])  # dataset load and oracle index, as the farm's actors cache them
    t0, c0 = time.perf_counter(), time.process_time()
    for run in runs:
        run_one(run, oracles.get(run))
    return time.perf_counter() - t0, 1.0, (time.process_time() - c0) / len(runs)


def _farm(spec) -> tuple[float, float, float]:
    """(wall time, mean runs in flight: the runs' summed durations over the wall time, mean
    CPU seconds per run in the actors)."""
    from optfarm.farm.store.store import Store
    from optfarm.farm.sweep.runner import run_sweep

    with tempfile.TemporaryDirectory(prefix="optfarm-bench-") as out:
        t0 = time.perf_counter()
        report = run_sweep(spec, out, progress=False)
        wall = time.perf_counter() - t0
        records = list(Store(out).records())
    if not report.complete:
        raise RuntimeError(f"{report.failed} runs failed: {report.failures[0]['error']}")
    busy = sum(r["duration_s"] for r in records)
    return wall, busy / wall, float(np.mean([r["cpu_s"] for r in records]))


def _resume(spec) -> tuple[float, float, float]:
    """(wall time of a resume of the finished sweep, 0 runs in flight, the driver's CPU seconds
    per run)."""
    from optfarm.farm.sweep.runner import run_sweep

    with tempfile.TemporaryDirectory(prefix="optfarm-bench-") as out:
        run_sweep(spec, out, progress=False)
        t0, c0 = time.perf_counter(), time.process_time()
        report = run_sweep(spec, out, progress=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if report.skipped != len(report.runs):
        raise RuntimeError(f"the resume ran {report.done + report.failed} runs")
    return wall, 0.0, cpu / len(report.runs)


def resume_cost(
    sizes: list[int],
    dataset: str = "synthetic",
    optimizer: str = "random",
    iterations: int | None = 5,
    workers: int = 2,
) -> list[dict]:
    """One row per size: the sweep (tracking off), its resume and its resume with --verify."""
    from optfarm.farm.sweep.runner import run_sweep

    rows = []
    with _local_ray(workers):
        for n in sizes:
            spec = _spec(dataset, optimizer, n, iterations, workers)
            with tempfile.TemporaryDirectory(prefix="optfarm-bench-") as out:
                t0 = time.perf_counter()
                run_sweep(spec, out, progress=False)
                row = {"runs": n, "sweep_s": time.perf_counter() - t0}
                for name, verify in (("resume", False), ("verify", True)):
                    t0, c0 = time.perf_counter(), time.process_time()
                    again = run_sweep(spec, out, progress=False, verify=verify)
                    row[f"{name}_s"] = time.perf_counter() - t0
                    row[f"{name}_cpu_s"] = time.process_time() - c0
                    if again.skipped != n:
                        raise RuntimeError(f"the resume of {n} runs ran some again")
                row.update(report_cost(out))
            rows.append(row)
    return rows


def report_cost(sweep_dir: str) -> dict[str, float]:
    """``farm report`` of a finished sweep in a child process, as a user runs it: its wall
    and CPU time (``report_s``, ``report_cpu_s``: on a loaded machine the CPU time is what it
    needs) and peak resident memory (``report_rss_mb``), the child's own (``wait4``). Target
    for 20,000 runs: < 20 s and < 500 MB.

    The child is started by a small launcher process (``_MEASURE``), not by this one: a
    child's ``ru_maxrss`` counts the memory of the process it was forked from until it
    starts the program (Linux keeps the old memory's peak across ``exec``), so started from
    this process, which holds a 20,000-run sweep, it read 637 MB for a report that peaks at
    428 MB (measured)."""
    import subprocess
    import sys

    with (
        tempfile.TemporaryDirectory(prefix="optfarm-bench-report-") as report,
        tempfile.TemporaryFile() as err,
    ):
        measured = subprocess.run(
            [
                sys.executable,
                "-c",
                _MEASURE,
                sys.executable,
                "-m",
                "optfarm",
                "report",
                sweep_dir,
                "--out",
                report,
                "--no-tracking",
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            check=False,
        )
        if measured.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"farm report failed: {err.read().decode().strip()}")
    return json.loads(measured.stdout)


# runs its arguments as a child, silenced, and prints its wall, CPU and peak memory as JSON;
# exits with the child's exit code
_MEASURE = """
import json, os, subprocess, sys, time
t0 = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(json.dumps({"report_s": time.perf_counter() - t0,
                  "report_cpu_s": usage.ru_utime + usage.ru_stime,
                  "report_rss_mb": usage.ru_maxrss / 1024}))
sys.exit(os.waitstatus_to_exitcode(status))
"""


@contextmanager
def _local_ray(workers: int):
    """A local Ray of ``workers`` CPUs for the time of a benchmark."""
    # Ray as the farm imports it: imported here first, Ray's servers would not stay on 127.0.0.1
    from optfarm.farm.runtime.ray_runtime import init_ray, ray

    init_ray(num_cpus=workers)
    try:
        yield
    finally:
        ray.shutdown()


def _tenths(times: list[float]) -> tuple[float, float]:
    """Mean seconds per run of the first and the last tenth of the runs, from the times each
    was completed (the first tenth counted from the first run: start-up is not a run's)."""
    times = sorted(times)
    n = max(1, len(times) // 10)
    return (times[n] - times[0]) / n, (times[-1] - times[-n - 1]) / n


def _tracked_sweep(spec, out: str, tracking: bool, uri: str | None = None) -> dict:
    from optfarm.farm.sweep.runner import run_sweep

    t0 = time.time()
    report = run_sweep(spec, out, tracking=tracking, tracking_uri=uri, progress=False)
    wall = time.time() - t0
    if not report.complete or report.tracking_offline:
        raise RuntimeError(f"sweep incomplete ({report.failed} failed) or tracking offline")
    stored = [r["finished_at"] for r in report.records.values()]
    first, last = _tenths(stored)
    row = {
        "wall_s": wall,
        "runs_per_s": len(report.runs) / wall,
        "first_tenth_ms": 1000 * first,
        "last_tenth_ms": 1000 * last,
    }
    if tracking:
        lines = (Path(out) / "mlflow_runs.jsonl").read_text().splitlines()
        logged = [e["logged_at"] for e in map(json.loads, lines) if "key" in e]
        row["stored_first_tenth_ms"], row["stored_last_tenth_ms"] = (
            row["first_tenth_ms"],
            row["last_tenth_ms"],
        )
        first, last = _tenths(logged)
        row.update(
            first_tenth_ms=1000 * first,
            last_tenth_ms=1000 * last,
            drain_s=max(logged) - max(stored),
        )
    return row


def tracking_cost(
    sizes: list[int],
    dataset: str = "synthetic",
    optimizer: str = "random",
    iterations: int | None = 5,
    workers: int = 2,
    servers: dict[str, str] | None = None,
) -> list[dict]:
    """One row per size and tracking: off, on to the folder's sqlite store ("sqlite"), and on
    to each of ``servers`` (label -> tracking URI); with tracking, the resume time of the
    finished sweep."""
    from optfarm.farm.sweep.runner import run_sweep

    rows = []
    targets = {"off": None, "sqlite": None, **(servers or {})}
    with _local_ray(workers):
        for n in sizes:
            spec = _spec(dataset, optimizer, n, iterations, workers)
            for label, uri in targets.items():
                tracking = label != "off"
                with tempfile.TemporaryDirectory(prefix="optfarm-bench-") as out:
                    row = {"runs": n, "tracking": label, **_tracked_sweep(spec, out, tracking, uri)}
                    if tracking:
                        t0 = time.perf_counter()
                        again = run_sweep(
                            spec, out, tracking=True, tracking_uri=uri, progress=False
                        )
                        row["resume_s"] = time.perf_counter() - t0
                        assert again.skipped == n and again.done == 0
                rows.append(row)
    return rows


def _burn(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def machine_speedup(workers: int, n: int = 3_000_000) -> float:
    """The control: how much faster ``workers`` CPU-bound processes finish ``workers`` equal
    jobs than one process doing them in turn, on this machine, now (ideal: ``workers``)."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_burn, [1000] * workers))  # processes started before timing
        t0 = time.perf_counter()
        for _ in range(workers):
            _burn(n)
        serial = time.perf_counter() - t0
        t0 = time.perf_counter()
        list(pool.map(_burn, [n] * workers))
        return serial / (time.perf_counter() - t0)


def run(
    runs: int = 200,
    dataset: str = "synthetic",
    optimizer: str = "random",
    iterations: int | None = None,
    workers: int = 2,
    repeats: int = 3,
) -> dict:
    """Time the three cases ``repeats`` times, interleaved, and keep each case's fastest wall
    time (on a shared machine the minimum is the estimate least disturbed by other load);
    returns the table rows and the two ratios."""
    from optfarm.farm.runtime.ray_runtime import (  # first: Ray's servers on 127.0.0.1
        init_ray,
        ray,
    )

    t0 = time.perf_counter()
    init_ray(num_cpus=workers)
    ray_start = time.perf_counter() - t0
    cases = {
        "loop (in-process)": lambda: _loop(_spec(dataset, optimizer, runs, iterations, 1)),
        "farm, 1 worker": lambda: _farm(_spec(dataset, optimizer, runs, iterations, 1)),
        f"farm, {workers} workers": lambda: _farm(
            _spec(dataset, optimizer, runs, iterations, workers)
        ),
        "resume (all done)": lambda: _resume(_spec(dataset, optimizer, runs, iterations, workers)),
    }
    walls: dict[str, list[tuple[float, float, float]]] = {name: [] for name in cases}
    capacity = []
    for _ in range(repeats):
        capacity.append(machine_speedup(workers))
        for name, case in cases.items():
            walls[name].append(case())
    ray.shutdown()
    rows = [
        {
            "case": name,
            "wall_s": min(w)[0],
            "wall_max_s": max(w)[0],
            "in_flight": min(w)[1],
            "cpu_ms_per_run": 1000 * min(w)[2],
        }
        for name, w in walls.items()
    ]
    for r in rows:
        r["runs_per_s"] = runs / r["wall_s"]
        r["ms_per_run"] = 1000 * r["wall_s"] / runs
    loop, one, many, _ = (r["wall_s"] for r in rows)
    return {
        "rows": rows,
        "ray_start_s": ray_start,
        "overhead": one / loop - 1,
        "speedup": one / many,
        "workers": workers,
        "runs": runs,
        "repeats": repeats,
        "machine_speedup": float(np.median(capacity)),
        "load_average": os.getloadavg()[1],
        "cpus": os.cpu_count(),
    }
