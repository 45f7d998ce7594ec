"""The Scout dataset (Hsu et al., "Scout: An Experienced Guide to Find the Best Cloud
Configuration", 2018; github.com/oxhead/scout, MIT), as published with Lynceus
(``data/scout/osr_multiple_nodes_original/`` of github.com/marialcasimiro/Lynceus-ICDCS).

Layout: ``<workload>/<N>_<vm>_<workload run name>_1/report.json``. ``load`` takes the folder
of workloads (yielding ``scout-<workload>`` for each, 18 x 69 configurations) or one workload
folder. Rules:

- Dimensions: ``vm_family`` (categorical c4/m4/r4), ``vcpus`` (ordinal, log: large 2, xlarge 4,
  2xlarge 8) and ``n_vms`` (ordinal, log: 4 .. 48); the extra column ``vm_type`` holds the
  instance name (e.g. ``c4.large``). An instance type without a known price is rejected.
- ``time`` = ``elapsed_time`` (s) of a completed run. A run with ``completed = false`` is kept
  as a real, costly observation with ``timed_out = True``; as in Lynceus'
  ``ScoutVMCostGenerator`` its ``time`` is the largest ``elapsed_time`` of the workload (the
  7200 s timeout wherever a run timed out). This also covers the few runs that failed early
  (elapsed 8 .. 6030 s, e.g. wordcount 20 x c4.xlarge after 8 s): charging their short
  elapsed time would make a crashed configuration the cheapest "feasible" one. The raw
  values are kept in ``elapsed_time`` and ``completed``.
- ``cost = time / 3600 x price(vm) x n_vms`` with the hourly prices c4 0.1/0.199/0.398,
  m4 0.1/0.2/0.4, r4 0.133/0.266/0.532 (large/xlarge/2xlarge).
- Default problem: minimise cost s.t. ``time <= T_max``, T_max = median time over the 69
  configurations rounded to 4 significant digits (about half feasible), as Lynceus does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ..dataset import Dataset, DatasetError, DatasetMeta
from ..problem import Constraint, Objective, Problem
from ..space import Dimension
from ._table import RawTable, build_dataset, median_limit, ordered_values

__all__ = ["PRICES", "load"]

PRICES = {
    "c4.large": 0.1,
    "c4.xlarge": 0.199,
    "c4.2xlarge": 0.398,
    "m4.large": 0.1,
    "m4.xlarge": 0.2,
    "m4.2xlarge": 0.4,
    "r4.large": 0.133,
    "r4.xlarge": 0.266,
    "r4.2xlarge": 0.532,
}
VCPUS = {"large": 2, "xlarge": 4, "2xlarge": 8}
RUN = re.compile(r"^(?P<n>\d+)_(?P<vm>[a-z0-9]+\.[a-z0-9]+)_.+$")
FIELDS = ("completed", "elapsed_time")
SOURCE = "https://github.com/oxhead/scout"
CITATION = (
    "C.-J. Hsu, V. Nair, T. Menzies, V. W. Freeh. Scout: An Experienced Guide to Find "
    "the Best Cloud Configuration. arXiv:1803.01296, 2018."
)


def load(path: Path, name: str | None = None) -> list[Dataset]:
    if not path.is_dir():
        raise DatasetError(f"{path}: expected a folder of <workload>/<N>_<vm>_..._1/report.json")
    if _runs(path):
        workloads = [path]
    else:
        workloads = [d for d in sorted(path.iterdir()) if d.is_dir() and _runs(d)]
    if not workloads:
        raise DatasetError(f"{path}: no <N>_<vm>_..._1/report.json run folders found")
    if name and len(workloads) > 1:
        raise DatasetError(
            f"{path}: --name needs a single workload, this folder has {len(workloads)}"
        )
    return [_load_workload(w, name) for w in workloads]


def _runs(folder: Path) -> list[Path]:
    return sorted(d for d in folder.iterdir() if d.is_dir() and RUN.match(d.name))


def _load_workload(folder: Path, name: str | None) -> Dataset:
    runs = _runs(folder)
    reports = [_report(run) for run in runs]
    where = str(folder)
    table = RawTable({"run": np.array([r.name for r in runs], dtype=object)}, where, None)
    vm_type, n_vms, elapsed, completed = [], [], [], []
    for run, report in zip(runs, reports):
        m = RUN.match(run.name)
        if m["vm"] not in PRICES:
            raise DatasetError(
                f"{run}: column 'vm_type': unknown instance type {m['vm']!r} "
                f"(known: {', '.join(PRICES)})"
            )
        vm_type.append(m["vm"])
        n_vms.append(int(m["n"]))
        elapsed.append(_field_number(run, report, "elapsed_time"))
        completed.append(_field_flag(run, report, "completed"))
    vm_type, n_vms = np.array(vm_type, dtype=object), np.array(n_vms, dtype=np.int64)
    elapsed, completed = np.array(elapsed), np.array(completed, dtype=bool)
    time = np.where(completed, elapsed, elapsed.max())
    price_per_s = np.array([PRICES[v] for v in vm_type]) * n_vms / 3600.0
    family = np.array([v.split(".")[0] for v in vm_type], dtype=object)
    vcpus = np.array([VCPUS[v.split(".")[1]] for v in vm_type], dtype=np.int64)
    columns = {
        "vm_family": family,
        "vcpus": vcpus,
        "n_vms": n_vms,
        "fidelity": np.ones(len(runs)),
        "time": time,
        "cost": time * price_per_s,
        "price_per_s": price_per_s,
        "timed_out": ~completed,
        "vm_type": vm_type,
        "elapsed_time": elapsed,
        "completed": completed,
    }
    dims = (
        Dimension("vm_family", "categorical", ordered_values(family)),
        Dimension("vcpus", "ordinal", ordered_values(vcpus), log=True),
        Dimension("n_vms", "ordinal", ordered_values(n_vms), log=True),
    )
    t_max = median_limit(time, (family, vcpus, n_vms))
    workload = folder.name
    meta = DatasetMeta(
        name=name or f"scout-{workload}",
        title=f"Scout {workload} on AWS clusters (c4/m4/r4 x size x 4..48 VMs)",
        source=SOURCE,
        licence="MIT",
        citation=CITATION,
        dimensions=dims,
        problem=Problem(Objective("cost", "min"), (Constraint("time", "<=", t_max),)),
        measured=("time", "cost"),
        price_model="hourly price of the instance type x n_vms / 3600 per second",
        cost_unit="USD",
        notes=(
            f"T_max = {t_max:g} s = median time (about half feasible); "
            f"{int((~completed).sum())} runs not completed, charged {elapsed.max():g} s"
        ),
    )
    return build_dataset(table, columns, meta, price_column="vm_type", time_column="elapsed_time")


def _report(run: Path) -> dict:
    path = run / "report.json"
    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        raise DatasetError(f"{path}: missing (every run folder needs its report.json)") from None
    except (OSError, ValueError) as e:
        raise DatasetError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(report, dict):
        raise DatasetError(f"{path}: expected a JSON object")
    for f in FIELDS:
        if f not in report:
            raise DatasetError(f"{path}: field {f!r} is missing")
    return report


def _field_number(run: Path, report: dict, field: str) -> float:
    try:
        value = float(report[field])
    except (TypeError, ValueError):
        value = float("nan")
    if not np.isfinite(value) or value <= 0:
        raise DatasetError(
            f"{run / 'report.json'}: field {field!r}: {report[field]!r} is not "
            "a positive number of seconds"
        )
    return value


def _field_flag(run: Path, report: dict, field: str) -> bool:
    value = report[field]
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise DatasetError(f"{run / 'report.json'}: field {field!r}: {value!r} is not true/false")
