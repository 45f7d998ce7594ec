"""TrimTuner's TensorFlow measurements (Mendes et al., "TrimTuner", MASCOTS 2020, Sec. V).

Files: ``cnn.csv`` and ``rnn.csv`` (``multilayer.csv`` where available) from
github.com/pedrogbmendes/TrimTuner. ``load`` takes one file or a folder holding them and yields
``trimtuner-<network>``. Rules:

- One row = the mean of 3 runs of a configuration on a sub-sample of MNIST-like data:
  1440 rows = 288 configurations x ``training_set_size`` {1000, 6000, 15000, 30000, 60000}.
  Fidelity ``s = training_set_size / 60000`` in {1/60, 1/10, 1/4, 1/2, 1}.
- Dimensions: ``vm_flavor`` (ordinal by size, t2.small .. t2.2xlarge, as the authors' code
  encodes it: one feature instead of four one-hot columns, which lets the models share what
  they learn about cost across VM sizes), ``n_workers`` (worker VMs, ordinal, log scale),
  ``learning_rate`` (ordinal, log), ``batch_size`` (ordinal, log), ``synchronism``
  (categorical). Extra column ``cores`` = n_workers x vCPUs of the flavour.
- Cost (no cost column is published): the cluster is ``n_workers`` workers plus one bookkeeper
  of the flavour plus ``n_ps`` t2.2xlarge parameter servers (``n_ps`` is 1 in every row), so
  ``cost = ((n_workers + 1) x price(flavor) + n_ps x 0.3712) / 3600 x training_time`` with
  the hourly prices t2.small 0.023, t2.medium 0.0464, t2.xlarge 0.1856, t2.2xlarge 0.3712 —
  the datasets README's ``((n_workers + 1) * price / 60 + 0.3712 / 60) * (training_time / 60)``.
- Measured: ``time`` = training_time (s), ``accuracy`` = acc. Kept as extra columns:
  ``time_std``, ``accuracy_std``, ``iterations_std`` (the published standard deviations over the
  3 runs), ``total_iterations``, ``iterations_counted``, and the intermediate curves as lists:
  ``intermediate_acc_values``, ``intermediate_test_durations``, ``intermediate_iterations``.
  They are sampled at iteration marks, not at a fixed time interval, so no ``acc_curve`` is
  derived (a time cap reveals no accuracy on this dataset).
- Default problem (Table II): maximise accuracy s.t. cost <= C_max, C_max = $0.10 (CNN),
  $0.02 (RNN), $0.06 (multilayer).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..dataset import Dataset, DatasetError, DatasetMeta
from ..problem import Constraint, Objective, Problem
from ..space import Dimension
from ._table import build_dataset, files_in, ordered_values, read_csv

__all__ = ["COST_MAX", "FULL_SIZE", "PRICES", "VCPUS", "load", "t2_dimensions"]

PRICES = {"t2.small": 0.023, "t2.medium": 0.0464, "t2.xlarge": 0.1856, "t2.2xlarge": 0.3712}
VCPUS = {"t2.small": 1, "t2.medium": 2, "t2.xlarge": 4, "t2.2xlarge": 8}
PS_PRICE = PRICES["t2.2xlarge"]
COST_MAX = {"cnn": 0.10, "rnn": 0.02, "multilayer": 0.06}
FULL_SIZE = 60000
COLUMNS = (
    "n_workers",
    "learning_rate",
    "batch_size",
    "synchronism",
    "training_time",
    "standard deviation time",
    "intermediate_acc_values",
    "n_ps",
    "acc",
    "standard deviation accuarcy",
    "vm_flavor",
    "intermediate_test_durations",
    "training_set_size",
    "intermediate_no_interations",
    "total_iterations",
    "standard deviation iteration",
    "iterations_counted",
)
SOURCE = "https://github.com/pedrogbmendes/TrimTuner"
CITATION = (
    "P. Mendes, M. Casimiro, P. Romano, D. Garlan. TrimTuner: Efficient Optimization of "
    "Machine Learning Jobs in the Cloud via Sub-Sampling. MASCOTS 2020."
)


def load(path: Path, name: str | None = None, cost_max: float | None = None) -> list[Dataset]:
    files = [
        f
        for f in files_in(path, "*.csv", "TrimTuner CSV files")
        if path.is_file() or f.stem in COST_MAX
    ]
    if not files:
        raise DatasetError(f"{path}: no TrimTuner file ({', '.join(f'{n}.csv' for n in COST_MAX)})")
    if name and len(files) > 1:
        raise DatasetError(f"{path}: --name needs a single file, this folder has {len(files)}")
    return [_load_file(f, name, cost_max) for f in files]


def _load_file(path: Path, name: str | None, cost_max: float | None) -> Dataset:
    network = path.stem.lower()
    if cost_max is None and network not in COST_MAX:
        raise DatasetError(
            f"{path}: unknown network {network!r} (known: "
            f"{', '.join(COST_MAX)}); name the file after one of them"
        )
    c_max = COST_MAX[network] if cost_max is None else float(cost_max)
    t = read_csv(path, COLUMNS)
    flavor = t.text("vm_flavor", PRICES, what="flavour without a known price")
    workers = t.number("n_workers", integer=True, strictly_positive=True)
    n_ps = t.number("n_ps", integer=True)
    size = t.number("training_set_size", integer=True, strictly_positive=True, high=FULL_SIZE)
    lr = t.number("learning_rate", strictly_positive=True)
    batch = t.number("batch_size", integer=True, strictly_positive=True)
    sync = t.text("synchronism", ("async", "sync"))
    time = t.number("training_time", strictly_positive=True)
    acc = t.number("acc", high=1.0)
    price = np.array([PRICES[f] for f in flavor])
    price_per_s = ((workers + 1) * price + n_ps * PS_PRICE) / 3600.0
    columns = {
        "vm_flavor": flavor,
        "n_workers": workers,
        "learning_rate": lr,
        "batch_size": batch,
        "synchronism": sync,
        "fidelity": size / FULL_SIZE,
        "time": time,
        "cost": time * price_per_s,
        "price_per_s": price_per_s,
        "timed_out": np.zeros(t.n_rows, dtype=bool),
        "accuracy": acc,
        "cores": workers * np.array([VCPUS[f] for f in flavor]),
        "n_ps": n_ps,
        "training_set_size": size,
        "time_std": t.number("standard deviation time"),
        "accuracy_std": t.number("standard deviation accuarcy"),
        "iterations_std": t.number("standard deviation iteration"),
        "total_iterations": t.number("total_iterations", integer=True),
        "iterations_counted": t.number("iterations_counted", integer=True),
        "intermediate_acc_values": t.floats_list("intermediate_acc_values"),
        "intermediate_test_durations": t.floats_list("intermediate_test_durations"),
        "intermediate_iterations": t.floats_list("intermediate_no_interations"),
    }
    dims = t2_dimensions(flavor, workers, lr, batch, sync, flavor_kind="ordinal")
    meta = _meta(network, name, c_max, dims)
    return build_dataset(t, columns, meta, price_column="vm_flavor", time_column="training_time")


def _meta(network: str, name: str | None, c_max: float, dims) -> DatasetMeta:
    """The facts of one network's table and its problem (TrimTuner's: max accuracy under a
    cost cap)."""
    return DatasetMeta(
        name=name or f"trimtuner-{network}",
        title=f"TrimTuner TensorFlow {network.upper()} on t2 clusters, 5 training-set sizes",
        source=SOURCE,
        licence="MIT (Copyright (c) 2020 TrimTuner)",
        citation=CITATION,
        dimensions=dims,
        problem=Problem(Objective("accuracy", "max"), (Constraint("cost", "<=", c_max),)),
        fidelity_name="training_set_size / 60000",
        measured=("time", "cost", "accuracy"),
        price_model="((n_workers + 1) x price(flavor) + n_ps x 0.3712) $/h / 3600 per second "
        "(workers + bookkeeper + t2.2xlarge parameter server)",
        cost_unit="USD",
        notes=f"C_max = ${c_max:g} (TrimTuner Table II); rows are means of 3 runs",
    )


def t2_dimensions(
    flavor, workers, lr, batch, sync, flavor_kind: str = "categorical"
) -> tuple[Dimension, ...]:
    """The five dimensions of the TensorFlow jobs on t2 clusters (TrimTuner and Lynceus data),
    with the values present in the columns given. ``flavor_kind="ordinal"`` orders the VM
    types by size (t2.small < ... < t2.2xlarge), as the TrimTuner authors' code encodes them."""
    return (
        Dimension("vm_flavor", flavor_kind, ordered_values(flavor, PRICES)),
        Dimension("n_workers", "ordinal", ordered_values(workers), log=True),
        Dimension("learning_rate", "ordinal", ordered_values(lr), log=True),
        Dimension("batch_size", "ordinal", ordered_values(batch), log=True),
        Dimension("synchronism", "categorical", ordered_values(sync)),
    )
