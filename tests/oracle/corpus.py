"""A corpus of synthetic but realistic measurement tables of jobs optfarm has never seen, each
written in its raw upstream form (column names with ``#``, ``-`` and spaces, time in ms,
minutes or hours, negated costs, percentages, repeated noisy rows) with the optfarm
description that imports it as it is, and the facts of each computed independently with
pandas (``expected_facts``).

``TABLES[name](seed) -> RawJob``; the tables are generated, never read from a dataset.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["RawJob", "TABLES", "expected_facts"]


@dataclass(frozen=True)
class RawJob:
    """A raw table and its description, plus what the facts need to be recomputed: the
    dimension columns, the time column and its scale to seconds, the cost per row (from the
    raw columns), the constrained metric columns with their scale, and the constraints in
    canonical units ``(metric, op, threshold)``."""

    name: str
    frame: pd.DataFrame
    description: str
    dims: tuple[str, ...]
    time_col: str
    time_scale: float
    cost: pd.Series
    metrics: dict  # metric -> (raw column, scale)
    constraints: tuple  # (metric, op, threshold in canonical units)


def _noisy(rng, values, cv):
    return values * np.exp(rng.normal(0.0, cv, size=np.shape(values)))


def _repeat(rng, frame: pd.DataFrame, low: int, high: int) -> pd.DataFrame:
    """Each configuration measured ``low..high`` times (rows shuffled, as logs are)."""
    reps = rng.integers(low, high + 1, size=len(frame))
    out = frame.loc[frame.index.repeat(reps)].reset_index(drop=True)
    return out.sample(frac=1.0, random_state=int(rng.integers(2**31))).reset_index(drop=True)


def spark_vms_1d(seed: int = 0) -> RawJob:
    """A Spark query on 2..40 VMs (20 configurations), the MALIBOO layout ``#vm,time,-cost``:
    time in ms, ``-cost`` the negated VM x ms; 3-6 noisy runs per configuration."""
    rng = np.random.default_rng(seed)
    vm = np.arange(2, 42, 2)
    base = 1000.0 * (60 + 5200 / vm + 1.5 * vm)
    f = _repeat(rng, pd.DataFrame({"#vm": vm, "base": base}), 3, 6)
    f["time"] = np.round(_noisy(rng, f["base"].to_numpy(), 0.06))
    f["-cost"] = -(f["time"] * f["#vm"])
    f = f.drop(columns="base")
    t_max_ms = float(np.round(np.median(base) * 0.95, -3))
    desc = f"""optfarm: table/1
name: spark-vms-1d
dimensions: [{{name: n_vm, column: "#vm", kind: ordinal, log: true}}]
columns: {{time: time}}
price: {{cost_column: "-`-cost`"}}
units: {{time: ms, cost: VM x ms}}
constraints: ["time<={t_max_ms:.0f}"]
"""
    return RawJob(
        "spark-vms-1d",
        f,
        desc,
        ("#vm",),
        "time",
        1e-3,
        -f["-cost"],
        {},
        (("time", "<=", t_max_ms / 1000),),
    )


def serverless_memory_1d(seed: int = 0) -> RawJob:
    """A serverless function over 20 memory sizes: ``duration ms`` and a price per GB-second
    (cost = GB x s x 0.0000166667, as billed), p99 latency constrained; 2-4 runs each."""
    rng = np.random.default_rng(seed)
    mem = np.array([128 * k for k in range(1, 21)])
    base = 400.0 + 180000.0 / mem
    f = _repeat(rng, pd.DataFrame({"memory MB": mem, "base": base}), 2, 4)
    f["duration ms"] = np.round(_noisy(rng, f["base"].to_numpy(), 0.05), 1)
    f["p99-latency ms"] = np.round(f["duration ms"] * 1.3 + rng.normal(0, 15, len(f)), 1)
    f = f.drop(columns="base")
    limit = float(np.round(np.median(base) * 1.3, -1))
    desc = f"""optfarm: table/1
name: serverless-memory-1d
dimensions: [{{name: memory_mb, column: memory MB, kind: ordinal, log: true}}]
columns: {{time: duration ms}}
metrics: {{p99_ms: "`p99-latency ms`"}}
price: {{formula: "`memory MB` / 1024 * 0.0000166667 * 3600"}}
units: {{time: ms, p99_ms: ms}}
constraints: ["p99_ms <= {limit:g} ms"]
"""
    cost = f["duration ms"] / 1000 * f["memory MB"] / 1024 * 0.0000166667
    return RawJob(
        "serverless-memory-1d",
        f,
        desc,
        ("memory MB",),
        "duration ms",
        1e-3,
        cost,
        {"p99_ms": ("p99-latency ms", 1.0)},
        (("p99_ms", "<=", limit),),
    )


VM_PRICES = {
    "m5.large": 0.096,
    "m5.xlarge": 0.192,
    "c5.xlarge": 0.17,
    "r5.xlarge": 0.252,
    "c5.2xlarge": 0.34,
}
VM_SPEED = {
    "m5.large": 1.0,
    "m5.xlarge": 1.9,
    "c5.xlarge": 2.2,
    "r5.xlarge": 1.8,
    "c5.2xlarge": 4.1,
}


def spark_grid_4d(seed: int = 0) -> RawJob:
    """A Spark job on 5 VM types x 25 cluster sizes x 10 executor memories x 8 partition
    counts = 10,000 configurations; ``Run time (s)``, the price column ``$/h per VM``;
    one run each, 5% measured twice."""
    rng = np.random.default_rng(seed)
    vms, ns = list(VM_PRICES), np.arange(2, 52, 2)
    mems, parts = np.arange(2, 22, 2), 2 ** np.arange(4, 12)
    grid = pd.DataFrame(
        list(itertools.product(vms, ns, mems, parts)),
        columns=["vm type", "#nodes", "executor mem GB", "partitions"],
    )
    speed = grid["vm type"].map(VM_SPEED).to_numpy()
    n, mem, p = (grid[c].to_numpy(float) for c in ("#nodes", "executor mem GB", "partitions"))
    spill = 1.0 + 2.0 * np.exp(-mem / 4.0)
    skew = 1.0 + 0.3 * np.abs(np.log2(p / (n * 16)))
    grid["base"] = 40.0 + 24000.0 / (speed * n**0.85) * spill * skew
    extra = grid.sample(frac=0.05, random_state=seed)
    f = pd.concat([grid, extra], ignore_index=True)
    f["Run time (s)"] = np.round(_noisy(rng, f["base"].to_numpy(), 0.05), 2)
    f["$/h per VM"] = f["vm type"].map(VM_PRICES)
    f = f.drop(columns="base")
    limit = float(np.round(np.quantile(grid["base"], 0.3), 0))
    desc = f"""optfarm: table/1
name: spark-grid-4d
dimensions:
  - {{name: vm_type, column: vm type, kind: categorical}}
  - {{name: nodes, column: "#nodes", kind: ordinal, log: true}}
  - {{name: executor_mem, column: executor mem GB, kind: ordinal}}
  - {{name: partitions, column: partitions, kind: ordinal, log: true}}
columns: {{time: Run time (s)}}
price: {{formula: "`$/h per VM` * `#nodes`"}}
constraints: ["time <= {limit:g} s"]
"""
    cost = f["Run time (s)"] / 3600 * f["$/h per VM"] * f["#nodes"]
    return RawJob(
        "spark-grid-4d",
        f,
        desc,
        ("vm type", "#nodes", "executor mem GB", "partitions"),
        "Run time (s)",
        1.0,
        cost,
        {},
        (("time", "<=", limit),),
    )


def md_simulation_8d(seed: int = 0) -> RawJob:
    """A molecular-dynamics ensemble, 8 knobs (timestep, cutoff, PME order, thermostat,
    nodes, GPUs per node, precision, neighbour-list interval), 2-3 levels each: 2,916
    configurations; ``wall (min)``, price per node-hour, constrained on the quality metric
    ``RMSD (A)`` (<= 2.1 A); 2 runs each."""
    rng = np.random.default_rng(seed)
    levels = {
        "timestep fs": [1.0, 2.0, 4.0],
        "cutoff nm": [0.9, 1.2, 1.5],
        "pme order": [4, 6],
        "thermostat": ["berendsen", "v-rescale", "nose-hoover"],
        "nodes": [1, 2, 4],
        "gpus/node": [1, 2, 4],
        "precision": ["mixed", "double"],
        "nstlist": [10, 20, 40],
    }
    grid = pd.DataFrame(list(itertools.product(*levels.values())), columns=list(levels))
    dt, rc, pme = (grid[c].to_numpy(float) for c in ("timestep fs", "cutoff nm", "pme order"))
    nodes, gpus, nst = (grid[c].to_numpy(float) for c in ("nodes", "gpus/node", "nstlist"))
    double = (grid["precision"] == "double").to_numpy()
    thermo = (
        grid["thermostat"]
        .map({"berendsen": 1.0, "v-rescale": 1.03, "nose-hoover": 1.08})
        .to_numpy()
    )
    work = 600.0 / dt * rc**3 * (1 + 0.1 * (pme - 4)) * np.where(double, 1.8, 1.0) * thermo
    grid["base_t"] = 2.0 + work / (nodes * gpus) ** 0.8 * (1 + 5.0 / nst)
    grid["base_r"] = (
        0.8
        + 0.35 * dt
        + 0.6 / rc
        + 0.2 * (pme == 4)
        + 0.15 * (thermo > 1.05)
        - 0.1 * double
        + 0.004 * nst
    )
    f = _repeat(rng, grid, 2, 2)
    f["wall (min)"] = np.round(_noisy(rng, f["base_t"].to_numpy(), 0.04), 3)
    f["RMSD (A)"] = np.round(_noisy(rng, f["base_r"].to_numpy(), 0.03), 3)
    f["node-hour price"] = 0.9 * f["gpus/node"] + 0.4
    f = f.drop(columns=["base_t", "base_r"])
    desc = """optfarm: table/1
name: md-simulation-8d
dimensions:
  - {name: timestep, column: timestep fs, kind: ordinal}
  - {name: cutoff, column: cutoff nm, kind: ordinal}
  - {name: pme_order, column: pme order, kind: ordinal}
  - {name: thermostat, kind: categorical}
  - {name: nodes, kind: ordinal, log: true}
  - {name: gpus, column: gpus/node, kind: ordinal, log: true}
  - {name: precision, kind: categorical}
  - {name: nstlist, kind: ordinal, log: true}
columns: {time: wall (min)}
metrics: {rmsd: "`RMSD (A)`"}
price: {formula: "`node-hour price` * nodes"}
units: {time: min, rmsd: A}
constraints: ["rmsd <= 2.1 A"]
"""
    cost = f["wall (min)"] * 60 / 3600 * f["node-hour price"] * f["nodes"]
    return RawJob(
        "md-simulation-8d",
        f,
        desc,
        tuple(levels),
        "wall (min)",
        60.0,
        cost,
        {"rmsd": ("RMSD (A)", 1.0)},
        (("rmsd", "<=", 2.1),),
    )


def training_accuracy_3d(seed: int = 0) -> RawJob:
    """Distributed training: 4 GPU types x 6 worker counts x 5 batch sizes (120
    configurations), ``train-time h``, validation accuracy in percent (``val acc %``,
    scaled by / 100), constrained to >= 0.9 and to a time limit; 1-3 runs each."""
    rng = np.random.default_rng(seed)
    gpus = {"T4": (0.53, 1.0), "V100": (3.06, 3.1), "A10G": (1.21, 2.0), "A100": (4.1, 5.0)}
    grid = pd.DataFrame(
        list(itertools.product(gpus, [1, 2, 4, 8, 16, 32], [64, 128, 256, 512, 1024])),
        columns=["gpu", "workers", "batch-size"],
    )
    speed = grid["gpu"].map({k: v[1] for k, v in gpus.items()}).to_numpy()
    w, b = grid["workers"].to_numpy(float), grid["batch-size"].to_numpy(float)
    grid["base_t"] = 0.05 + 12.0 / (speed * w**0.9) * (256 / b) ** 0.15
    grid["base_a"] = 93.5 - 1.2 * np.log2(w * b / 256).clip(0) ** 1.3
    f = _repeat(rng, grid, 1, 3)
    f["train-time h"] = np.round(_noisy(rng, f["base_t"].to_numpy(), 0.05), 4)
    f["val acc %"] = np.round(f["base_a"] + rng.normal(0, 0.3, len(f)), 2).clip(0, 100)
    f["price/h"] = f["gpu"].map({k: v[0] for k, v in gpus.items()}) * f["workers"]
    f = f.drop(columns=["base_t", "base_a"])
    desc = """optfarm: table/1
name: training-accuracy-3d
dimensions:
  - {name: gpu, kind: categorical}
  - {name: workers, kind: ordinal, log: true}
  - {name: batch, column: batch-size, kind: ordinal, log: true}
columns: {time: train-time h, accuracy: "`val acc %` / 100"}
price: {column: price/h}
units: {time: h}
constraints: ["accuracy >= 0.9", "time <= 2"]
"""
    cost = f["train-time h"] * f["price/h"]
    return RawJob(
        "training-accuracy-3d",
        f,
        desc,
        ("gpu", "workers", "batch-size"),
        "train-time h",
        3600.0,
        cost,
        {"accuracy": ("val acc %", 0.01)},
        (("accuracy", ">=", 0.9), ("time", "<=", 7200.0)),
    )


def hpc_energy_2d(seed: int = 0) -> RawJob:
    """An MPI solver on 1..64 nodes x 6 CPU frequencies (42 configurations): ``elapsed s``,
    ``energy kJ`` constrained (<= a budget), the centre's price per node-hour; 3 runs."""
    rng = np.random.default_rng(seed)
    grid = pd.DataFrame(
        list(itertools.product([1, 2, 4, 8, 16, 32, 64], [1.2, 1.6, 2.0, 2.4, 2.8, 3.2])),
        columns=["nodes", "freq GHz"],
    )
    n, fr = grid["nodes"].to_numpy(float), grid["freq GHz"].to_numpy(float)
    grid["base_t"] = 30.0 + 36000.0 / (n**0.9 * fr**0.8) + 4.0 * n
    grid["base_e"] = grid["base_t"] * n * (0.12 + 0.05 * fr**2)
    f = _repeat(rng, grid, 3, 3)
    f["elapsed s"] = np.round(_noisy(rng, f["base_t"].to_numpy(), 0.03), 1)
    f["energy kJ"] = np.round(
        f["elapsed s"]
        * f["nodes"]
        * (0.12 + 0.05 * f["freq GHz"] ** 2)
        * np.exp(rng.normal(0, 0.02, len(f))),
        2,
    )
    f = f.drop(columns=["base_t", "base_e"])
    limit = float(np.round(np.quantile(grid["base_e"], 0.4), -1))
    desc = f"""optfarm: table/1
name: hpc-energy-2d
dimensions:
  - {{name: nodes, kind: ordinal, log: true}}
  - {{name: freq, column: freq GHz, kind: ordinal}}
columns: {{time: elapsed s}}
metrics: {{energy: "`energy kJ`"}}
price: {{formula: "nodes * 0.65"}}
units: {{energy: kJ, cost: EUR}}
constraints: ["energy <= {limit:g} kJ"]
"""
    cost = f["elapsed s"] / 3600 * f["nodes"] * 0.65
    return RawJob(
        "hpc-energy-2d",
        f,
        desc,
        ("nodes", "freq GHz"),
        "elapsed s",
        1.0,
        cost,
        {"energy": ("energy kJ", 1.0)},
        (("energy", "<=", limit),),
    )


def etl_measured_cost_3d(seed: int = 0) -> RawJob:
    """A nightly ETL on 3 instance families x 8 sizes x 3 storage tiers (72
    configurations) whose bill is measured (``billed USD``, time in ``wall ms``); 2-5 noisy
    runs each, the price per configuration the median of billed / time."""
    rng = np.random.default_rng(seed)
    fam = {"general": (0.05, 1.0), "compute": (0.045, 1.25), "memory": (0.066, 1.1)}
    tier = {"hdd": 1.6, "ssd": 1.0, "nvme": 0.8}
    grid = pd.DataFrame(
        list(itertools.product(fam, [1, 2, 3, 4, 6, 8, 12, 16], tier)),
        columns=["instance family", "vcpu x4", "storage tier"],
    )
    v = grid["vcpu x4"].to_numpy(float)
    speed = grid["instance family"].map({k: s for k, (_, s) in fam.items()}).to_numpy()
    io = grid["storage tier"].map(tier).to_numpy()
    grid["base"] = 1000.0 * (90.0 + 3000.0 / (speed * v**0.8) * io)
    grid["rate"] = grid["instance family"].map({k: p for k, (p, _) in fam.items()}) * v * 4 + grid[
        "storage tier"
    ].map({"hdd": 0.01, "ssd": 0.03, "nvme": 0.06})
    f = _repeat(rng, grid, 2, 5)
    f["wall ms"] = np.round(_noisy(rng, f["base"].to_numpy(), 0.08))
    f["billed USD"] = np.round(f["wall ms"] / 3.6e6 * f["rate"], 6)
    f = f.drop(columns=["base", "rate"])
    limit_ms = float(np.round(np.quantile(grid["base"], 0.5), -3))
    desc = f"""optfarm: table/1
name: etl-measured-cost-3d
dimensions:
  - {{name: family, column: instance family, kind: categorical}}
  - {{name: vcpu4, column: vcpu x4, kind: ordinal, log: true}}
  - {{name: tier, column: storage tier, kind: categorical, values: [hdd, ssd, nvme]}}
columns: {{time: wall ms}}
price: {{cost_column: billed USD}}
units: {{time: ms}}
constraints: ["time<={limit_ms:.0f}"]
"""
    return RawJob(
        "etl-measured-cost-3d",
        f,
        desc,
        ("instance family", "vcpu x4", "storage tier"),
        "wall ms",
        1e-3,
        f["billed USD"],
        {},
        (("time", "<=", limit_ms / 1000),),
    )


def web_latency_2d(seed: int = 0) -> RawJob:
    """A web service load test: 10 replica counts x 6 pod sizes (60 configurations), a
    10-minute test each after a rolling start of ~7 s per replica (``test-duration s``),
    constrained on ``p95 latency ms`` and on the time (in minutes: an explicit unit);
    ``#replicas`` and ``pod-cpu`` name the knobs; 4 runs each."""
    rng = np.random.default_rng(seed)
    grid = pd.DataFrame(
        list(itertools.product(range(1, 11), [0.25, 0.5, 1, 2, 4, 8])),
        columns=["#replicas", "pod-cpu"],
    )
    r, c = grid["#replicas"].to_numpy(float), grid["pod-cpu"].to_numpy(float)
    load = 40.0 / (r * c)
    grid["base_l"] = 35.0 + 60.0 * load / np.maximum(1.0 - 0.08 * load, 0.05)
    f = _repeat(rng, grid, 4, 4)
    f["p95 latency ms"] = np.round(_noisy(rng, f["base_l"].to_numpy(), 0.07), 1)
    f["test-duration s"] = np.round(600.0 + 7.0 * f["#replicas"] + rng.uniform(0, 8, len(f)), 1)
    f = f.drop(columns="base_l")
    desc = """optfarm: table/1
name: web-latency-2d
dimensions:
  - {name: replicas, column: "#replicas", kind: ordinal}
  - {name: cpu, column: pod-cpu, kind: ordinal, log: true}
columns: {time: test-duration s}
metrics: {p95_ms: "`p95 latency ms`"}
price: {formula: "`#replicas` * `pod-cpu` * 0.0316"}
units: {p95_ms: ms}
constraints: ["p95_ms <= 120", "time <= 11 min"]
"""
    cost = f["test-duration s"] / 3600 * f["#replicas"] * f["pod-cpu"] * 0.0316
    return RawJob(
        "web-latency-2d",
        f,
        desc,
        ("#replicas", "pod-cpu"),
        "test-duration s",
        1.0,
        cost,
        {"p95_ms": ("p95 latency ms", 1.0)},
        (("p95_ms", "<=", 120.0), ("time", "<=", 660.0)),
    )


TABLES = {
    f.__name__.replace("_", "-"): f
    for f in (
        spark_vms_1d,
        serverless_memory_1d,
        spark_grid_4d,
        md_simulation_8d,
        training_accuracy_3d,
        hpc_energy_2d,
        etl_measured_cost_3d,
        web_latency_2d,
    )
}


def expected_facts(job: RawJob) -> dict:
    """The facts of a raw job by pandas alone: configurations, feasible count, the cheapest
    feasible configuration's mean cost (per-configuration means over repeated rows)."""
    f = job.frame.assign(_time=job.frame[job.time_col] * job.time_scale, _cost=job.cost)
    for metric, (col, scale) in job.metrics.items():
        f[f"_{metric}"] = f[col] * scale
    cols = ["_time", "_cost", *(f"_{m}" for m in job.metrics)]
    per = f.groupby(list(job.dims))[cols].mean()
    ok = pd.Series(True, index=per.index)
    for metric, op, thr in job.constraints:
        v = per[f"_{metric}"]
        ok &= (v <= thr) if op == "<=" else (v >= thr)
    best = per.loc[ok, "_cost"].idxmin() if ok.any() else None
    return {
        "n_rows": len(f),
        "n_configs": len(per),
        "n_feasible": int(ok.sum()),
        "optimum_cost": None if best is None else float(per.loc[best, "_cost"]),
        "optimum": best,
    }
