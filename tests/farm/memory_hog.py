"""An optimizer that takes memory, to be killed for it: random search whose run of seed
``hog_seed`` grows its process's resident memory by ``STEP_MB`` at a time, up to ``hog_mb``,
on its first suggestion, and holds it to the run's end. With ``once`` (a file path) it does so
only while that file does not exist, and makes the file as it starts: its run again after a
kill runs light. ``register`` names it ``memory-hog`` in the registry of the process that calls
it (a Ray worker's set-up hook, ``runtime_env``). With ``impossible`` it asks numpy for 256 TiB
instead, which raises MemoryError at once.

A Ray started with a memory monitor threshold just above the machine's use now
(``ray_memory_monitor_env``: ``RAY_memory_usage_threshold``, ``RAY_memory_monitor_refresh_ms``)
kills the hog's worker as Ray kills one on a machine short of memory: the same monitor, signal
and error (``ray.exceptions.OutOfMemoryError``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from optfarm.optimizers.base import Param
from optfarm.optimizers.random_search import RandomSearch

NAME = "memory-hog"
STEP_MB = 50


class MemoryHog(RandomSearch):
    name = NAME
    summary = "random search whose run of one seed takes memory (a test's memory kill)"
    params = RandomSearch.params + (
        Param("hog_mb", 0, "memory the run of seed hog_seed takes (MB)", low=0, high=4500),
        Param("hog_seed", 0, "the seed whose run takes it", low=0),
        Param("once", "", "a file: take it only while the file does not exist, then make it"),
        Param("impossible", False, "ask for 256 TiB instead (numpy's MemoryError at once)"),
    )

    def suggest(self):
        if not self.history and self.seed == self.config["hog_seed"] and self._hogs():
            if self.config["impossible"]:
                np.empty(2**45)  # 256 TiB
            self._held = _take(self.config["hog_mb"])
        return super().suggest()

    def _hogs(self) -> bool:
        once = self.config["once"]
        if not once:
            return True
        if Path(once).exists():
            return False
        Path(once).touch()
        return True


def _take(mb: int) -> list[np.ndarray]:
    """``mb`` MB of resident memory (pages written), ``STEP_MB`` at a time, a little apart so
    that a memory monitor sees it grow."""
    held = []
    for _ in range(mb // STEP_MB):
        held.append(np.ones(STEP_MB * 2**20 // 8))
        time.sleep(0.02)
    return held


def ray_memory_monitor_env(margin_bytes: float) -> dict[str, str]:
    """Ray's memory monitor set to kill once this machine uses ``margin_bytes`` more than it
    does now, checked every 100 ms (the environment of a Ray about to start)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    meminfo = Path("/proc/meminfo").read_text()
    available = int(meminfo.split("MemAvailable:")[1].split()[0]) * 1024
    return {
        "RAY_memory_usage_threshold": f"{(total - available + margin_bytes) / total:.4f}",
        "RAY_memory_monitor_refresh_ms": "100",
    }


def register() -> None:
    from optfarm.optimizers.registry import OPTIMIZERS

    OPTIMIZERS[NAME] = "tests.farm.memory_hog:MemoryHog"
