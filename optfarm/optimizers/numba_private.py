"""numba's private API, the one door to it (``optfarm.oracle.dependency_api``): the on-disk
cache of a kernel (``@numba.njit(cache=True)``), its index and the source stamp the index is
valid for. Every name is listed in ``PRIVATE``; one that an upgrade dropped raises
``DependencyAPIError`` naming it.

numba stamps a kernel's cache with the file that defines it (modification time and size)
only, so a kernel that inlines kernels of another file would load its stale machine code
after that file changed. ``stamp_with`` adds the other files' stamps to a kernel's, so that a
change of any of them compiles it again; ``is_cached`` says whether the index lists compiled
code for the stamp as it is now (``farm run``'s first-compile line).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from types import ModuleType

from numba.core.registry import CPUDispatcher

from optfarm.oracle.dependency_api import private_attribute

__all__ = ["PRIVATE", "is_cached", "kernels_of", "stamp_with"]

PRIVATE = (
    ("numba.core.dispatcher", "Dispatcher"),  # its ``_cache``
    ("numba.core.caching", "Cache"),  # its ``_cache_file``
    ("numba.core.caching", "IndexDataCacheFile._load_index"),  # and its ``_source_stamp``
)


def kernels_of(module: ModuleType) -> list[CPUDispatcher]:
    """The numba kernels ``module`` defines (not those it imports)."""
    return [
        value
        for value in vars(module).values()
        if isinstance(value, CPUDispatcher) and value.__module__ == module.__name__
    ]


def _index(kernel: CPUDispatcher):
    return private_attribute(private_attribute(kernel, "_cache"), "_cache_file")


def stamp_with(kernels: Iterable[CPUDispatcher], *files: str) -> None:
    """Make each cached kernel's index valid only for its own file's stamp and the current
    stamps (modification time, size) of ``files`` too."""
    others = tuple((os.stat(f).st_mtime, os.stat(f).st_size) for f in files)
    for kernel in kernels:
        index = _index(kernel)
        index._source_stamp = (private_attribute(index, "_source_stamp"), others)


def is_cached(kernel: CPUDispatcher) -> bool:
    """Whether numba's cache index of ``kernel`` lists compiled code for its stamp as it is
    now (an index of an older source reads as empty)."""
    try:
        return bool(private_attribute(_index(kernel), "_load_index")())
    except OSError:
        return False
