"""A sweep's runs in this process, one after the other, without Ray (``farm sweep --serial``),
and what a run's outcome is for every backend: ``Outcome``, and ``OracleCache``, which builds
each dataset's oracle once per (dataset, problem). Importing this module never imports Ray."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from optfarm.farm.run.checkpoint import Checkpoints
from optfarm.farm.run.loop import RunResult, run_one
from optfarm.farm.run.spec import RunSpec, run_words
from optfarm.farm.runtime.memory import available_bytes, gb, run_memory

__all__ = ["OracleCache", "Outcome", "error_line", "run_serially", "run_words", "say"]


class OracleCache:
    """Datasets by name and oracles by (dataset, problem, aggregate), each built once."""

    def __init__(self, load: Callable[[str], Any]):
        self._load = load
        self.datasets: dict[str, Any] = {}
        self._oracles: dict[tuple, Any] = {}

    def dataset(self, name: str):
        if name not in self.datasets:
            self.datasets[name] = self._load(name)
        return self.datasets[name]

    def get(self, spec: RunSpec):
        from optfarm.oracle.oracle import Oracle

        key = (spec.dataset, spec.objective, spec.constraints, spec.budget, spec.aggregate)
        if key not in self._oracles:
            dataset = self.dataset(spec.dataset)
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


def run_serially(
    runs: Sequence[RunSpec], checkpoints: Checkpoints | None = None
) -> Iterator[Outcome]:
    """The same outcomes, in this process, one run after the other (no Ray); with
    ``checkpoints`` each run resumes from its checkpoint and writes it as it goes
    (``optfarm.farm.run.checkpoint``). A run that needs
    more memory than the machine has available as it would start
    (``optfarm.farm.runtime.memory``) is not started: it is recorded as failed, said in one
    line, and the sweep goes on (a run killed here by the kernel's OOM killer would end the
    sweep with it); a run that runs out of memory (``MemoryError``) is said in one line too."""
    from optfarm.oracle.registry import load

    where = {"node_id": "local", "pid": os.getpid(), "ip": "127.0.0.1"}
    oracles = OracleCache(load)
    needs: dict[tuple[str, str], int] = {}  # (optimizer, dataset) -> run_memory
    for spec in runs:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            pair = (spec.optimizer, spec.dataset)
            if pair not in needs:
                needs[pair] = run_memory(spec, oracles.dataset(spec.dataset))
            if (room := _no_room(spec, needs[pair])) is not None:
                yield Outcome(spec, None, room, 0, 0.0, where)
                continue
            result = run_one(
                spec,
                oracles.get(spec),
                checkpoint=checkpoints and checkpoints.for_run(spec),
            )
        except Exception as e:  # a failed run is recorded, the sweep goes on
            if isinstance(e, MemoryError):
                say(f"{run_words(spec)} ran out of memory ({error_line(e)}); failed")
            yield Outcome(spec, None, error_line(e), 1, time.perf_counter() - t0, where)
            continue
        yield Outcome(
            spec,
            result,
            None,
            1,
            time.perf_counter() - t0,
            where,
            result.cpu_s_before + time.process_time() - c0,
        )


def _no_room(spec: RunSpec, need: int) -> str | None:
    """Why ``spec``, which needs ``need`` bytes, is not started here (one line, also said on
    stderr): the machine has less available now; None when it fits, or when that cannot be
    known."""
    available = available_bytes()
    if available is None or need <= available:
        return None
    say(
        f"{run_words(spec)} needs about {gb(need)} of memory and {gb(available)} is available: "
        "not run, recorded as failed (the sweep tries it again when run again)"
    )
    return f"not run: needs about {gb(need)} of memory, {gb(available)} was available"


def say(line: str) -> None:
    """One warning line on stderr, as the farm says what happened to a run."""
    print(f"farm: warning: {line}", file=sys.stderr, flush=True)
