"""A sweep's runs in this process, one after the other, without Ray (``farm sweep --serial``),
and what a run's outcome is for every backend: ``Outcome``, and ``OracleCache``, which builds
each dataset's oracle once per (dataset, problem). Importing this module never imports Ray."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from optfarm.farm.run.loop import RunResult, run_one
from optfarm.farm.run.spec import RunSpec

__all__ = ["OracleCache", "Outcome", "error_line", "run_serially"]


class OracleCache:
    """Datasets by name and oracles by (dataset, problem, aggregate), each built once."""

    def __init__(self, load: Callable[[str], Any]):
        self._load = load
        self.datasets: dict[str, Any] = {}
        self._oracles: dict[tuple, Any] = {}

    def get(self, spec: RunSpec):
        from optfarm.oracle.oracle import Oracle

        key = (spec.dataset, spec.objective, spec.constraints, spec.budget, spec.aggregate)
        if key not in self._oracles:
            if spec.dataset not in self.datasets:
                self.datasets[spec.dataset] = self._load(spec.dataset)
            dataset = self.datasets[spec.dataset]
            self._oracles[key] = Oracle(dataset, spec.problem(dataset), aggregate=spec.aggregate)
        return self._oracles[key]


@dataclass
class Outcome:
    """How one run ended: a result, or an error message (one line)."""

    spec: RunSpec
    result: RunResult | None
    error: str | None
    attempts: int
    duration_s: float  # wall time of the run (a lost run: since its submission)
    where: dict
    cpu_s: float = math.nan  # CPU time of the run in the process that ran it


def error_line(e: BaseException) -> str:
    cause = getattr(e, "cause", None) or e
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[-1] if text else ''}"


def run_serially(runs: Sequence[RunSpec]) -> Iterator[Outcome]:
    """The same outcomes, in this process, one run after the other (no Ray)."""
    from optfarm.oracle.registry import load

    where = {"node_id": "local", "pid": os.getpid(), "ip": "127.0.0.1"}
    oracles = OracleCache(load)
    for spec in runs:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            result = run_one(spec, oracles.get(spec))
        except Exception as e:  # a failed run is recorded, the sweep goes on
            yield Outcome(spec, None, error_line(e), 1, time.perf_counter() - t0, where)
            continue
        yield Outcome(
            spec, result, None, 1, time.perf_counter() - t0, where, time.process_time() - c0
        )
