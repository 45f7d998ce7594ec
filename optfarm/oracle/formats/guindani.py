"""Spark job measurements of Guindani et al. (ML-augmented constrained BO; the MALIBOO
repository github.com/RobertoSala98/MALIBOO, ``resources/*.csv``, MIT).

``load`` takes one CSV or a folder and yields, by file:

- ``kmeans_monodimensional.csv`` -> ``guindani-kmeans`` (120 rows, #vm 6 .. 44, 6 runs each),
  default ``time <= 330 s`` (the paper's T_max; 9 of 20 configurations feasible);
- ``query26_monodimensional.csv`` -> ``guindani-query26`` (115 rows, 20 configurations);
  no threshold is published for it, so T_max = the median per-configuration mean time rounded
  to 4 significant digits, 487.3 s: 10 of 20 configurations feasible;
- ``query26_vm_ram.csv`` -> ``guindani-query26-vm-ram`` (696 rows, 41 configurations #vm x
  ram), default ``time <= 205 s`` (205000 ms upstream; its feasible rows' optimum is
  -cost = -4079658 at #vm 22, ram 0.7);
- any other ``<stem>.csv`` -> ``guindani-<stem>`` with the median rule.

Rules: ``#vm`` becomes the dimension ``n_vm`` (ordinal, log), ``ram`` the dimension ``ram``
(ordinal, log). ``time`` is published in ms and stored in seconds. The cost column is
``-cost`` (negated for a maximiser): ``cost = -(-cost)`` in the unit "VM x ms"
(``cost_unit``), which must equal ``time_ms x #vm``; ``price_per_s = #vm x 1000`` in that unit.
Repeated noisy rows of a configuration are kept as several rows (the oracle replays them).
Default problem: minimise cost s.t. ``time <= T_max``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..dataset import Dataset, DatasetError, DatasetMeta
from ..problem import Constraint, Objective, Problem
from ..space import Dimension
from ._table import build_dataset, files_in, median_limit, ordered_values, read_csv

__all__ = ["T_MAX_S", "load"]

T_MAX_S = {"kmeans": 330.0, "query26-vm-ram": 205.0}
SOURCE = "https://github.com/RobertoSala98/MALIBOO"
CITATION = (
    "B. Guindani, D. Ardagna, A. Guglielmi. Bayesian optimization for cloud resource "
    "management through machine learning (ML-augmented constrained BO; MALIBOO)."
)


def dataset_name(path: Path) -> str:
    return "guindani-" + path.stem.lower().removesuffix("_monodimensional").replace("_", "-")


def load(path: Path, name: str | None = None, time_max: float | None = None) -> list[Dataset]:
    files = files_in(path, "*.csv", "Guindani/MALIBOO CSV files")
    if name and len(files) > 1:
        raise DatasetError(f"{path}: --name needs a single file, this folder has {len(files)}")
    return [_load_file(f, name, time_max) for f in files]


def _load_file(path: Path, name: str | None, time_max: float | None) -> Dataset:
    t = read_csv(path, ("#vm", "time", "-cost"))
    n_vm = t.number("#vm", integer=True, strictly_positive=True)
    time_ms = t.number("time", strictly_positive=True)
    neg_cost = t.number("-cost", low=None)
    positive = np.flatnonzero(neg_cost > 0)
    if len(positive):
        raise t.fail(
            "-cost",
            positive[0],
            f"value {neg_cost[positive[0]]:g} is positive; the column holds the negated cost",
        )
    cost = -neg_cost
    wrong = np.flatnonzero(~np.isclose(cost, time_ms * n_vm, rtol=1e-6, atol=1.0))
    if len(wrong):
        i = wrong[0]
        raise t.fail("-cost", i, f"cost {cost[i]:g} is not time x #vm = {time_ms[i] * n_vm[i]:g}")
    columns = {"n_vm": n_vm}
    dims = [Dimension("n_vm", "ordinal", ordered_values(n_vm), log=True)]
    if "ram" in t.columns:
        columns["ram"] = t.number("ram", strictly_positive=True)
        dims.append(Dimension("ram", "ordinal", ordered_values(columns["ram"]), log=True))
    time = time_ms / 1000.0
    columns |= {
        "fidelity": np.ones(t.n_rows),
        "time": time,
        "cost": cost,
        "price_per_s": n_vm * 1000.0,
        "timed_out": np.zeros(t.n_rows, dtype=bool),
    }
    short = dataset_name(path).removeprefix("guindani-")
    if time_max is not None:
        t_max, rule = float(time_max), "given"
    elif short in T_MAX_S:
        t_max, rule = T_MAX_S[short], "the paper's"
    else:
        t_max, rule = median_limit(time, [columns[d.name] for d in dims]), "median time"
    meta = DatasetMeta(
        name=name or dataset_name(path),
        title=f"Spark {short} (Guindani et al.; MALIBOO resources/{path.name})",
        source=SOURCE,
        licence="MIT",
        citation=CITATION,
        dimensions=tuple(dims),
        problem=Problem(Objective("cost", "min"), (Constraint("time", "<=", t_max),)),
        measured=("time", "cost"),
        price_model="n_vm x 1000 VM-ms per second of job time",
        cost_unit="VM x ms",
        notes=f"T_max = {t_max:g} s ({rule}); repeated noisy rows kept; time published in ms",
    )
    return build_dataset(t, columns, meta, price_column="#vm")
