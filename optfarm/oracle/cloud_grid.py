"""Generated large tables: a documented model of a data-parallel cloud job on a grid of VM
families x sizes x counts x framework knobs x threads, at 10^4 to 10^5 configurations.

The papers' tables hold 20-1,440 configurations; real grids of cloud jobs are larger. These
tables let the farm measure optimizers where the choice of one pays (issue 41), with no
download: ``optfarm.oracle.registry.load`` generates them by code, deterministically, in
well under a second, and writes nothing. The model (all constants below):

- **Configuration**: four dimensions. ``vm_type`` (categorical): a family x a size.
  Families differ in per-core speed, memory per vCPU and price per vCPU-hour (``FAMILIES``:
  compute-optimised, general purpose, memory-optimised, burstable, storage-optimised with fast
  local disks, ARM, high-frequency; prices like a public cloud's on-demand list); sizes
  ``large`` .. ``4xlarge`` have 2, 4, 8, 16 vCPUs. ``vm_count`` (ordinal): 2, 4, ... VMs.
  ``framework`` (categorical): every combination of binary framework knobs (``KNOBS``:
  serializer, shuffle compression, partitioning, off-heap memory). ``threads`` (ordinal):
  worker threads per VM, ``THREADS``.
- **Time** of one run, in seconds: start-up ``45 + 3 n`` (n VMs) + driver ``60`` + compute +
  shuffle. Compute is ``WORK`` thread-seconds spread over ``n x p x speed`` effective threads:
  a VM of v vCPUs running t threads gives ``p = min(t, v) + 0.2 min(t - v, v)^+`` (SMT) over
  ``1 + 0.03 (t - v)^+`` (contention); threads whose memory (``2.5 GiB`` each, times the
  serializer's and off-heap's factors) exceeds 85% of the VM's spill to disk, a slowdown of
  ``1 + 0.8 x`` the excess share (``0.4 x`` on local-disk families); coarse partitions leave
  stragglers, ``1 + 0.02 sqrt(n t)``. Shuffle moves ``SHUFFLE_GIB`` (times the serializer's
  and compression's byte factors) all-to-all at ``0.08 v^0.6`` GiB/s per VM, plus ``5 s`` per
  round of ``log2 n`` rounds. Each knob's factors on compute, shuffle bytes and memory are in
  ``KNOBS``. The measured time is the model's times ``lognormal(0, 0.05)`` noise, one
  measurement per configuration (``seed``).
- **Cost**: time x price, the price per second ``n x vCPUs x the family's $/vCPU-hour / 3600``.
- **Problem**: minimise cost s.t. ``time <= T``, T the table's 1% time quantile rounded to
  three significant digits, so about 1% of the configurations are feasible: a deadline that
  only large, well-tuned clusters meet (the fastest configurations are not the cheapest
  feasible ones: the optimum trades family, count, threads and knobs).

``GRIDS`` names the family (``farm datasets list`` shows it): ``cloud-grid-9216`` (3 families x
4 sizes = 12 VM types x 12 counts x 8 framework settings x 8 thread counts, issue 41's
10^4 table), ``cloud-grid-50176`` (7 families x 4 sizes = 28 x 14 counts x 16 x 8) and
``cloud-grid-100352`` (28 x 28 counts x 16 x 8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .dataset import Dataset, DatasetMeta
from .problem import Constraint, Objective, Problem
from .space import Dimension

__all__ = ["GRIDS", "Grid", "make_cloud_grid"]

# family -> (per-core speed, GiB per vCPU, $ per vCPU-hour, spill slowdown factor)
FAMILIES = {
    "c": (1.15, 2.0, 0.0425, 1.0),  # compute-optimised
    "m": (1.00, 4.0, 0.0480, 1.0),  # general purpose
    "r": (1.00, 8.0, 0.0630, 1.0),  # memory-optimised
    "t": (0.70, 4.0, 0.0416, 1.0),  # burstable (its sustained speed)
    "i": (1.00, 7.6, 0.0780, 0.4),  # storage-optimised: local NVMe, cheap spills
    "g": (0.90, 4.0, 0.0385, 1.0),  # ARM
    "z": (1.40, 8.0, 0.0930, 1.0),  # high-frequency
}
SIZES = {"large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16}  # size -> vCPUs
THREADS = (1, 2, 3, 4, 6, 8, 12, 16)
# knob -> (its two settings, then the second setting's factors on compute, shuffle bytes and
# memory per thread)
KNOBS = {
    "serializer": (("java", "kryo"), 0.92, 0.60, 0.70),
    "compression": (("none", "lz4"), 1.06, 0.45, 1.00),
    "partitions": (("coarse", "fine"), 1.04, 1.00, 1.00),  # fine: no stragglers
    "memory": (("heap", "offheap"), 1.03, 1.00, 0.75),
}
WORK = 150_000.0  # thread-seconds of compute at speed 1
SHUFFLE_GIB = 200.0
THREAD_GIB = 2.5
FEASIBLE_SHARE = 0.01
NOISE_SIGMA = 0.05


@dataclass(frozen=True)
class Grid:
    """One table of the family: ``families`` (keys of ``FAMILIES``) x every size,
    ``counts`` VM counts 2, 4, ..., 2 x counts, the first ``knobs`` of ``KNOBS``."""

    families: str
    counts: int
    knobs: int

    @property
    def n_configs(self) -> int:
        return len(self.families) * len(SIZES) * self.counts * 2**self.knobs * len(THREADS)

    @property
    def name(self) -> str:
        return f"cloud-grid-{self.n_configs}"


GRIDS = {g.name: g for g in (Grid("cmr", 12, 3), Grid("cmrtigz", 14, 4), Grid("cmrtigz", 28, 4))}


def _dimensions(grid: Grid) -> tuple[Dimension, ...]:
    knobs = list(KNOBS.values())[: grid.knobs]
    settings = [
        "/".join(k[0][(code >> bit) & 1] for bit, k in enumerate(knobs))
        for code in range(2**grid.knobs)
    ]
    return (
        Dimension(
            "vm_type", "categorical", tuple(f"{f}.{s}" for f in grid.families for s in SIZES)
        ),
        Dimension("vm_count", "ordinal", tuple(range(2, 2 * grid.counts + 1, 2)), log=True),
        Dimension("framework", "categorical", tuple(settings)),
        Dimension("threads", "ordinal", THREADS, log=True),
    )


def _knob_factors(code: np.ndarray, n_knobs: int) -> tuple[np.ndarray, ...]:
    """Per configuration, the knobs' product factors on compute, shuffle bytes and memory,
    and whether partitions are fine."""
    compute, shuffle, memory = (np.ones(len(code)) for _ in range(3))
    for bit, (_, on_compute, on_shuffle, on_memory) in enumerate(list(KNOBS.values())[:n_knobs]):
        on = ((code >> bit) & 1).astype(bool)
        compute *= np.where(on, on_compute, 1.0)
        shuffle *= np.where(on, on_shuffle, 1.0)
        memory *= np.where(on, on_memory, 1.0)
    bit = list(KNOBS).index("partitions")
    fine = ((code >> bit) & 1).astype(bool) if n_knobs > bit else np.zeros(len(code), bool)
    return compute, shuffle, memory, fine


def _model_time(vm: np.ndarray, n: np.ndarray, code: np.ndarray, t: np.ndarray, grid: Grid):
    """The model's time (module docstring) and price per second for configurations given by
    their VM type index, count, framework code (bit i: knob i's second setting) and threads."""
    family = np.array([FAMILIES[f] for f in grid.families for _ in SIZES])[vm]
    speed, gib_per_vcpu, usd_per_vcpu_h, spill_factor = family.T
    v = np.tile(np.array(list(SIZES.values()), float), len(grid.families))[vm]
    compute_f, shuffle_f, memory_f, fine = _knob_factors(code, grid.knobs)
    over = np.clip(t - v, 0.0, None)
    p = (np.minimum(t, v) + 0.2 * np.minimum(over, v)) / (1.0 + 0.03 * over)
    pressure = t * THREAD_GIB * memory_f / (0.85 * gib_per_vcpu * v)
    spill = 1.0 + 0.8 * spill_factor * np.clip(pressure - 1.0, 0.0, None)
    stragglers = np.where(fine, 1.0, 1.0 + 0.02 * np.sqrt(n * t))
    compute = WORK / (n * p * speed) * compute_f * spill * stragglers
    shuffle = SHUFFLE_GIB * shuffle_f * (1.0 - 1.0 / n) / (n * 0.08 * v**0.6) + 5.0 * np.log2(n)
    return 45.0 + 3.0 * n + 60.0 + compute + shuffle, n * v * usd_per_vcpu_h / 3600.0


def make_cloud_grid(name: str, seed: int = 0, grid: Grid | None = None) -> Dataset:
    """Generate the table ``name`` of ``GRIDS`` (deterministic for a seed), or the table of
    another ``grid`` of the family (``farm bench --scale``'s smaller sizes)."""
    grid = grid or GRIDS[name]
    dims = _dimensions(grid)
    codes = np.stack(
        np.meshgrid(*(np.arange(len(d.values)) for d in dims), indexing="ij"), -1
    ).reshape(-1, len(dims))
    vm, count, code, thread = codes.T
    n = np.asarray(dims[1].values, float)[count]
    t = np.asarray(THREADS, float)[thread]
    model_time, price = _model_time(vm, n, code, t, grid)
    time = model_time * np.random.default_rng(seed).lognormal(0.0, NOISE_SIGMA, len(codes))
    t_max = float(f"{np.quantile(time, FEASIBLE_SHARE):.3g}")
    table = pa.table(
        {
            "vm_type": np.asarray(dims[0].values, object)[vm],
            "vm_count": np.asarray(dims[1].values)[count],
            "framework": np.asarray(dims[2].values, object)[code],
            "threads": np.asarray(THREADS)[thread],
            "fidelity": np.ones(len(codes)),
            "time": time,
            "cost": time * price,
            "price_per_s": price,
            "timed_out": np.zeros(len(codes), bool),
        }
    )
    meta = DatasetMeta(
        name=name,
        title=(
            f"Generated cloud grid of {grid.n_configs:,} configurations (VM type x count x "
            "framework knobs x threads; optfarm/oracle/cloud_grid.py)"
        ),
        source="generated by optfarm (optfarm/oracle/cloud_grid.py)",
        licence="MIT",
        citation="optfarm",
        dimensions=dims,
        problem=Problem(Objective("cost", "min"), (Constraint("time", "<=", t_max),)),
        price_model="vm_count x vCPUs x the family's $/vCPU-hour / 3600 per second",
        notes=f"T = the 1% time quantile ({t_max:g} s): about 1% of configurations feasible",
    )
    return Dataset(table, meta, origin=name)
