"""Whether the optimizers' numba kernels (``optfarm/optimizers/models/_kernels.py``, used by the
tree-based optimizers) are compiled for this install.

Every kernel is ``@numba.njit(cache=True)``: the first run of a model-based optimizer compiles
them (a minute or two on a busy machine) and numba keeps the machine code beside the sources
(``__pycache__/*.nbi``/``*.nbc``), so later runs load it in milliseconds. ``farm run`` says so
before a first run rather than sitting silent. Reading the cache index goes through numba's
``FunctionCache`` (not a public API; kept in this one module).
"""

from __future__ import annotations

__all__ = ["uncompiled_kernels"]


def uncompiled_kernels() -> list[str]:
    """The names of the kernels with no compiled code in numba's cache for their current
    source (none: every kernel loads without compiling)."""
    from numba.core.registry import CPUDispatcher

    from optfarm.optimizers.models import _kernels

    return [
        name
        for name, value in vars(_kernels).items()
        if isinstance(value, CPUDispatcher)
        and value.__module__ == _kernels.__name__
        and not _cached(value)
    ]


def _cached(dispatcher) -> bool:
    """Whether numba's cache index of ``dispatcher`` lists compiled code for its source as it
    is now (an index of an older source reads as empty)."""
    try:
        return bool(dispatcher._cache._cache_file._load_index())
    except (AttributeError, OSError):
        return False
