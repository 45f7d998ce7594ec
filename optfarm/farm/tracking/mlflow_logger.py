"""The thread that logs a sweep's runs to MLflow, so that the sweep's driver never waits for
the tracking store.

It first runs ``begin`` (opening the store takes seconds: the sweep's runs go on meanwhile),
then hands what is queued to ``write`` in batches: after the first item it waits up to
``linger_s`` for more, up to ``batch`` items, so that a backlog (runs that arrived while the
store was opened) is written faster than runs arrive. ``stop`` ends it after what is queued
is written, or, with ``drop``, after the batch in hand (the rest stays in the results store,
for the next run of the sweep or ``farm sync``).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Logger"]

_END = object()


class Logger:
    """``begin()`` once, then ``write(items)`` for each batch of the items ``put``."""

    def __init__(
        self,
        begin: Callable[[], Any],
        write: Callable[[list], Any],
        batch: int = 500,
        linger_s: float = 1.0,
    ):
        self._begin, self._write = begin, write
        self._batch, self._linger_s = batch, linger_s
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="mlflow-logger", daemon=True)
        self.begun = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def put(self, item: Any) -> None:
        self._queue.put(item)

    def stop(self, drop: bool = False) -> None:
        """Write what is queued (``drop``: only the batch in hand), then end the thread."""
        if drop:
            while True:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break
        self._queue.put(_END)
        self._thread.join()

    def _work(self) -> None:
        try:
            self._begin()
        finally:
            self.begun.set()
        while True:
            batch = [self._queue.get()]
            until = time.monotonic() + self._linger_s
            while batch[-1] is not _END and len(batch) < self._batch:
                try:
                    batch.append(self._queue.get(timeout=max(0.0, until - time.monotonic())))
                except queue.Empty:
                    break
            items = [item for item in batch if item is not _END]
            if items:
                self._write(items)
            if batch[-1] is _END:
                return
