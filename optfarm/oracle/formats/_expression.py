"""Safe column expressions of the described-table format (``optfarm.oracle.formats.table``).

An expression is either a column name exactly as the table spells it (``#vm``, ``-cost``,
``wall time (ms)``) or arithmetic over columns and numbers: ``+ - * / **``, unary minus and
parentheses. Inside arithmetic a column whose name is not a Python identifier is quoted in
backticks: ``-`-cost```, ```wall time (ms)` / 1000``, ```#vm` * 0.192``.

The text is parsed with :mod:`ast` and only those nodes are evaluated (no names other than
columns, no calls, no attributes): nothing in a description file is ever executed.
"""

from __future__ import annotations

import ast
import difflib
import operator
import re
from dataclasses import dataclass

import numpy as np

from ..dataset import DatasetError
from ._table import RawTable

__all__ = ["Expression"]

_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_QUOTED = re.compile(r"`([^`]*)`")
_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, *_OPS)


@dataclass(frozen=True)
class Expression:
    """``text`` of the description key ``key`` (e.g. ``price.formula``), read from ``where``."""

    text: str
    key: str
    where: str

    def columns(self, table: RawTable) -> list[str]:
        """The table columns the expression reads (a misspelt one is an error)."""
        if self.text.strip() in table.columns:
            return [self.text.strip()]
        return sorted(set(self._parse(table)[1].values()))

    def is_column(self, table: RawTable) -> bool:
        return self.text.strip() in table.columns

    def evaluate(self, table: RawTable, **checks) -> np.ndarray:
        """Row values as floats. A plain column is read with ``table.number(name, **checks)``
        (errors name the column and the CSV line); a formula's columns are read as finite
        numbers and ``checks`` (``low``, ``high``, ``strictly_positive``) apply to its result,
        errors naming the key and the line."""
        name = self.text.strip()
        if name in table.columns:
            return table.number(name, **checks)
        tree, names = self._parse(table)
        values = {alias: table.number(col, low=None) for alias, col in names.items()}
        with np.errstate(all="ignore"):
            result = np.broadcast_to(
                np.asarray(self._eval(tree.body, values), dtype=float), (table.n_rows,)
            ).copy()
        label = f"{self.key} = {self.text}"
        bad = np.flatnonzero(~np.isfinite(result))
        if len(bad):
            raise table.fail(label, bad[0], f"the formula gives {result[bad[0]]!r}")
        # a formula's floor is 0 unless it must be strictly positive (one message for both)
        floor = None if checks.get("strictly_positive") else 0.0
        return table.check_bounds(label, result, **{"low": floor, **checks})

    # -- parsing ------------------------------------------------------------------------------
    def _fail(self, what: str) -> DatasetError:
        return DatasetError(f"{self.where}: key {self.key!r}: {what}")

    def _parse(self, table: RawTable) -> tuple[ast.Expression, dict[str, str]]:
        """The syntax tree with each backticked name replaced by an identifier, and the map
        identifier -> table column."""
        names: dict[str, str] = {}

        def alias(m: re.Match) -> str:
            names[f"_c{len(names)}"] = m.group(1)
            return f"_c{len(names) - 1}"

        tree = self._syntax_tree(_QUOTED.sub(alias, self.text))
        self._check_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id not in names:
                names[node.id] = node.id
        for col in names.values():
            if col not in table.columns:
                close = difflib.get_close_matches(col, list(table.columns), n=1, cutoff=0.6)
                hint = f" (found {close[0]!r}: misspelt?)" if close else ""
                raise self._fail(
                    f"column {col!r} is not in the table{hint}; columns are {list(table.columns)}"
                )
        return tree, names

    def _syntax_tree(self, text: str) -> ast.Expression:
        """The syntax tree of ``text`` (backticked names replaced), or the one-line error."""
        if "`" in text:
            raise self._fail(f"{self.text!r} has an unclosed backtick")
        try:
            return ast.parse(text.strip(), mode="eval")
        except SyntaxError:
            hint = (
                " (quote column names such as `#vm` in backticks)"
                if re.search(r"[#\s\-()%]", self.text)
                else ""
            )
            raise self._fail(f"{self.text!r} is neither a column nor a formula{hint}") from None

    def _check_nodes(self, tree: ast.Expression) -> None:
        """Numbers, names and + - * / ** only."""
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED):
                shown = ast.unparse(node) if isinstance(node, ast.expr) else type(node).__name__
                raise self._fail(
                    f"{shown!r} in {self.text!r} is not allowed (numbers, "
                    "columns, + - * / ** and parentheses only)"
                )
            if isinstance(node, ast.Constant) and (
                isinstance(node.value, bool) or not isinstance(node.value, (int, float))
            ):
                raise self._fail(f"{node.value!r} in {self.text!r} is not a number")

    def _eval(self, node: ast.AST, values: dict[str, np.ndarray]):
        """Evaluate a tree ``_parse`` has checked (only the nodes of ``_ALLOWED``)."""
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return values[node.id]
        if isinstance(node, ast.BinOp):
            return _OPS[type(node.op)](
                self._eval(node.left, values), self._eval(node.right, values)
            )
        return _OPS[type(node.op)](self._eval(node.operand, values))
