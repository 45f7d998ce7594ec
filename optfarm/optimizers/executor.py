"""The executor protocol: how an optimizer hands out independent pieces of work.

``executor.map(fn, items, context)`` returns ``[fn(context, item) for item in items]`` in
order. ``fn`` is a module-level function (picklable); ``context`` is shared by all items and
shipped once (the Ray executor of ``farm`` puts it in the object store). Results must not
depend on the executor or on how items are chunked. An executor may say how many items it
runs at once (``workers``; 1 when it does not say): a caller whose items share work it would
otherwise repeat per item hands it no more items than that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

__all__ = ["Executor", "SerialExecutor"]

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    def map(
        self, fn: Callable[[Any, T], R], items: Sequence[T], context: Any = None
    ) -> list[R]: ...


class SerialExecutor:
    """Runs every item in the calling process, in order."""

    workers = 1

    def map(self, fn: Callable[[Any, T], R], items: Sequence[T], context: Any = None) -> list[R]:
        return [fn(context, item) for item in items]

    def __repr__(self) -> str:
        return "SerialExecutor()"
