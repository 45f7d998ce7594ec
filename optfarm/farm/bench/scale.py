"""Every optimizer against table size (``farm bench --scale``): CPU per step and max RSS on
generated tables of about 384, 2,300, 9,200 and 50,000 configurations (issue 41).

The tables are sizes of one family, the generated cloud grids of ``optfarm.oracle.cloud_grid``
(VM type x count x framework knobs x threads, min cost s.t. ``time <= T`` with about 1% of the
configurations feasible): ``cloud-grid-9216`` and ``cloud-grid-50176`` as ``farm run`` knows
them, and two smaller grids of the same model (``SCALE_GRIDS``). Their one-hot columns grow
with the table (10, 14, 22 and 46 model features), and with them the GP optimizers'
hyperparameter samples (emcee walkers, 3 x their hyperparameters): a larger table costs those
optimizers more per configuration too.

Each (optimizer, size) runs in a fresh interpreter of its own (``python -m
optfarm.farm.bench.scale``), so that its max RSS (``getrusage``'s ``ru_maxrss``: the table, the
oracle and the optimizer) is its own, with one BLAS/numba thread (``ONE_THREAD_ENV``), pinned
to one CPU, and with its address space capped (``memory_cap_gb``, ``RLIMIT_AS``) so that a run
that would outgrow the machine fails with a ``MemoryError`` instead of waking the kernel's
out-of-memory killer. The cap is set once the table and its oracle are built and the
optimizer's module is imported, and a cap below what the process then maps (about 1.6 GB: the
interpreter, numba's LLVM, the libraries) is a row at once: under it, whichever allocation
came first failed (numpy's ``MemoryError``, a lazy import's ``failed to map segment``, OpenBLAS
giving up), so the row depended on the install. It drives the farm's loop (``Stepper``:
suggest, the oracle's run, observe, then the recommendation the loop asks for every step) for
``evaluations`` evaluations with the optimizer's default parameters and the run's evaluation
budget, as ``farm run --iterations`` does, and measures CPU seconds (``time.process_time``):
per evaluation (the whole loop, model fits included) and per model-guided ``suggest`` (search
phase).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from optfarm.farm.run.loop import Stepper
from optfarm.optimizers.blas import ONE_THREAD_ENV
from optfarm.optimizers.registry import available, get, make_optimizer
from optfarm.oracle.cloud_grid import GRIDS, Grid, make_cloud_grid
from optfarm.oracle.dataset import Dataset
from optfarm.oracle.oracle import Oracle

__all__ = ["SCALE_GRIDS", "COLUMNS", "measure_run", "scale_dataset", "scale_rows"]

# configurations -> the grid of that size (families, VM counts, framework knobs)
SCALE_GRIDS: dict[int, Grid] = {
    384: Grid("c", 3, 2),
    2304: Grid("cm", 9, 2),
    9216: GRIDS["cloud-grid-9216"],
    50176: GRIDS["cloud-grid-50176"],
}
COLUMNS = (
    "optimizer",
    "configs",
    "features",
    "evaluations",
    "search",
    "cpu_per_eval_s",
    "search_suggest_s",
    "max_rss_mb",
    "status",
)


def scale_dataset(size: int) -> Dataset:
    """The generated table of ``size`` configurations (a key of ``SCALE_GRIDS``)."""
    if size not in SCALE_GRIDS:
        raise ValueError(
            f"--scale: no generated table of {size} configurations "
            f"(sizes: {', '.join(map(str, SCALE_GRIDS))})"
        )
    grid = SCALE_GRIDS[size]
    return make_cloud_grid(grid.name, grid=grid)


def measure_run(
    optimizer: str, size: int, evaluations: int, seed: int = 0, oracle: Oracle | None = None
) -> dict[str, Any]:
    """One row, measured in this process: ``optimizer`` (default parameters) run for
    ``evaluations`` evaluations on the table of ``size`` configurations (``oracle``: over it,
    when already built)."""
    oracle = Oracle(scale_dataset(size)) if oracle is None else oracle
    opt = make_optimizer(optimizer, oracle.space, oracle.problem, seed, evaluations=evaluations)
    stepper = Stepper(opt, oracle, seed)
    guided: list[float] = []
    start = time.process_time()
    while stepper.steps < evaluations:
        before = time.process_time()
        ran = stepper.suggest_and_run()
        if ran is None:
            break
        suggestion, observation, _ = ran
        if suggestion.phase == "search":
            guided.append(time.process_time() - before)
        stepper.observe(suggestion, observation)
        opt.recommend()
    cpu = time.process_time() - start
    return {
        "optimizer": optimizer,
        "dataset": oracle.dataset.name,
        "configs": oracle.space.n_configs,
        "features": int(oracle.space.features.shape[1]),
        "evaluations": stepper.steps,
        "search": len(guided),
        "cpu_s": cpu,
        "cpu_per_eval_s": cpu / max(stepper.steps, 1),
        "search_suggest_s": sum(guided) / len(guided) if guided else None,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "stop_reason": opt.stop_reason if stepper.steps < evaluations else "iterations",
        "status": "ok",
    }


def _child(request: Mapping[str, Any]) -> int:
    """The measuring process: print its row (``_capped_row``)."""
    print(json.dumps(_capped_row(request)))
    return 0


def _capped_row(request: Mapping[str, Any]) -> dict[str, Any]:
    """Build the table's oracle and import the optimizer, cap the address space, pin to one
    CPU, run: the row, or the cap's failure."""
    oracle = Oracle(scale_dataset(int(request["size"])))
    get(request["optimizer"])
    over = f"MemoryError over the {request['memory_cap_gb']} GB cap"
    mapped = _mapped_gb()
    if mapped >= float(request["memory_cap_gb"]):  # every new mapping would fail, anywhere
        why = f"the interpreter, its libraries and the table already map {mapped:.1f} GB"
        return _failed(request, f"{over}: {why}")
    cap = int(float(request["memory_cap_gb"]) * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    try:
        return measure_run(
            request["optimizer"],
            int(request["size"]),
            int(request["evaluations"]),
            int(request["seed"]),
            oracle,
        )
    except MemoryError as e:
        return _failed(request, f"{over}: {e}" if str(e) else over)


def _mapped_gb() -> float:
    """The address space this process maps now (``VmSize``), in GB."""
    with open("/proc/self/status") as status:
        size_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    return size_kb * 1024 / 2**30


def _failed(request: Mapping[str, Any], status: str) -> dict[str, Any]:
    return {
        "optimizer": request["optimizer"],
        "dataset": SCALE_GRIDS[int(request["size"])].name,
        "configs": int(request["size"]),
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "status": status,
    }


def _measured(request: Mapping[str, Any]) -> dict[str, Any]:
    """The row of ``request`` measured in a fresh interpreter (module docstring)."""
    env = {**os.environ, **ONE_THREAD_ENV}
    cmd = [sys.executable, "-m", "optfarm.farm.bench.scale", json.dumps(dict(request))]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        return json.loads(lines[-1])
    why = (
        f"killed by signal {-done.returncode}"
        if done.returncode < 0
        else (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    )
    return _failed(request, why)


def scale_rows(
    optimizers: Sequence[str] | None,
    sizes: Sequence[int],
    evaluations: int = 25,
    seed: int = 0,
    memory_cap_gb: float = 8.0,
    progress: Callable[[dict], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (optimizer, size) measured in its own process, sizes outermost; ``optimizers``
    None: every optimizer ``farm optimizers`` lists."""
    for size in sizes:
        scale_dataset(size)  # an unknown size is refused before anything runs
    rows = []
    for size in sizes:
        for name in optimizers or available():
            request = {
                "optimizer": name,
                "size": size,
                "evaluations": evaluations,
                "seed": seed,
                "memory_cap_gb": memory_cap_gb,
            }
            rows.append(_measured(request))
            if progress:
                progress(rows[-1])
    return rows


if __name__ == "__main__":
    sys.exit(_child(json.loads(sys.argv[1])))
