"""The built-in synthetic dataset: a documented analytic model of distributed training.

It lets a fresh install run every command with no download. The model (all constants below):

- Cluster: ``n_workers`` worker VMs of one ``vm_flavor`` plus one parameter server of the
  same flavour; hourly price ``(n_workers + 1) x price(flavor)`` (t2-like prices).
- Work: training on a fraction ``s`` of the data takes ``WORK x s / batch_speed(batch)``
  vCPU-seconds. Throughput grows with vCPUs sub-linearly (``vcpus ** 0.9`` per VM) and with
  workers by Amdahl's law (serial fraction 5%); synchronous training adds a barrier cost that
  grows with ``log2(n_workers + 1)`` and shrinks with the batch size.
- Accuracy: a ceiling set by learning rate and batch size, lowered by staleness for
  asynchronous training with many workers, approached with more data as a power law
  ``acc(s) = ceil - (ceil - 0.1) x 0.35 x s ** -0.35`` clipped to [0.1, ceil].
- Noise: three repeated measurements per (configuration, s), time x lognormal(0, 0.05) and
  accuracy + normal(0, 0.004); an accuracy curve every 30 s approaching the final value.
- Default problem (Nephele's form): minimise cost s.t. accuracy >= 0.85 and time <= T_max, with
  T_max the median full-data time so about half the configurations meet it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .dataset import Dataset, DatasetMeta
from .problem import Constraint, Objective, Problem
from .space import Dimension

__all__ = ["make_synthetic", "FLAVORS"]

# flavour -> (vCPUs, $/hour)
FLAVORS = {
    "small": (1, 0.023),
    "medium": (2, 0.0464),
    "xlarge": (4, 0.1856),
    "2xlarge": (8, 0.3712),
}
WORKERS = (1, 2, 4, 8, 16)
LEARNING_RATES = (1e-5, 1e-4, 1e-3)
BATCHES = (16, 64, 256)
SYNC = ("async", "sync")
FIDELITIES = (0.1, 0.25, 0.5, 1.0)
REPEATS = 3
WORK = 40_000.0  # vCPU-seconds of a full-data training at batch 64
CURVE_INTERVAL = 30.0
A_MIN = 0.85


def _time(vcpus, workers, batch, sync, s):
    per_vm = vcpus**0.9
    amdahl = 1.0 / (0.05 + 0.95 / workers)
    batch_speed = {16: 0.6, 64: 1.0, 256: 1.3}[batch]
    compute = WORK * s / (batch_speed * per_vm * amdahl)
    barrier = 4.0 * np.log2(workers + 1) * (64.0 / batch) ** 0.5 * (sync == "sync") * s * 10
    return compute + barrier + 20.0  # + start-up


def _ceiling(lr, batch, sync, workers):
    base = {1e-5: 0.90, 1e-4: 0.965, 1e-3: 0.94}[lr] - {16: 0.0, 64: 0.005, 256: 0.02}[batch]
    stale = 0.012 * np.log2(workers) if sync == "async" else 0.0
    return base - stale


def _accuracy(ceil, s):
    return float(np.clip(ceil - (ceil - 0.1) * 0.35 * s**-0.35 * 0.3, 0.1, ceil))


def make_synthetic(seed: int = 0) -> Dataset:
    """Generate the synthetic dataset (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {
        k: []
        for k in (
            "vm_flavor",
            "n_workers",
            "learning_rate",
            "batch_size",
            "synchronism",
            "fidelity",
            "time",
            "cost",
            "price_per_s",
            "accuracy",
            "timed_out",
            "acc_curve",
        )
    }
    for flavor, (vcpus, price) in FLAVORS.items():
        for w in WORKERS:
            per_s = (w + 1) * price / 3600.0
            for lr in LEARNING_RATES:
                for b in BATCHES:
                    for sync in SYNC:
                        ceil = _ceiling(lr, b, sync, w)
                        for s in FIDELITIES:
                            t0, a0 = _time(vcpus, w, b, sync, s), _accuracy(ceil, s)
                            for _ in range(REPEATS):
                                t = float(t0 * rng.lognormal(0.0, 0.05))
                                a = float(np.clip(a0 + rng.normal(0.0, 0.004), 0.0, 1.0))
                                points = np.arange(CURVE_INTERVAL, t, CURVE_INTERVAL)
                                curve = a * (1 - 0.9 * np.exp(-4.0 * points / t))
                                for k, v in (
                                    ("vm_flavor", flavor),
                                    ("n_workers", w),
                                    ("learning_rate", lr),
                                    ("batch_size", b),
                                    ("synchronism", sync),
                                    ("fidelity", s),
                                    ("time", t),
                                    ("cost", t * per_s),
                                    ("price_per_s", per_s),
                                    ("accuracy", a),
                                    ("timed_out", False),
                                    ("acc_curve", [*curve.round(4).tolist(), a]),
                                ):
                                    rows[k].append(v)
    table = pa.table(rows)
    full = np.asarray(rows["fidelity"]) == 1.0
    t_max = float(np.round(np.median(np.asarray(rows["time"])[full])))
    meta = DatasetMeta(
        name="synthetic",
        title="Synthetic distributed-training job (analytic model, optfarm/oracle/synthetic.py)",
        source="generated by optfarm (optfarm/oracle/synthetic.py)",
        licence="MIT",
        citation="optfarm",
        dimensions=(
            Dimension("vm_flavor", "categorical", tuple(FLAVORS)),
            Dimension("n_workers", "ordinal", WORKERS, log=True),
            Dimension("learning_rate", "ordinal", LEARNING_RATES, log=True),
            Dimension("batch_size", "ordinal", BATCHES, log=True),
            Dimension("synchronism", "categorical", SYNC),
        ),
        problem=Problem(
            Objective("cost", "min"),
            (Constraint("accuracy", ">=", A_MIN), Constraint("time", "<=", t_max)),
        ),
        fidelity_name="training_set_fraction",
        measured=("time", "cost", "accuracy", "acc_curve"),
        price_model="(n_workers + 1) x hourly price of the flavour / 3600 per second",
        curve_interval_s=CURVE_INTERVAL,
        notes=f"T_max = median full-data time ({t_max:g} s); A_min = {A_MIN}",
    )
    return Dataset(table, meta, origin="synthetic")
