"""Reading published measurement files strictly, and turning their columns into a Dataset.

Every loader reads its files through ``read_csv`` / ``RawTable`` so that a malformed input is
rejected with ONE line naming the file, the column and the row (``row N`` is the N-th data row,
``line N + 1`` of a CSV file with its header), and builds its datasets with ``build_dataset``,
which checks that repeated measurements of one configuration agree on its price.
"""

from __future__ import annotations

import csv
import difflib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..dataset import MAX_PRICE_PER_S, MAX_RUN_S, Dataset, DatasetError, DatasetMeta

__all__ = [
    "RawTable",
    "build_dataset",
    "files_in",
    "median_limit",
    "ordered_values",
    "read_csv",
    "read_parquet",
]


class RawTable:
    """The columns of one file as read (strings or numbers), with row-precise checks.

    Args:
        columns: column name -> 1-D array (one entry per data row).
        where: the file, for messages.
        line_offset: file line of data row 1 (2 for a CSV with a header, None: no lines).
    """

    def __init__(self, columns: Mapping[str, np.ndarray], where: str, line_offset: int | None):
        self.columns = dict(columns)
        self.where = where
        self.line_offset = line_offset
        self.n_rows = len(next(iter(self.columns.values()))) if self.columns else 0

    def row(self, i: int) -> str:
        """'row N (line L)' for the 0-based data row ``i``."""
        line = "" if self.line_offset is None else f" (line {i + self.line_offset})"
        return f"row {i + 1}{line}"

    def fail(self, column: str, i: int, what: str) -> DatasetError:
        return DatasetError(f"{self.where}: column {column!r}, {self.row(i)}: {what}")

    def require(self, names: Iterable[str]) -> None:
        """Reject a missing column, suggesting the closest existing name (a misspelling)."""
        for name in names:
            if name not in self.columns:
                close = difflib.get_close_matches(name, list(self.columns), n=1, cutoff=0.6)
                hint = f" (found {close[0]!r}: misspelt?)" if close else ""
                raise DatasetError(
                    f"{self.where}: column {name!r} is missing{hint}; "
                    f"columns are {list(self.columns)}"
                )

    def number(
        self,
        name: str,
        *,
        low: float | None = 0.0,
        high: float | None = None,
        integer: bool = False,
        strictly_positive: bool = False,
    ) -> np.ndarray:
        """Column ``name`` as floats (or ints): every entry a finite number within bounds."""
        self.require([name])
        raw = self.columns[name]
        values = pd.to_numeric(pd.Series(raw, dtype=object), errors="coerce").to_numpy(float)
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            v = raw[bad[0]]
            what = (
                "missing value"
                if v is None or str(v).strip() in ("", "nan", "NaN", "NA")
                else f"{v!r} is not a finite number"
            )
            raise self.fail(name, bad[0], what)
        return self.check_bounds(
            name, values, low=low, high=high, integer=integer, strictly_positive=strictly_positive
        )

    def check_bounds(
        self,
        label: str,
        values: np.ndarray,
        *,
        low: float | None = 0.0,
        high: float | None = None,
        integer: bool = False,
        strictly_positive: bool = False,
    ) -> np.ndarray:
        """``values`` (one per row, finite) within bounds, else the error naming ``label`` and
        the first offending row's line; as ints with ``integer``."""
        if low is not None:
            bad = np.flatnonzero(values < low)
            if len(bad):
                raise self.fail(
                    label,
                    bad[0],
                    f"negative value {values[bad[0]]:g}"
                    if low == 0
                    else f"value {values[bad[0]]:g} is below {low:g}",
                )
        if strictly_positive:
            bad = np.flatnonzero(values <= 0)
            if len(bad):
                raise self.fail(label, bad[0], f"value {values[bad[0]]:g} must be positive")
        if high is not None:
            bad = np.flatnonzero(values > high)
            if len(bad):
                raise self.fail(label, bad[0], f"value {values[bad[0]]:g} is above {high:g}")
        if integer:
            bad = np.flatnonzero(values != np.round(values))
            if len(bad):
                raise self.fail(label, bad[0], f"value {values[bad[0]]:g} is not an integer")
            return values.astype(np.int64)
        return values

    def text(
        self, name: str, allowed: Iterable[str] | None = None, what: str = "value"
    ) -> np.ndarray:
        """Column ``name`` as stripped strings; with ``allowed``, reject any other value."""
        self.require([name])
        raw = self.columns[name]
        values = np.array(
            [
                "" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v).strip()
                for v in raw
            ],
            dtype=object,
        )
        empty = np.flatnonzero(values == "")
        if len(empty):
            raise self.fail(name, empty[0], "missing value")
        if allowed is not None:
            allowed = list(allowed)
            bad = np.flatnonzero(~np.isin(values, allowed))
            if len(bad):
                raise self.fail(
                    name, bad[0], f"unknown {what} {values[bad[0]]!r} (known: {', '.join(allowed)})"
                )
        return values

    def flag(self, name: str) -> np.ndarray:
        """A boolean column written as true/false, yes/no or 1/0."""
        words = {
            "true": True,
            "1": True,
            "yes": True,
            "1.0": True,
            "false": False,
            "0": False,
            "no": False,
            "0.0": False,
        }
        values = self.text(name)
        keys = np.char.lower(values.astype(str))
        bad = np.flatnonzero(~np.isin(keys, list(words)))
        if len(bad):
            raise self.fail(name, bad[0], f"{values[bad[0]]!r} is not true/false")
        return np.array([words[k] for k in keys], dtype=bool)

    def floats_list(self, name: str) -> list[list[float]]:
        """A column of space-separated numbers (the published intermediate curves)."""
        out = []
        for i, v in enumerate(self.text(name)):
            try:
                out.append([float(x) for x in str(v).split()])
            except ValueError:
                raise self.fail(name, i, f"{v!r} is not a list of numbers") from None
        return out


def read_csv(path: Path, required: Sequence[str] = ()) -> RawTable:
    """Read a comma-separated file as strings; reject an empty file, a wrong delimiter, ragged
    rows and missing columns."""
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"{where}: cannot read the file ({e})") from None
    if not text.strip():
        raise DatasetError(f"{where}: the file is empty")
    _check_delimiter(text.splitlines()[0], where)
    rows = list(csv.reader(text.splitlines()))
    names = [n.strip() for n in rows[0]]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DatasetError(f"{where}: column {dup[0]!r} appears twice in the header")
    body = _data_rows(rows[1:], len(names), where)
    columns = {n: np.array([r[j] for r in body], dtype=object) for j, n in enumerate(names)}
    table = RawTable(columns, where, line_offset=2)
    table.require(required)
    return table


def _check_delimiter(header: str, where: str) -> None:
    """A header without a comma but with another separator is a file of another delimiter."""
    if "," in header:
        return
    for sep in (";", "\t", "|"):
        if sep in header:
            raise DatasetError(
                f"{where}: line 1: the header is separated by {sep!r}; "
                "expected a comma-separated file"
            )


def _data_rows(body: list[list[str]], n_names: int, where: str) -> list[list[str]]:
    """The data rows without trailing blank lines: at least one, none blank, each with the
    header's number of fields."""
    while body and not body[-1]:
        body.pop()  # trailing blank lines
    if not body:
        raise DatasetError(f"{where}: the file has a header but no data rows")
    for i, r in enumerate(body):
        if not r:
            raise DatasetError(f"{where}: row {i + 1} (line {i + 2}): blank line")
        if len(r) != n_names:
            raise DatasetError(
                f"{where}: row {i + 1} (line {i + 2}): {len(r)} fields, the "
                f"header has {n_names} (wrong delimiter or a stray comma?)"
            )
    return body


def read_parquet(path: Path, required: Sequence[str] = ()) -> RawTable:
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise DatasetError(f"{path}: not a readable Parquet file ({e})") from None
    if t.num_rows == 0:
        raise DatasetError(f"{path}: the table has no rows")
    columns = {n: np.array(t.column(n).to_pylist(), dtype=object) for n in t.column_names}
    table = RawTable(columns, str(path), line_offset=None)
    table.require(required)
    return table


def files_in(path: Path, pattern: str, what: str) -> list[Path]:
    """``path`` itself if it is a file, else the files matching ``pattern`` in the folder."""
    if path.is_file():
        return [path]
    found = sorted(path.glob(pattern))
    if not found:
        raise DatasetError(f"{path}: no {what} ({pattern}) in this folder")
    return found


def ordered_values(values: Iterable[Any], order: Sequence[Any] | None = None) -> tuple:
    """Distinct values as plain Python values, in ``order`` (if given) else sorted."""
    present = sorted({v.item() if isinstance(v, np.generic) else v for v in values})
    if order is None:
        return tuple(present)
    return tuple(p for o in order for p in present if p == o)


def median_limit(times: np.ndarray, config_keys: Sequence[np.ndarray]) -> float:
    """The "about half feasible" time limit (Lynceus Sec. VI-A): the median of the
    per-configuration mean times, rounded to 4 significant digits (so the threshold survives
    its text form ``time<=T`` in the Parquet metadata)."""
    frame = pd.DataFrame({f"k{i}": k for i, k in enumerate(config_keys)} | {"t": times})
    per_config = frame.groupby([f"k{i}" for i in range(len(config_keys))])["t"].mean()
    return float(f"{np.median(per_config.to_numpy()):.4g}")


def build_dataset(
    table: RawTable,
    columns: Mapping[str, Any],
    meta: DatasetMeta,
    price_column: str = "price",
    time_column: str = "time",
) -> Dataset:
    """Assemble and validate a Dataset from canonical column arrays (in file row order).

    Checks, before the Dataset's own validation, that times, prices and their product (the
    cost) are physical, naming the file's column and line, and that every configuration has
    one price (repeated rows of a configuration disagreeing on the price are an error naming
    the row).
    """
    _check_physical(
        table,
        np.asarray(columns["time"], float),
        np.asarray(columns["price_per_s"], float),
        price_column,
        time_column,
    )
    names = [d.name for d in meta.dimensions]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DatasetError(f"{table.where}: dimension {dup[0]!r} is declared twice")
    _check_one_price(
        table,
        [np.asarray(columns[n]) for n in names],
        np.asarray(columns["fidelity"]),
        np.asarray(columns["price_per_s"], float),
        price_column,
    )
    arrays = {}
    for k, v in columns.items():
        if isinstance(v, pa.Array):
            arrays[k] = v
        elif isinstance(v, list):
            arrays[k] = pa.array(v, type=pa.list_(pa.float64()))
        else:
            arrays[k] = pa.array(
                np.asarray(v).tolist() if np.asarray(v).dtype == object else np.asarray(v)
            )
    return Dataset(pa.table(arrays), meta, origin=table.where)


def _check_physical(
    table: RawTable, time: np.ndarray, price: np.ndarray, price_column: str, time_column: str
) -> None:
    """No run longer than a year, no price above the cap (so no cost overflows)."""
    over = np.flatnonzero(time > MAX_RUN_S)
    if len(over):
        raise table.fail(
            time_column,
            over[0],
            f"{time[over[0]]:g} s is longer than a year (not a physical run time: a unit?)",
        )
    over = np.flatnonzero(price > MAX_PRICE_PER_S)
    if len(over):
        raise table.fail(
            price_column,
            over[0],
            f"price {price[over[0]]:g} per s is above the "
            f"cap of {MAX_PRICE_PER_S:g} (not a physical price: a unit?)",
        )


def _check_one_price(
    table: RawTable, keys: list[np.ndarray], fidelity: np.ndarray, price: np.ndarray, column: str
) -> None:
    frame = pd.DataFrame({f"k{i}": k for i, k in enumerate(keys)} | {"s": fidelity, "p": price})
    first = frame.groupby([f"k{i}" for i in range(len(keys))] + ["s"])["p"].transform("first")
    bad = np.flatnonzero(~np.isclose(price, first.to_numpy(), rtol=1e-9, atol=0.0))
    if len(bad):
        i = bad[0]
        raise DatasetError(
            f"{table.where}: column {column!r}, {table.row(i)}: repeated "
            f"measurement of one configuration with a different price "
            f"({price[i] * 3600:.6g}/h vs {first.iloc[i] * 3600:.6g}/h earlier)"
        )
