"""What every ``farm`` command shares: exit codes, the usage error, tables and JSON output."""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Sequence
from typing import Any

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "WIDTH",
    "UsageError",
    "fmt",
    "json_default",
    "parse_params",
    "print_json",
    "print_table",
    "table_blocks",
]

# every command's exit codes: success; a run or the command failed; bad input; Ctrl-C
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
WIDTH = 100  # human tables fit this many columns


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit code 2."""


def parse_params(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for p in pairs or ():
        if "=" not in p:
            raise UsageError(f"--param {p!r} is not of the form key=value")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def print_table(rows: list[dict[str, Any]], columns: Sequence[str], width: int = WIDTH) -> None:
    """A plain-text table; a last column that would pass ``width`` wraps onto more lines."""
    for block in table_blocks(rows, columns, width):
        print("\n".join(block))


def table_blocks(
    rows: list[dict[str, Any]], columns: Sequence[str], width: int = WIDTH
) -> list[list[str]]:
    """``print_table``'s lines in blocks: the header and rule, then one block per row (its
    line and the wrapped rest of its last column)."""
    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lead = sum(widths[:-1]) + 2 * (len(widths) - 1)
    if width - lead >= 10:  # else the table cannot fit: leave its last column whole
        widths[-1] = min(widths[-1], width - lead)
    blocks = [
        [
            "  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(),
            "  ".join("-" * w for w in widths),
        ]
    ]
    for row in cells:
        last = textwrap.wrap(row[-1], widths[-1], break_on_hyphens=False) or [""]
        blocks.append(
            ["  ".join(v.ljust(w) for v, w in zip(row[:-1] + [last[0]], widths)).rstrip()]
            + [" " * lead + more for more in last[1:]]
        )
    return blocks


def print_json(obj: Any) -> None:
    """One JSON object on stdout (numpy scalars as numbers, NaN and infinity as null)."""
    from optfarm.farm.run.metrics import finite_json

    print(json.dumps(finite_json(obj), default=json_default, allow_nan=False))


def fmt(v: Any) -> str:
    """A table cell: "-" for nothing (None, NaN), "never" for inf (a quality or a target never
    reached, as ``farm report`` shows it), floats to 4 significant digits, as the report writes
    them (never in exponent notation: 0.00002093, 66,720)."""
    from optfarm.farm.report.analysis import plain

    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return "never" if math.isinf(v) else plain(v)
    return str(v)


def duration(seconds: float | None) -> str:
    """A short time with its unit, 3 significant digits: ``21 µs``, ``4.5 ms``, ``2.3 s``,
    ``12 min``, ``3.5 h``; "-" for nothing."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds == 0:
        return "0 s"
    for unit, size in (("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3)):
        if abs(seconds) >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds / 1e-6:.3g} µs"


def json_default(o):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {o!r}")
