"""A dependency's private API, looked up by name so that an upgrade that moves or drops one of
its names fails loudly, naming it, instead of as an AttributeError somewhere inside a sweep
(or, worse, inside an ``except`` that blames the cluster).

Each dependency whose private names the farm uses has one module of its own listing them
(``PRIVATE``: (module, name) pairs) and reaching them only through ``private``:
``optfarm.farm.tracking.mlflow_private`` (MLflow), ``optfarm.farm.runtime.ray_private`` (Ray),
``optfarm.optimizers.peers.optuna_private`` (Optuna). ``tests/test_dependency_api.py`` resolves
every listed name under the versions installed (those ``requirements/lock.txt`` pins).
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

__all__ = ["DependencyAPIError", "missing", "private", "private_attribute"]


class DependencyAPIError(RuntimeError):
    """A private name the farm relies on is missing from the installed dependency."""


def private(module: str, name: str) -> Any:
    """``module.name`` (``name`` may be dotted: ``Class.attribute``); ``missing``'s error when
    either is not there."""
    try:
        found = importlib.import_module(module)
        for part in name.split("."):
            found = getattr(found, part)
        return found
    except (ImportError, AttributeError):
        raise missing(f"{module}.{name}", module.partition(".")[0]) from None


def private_attribute(obj: Any, name: str) -> Any:
    """``obj.name``, a private attribute of a dependency's object (a study's storage);
    ``missing``'s error, naming its class, when it is not there."""
    try:
        return getattr(obj, name)
    except AttributeError:
        cls = type(obj)
        raise missing(
            f"{cls.__module__}.{cls.__qualname__}.{name}", cls.__module__.partition(".")[0]
        ) from None


def missing(what: str, package: str) -> DependencyAPIError:
    """The error for the private name ``what`` missing from the installed ``package``: one line
    naming both, the version installed, and what to do."""
    try:
        installed = f"{package} {version(package)}"
    except PackageNotFoundError:
        installed = f"{package} (not installed)"
    return DependencyAPIError(
        f"{what} is missing from {installed}: optfarm uses this private "
        "name of the version requirements/lock.txt pins; install that version"
    )
