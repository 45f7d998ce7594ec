"""Generic import: any CSV or Parquet table described by a small YAML file.

``farm datasets import csv --from TABLE [--description FILE]``; without ``--description`` the
YAML next to the table with the same stem (``job.csv`` + ``job.yaml``/``job.yml``) is used.
Example::

    name: my-spark-job                  # dataset name (letters, digits, - _ .)
    title: Spark job on my cluster
    source: https://example.org/data    # optional: source, licence, citation, notes
    dimensions:                         # the configuration; kind categorical|ordinal|numeric
      - {name: vm_type, kind: categorical}
      - {name: n_vms, kind: ordinal, log: true}
    columns:                            # canonical name -> column of the table
      time: runtime                     # required
      accuracy: acc                     # optional (a fraction in [0, 1])
      timed_out: failed                 # optional (true/false, 1/0)
      fidelity: data_fraction           # optional (s in (0, 1]; default 1)
    price:                              # exactly one of:
      column: hourly_price              #   a column with the cluster's price per hour
      # formula: "n_vms * 0.192"        #   an arithmetic formula over columns, per hour
      # cost_column: cost               #   a measured cost column (price = median cost/time)
    units: {time: s, cost: USD}         # time: s | ms | min | h
    objective: min cost                 # or "max accuracy"
    constraints: ["time<=300"]

The description is validated (pydantic) with a message naming the bad key; the table with
the same row-precise checks as the public formats. Dimension values are those present in the
table (numbers for ordinal/numeric, strings for categorical), unless ``values`` lists them.
"""

from __future__ import annotations

import ast
import operator
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

from ..dataset import Dataset, DatasetError, DatasetMeta
from ..problem import Constraint, Objective, Problem
from ..space import Dimension
from ._table import RawTable, build_dataset, ordered_values, read_csv, read_parquet

__all__ = ["Description", "load"]

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "min": 60.0, "h": 3600.0}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DimensionSpec(_Strict):
    name: str
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
            raise ValueError("give exactly one of column, formula, cost_column "
                             f"(got {given or 'none'})")
        return self


class UnitsSpec(_Strict):
    time: Literal["s", "ms", "min", "h"] = "s"
    cost: str = "USD"


class Description(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    title: str = ""
    source: str = ""
    licence: str = ""
    citation: str = ""
    notes: str = ""
    dimensions: list[DimensionSpec] = Field(min_length=1)
    columns: ColumnsSpec
    price: PriceSpec
    units: UnitsSpec = UnitsSpec()
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
            Constraint.parse(c)
        return v

    @field_validator("dimensions")
    @classmethod
    def _unique(cls, v: list[DimensionSpec]) -> list[DimensionSpec]:
        names = [d.name for d in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"dimension {dup[0]!r} is declared twice")
        return v


def read_description(path: Path) -> Description:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise DatasetError(f"{path}: cannot read the description ({e})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise DatasetError(f"{path}: not valid YAML{at} ({getattr(e, 'problem', e)})") from None
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
    for ext in (".yaml", ".yml"):
        candidate = table.with_suffix(ext)
        if candidate.exists():
            return candidate
    raise DatasetError(f"{table}: no description: pass --description FILE or put "
                       f"{table.with_suffix('.yaml').name} next to the table")


def load(path: Path, description: str | Path | None = None,
         name: str | None = None) -> list[Dataset]:
    if path.is_dir():
        raise DatasetError(f"{path}: the csv format takes one CSV or Parquet file")
    desc_path = Path(description) if description else _find_description(path)
    if not desc_path.exists():
        raise DatasetError(f"{desc_path}: no such description file")
    desc = read_description(desc_path)
    t = read_parquet(path) if path.suffix.lower() in (".parquet", ".pq") else read_csv(path)
    t.require([d.name for d in desc.dimensions])
    columns: dict = {}
    dims = []
    for spec in desc.dimensions:
        values = (t.text(spec.name) if spec.kind == "categorical"
                  else _numbers(t, spec.name, positive=spec.log))
        if spec.values is not None:
            allowed = [str(v) for v in spec.values] if spec.kind == "categorical" \
                else [float(v) for v in spec.values]
            bad = np.flatnonzero(~np.isin(values, allowed))
            if len(bad):
                raise t.fail(spec.name, bad[0], f"value {values[bad[0]]!r} is not one of the "
                             f"declared values {spec.values}")
        columns[spec.name] = values
        try:
            dims.append(Dimension(spec.name, spec.kind, ordered_values(
                values, None if spec.values is None else allowed), spec.log))
        except ValueError as e:
            raise DatasetError(f"{desc_path}: {e}") from None
    c = desc.columns
    time = t.number(c.time, strictly_positive=True) * TIME_UNITS[desc.units.time]
    fidelity = (t.number(c.fidelity, strictly_positive=True, high=1.0) if c.fidelity
                else np.ones(t.n_rows))
    price = desc.price
    if price.cost_column:
        cost = t.number(price.cost_column)
        price_per_s = _per_config_median(cost / time, [columns[d.name] for d in dims], fidelity)
        price_col = price.cost_column
    else:
        if price.column:
            hourly, price_col = t.number(price.column, strictly_positive=True), price.column
        else:
            hourly, price_col = _formula(t, price.formula, desc_path), "price.formula"
        price_per_s = hourly / 3600.0
        with np.errstate(over="ignore"):  # an overflow is reported by build_dataset
            cost = time * price_per_s
    columns |= {"fidelity": fidelity, "time": time, "cost": cost, "price_per_s": price_per_s,
                "timed_out": t.flag(c.timed_out) if c.timed_out else np.zeros(t.n_rows, bool)}
    measured = ["time", "cost"]
    if c.accuracy:
        columns["accuracy"] = t.number(c.accuracy, high=1.0)
        measured.append("accuracy")
    problem = Problem(Objective.parse(desc.objective),
                      tuple(Constraint.parse(x) for x in desc.constraints))
    for metric in [problem.objective.metric, *(x.metric for x in problem.constraints)]:
        if metric not in measured:
            raise DatasetError(f"{desc_path}: key 'objective'/'constraints' uses {metric!r}, "
                               f"but columns.{metric} is not given")
    meta = DatasetMeta(
        name=name or desc.name, title=desc.title, source=desc.source, licence=desc.licence,
        citation=desc.citation, dimensions=tuple(dims), problem=problem,
        fidelity_name=c.fidelity, measured=tuple(measured),
        price_model=(f"column {price.column} per hour" if price.column else
                     f"formula {price.formula} per hour" if price.formula else
                     f"median of {price.cost_column} / time per configuration"),
        cost_unit=desc.units.cost, notes=desc.notes,
    )
    return [build_dataset(t, columns, meta, price_column=price_col, time_column=c.time)]


def _numbers(t: RawTable, name: str, positive: bool) -> np.ndarray:
    values = t.number(name, low=None, strictly_positive=positive)
    return values.astype(np.int64) if np.all(values == np.round(values)) else values


def _per_config_median(price: np.ndarray, keys: list[np.ndarray],
                       fidelity: np.ndarray) -> np.ndarray:
    import pandas as pd

    frame = pd.DataFrame({f"k{i}": k for i, k in enumerate(keys)} | {"s": fidelity, "p": price})
    group = frame.groupby([f"k{i}" for i in range(len(keys))])["p"]
    return group.transform("median").to_numpy(float)


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.Pow: operator.pow, ast.USub: operator.neg}


def _formula(t: RawTable, text: str, where: Path) -> np.ndarray:
    """Evaluate an arithmetic formula (numbers, column names, + - * / ** and parentheses)
    over the table's columns, row-wise; the result is the hourly price of each row."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise DatasetError(f"{where}: key 'price.formula': {text!r} is not a formula") from None

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name):
            if node.id not in t.columns:
                raise DatasetError(f"{where}: key 'price.formula': column {node.id!r} is not "
                                   "in the table")
            return t.number(node.id, low=None)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise DatasetError(f"{where}: key 'price.formula': {ast.unparse(node)!r} is not "
                           "allowed (numbers, columns, + - * / ** only)")

    with np.errstate(all="ignore"):
        hourly = np.broadcast_to(np.asarray(ev(tree), dtype=float), (t.n_rows,)).copy()
    bad = np.flatnonzero(~np.isfinite(hourly) | (hourly <= 0))
    if len(bad):
        raise t.fail("price.formula", bad[0], f"price {hourly[bad[0]]!r} is not positive")
    return hourly

