"""Whether the optimizers' numba kernels (the tree kernels,
``optfarm/optimizers/models/tree_kernels.py``, and the look-ahead's that inline them,
``optfarm/optimizers/lookahead_kernels.py``; used by the tree-based optimizers) are compiled
for this install.

Every kernel is ``@numba.njit(cache=True)``: the first run of a model-based optimizer compiles
them (about ``SECONDS_PER_KERNEL`` of CPU each) and numba keeps the machine code beside the
sources (``__pycache__/*.nbi``/``*.nbc``), so later runs load it in milliseconds. ``farm run``
says so before a first run rather than sitting silent. A kernel marked ``inline="always"`` is
compiled into each kernel that calls it, never on its own, so it is not counted: it has no code
of its own in the cache, and counting it made the first-compile line come back on every run.
Reading the cache index goes through numba's private API's door,
``optfarm.optimizers.numba_private``.
"""

from __future__ import annotations

__all__ = ["SECONDS_PER_KERNEL", "uncompiled_kernels"]

SECONDS_PER_KERNEL = 2  # CPU seconds to compile one kernel (36 s for 21, measured)


def uncompiled_kernels() -> list[str]:
    """The names of the kernels compiled on their own (not inlined) with no compiled code in
    numba's cache for their current sources (none: every kernel loads without compiling)."""
    from optfarm.optimizers import lookahead_kernels
    from optfarm.optimizers.models import tree_kernels
    from optfarm.optimizers.numba_private import is_cached, kernels_of

    return [
        kernel.py_func.__name__
        for module in (tree_kernels, lookahead_kernels)
        for kernel in kernels_of(module)
        if kernel.targetoptions.get("inline") != "always" and not is_cached(kernel)
    ]
