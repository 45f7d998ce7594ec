"""The built-in sweep specs and the nightly gate's baselines: package data of ``optfarm``
(``optfarm/sweeps/*.yaml``, ``*.json``; the checkout's top-level ``sweeps/`` is a link to that
folder), read with ``importlib.resources`` so that an installed wheel finds them from any folder.

Where a command takes a spec (``farm sweep``, ``farm leaderboard``, ``farm regress``, and
``farm regress --baseline``), an argument that names an existing file is that file, as always;
a bare name, with neither a folder nor a suffix (``quickstart``, ``nightly-short``,
``nightly-baseline``), names the built-in file of that name (``optfarm/sweeps/NAME.yaml``, a
baseline ``NAME.json``). Any other argument is a path, and a missing one is reported as such.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path, PurePath

from optfarm.oracle.spelling import did_you_mean

__all__ = ["SPEC_SUFFIX", "BASELINE_SUFFIX", "builtin_names", "is_builtin_name", "resolve"]

SPEC_SUFFIX = ".yaml"
BASELINE_SUFFIX = ".json"


def _folder() -> Traversable:
    return files("optfarm").joinpath("sweeps")


def builtin_names(suffix: str = SPEC_SUFFIX) -> list[str]:
    """The names of the built-in files with ``suffix`` (specs: ``.yaml``; baselines:
    ``.json``), sorted."""
    return sorted(
        entry.name.removesuffix(suffix)
        for entry in _folder().iterdir()
        if entry.name.endswith(suffix) and entry.is_file()
    )


def is_builtin_name(text: str | PurePath) -> bool:
    """Whether ``text`` is a bare name (no folder, no suffix): the way a built-in is named."""
    path = PurePath(text)
    return bool(str(text)) and len(path.parts) == 1 and not path.suffix and str(text) == path.name


def resolve(
    text: str | PurePath, suffix: str = SPEC_SUFFIX, what: str = "sweep spec"
) -> Path | Traversable:
    """What a spec (or, with ``suffix`` ``.json``, a baseline) argument names: an existing
    file as given; else a bare name's built-in file (``FileNotFoundError`` with the built-in
    names, and the closest, for a bare name that is none); else the path as given (its reader
    says it does not exist)."""
    path = Path(text)
    if path.exists() or not is_builtin_name(text):
        return path
    found = _folder().joinpath(f"{text}{suffix}")
    if not found.is_file():
        names = builtin_names(suffix)
        raise FileNotFoundError(
            f"{text}: no such file, nor a built-in {what}{did_you_mean(str(text), names)} "
            f"(built-in: {', '.join(names)})"
        )
    return found
