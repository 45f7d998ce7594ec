"""Generic import: any CSV or Parquet table described by a small YAML file.

``farm datasets import csv --from TABLE [--description FILE]``. Without ``--description`` the
description is ``job.optfarm.yaml`` next to ``job.csv``, or ``job.yaml``/``job.yml`` if it
starts with the marker key ``optfarm:`` (a same-named YAML file of another tool is never read
as ours). Example (docs/guide/datasets.md has one worked example per feature)::

    optfarm: table/1                    # marker: this YAML describes a table for optfarm
    name: my-spark-job                  # dataset name (letters, digits, - _ .)
    title: Spark job on my cluster
    source: https://example.org/data    # optional: source, licence, citation, notes
    dimensions:                         # the configuration; kind categorical|ordinal|numeric
      - {name: vm_type, kind: categorical}
      - {name: n_vms, column: "#vm", kind: ordinal, log: true}   # column: the table's name
    columns:                            # canonical name -> expression over the table
      time: "`wall time (ms)`"          # required
      accuracy: acc                     # optional (a fraction in [0, 1])
      timed_out: failed                 # optional (true/false, 1/0; a column)
      fidelity: data_fraction           # optional (s in (0, 1]; default 1)
    metrics:                            # optional: further measured metrics, any name
      rmsd: "`RMSD (A)`"
      p95_s: "`p95 latency ms` / 1000"
    price:                              # exactly one of:
      column: hourly_price              #   the cluster's price per hour
      # formula: "`#vm` * 0.192"        #   the same as a formula
      # cost_column: "-`-cost`"         #   a measured cost (price = median cost/time)
    units: {time: ms, cost: USD, rmsd: A}   # time: s | ms | min | h; others are labels
    objective: min cost                 # min|max of cost, time, accuracy or a metric
    constraints: ["time<=205000", "rmsd <= 2.1 A"]

Expressions (``optfarm.oracle.formats._expression``): a column name exactly as the table writes it,
or arithmetic (``+ - * / **``, unary minus, parentheses, numbers) over columns, with names
that are not identifiers in backticks. Time is stored in seconds: the ``time`` expression is
in ``units.time`` and converted. A constraint is written in the file's own units
(``time<=205000`` with ``units.time: ms`` is 205 s) or with an explicit unit
(``time<=205 s``; for another metric the unit must be the one declared in ``units``).

The description is validated (pydantic) with a message naming the bad key; the table with
the same row-precise checks as the public formats. Dimension values are those present in the
table (numbers for ordinal/numeric, strings for categorical), unless ``values`` lists them.
The import reports, per constraint, how many configurations meet it
(``constraint_report``); one met by every or by no configuration is a warning.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ..dataset import (
    BUILTIN_MEASURES,
    REQUIRED_COLUMNS,
    Dataset,
    DatasetError,
    DatasetMeta,
)
from ..problem import (
    TIME_UNITS,
    Constraint,
    Objective,
    Problem,
    parse_constraint,
    to_seconds,
)
from ..space import Dimension
from ..unique_yaml import load_unique
from ._expression import Expression
from ._table import RawTable, build_dataset, ordered_values, read_csv, read_parquet

__all__ = ["Description", "load", "MARKER"]

MARKER = "optfarm"  # the top-level key that makes a YAML file one of our descriptions
SUFFIX = ".optfarm.yaml"
_METRIC = r"^[A-Za-z_][A-Za-z0-9_]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DimensionSpec(_Strict):
    name: str
    column: str | None = None  # the table's column (default: name)
    kind: Literal["categorical", "ordinal", "numeric"]
    log: bool = False
    values: list | None = None


class ColumnsSpec(_Strict):
    time: str
    accuracy: str | None = None
    timed_out: str | None = None
    fidelity: str | None = None


class PriceSpec(_Strict):
    column: str | None = None
    formula: str | None = None
    cost_column: str | None = None

    @model_validator(mode="after")
    def exactly_one(self):
        given = [k for k in ("column", "formula", "cost_column") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of column, formula, cost_column (got {given or 'none'})"
            )
        return self


class Description(_Strict):
    optfarm: str | int | None = None  # the marker (a format tag, e.g. table/1)
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    title: str = ""
    source: str = ""
    licence: str = ""
    citation: str = ""
    notes: str = ""
    dimensions: list[DimensionSpec] = Field(min_length=1)
    columns: ColumnsSpec
    metrics: dict[str, str] = {}
    price: PriceSpec
    units: dict[str, str] = {}
    objective: str = "min cost"
    constraints: list[str] = []

    @field_validator("objective")
    @classmethod
    def _objective(cls, v: str) -> str:
        Objective.parse(v)
        return v

    @field_validator("constraints")
    @classmethod
    def _constraints(cls, v: list[str]) -> list[str]:
        for c in v:
            parse_constraint(c)
        return v

    @field_validator("metrics")
    @classmethod
    def _metric_names(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not re.match(_METRIC, name):
                raise ValueError(
                    f"metric name {name!r} must be letters, digits and _ "
                    "(the column it reads may be named anyhow)"
                )
            if name in (*BUILTIN_MEASURES, *REQUIRED_COLUMNS):
                raise ValueError(f"metric {name!r} is built in: map it under columns")
        return v

    @field_validator("units")
    @classmethod
    def _units(cls, v: dict[str, str]) -> dict[str, str]:
        if v.get("time", "s") not in TIME_UNITS:
            raise ValueError(f"time unit {v['time']!r} is not one of {', '.join(TIME_UNITS)}")
        return v

    @field_validator("dimensions")
    @classmethod
    def _unique(cls, v: list[DimensionSpec]) -> list[DimensionSpec]:
        names = [d.name for d in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"dimension {dup[0]!r} is declared twice")
        return v


def _read_yaml(path: Path):
    try:
        return load_unique(path.read_text())
    except OSError as e:
        raise DatasetError(f"{path}: cannot read the description ({e})") from None
    except UnicodeDecodeError as e:
        raise DatasetError(f"{path}: not a text file (byte {e.start} is not UTF-8)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise DatasetError(f"{path}: not valid YAML{at} ({getattr(e, 'problem', e)})") from None


def read_description(path: Path) -> Description:
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: the description must be a YAML mapping")
    try:
        return Description.model_validate(data)
    except ValidationError as e:
        errors = e.errors()  # an unknown key explains a "required" one: report it first
        err = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            raise DatasetError(f"{path}: unknown key {key!r} (misspelt?)") from None
        msg = err["msg"].removeprefix("Value error, ")
        raise DatasetError(f"{path}: key {key!r}: {msg}") from None


def _find_description(table: Path) -> Path:
    """``job.optfarm.yaml`` next to ``job.csv``; else ``job.yaml``/``job.yml`` if it carries
    the marker key (another tool's YAML of the same name is skipped, and said so)."""
    ours = table.with_name(table.stem + SUFFIX)
    if ours.exists():
        return ours
    skipped = []
    for ext in (".yaml", ".yml"):
        candidate = table.with_suffix(ext)
        if candidate.exists():
            data = _read_yaml(candidate)
            if isinstance(data, dict) and MARKER in data:
                return candidate
            skipped.append(candidate.name)
    also = (
        f" ({', '.join(skipped)} has no top-level '{MARKER}:' key, so it is not ours)"
        if skipped
        else ""
    )
    raise DatasetError(
        f"{table}: no description: pass --description FILE or put "
        f"{ours.name} next to the table{also}"
    )


def load(
    path: Path, description: str | Path | None = None, name: str | None = None
) -> list[Dataset]:
    """The dataset of a CSV or Parquet table and its description (``description``, else the
    ``*.optfarm.yaml`` beside it): its dimensions, measures, price and problem."""
    if path.is_dir():
        raise DatasetError(f"{path}: the csv format takes one CSV or Parquet file")
    desc_path = Path(description) if description else _find_description(path)
    if not desc_path.exists():
        raise DatasetError(f"{desc_path}: no such description file")
    desc = read_description(desc_path)
    t = read_parquet(path) if path.suffix.lower() in (".parquet", ".pq") else read_csv(path)
    columns, dims = _dimensions(t, desc, desc_path)
    price_col = _measures(t, desc, desc_path, columns, dims)
    measured = _metrics(t, desc, desc_path, columns)
    meta = DatasetMeta(
        name=name or desc.name,
        title=desc.title,
        source=desc.source,
        licence=desc.licence,
        citation=desc.citation,
        dimensions=tuple(dims),
        problem=_problem(desc, desc_path, measured),
        fidelity_name=desc.columns.fidelity,
        measured=tuple(measured),
        price_model=_price_model(desc.price),
        cost_unit=desc.units.get("cost", "USD"),
        time_unit=desc.units.get("time", "s"),
        notes=desc.notes,
    )
    return [build_dataset(t, columns, meta, price_column=price_col, time_column=desc.columns.time)]


def _measures(t: RawTable, desc: Description, desc_path: Path, columns: dict, dims) -> str:
    """Fidelity, time (in seconds), cost, price per second and timeouts added to ``columns``;
    the price's column (or formula) for the dataset's messages."""
    c = desc.columns
    time_unit = desc.units.get("time", "s")
    time = (
        Expression(c.time, "columns.time", str(desc_path)).evaluate(t, strictly_positive=True)
        * TIME_UNITS[time_unit]
    )
    fidelity = (
        Expression(c.fidelity, "columns.fidelity", str(desc_path)).evaluate(
            t, strictly_positive=True, high=1.0
        )
        if c.fidelity
        else np.ones(t.n_rows)
    )
    cost, price_per_s, price_col = _cost_and_price(
        t, desc, desc_path, columns, dims, time, fidelity
    )
    columns |= {
        "fidelity": fidelity,
        "time": time,
        "cost": cost,
        "price_per_s": price_per_s,
        "timed_out": t.flag(c.timed_out) if c.timed_out else np.zeros(t.n_rows, bool),
    }
    return price_col


def _cost_and_price(t, desc, desc_path, columns, dims, time, fidelity):
    """(cost, price per second, the price's column or formula): from a cost column (the
    price the per-configuration median of cost / time), or from an hourly price column or
    formula (cost = time x price)."""
    price = desc.price
    if price.cost_column:
        cost = Expression(price.cost_column, "price.cost_column", str(desc_path)).evaluate(t)
        price_per_s = _per_config_median(cost / time, [columns[d.name] for d in dims], fidelity)
        return cost, price_per_s, price.cost_column
    key, text = ("price.column", price.column) if price.column else ("price.formula", price.formula)
    hourly = Expression(text, key, str(desc_path)).evaluate(t, strictly_positive=True)
    price_per_s = hourly / 3600.0
    with np.errstate(over="ignore"):  # an overflow is reported by build_dataset
        cost = time * price_per_s
    return cost, price_per_s, text


def _metrics(t: RawTable, desc: Description, desc_path: Path, columns: dict) -> list[str]:
    """Accuracy and the named metrics added to ``columns``; the measured metrics (a unit is
    given only for one of them)."""
    c = desc.columns
    measured = ["time", "cost"]
    if c.accuracy:
        accuracy = Expression(c.accuracy, "columns.accuracy", str(desc_path))
        columns["accuracy"] = accuracy.evaluate(t, high=1.0)
        measured.append("accuracy")
    for metric, text in desc.metrics.items():
        if metric in columns:
            raise DatasetError(f"{desc_path}: key 'metrics.{metric}': the name is a dimension's")
        columns[metric] = Expression(text, f"metrics.{metric}", str(desc_path)).evaluate(
            t, low=None
        )
        measured.append(metric)
    for key in desc.units:
        if key not in ("time", "cost", *measured):
            raise DatasetError(
                f"{desc_path}: key 'units.{key}': {key!r} is not a measured "
                f"metric (measured: {', '.join(measured)})"
            )
    return measured


def _problem(desc: Description, desc_path: Path, measured: list[str]) -> Problem:
    """The described problem, every metric it uses measured."""
    problem = Problem(
        Objective.parse(desc.objective),
        tuple(_constraint(x, desc, desc_path) for x in desc.constraints),
    )
    for metric in [problem.objective.metric, *(x.metric for x in problem.constraints)]:
        if metric not in measured:
            where = "columns" if metric in BUILTIN_MEASURES else "metrics"
            raise DatasetError(
                f"{desc_path}: key 'objective'/'constraints' uses {metric!r}, "
                f"but {where}.{metric} is not given"
            )
    return problem


def _price_model(price) -> str:
    """The price model in words (the dataset's facts)."""
    if price.column:
        return f"column {price.column} per hour"
    if price.formula:
        return f"formula {price.formula} per hour"
    return f"median of {price.cost_column} / time per configuration"


def _dimensions(t: RawTable, desc: Description, desc_path: Path):
    """The dimension columns (as read, under the dimension names) and their Dimensions."""
    t.require([d.column or d.name for d in desc.dimensions])
    columns: dict = {}
    dims = []
    for spec in desc.dimensions:
        col = spec.column or spec.name
        values = t.text(col) if spec.kind == "categorical" else _numbers(t, col, positive=spec.log)
        allowed = _declared_values(t, spec, col, values)
        columns[spec.name] = values
        try:
            dims.append(Dimension(spec.name, spec.kind, ordered_values(values, allowed), spec.log))
        except ValueError as e:
            raise DatasetError(f"{desc_path}: {e}") from None
    return columns, dims


def _declared_values(t: RawTable, spec, col: str, values: np.ndarray) -> list | None:
    """A dimension's declared values as its column reads them (None: not declared); the
    table's one-line error for a value that is none of them."""
    if spec.values is None:
        return None
    allowed = (
        [str(v) for v in spec.values]
        if spec.kind == "categorical"
        else [float(v) for v in spec.values]
    )
    bad = np.flatnonzero(~np.isin(values, allowed))
    if len(bad):
        raise t.fail(
            col, bad[0], f"value {values[bad[0]]!r} is not one of the declared values {spec.values}"
        )
    return allowed


def _constraint(text: str, desc: Description, where: Path) -> Constraint:
    """A constraint of the description, in the file's units unless it names its own: a time
    is converted to seconds; another metric's unit must be the one ``units`` declares."""
    metric, op, value, unit = parse_constraint(text)
    if metric == "time":
        unit = unit or desc.units.get("time", "s")
        if unit not in TIME_UNITS:
            raise DatasetError(
                f"{where}: key 'constraints': {text!r}: time unit {unit!r} is "
                f"not one of {', '.join(TIME_UNITS)}"
            )
        return Constraint(metric, op, to_seconds(value, unit))
    declared = desc.units.get(metric, "USD" if metric == "cost" else None)
    if unit is not None and unit != declared:
        said = f"the column is in {declared!r}" if declared else f"units.{metric} is not declared"
        raise DatasetError(f"{where}: key 'constraints': {text!r} gives unit {unit!r}, but {said}")
    return Constraint(metric, op, value)


def _numbers(t: RawTable, name: str, positive: bool) -> np.ndarray:
    values = t.number(name, low=None, strictly_positive=positive)
    return values.astype(np.int64) if np.all(values == np.round(values)) else values


def _per_config_median(
    price: np.ndarray, keys: list[np.ndarray], fidelity: np.ndarray
) -> np.ndarray:
    import pandas as pd

    frame = pd.DataFrame({f"k{i}": k for i, k in enumerate(keys)} | {"s": fidelity, "p": price})
    group = frame.groupby([f"k{i}" for i in range(len(keys))])["p"]
    return group.transform("median").to_numpy(float)
