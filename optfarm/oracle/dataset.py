"""The canonical dataset: an Arrow table of measurements plus metadata, one Parquet file.

Table columns (one row per measurement; repeated measurements of a configuration are several
rows):

- one column per dimension (``DatasetMeta.dimensions``), holding the configuration's values;
- ``fidelity``: dataset size s in (0, 1] (1.0 for datasets without sub-sampling);
- ``time``: job time in seconds (for a timed-out run, the time at which it was stopped);
- ``cost``: cost of the run in the dataset's cost unit (``DatasetMeta.cost_unit``);
- ``price_per_s``: known price of one second of the configuration (``cost = time * price_per_s``);
- ``timed_out``: the run hit the measurement's own time limit (Scout's 7200 s, ...);
- ``accuracy`` (when measured) and ``acc_curve`` (when measured: accuracy every
  ``DatasetMeta.curve_interval_s`` seconds); any further measured columns are kept as they are;
  those named in ``DatasetMeta.measured`` (e.g. ``rmsd``, ``p95_ms``, ``energy``) are metrics
  the oracle replays (``Observation.metrics``) and problems may constrain or optimise.

The metadata lives in the Arrow schema metadata under the key ``optfarm`` as JSON, so one
Parquet file is the whole dataset.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .atomic_files import write_file_atomically
from .contract import METRICS
from .problem import Problem
from .space import Dimension, SearchSpace

__all__ = [
    "DatasetMeta",
    "Dataset",
    "DatasetError",
    "MAX_PRICE_PER_S",
    "MAX_RUN_S",
    "REQUIRED_COLUMNS",
    "check_name",
]

REQUIRED_COLUMNS = ("fidelity", "time", "cost", "price_per_s", "timed_out")
BUILTIN_MEASURES = (*METRICS, "acc_curve")
_META_KEY = b"optfarm"
MAX_RUN_S = 365 * 86400.0  # a measured run longer than a year is not physical (a unit slip)
MAX_PRICE_PER_S = 1e6  # cost units per second of one configuration (USD: $3.6e9/h)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_name(name: str, where: str = "dataset name") -> str:
    """A dataset name: letters, digits and ``._-``, no path separators (it names a file of the
    cache folder)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise DatasetError(
            f"{where}: {name!r} is not a dataset name (letters, digits and ._- "
            "only, no path separators or '..')"
        )
    return name


class DatasetError(ValueError):
    """A dataset (or a file it is read from) is malformed. The message is one line naming the
    file, the column and the row where that is known."""


@dataclass(frozen=True)
class DatasetMeta:
    """Everything about a dataset that is not a measurement."""

    name: str
    dimensions: tuple[Dimension, ...]
    problem: Problem
    title: str = ""
    source: str = ""
    licence: str = ""
    citation: str = ""
    fidelity_name: str | None = None  # what s sub-samples, e.g. "training_set_size"
    measured: tuple[str, ...] = ("time", "cost")
    price_model: str = ""
    cost_unit: str = "USD"
    time_unit: str = "s"  # the source's unit of time (stored in s): a bare time needs a unit
    curve_interval_s: float | None = None
    notes: str = ""

    @property
    def named_metrics(self) -> tuple[str, ...]:
        """The measured metrics beyond time, cost, accuracy and the accuracy curve."""
        return tuple(m for m in self.measured if m not in BUILTIN_MEASURES)

    def to_json(self) -> str:
        d = asdict(self)
        d["dimensions"] = [dim.to_dict() for dim in self.dimensions]
        d["problem"] = self.problem.to_dict()
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str | bytes) -> DatasetMeta:
        d = json.loads(text)
        d["dimensions"] = tuple(Dimension.from_dict(x) for x in d["dimensions"])
        d["problem"] = Problem.from_dict(d["problem"])
        d["measured"] = tuple(d.get("measured", ()))
        return cls(**d)


@dataclass(frozen=True, eq=False)
class Dataset:
    """A validated measurement table with its metadata (see the module docstring)."""

    table: pa.Table
    meta: DatasetMeta
    origin: str = field(default="", compare=False)  # file it came from, for messages

    def __post_init__(self):
        _validate(self.table, self.meta, self.origin or self.meta.name)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def fidelities(self) -> tuple[float, ...]:
        return tuple(sorted(set(self.table.column("fidelity").to_pylist())))

    def space(self) -> SearchSpace:
        """The configurations present at s = 1, with config_id in sorted dimension order."""
        full = self.table.filter(pc.equal(self.table.column("fidelity"), 1.0))
        names = [d.name for d in self.meta.dimensions]
        keys = (
            full.select(names + ["price_per_s"]).group_by(names).aggregate([("price_per_s", "max")])
        )
        order = [(n, "ascending") for n in names]
        keys = keys.sort_by(order)
        configs = {n: keys.column(n).to_numpy(zero_copy_only=False) for n in names}
        return SearchSpace(
            tuple(self.meta.dimensions),
            configs,
            keys.column("price_per_s_max").to_numpy().copy(),
            self.fidelities,
        )

    def to_table(self) -> pa.Table:
        """The table with the metadata packed into its Arrow schema (key ``optfarm``, JSON):
        the canonical form, on disk and in Ray's object store (``from_table`` unpacks it)."""
        schema_meta = dict(self.table.schema.metadata or {})
        schema_meta[_META_KEY] = self.meta.to_json().encode()
        return self.table.replace_schema_metadata(schema_meta)

    @classmethod
    def from_table(cls, table: pa.Table, origin: str = "") -> Dataset:
        """The dataset of a table made by ``to_table``; ``origin`` (its file) names it in
        errors."""
        raw = (table.schema.metadata or {}).get(_META_KEY)
        if raw is None:
            raise DatasetError(f"{origin or 'table'}: no optfarm metadata in the Parquet schema")
        return cls(table, DatasetMeta.from_json(raw), origin=origin)

    def write(self, path: str | Path) -> Path:
        """Write the canonical Parquet file atomically (``write_file_atomically``)."""
        path = Path(path)
        sink = pa.BufferOutputStream()
        pq.write_table(self.to_table(), sink)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file_atomically(path, sink.getvalue().to_pybytes())
        except OSError as e:
            raise DatasetError(
                f"{path}: cannot write the dataset ({getattr(e, 'strerror', None) or e})"
            ) from None
        return path

    @classmethod
    def read(cls, path: str | Path) -> Dataset:
        path = Path(path)
        try:
            with pq.ParquetFile(path) as f:  # not read_table: it imports pyarrow.dataset (0.3 s)
                table = f.read()
        except (OSError, pa.ArrowException) as e:
            raise DatasetError(f"{path}: not a readable Parquet file ({e})") from None
        return cls.from_table(table, origin=str(path))


def _validate(table: pa.Table, meta: DatasetMeta, where: str) -> None:
    """Reject a malformed table with one line naming the file, column and row (the checks in
    this order: the first problem found is the one named)."""
    if table.num_rows == 0:
        raise DatasetError(f"{where}: the table has no rows")
    _check_dimensions(table, meta, where)
    _check_measures(table, where)
    _check_named_metrics(table, meta, where)
    if not math.isfinite(meta.curve_interval_s or 0.0):
        raise DatasetError(f"{where}: curve_interval_s must be finite")


def _floats(table: pa.Table, col: str) -> np.ndarray:
    return table.column(col).to_numpy(zero_copy_only=False).astype(float)


def _check_dimensions(table: pa.Table, meta: DatasetMeta, where: str) -> None:
    """Declared once each, with a column each (and the required columns), every value one
    of the declared values."""
    names = [d.name for d in meta.dimensions]
    if not names:
        raise DatasetError(f"{where}: the dataset declares no dimensions")
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise DatasetError(f"{where}: dimension {sorted(dup)[0]!r} is declared twice")
    for col in (*names, *REQUIRED_COLUMNS):
        if col not in table.column_names:
            raise DatasetError(f"{where}: column {col!r} is missing")
    _check_declared_values(table, meta, where)


def _check_declared_values(table: pa.Table, meta: DatasetMeta, where: str) -> None:
    """Every value of a dimension's column one of its declared values."""
    for d in meta.dimensions:
        allowed = set(d.values)
        for i, v in enumerate(table.column(d.name).to_pylist()):
            if v not in allowed:
                raise DatasetError(
                    f"{where}: column {d.name!r}, row {i}: value {v!r} is not "
                    f"one of the declared values {list(d.values)!r}"
                )


def _check_measures(table: pa.Table, where: str) -> None:
    """Fidelity, time, cost, price (and accuracy) finite and not negative, time and price
    physical, fidelity in (0, 1] reaching 1, accuracy a fraction."""
    has_accuracy = "accuracy" in table.column_names
    for col in ("fidelity", "time", "cost", "price_per_s", *(["accuracy"] if has_accuracy else [])):
        _check_finite_non_negative(_floats(table, col), col, where)
    for col, cap, what in (
        ("time", MAX_RUN_S, "s: longer than a year"),
        ("price_per_s", MAX_PRICE_PER_S, "per s: above the price cap"),
    ):
        values = _floats(table, col)
        over = np.flatnonzero(values > cap)
        if len(over):
            raise DatasetError(
                f"{where}: column {col!r}, row {over[0]}: value "
                f"{values[over[0]]:g} {what} (not a physical value: a unit?)"
            )
    fid = table.column("fidelity").to_numpy()
    if fid.max() != 1.0 or fid.min() <= 0:
        raise DatasetError(f"{where}: column 'fidelity' must lie in (0, 1] and reach 1.0")
    if has_accuracy:
        acc = _floats(table, "accuracy")
        over = np.flatnonzero(acc > 1.0)
        if len(over):
            raise DatasetError(
                f"{where}: column 'accuracy', row {over[0]}: value "
                f"{acc[over[0]]!r} is not a fraction in [0, 1]"
            )


def _check_finite_non_negative(values: np.ndarray, col: str, where: str) -> None:
    """A measure's values finite (accuracy may be missing) and not negative (fidelity
    positive)."""
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad) and col != "accuracy":
        raise DatasetError(
            f"{where}: column {col!r}, row {bad[0]}: missing or non-finite value {values[bad[0]]!r}"
        )
    low = 0.0 if col != "fidelity" else 1e-12
    neg = np.flatnonzero(values < low)
    if len(neg):
        raise DatasetError(
            f"{where}: column {col!r}, row {neg[0]}: negative value {values[neg[0]]!r}"
        )


def _check_named_metrics(table: pa.Table, meta: DatasetMeta, where: str) -> None:
    """Each measured metric a column of finite values; the problem's constraints and
    objective name columns of the table."""
    for m in meta.named_metrics:
        if m not in table.column_names:
            raise DatasetError(f"{where}: measured metric {m!r} has no column")
        values = _floats(table, m)
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            raise DatasetError(
                f"{where}: column {m!r}, row {bad[0]}: missing or "
                f"non-finite value {values[bad[0]]!r}"
            )
    for c in meta.problem.constraints:
        if c.metric not in table.column_names:
            raise DatasetError(
                f"{where}: constraint {c} names column {c.metric!r}, which the table lacks"
            )
    if meta.problem.objective.metric not in table.column_names:
        raise DatasetError(
            f"{where}: objective {meta.problem.objective} names a column the table lacks"
        )
