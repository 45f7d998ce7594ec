"""Whether the optimizers' numba kernels (the tree kernels,
``optfarm/optimizers/models/tree_kernels.py``, and the look-ahead's that inline them,
``optfarm/optimizers/lookahead_kernels.py``; used by the tree-based optimizers) are compiled
for this install.

Every kernel is ``@numba.njit(cache=True)``: the first run of a model-based optimizer compiles
them (a minute or two on a busy machine) and numba keeps the machine code beside the sources
(``__pycache__/*.nbi``/``*.nbc``), so later runs load it in milliseconds. ``farm run`` says so
before a first run rather than sitting silent. Reading the cache index goes through numba's
private API's door, ``optfarm.optimizers.numba_private``.
"""

from __future__ import annotations

__all__ = ["uncompiled_kernels"]


def uncompiled_kernels() -> list[str]:
    """The names of the kernels with no compiled code in numba's cache for their current
    sources (none: every kernel loads without compiling)."""
    from optfarm.optimizers import lookahead_kernels
    from optfarm.optimizers.models import tree_kernels
    from optfarm.optimizers.numba_private import is_cached, kernels_of

    return [
        kernel.py_func.__name__
        for module in (tree_kernels, lookahead_kernels)
        for kernel in kernels_of(module)
        if not is_cached(kernel)
    ]
