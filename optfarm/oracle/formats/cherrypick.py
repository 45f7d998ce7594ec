"""CherryPick's Spark/Hadoop job measurements (Alipourfard et al., "CherryPick", NSDI 2017),
as published with Lynceus (``data/cherrypick/CP_<job>.csv`` of
github.com/marialcasimiro/Lynceus-ICDCS; Lynceus ICDCS 2020 Sec. VI-A uses them).

``load`` takes one ``CP_<job>.csv`` or a folder of them and yields ``cherrypick-<job>``
(kmeans 47, spark 59, terasort 72, tpcds 61, tpch 52 configurations, one row each). Rules:

- Dimensions: ``vm_name`` (categorical, c4/m4/r3/i2 large..2xlarge, in file order of price)
  and ``num_machines`` (ordinal, log scale). The ``disk_*`` columns vary across rows but are a
  function of the VM type (EBS for c4/m4/r3, local SSDs for i2), so they add no configuration
  freedom: a ``disk_*`` column becomes a dimension only if it takes several values for one
  ``vm_name``. All ``disk_*`` columns, ``cpu_count``, ``ram`` and ``vm_cost`` are kept as extra
  columns.
- ``vm_cost`` is the hourly price of ONE VM, not of the cluster: it is the same for a VM type
  whatever ``num_machines`` (2 .. 56), doubles from large to xlarge to 2xlarge, and is of the
  size of one instance's AWS on-demand price (c4.large 0.138, m4.large 0.147, r3.large 0.195,
  i2.xlarge 0.938 $/h, against the us-east-1 list prices 0.10, 0.10-0.12, 0.166, 0.853; the
  file's values are 10-40% higher, as in AWS's pricier regions). A 56-VM cluster price would
  be tens of $/h. So ``cost = time / 3600 x vm_cost x num_machines`` (as Lynceus'
  ``AWSDirectory.cherrypickCostPerConfigPerMinute`` uses the VM type, size and count). A VM
  type with two different ``vm_cost`` values is rejected.
- Default problem: minimise cost s.t. ``time <= T_max``, T_max = median time over the
  configurations rounded to 4 significant digits (about half feasible), as Lynceus does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..dataset import Dataset, DatasetError, DatasetMeta
from ..problem import Constraint, Objective, Problem
from ..space import Dimension
from ._table import build_dataset, files_in, median_limit, ordered_values, read_csv

__all__ = ["load"]

COLUMNS = ("num_machines", "time", "vm_name", "vm_cost")
SOURCE = "https://github.com/marialcasimiro/Lynceus-ICDCS"
CITATION = (
    "O. Alipourfard, H. H. Liu, J. Chen, S. Venkataraman, M. Yu, M. Zhang. CherryPick: "
    "Adaptively Unearthing the Best Cloud Configurations for Big Data Analytics. NSDI "
    "2017 (data as published with Lynceus, ICDCS 2020)."
)


def load(path: Path, name: str | None = None) -> list[Dataset]:
    files = files_in(path, "CP_*.csv", "CherryPick CP_*.csv files")
    if name and len(files) > 1:
        raise DatasetError(f"{path}: --name needs a single file, this folder has {len(files)}")
    return [_load_file(f, name) for f in files]


def _load_file(path: Path, name: str | None) -> Dataset:
    t = read_csv(path, COLUMNS)
    vm = t.text("vm_name")
    machines = t.number("num_machines", integer=True, strictly_positive=True)
    time = t.number("time", strictly_positive=True)
    vm_cost = t.number("vm_cost", strictly_positive=True)
    price_per_s = vm_cost * machines / 3600.0
    columns = {
        "vm_name": vm,
        "num_machines": machines,
        "fidelity": np.ones(t.n_rows),
        "time": time,
        "cost": time * price_per_s,
        "price_per_s": price_per_s,
        "timed_out": np.zeros(t.n_rows, dtype=bool),
        "vm_cost": vm_cost,
    }
    _check_vm_price(t, vm, vm_cost)
    dims = [
        Dimension(
            "vm_name",
            "categorical",
            tuple(dict.fromkeys(vm[np.argsort(vm_cost, kind="stable")].tolist())),
        ),
        Dimension("num_machines", "ordinal", ordered_values(machines), log=True),
    ]
    for col in [c for c in t.columns if c.startswith("disk_")]:
        values = t.text(col)
        columns[col] = values
        varies_within_vm = any(len(set(values[vm == v])) > 1 for v in set(vm))
        if varies_within_vm:
            dims.append(Dimension(col, "categorical", ordered_values(values)))
    for col in ("cpu_count", "ram"):
        if col in t.columns:
            columns[col] = t.number(col)
    job = path.stem.removeprefix("CP_").lower()
    t_max = median_limit(time, [columns[d.name] for d in dims])
    meta = DatasetMeta(
        name=name or f"cherrypick-{job}",
        title=f"CherryPick {job} job on AWS clusters (VM type x cluster size)",
        source=SOURCE,
        licence="published by the authors for research use (no licence file)",
        citation=CITATION,
        dimensions=tuple(dims),
        problem=Problem(Objective("cost", "min"), (Constraint("time", "<=", t_max),)),
        measured=("time", "cost"),
        price_model="vm_cost ($/h of one VM) x num_machines / 3600 per second",
        cost_unit="USD",
        notes=f"T_max = {t_max:g} s = median time (about half feasible); vm_cost is per VM",
    )
    return build_dataset(t, columns, meta, price_column="vm_cost")


def _check_vm_price(t, vm: np.ndarray, vm_cost: np.ndarray) -> None:
    first: dict[str, float] = {}
    for i, (v, c) in enumerate(zip(vm.tolist(), vm_cost.tolist())):
        if not np.isclose(first.setdefault(v, c), c, rtol=1e-9, atol=0):
            raise t.fail(
                "vm_cost",
                i,
                f"VM type {v!r} costs {c:g}/h here but {first[v]:g}/h in an earlier row",
            )
