"""Whether the optimizers' numba kernels (``optfarm/optimizers/models/_kernels.py``, used by the
tree-based optimizers) are compiled for this install.

Every kernel is ``@numba.njit(cache=True)``: the first run of a model-based optimizer compiles
them (about ``SECONDS_PER_KERNEL`` of CPU each: 36 CPU-s for the 21 of a first ``farm run``
here) and numba keeps the machine code beside the sources (``__pycache__/*.nbi``/``*.nbc``), so
later runs load it in milliseconds. ``farm run`` says so before a first run rather than sitting
silent. A kernel marked ``inline="always"`` is compiled into each kernel that calls it, never on
its own, so it is not counted: it has no code of its own in the cache, and counting it made the
first-compile line come back on every run. Reading the cache index goes through numba's
``FunctionCache`` (not a public API; kept in this one module).
"""

from __future__ import annotations

__all__ = ["SECONDS_PER_KERNEL", "uncompiled_kernels"]

SECONDS_PER_KERNEL = 2  # CPU seconds to compile one kernel (36 s for 21, measured)


def uncompiled_kernels() -> list[str]:
    """The names of the kernels compiled on their own (not inlined) with no compiled code in
    numba's cache for their current source (none: every kernel loads without compiling)."""
    from numba.core.registry import CPUDispatcher

    from optfarm.optimizers.models import _kernels

    return [
        name
        for name, value in vars(_kernels).items()
        if isinstance(value, CPUDispatcher)
        and value.__module__ == _kernels.__name__
        and value.targetoptions.get("inline") != "always"
        and not _cached(value)
    ]


def _cached(dispatcher) -> bool:
    """Whether numba's cache index of ``dispatcher`` lists compiled code for its source as it
    is now (an index of an older source reads as empty)."""
    try:
        return bool(dispatcher._cache._cache_file._load_index())
    except (AttributeError, OSError):
        return False
