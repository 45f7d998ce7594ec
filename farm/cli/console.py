"""What every ``farm`` command shares: exit codes, the usage error, tables and JSON output."""

from __future__ import annotations

import math
from typing import Any, Sequence

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "UsageError", "fmt",
           "json_default", "parse_params", "print_table"]

# every command's exit codes: success; a run or the command failed; bad input; Ctrl-C
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


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


def print_table(rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


def fmt(v: Any) -> str:
    """A table cell: "-" for nothing, "never" for inf (a quality or a target never reached, as
    ``farm report`` shows it), floats to 4 significant digits."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return "never" if math.isinf(v) else f"{v:.4g}"
    return str(v)


def json_default(o):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {o!r}")
