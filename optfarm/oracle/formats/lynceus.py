"""Lynceus' TensorFlow measurements (Casimiro et al., "Lynceus", ICDCS 2020, Sec. VI-A).

Files: ``files/t2_cnn_intermediate_values.csv``, ``t2_multilayer_intermediate_values.csv`` and
``t2_rnn.csv`` of github.com/marialcasimiro/Lynceus-ICDCS. ``load`` takes one file or a folder
and yields ``lynceus-cnn``, ``lynceus-multilayer``, ``lynceus-rnn`` (the file stem without
``t2_`` and ``_intermediate_values``). Rules:

- 384 rows = 384 configurations, one run each: ``vm_flavor`` (4 t2 types, categorical) x
  ``n_workers`` (worker VMs, ordinal, log; total cores = n_workers x vCPUs in {8 .. 112}, kept
  as the extra column ``cores``) x ``learning_rate`` (ordinal, log) x ``batch_size`` (ordinal,
  log) x ``synchronism`` (categorical). ``n_ps`` parameter servers (1 in every row).
- A job ran until accuracy 0.85 or a 600 s cap. As in the Lynceus code, a run that hit the cap
  short of the target (``training_time > 600`` and ``acc < 0.85``) has its time extrapolated
  linearly to the target: ``time = training_time x 0.85 / acc`` (extra column ``extrapolated``;
  the raw value stays in ``training_time``). ``timed_out`` is False: ``time`` is the
  (extrapolated) time to reach the target, which is what the Lynceus simulator charges.
- ``cost = time / 3600 x price(flavor) x (n_ps + n_workers + 1)`` with t2 hourly prices
  0.023 / 0.0464 / 0.1856 / 0.3712 (workers + parameter server + one master of the flavour).
- ``acc_curve`` = intermediate_acc_values, one point every ``curve_interval_s = 30`` s.
- Default problem: minimise cost s.t. ``time <= T_max``, T_max = the median (extrapolated) time
  over the configurations rounded to 4 significant digits, so about half are feasible:
  230.7 s CNN (192 feasible), 332.2 s multilayer (192), 61.84 s RNN (193).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..dataset import Dataset, DatasetError, DatasetMeta
from ..problem import Constraint, Objective, Problem
from ._table import build_dataset, files_in, median_limit, read_csv
from .trimtuner import PRICES, VCPUS, t2_dimensions

__all__ = ["CAP_S", "CURVE_INTERVAL_S", "TARGET_ACCURACY", "load"]

TARGET_ACCURACY = 0.85
CAP_S = 600.0
CURVE_INTERVAL_S = 30.0
COLUMNS = (
    "n_workers",
    "learning_rate",
    "batch_size",
    "synchronism",
    "training_time",
    "n_ps",
    "acc",
    "vm_flavor",
    "intermediate_acc_values",
)
SOURCE = "https://github.com/marialcasimiro/Lynceus-ICDCS"
CITATION = (
    "M. Casimiro, D. Didona, P. Romano, L. Rodrigues, W. Zwaenepoel, D. Garlan. "
    "Lynceus: Cost-efficient Tuning and Provisioning of Data Analytic Jobs. ICDCS 2020."
)


def network_name(path: Path) -> str:
    stem = path.stem.lower()
    return stem.removeprefix("t2_").removesuffix("_intermediate_values")


def load(path: Path, name: str | None = None) -> list[Dataset]:
    files = files_in(path, "t2_*.csv", "Lynceus t2_*.csv files")
    if name and len(files) > 1:
        raise DatasetError(f"{path}: --name needs a single file, this folder has {len(files)}")
    return [_load_file(f, name) for f in files]


def _load_file(path: Path, name: str | None) -> Dataset:
    t = read_csv(path, COLUMNS)
    flavor = t.text("vm_flavor", PRICES, what="flavour without a known price")
    workers = t.number("n_workers", integer=True, strictly_positive=True)
    n_ps = t.number("n_ps", integer=True)
    lr = t.number("learning_rate", strictly_positive=True)
    batch = t.number("batch_size", integer=True, strictly_positive=True)
    sync = t.text("synchronism", ("async", "sync"))
    training_time = t.number("training_time", strictly_positive=True)
    acc = t.number("acc", high=1.0, strictly_positive=True)
    curves = t.floats_list("intermediate_acc_values")
    extrapolated = (training_time > CAP_S) & (acc < TARGET_ACCURACY)
    time = np.where(extrapolated, training_time * TARGET_ACCURACY / acc, training_time)
    price_per_s = np.array([PRICES[f] for f in flavor]) * (n_ps + workers + 1) / 3600.0
    columns = {
        "vm_flavor": flavor,
        "n_workers": workers,
        "learning_rate": lr,
        "batch_size": batch,
        "synchronism": sync,
        "fidelity": np.ones(t.n_rows),
        "time": time,
        "cost": time * price_per_s,
        "price_per_s": price_per_s,
        "timed_out": np.zeros(t.n_rows, dtype=bool),
        "accuracy": acc,
        "acc_curve": curves,
        "cores": workers * np.array([VCPUS[f] for f in flavor]),
        "n_ps": n_ps,
        "training_time": training_time,
        "extrapolated": extrapolated,
    }
    if "total_iterations" in t.columns:
        columns["total_iterations"] = t.number("total_iterations", integer=True)
    keys = (flavor, workers, lr, batch, sync)
    t_max = median_limit(time, keys)
    network = network_name(path)
    dims = t2_dimensions(flavor, workers, lr, batch, sync)
    meta = DatasetMeta(
        name=name or f"lynceus-{network}",
        title=f"Lynceus TensorFlow {network} on t2 clusters (run to accuracy 0.85, 600 s cap)",
        source=SOURCE,
        licence="published by the authors for research use (no licence file)",
        citation=CITATION,
        dimensions=dims,
        problem=Problem(Objective("cost", "min"), (Constraint("time", "<=", t_max),)),
        measured=("time", "cost", "accuracy", "acc_curve"),
        price_model="price(flavor) x (n_ps + n_workers + 1) $/h / 3600 per second",
        cost_unit="USD",
        curve_interval_s=CURVE_INTERVAL_S,
        notes=(
            f"T_max = {t_max:g} s = median time (about half feasible); "
            f"{int(extrapolated.sum())} runs stopped at 600 s extrapolated to accuracy 0.85"
        ),
    )
    return build_dataset(t, columns, meta, price_column="vm_flavor", time_column="training_time")
