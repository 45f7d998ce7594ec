"""A run's memory: how much it needs, how much the machine has, and whether it was killed for it.

- ``run_memory``: a run's peak resident memory, estimated before it runs: the run's process
  (``PROCESS_BYTES``: the interpreter, numpy, scipy, numba and the farm), the oracle's dense
  arrays over the table (``ORACLE_PER_TABLE_BYTE`` per byte of the Arrow table) and the
  optimizer's own structures, as its class declares them
  (``optfarm.optimizers.base.MemoryUse``: bytes as a function of the table's configurations). On
  Ray each run's actor asks for that much of the node's ``memory`` resource, so a node never
  holds more runs than its memory; in-process (``--serial``) a run that needs more than the
  machine has available (``available_bytes``) is not started. The constants and every
  optimizer's declaration are fitted to measured maximum resident sizes
  (docs/results/memory.md).
- ``memory_kill``: whether what ``ray.get`` raised for a run says its worker was killed for
  memory, and by what: Ray's memory monitor (``OutOfMemoryError``), or the kernel's OOM killer
  (the worker died without a word, SIGKILL, while this machine's count of OOM kills,
  ``oom_kill`` in ``/proc/vmstat``, went up; on another node of a cluster the farm cannot see
  that count, and such a death is an ordinary one).

Importing this module never imports Ray.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = [
    "ORACLE_PER_TABLE_BYTE",
    "PROCESS_BYTES",
    "available_bytes",
    "gb",
    "kernel_oom_kills",
    "memory_kill",
    "run_memory",
]

# max RSS of `farm run --optimizer random --iterations 25` on generated tables of 384, 1,715
# and 8,000 configurations (135, 139, 155 MB; tables of 0.08, 0.38, 1.76 MB): the process
# before any optimizer structure, and the oracle's dense arrays per byte of the Arrow table
# (docs/results/memory.md)
PROCESS_BYTES = 134e6
ORACLE_PER_TABLE_BYTE = 12.0


def run_memory(spec, dataset) -> int:
    """Bytes run ``spec`` needs at its peak on ``dataset`` (an ``optfarm.oracle.dataset.Dataset``;
    see the module doc)."""
    from optfarm.optimizers.registry import get

    optimizer = get(spec.optimizer)
    table = ORACLE_PER_TABLE_BYTE * dataset.table.nbytes
    return int(PROCESS_BYTES + table + optimizer.memory.bytes(dataset.space().n_configs))


def gb(n_bytes: float) -> str:
    """Bytes in words, to a tenth of a GB (``1.2 GB``)."""
    return f"{n_bytes / 1e9:.1f} GB"


def available_bytes() -> int | None:
    """Memory this machine can give a new process now without swapping: ``MemAvailable``
    (Linux), bounded by this process's cgroup limit when it has one; None where neither can
    be read."""
    try:
        meminfo = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    found = re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.MULTILINE)
    if found is None:
        return None
    available = int(found.group(1)) * 1024
    return min(available, _cgroup_room() or available)


def _cgroup_room() -> int | None:
    """What this process's cgroup (v2) may still take: its ``memory.max`` less its
    ``memory.current``; None without a limit."""
    cgroup = Path("/sys/fs/cgroup")
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        current = int((cgroup / "memory.current").read_text())
    except (OSError, ValueError):
        return None
    return None if limit == "max" else max(0, int(limit) - current)


def kernel_oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has killed on this machine since it booted
    (``oom_kill`` in ``/proc/vmstat``); None where that is not counted."""
    try:
        vmstat = Path("/proc/vmstat").read_text()
    except OSError:
        return None
    found = re.search(r"^oom_kill (\d+)$", vmstat, re.MULTILINE)
    return None if found is None else int(found.group(1))


def memory_kill(error: BaseException, oom_kills_before: int | None) -> str | None:
    """What killed a run's worker for memory, in words, given what ``ray.get`` raised for the
    run and the kernel's OOM kills counted when it was sent (``kernel_oom_kills``); None when
    ``error`` says nothing of memory."""
    from ray.exceptions import OutOfMemoryError, RayActorError

    if isinstance(error, OutOfMemoryError):
        used = re.search(r"was ([\d.]+GB) used / ([\d.]+GB) limit", str(error))
        at = f": the node had {used.group(1)} used of {used.group(2)}" if used else ""
        return f"Ray's memory monitor{at}"
    if isinstance(error, RayActorError) and "killed due to the node running low" in str(error):
        return "Ray's memory monitor"
    now = kernel_oom_kills()
    if (
        isinstance(error, RayActorError)
        and oom_kills_before is not None
        and now is not None
        and now > oom_kills_before
    ):
        return "the kernel's OOM killer"
    return None
