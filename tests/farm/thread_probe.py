"""An optimizer that reports its threads: random search whose every suggestion's ``phase`` is
``threads=N``, N the most threads any numeric library of its process runs (threadpoolctl's
view, and torch's pool once torch is loaded). On its second ask it imports torch, as Optuna's
GP sampler does on its first model-based ask. ``register`` names it ``thread-probe`` in the
registry of the process that calls it (a Ray worker's set-up hook)."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace

from threadpoolctl import threadpool_info

from optfarm.optimizers.random_search import RandomSearch

NAME = "thread-probe"


def threads() -> int:
    counts = [lib["num_threads"] for lib in threadpool_info()]
    torch = sys.modules.get("torch")
    return max(counts + ([torch.get_num_threads()] if torch is not None else []))


class ThreadProbe(RandomSearch):
    name = NAME
    summary = "random search that reports its process's threads as each suggestion's phase"

    def suggest(self):
        suggestion = super().suggest()
        if len(self.history) == 1 and importlib.util.find_spec("torch") is not None:
            import torch  # noqa: F401
        return None if suggestion is None else replace(suggestion, phase=f"threads={threads()}")


def register() -> None:
    from optfarm.optimizers.registry import OPTIMIZERS

    OPTIMIZERS[NAME] = "tests.farm.thread_probe:ThreadProbe"
