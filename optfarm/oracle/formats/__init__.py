"""Loaders of the public measurement formats and the generic table import.

``FORMATS[name](path, **options) -> list[Dataset]``: each loader reads a file or a folder,
builds and validates EVERY dataset it holds before returning (so a rejected import writes
nothing), and raises ``optfarm.oracle.dataset.DatasetError`` with one line naming the file, the
column and the row of the first problem. The rules of each format (cost formula, time limits,
defaults) are in its module docstring.
"""

from __future__ import annotations

from collections.abc import Callable

from ..dataset import Dataset
from . import cherrypick, guindani, lynceus, scout, table, trimtuner

__all__ = ["FORMATS"]

FORMATS: dict[str, Callable[..., list[Dataset]]] = {
    "trimtuner": trimtuner.load,
    "lynceus": lynceus.load,
    "cherrypick": cherrypick.load,
    "scout": scout.load,
    "guindani": guindani.load,
    "csv": table.load,
}
