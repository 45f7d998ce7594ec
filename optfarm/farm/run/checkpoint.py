"""A run's checkpoint: the state of a run in flight, written every ``every_s`` seconds of its
wall time, so that a run stopped before its end (the process ended, the machine taken back, a
kill for memory) resumes at its last checkpoint instead of its first step, and ends as the
uninterrupted run would have: the same configurations, observations and trace (the timing
columns apart), because everything the rest of the run depends on is in the checkpoint.

A checkpoint holds the optimizer (its models, its random generators), the harness' stepper
(the oracle's noise stream, the spend so far), the credited incumbent, the trace rows so far
and the warm-up, and the process-wide random states some libraries draw from (NumPy's and
Python's legacy generators, torch's when loaded). The oracle, its space and problem and the
run's executor are not written: they are the resuming process's own (``persistent_id``), as a
run gets them when it starts.

A checkpoint is keyed by its run's ``run_key``, under the contract run keys already carry: an
optimizer's results change only when its ``version`` (in the key) is bumped. It is pickled, so
it records the versions of Python and of the libraries that wrote it (``written_by``); one
written under others, or unreadable, is set aside (``*.unused``) with one line and the run
starts from its first step, and so is one whose resumed run then fails (a retry starts
afresh). An optimizer whose state pickle cannot hold declares ``resumable = False`` and
writes none. Checkpoints are files of this machine (a sweep's ``OUT/checkpoints/RUN_KEY.pkl``,
``optfarm.farm.sweep.runner``); the store removes a run's checkpoint once its result is
stored. A run says in one line that it resumes, or why its checkpoint was set aside; on Ray
the driver says it from the header (``Checkpoint.announce``), as an actor's lines are not
shown. ARCHITECTURE.md, "Runs that resume mid-way".
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import pickle
import random
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from optfarm.farm.run.spec import RunSpec, run_words
from optfarm.oracle.atomic_files import write_file_atomically

__all__ = ["Checkpoint", "CheckpointSettingError", "Checkpoints", "RunState", "every_s_here"]

EVERY_S = 300.0  # a run in flight loses at most this much of its wall time when stopped
ENVIRONMENT = "OPTFARM_CHECKPOINT_S"  # overrides EVERY_S; "off": no checkpoints
FORMAT = 1
AFRESH = "; the run starts from its first step"  # said of a checkpoint the run cannot use
# the distributions whose versions a checkpoint must be read back under
LIBRARIES = (
    "optfarm",
    "numpy",
    "scipy",
    "scikit-learn",
    "george",
    "emcee",
    "numba",
    "optuna",
    "torch",
    "cmaes",
    "smac",
)


class CheckpointSettingError(ValueError):
    """``$OPTFARM_CHECKPOINT_S`` is neither a number of seconds nor ``off`` (bad input)."""


@dataclass
class RunState:
    """What the rest of a run depends on (``optfarm.farm.run.loop``)."""

    optimizer: Any
    stepper: Any
    credited: Any
    rows: list[dict]
    warmup: float | None
    cpu_s: float = 0.0  # CPU-seconds the run has spent so far, in this process and earlier ones
    global_random: dict[str, Any] = field(default_factory=dict)


@functools.cache
def written_by() -> dict[str, str | None]:
    """Python's and ``LIBRARIES``' versions here (None: not installed)."""
    found: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _global_random() -> dict[str, Any]:
    states: dict[str, Any] = {"numpy": np.random.get_state(), "python": random.getstate()}
    if "torch" in sys.modules:
        states["torch"] = sys.modules["torch"].get_rng_state()
    return states


def _set_global_random(states: dict[str, Any]) -> None:
    np.random.set_state(states["numpy"])
    random.setstate(states["python"])
    if "torch" in states:
        import torch

        torch.set_rng_state(states["torch"])


class _Pickler(pickle.Pickler):
    """Writes the process's own objects (the oracle, its space and problem, the executor) as
    names, read back as the resuming process's (``_Unpickler``)."""

    def __init__(self, file, own: dict[str, Any]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.own = {id(obj): name for name, obj in own.items() if obj is not None}

    def persistent_id(self, obj):
        return self.own.get(id(obj))


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, own: dict[str, Any]):
        super().__init__(file)
        self.own = own

    def persistent_load(self, pid):
        return self.own[pid]


def _unreadable(e: Exception) -> str:
    return f"unreadable ({type(e).__name__}: {e})"


def _own(oracle, executor) -> dict[str, Any]:
    return {
        "oracle": oracle,
        "space": oracle.space,
        "problem": oracle.problem,
        "executor": executor,
    }


class Checkpoint:
    """The checkpoint file of one run (``path``), written at most every ``every_s`` seconds."""

    def __init__(
        self, path: str | os.PathLike, run_key: str, every_s: float = EVERY_S, words: str = ""
    ):
        self.path = Path(path)
        self.run_key = run_key
        self.words = words or f"run {run_key}"  # what its lines call the run
        self.every_s = every_s
        self.resumed = False  # the run was resumed from it
        self._last = time.monotonic()

    def load(self, oracle, executor) -> RunState | None:
        """The run's state as last written, its process-wide random states restored; None
        when there is no checkpoint, or one this run cannot use (set aside)."""
        if not self.path.exists():
            return None
        try:
            with self.path.open("rb") as f:
                why = self._unusable(pickle.load(f))
                if why is None:
                    state = _Unpickler(f, _own(oracle, executor)).load()
        except Exception as e:  # a torn, truncated or foreign file is never fatal to a run
            why = _unreadable(e)
        if why is not None:
            self.set_aside(why + AFRESH)
            return None
        _set_global_random(state.global_random)
        self._last = time.monotonic()
        self.resumed = True
        self._say_resumes(len(state.rows), state.cpu_s)
        return state

    def announce(self) -> None:
        """Say, from the checkpoint's header alone, what the run will do with it: resume, or
        start from its first step (and why); nothing without a checkpoint. For a driver whose
        runs resume in other processes (Ray's actors), whose own lines it does not show."""
        try:
            with self.path.open("rb") as f:
                header = pickle.load(f)
        except FileNotFoundError:
            return
        except Exception as e:  # the run sets it aside
            self._warn(_unreadable(e) + AFRESH)
            return
        if (why := self._unusable(header)) is not None:
            self._warn(why + AFRESH)
        else:
            self._say_resumes(header.get("evaluations"), header.get("cpu_s"))

    def _say_resumes(self, evaluations: int | None, cpu_s: float | None) -> None:
        """One line; without the counts for a header written before they were kept."""
        counts = (
            "" if evaluations is None else f" after {evaluations} evaluations ({cpu_s:.0f} CPU-s)"
        )
        print(
            f"farm: {self.words} resumes from its checkpoint{counts}", file=sys.stderr, flush=True
        )

    def _unusable(self, header: Any) -> str | None:
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            return "not a checkpoint of this format"
        if header.get("run_key") != self.run_key:
            return f"written for run {header.get('run_key')}"
        if header.get("written_by") != written_by():
            return "written under other versions of Python or its libraries"
        return None

    def set_aside(self, why: str) -> None:
        """Say ``why`` in one line and move the checkpoint to ``*.unused``: never read again."""
        self._warn(why)
        with contextlib.suppress(OSError):
            self.path.rename(self.path.with_name(self.path.name + ".unused"))

    def _warn(self, why: str) -> None:
        print(f"farm: warning: checkpoint {self.path}: {why}", file=sys.stderr, flush=True)

    def due(self) -> bool:
        return time.monotonic() - self._last >= self.every_s

    def off(self) -> None:
        """No more writes (a run whose state cannot be pickled)."""
        self.every_s = math.inf

    def save(self, state: RunState, oracle, executor) -> None:
        """Write ``state`` (whole or not at all: a stop mid-write leaves the previous one). A
        state that cannot be written (an object pickle cannot hold, a full disk) is said in
        one line and the run goes on without checkpoints."""
        self._last = time.monotonic()
        state.global_random = _global_random()
        try:
            buffer = io.BytesIO()
            header = {
                "format": FORMAT,
                "run_key": self.run_key,
                "written_by": written_by(),
                "evaluations": len(state.rows),
                "cpu_s": state.cpu_s,
            }
            pickle.dump(header, buffer, protocol=pickle.HIGHEST_PROTOCOL)
            _Pickler(buffer, _own(oracle, executor)).dump(state)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_file_atomically(self.path, buffer.getvalue())
        except Exception as e:
            print(
                f"farm: warning: checkpoint {self.path} not written ({type(e).__name__}: {e}); "
                "the run goes on without checkpoints",
                file=sys.stderr,
                flush=True,
            )
            self.off()

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@dataclass(frozen=True)
class Checkpoints:
    """Where a sweep's runs keep their checkpoints (``folder``, of this machine) and how often
    they write them."""

    folder: str
    every_s: float = EVERY_S

    def for_run(self, spec: RunSpec) -> Checkpoint:
        """``spec``'s checkpoint (``RUN_KEY.pkl``), named in its lines by ``run_words``."""
        return Checkpoint(self.path(spec.run_key), spec.run_key, self.every_s, run_words(spec))

    def path(self, run_key: str) -> Path:
        return Path(self.folder) / f"{run_key}.pkl"

    def drop_stored(self, stored: Iterable[str]) -> None:
        """Remove the checkpoints of runs already stored (left when a driver stopped between
        storing a run and removing its checkpoint)."""
        stored = set(stored)
        for path in Path(self.folder).glob("*.pkl"):
            if path.stem in stored:
                path.unlink(missing_ok=True)


def every_s_here() -> float | None:
    """Seconds between a run's checkpoints: ``$OPTFARM_CHECKPOINT_S`` (``off``: none), else
    ``EVERY_S``. A value that is neither is a ``CheckpointSettingError`` naming it."""
    text = os.environ.get(ENVIRONMENT, "").strip()
    if not text:
        return EVERY_S
    if text.lower() == "off":
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not seconds >= 0 or seconds == math.inf:
        raise CheckpointSettingError(
            f"${ENVIRONMENT}={text!r}: not a number of seconds (>= 0) or 'off'"
        )
    return seconds
