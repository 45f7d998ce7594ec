"""The farm on Ray: one actor per optimizer run over a shared, zero-copy Arrow oracle, and a Ray
executor for the optimizers' inner work (DESIGN.md, "farm/ -> Ray").

- Each dataset's Arrow table goes into the object store once (``share_dataset``); actors read
  it with ``ray.get``, which maps the table's buffers from shared memory instead of copying
  them, and build the oracle's index once per (dataset, problem).
- ``RunActor`` hosts one optimizer run at a time. ``run_on_ray`` keeps a bounded pool of them
  busy (back-pressure: a run is submitted only when an actor is free), yields each outcome as
  it finishes, and re-runs a run whose actor died (``max_retries``) on a fresh actor.
- ``RayExecutor`` implements ``optimizers.executor.Executor``: the context is put into the
  object store once per ``map`` and the items go out as a few chunked tasks.

A local Ray instance started here stays on 127.0.0.1: unless ``RAY_ADDRESS`` names a cluster
to join, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is set before Ray is imported, which makes
Ray use the loopback address for every server it starts.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

if not os.environ.get("RAY_ADDRESS"):
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")

import pyarrow as pa  # noqa: E402  (after the environment Ray reads at import)
import ray  # noqa: E402
from ray.exceptions import RayActorError, RayTaskError  # noqa: E402

from farm.run.loop import RunResult, run_one  # noqa: E402
from farm.run.spec import RunSpec  # noqa: E402
from farm.sweep.ray_setup import INIT_QUIET, ensure_auth_token, quiet_ray  # noqa: E402
from farm.sweep.serial import OracleCache, Outcome, error_line  # noqa: E402

__all__ = [
    "QUEUE_DEPTH",
    "RayExecutor",
    "RunActor",
    "init_ray",
    "run_on_ray",
    "share_dataset",
]

_META_KEY = b"optfarm"


def init_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Join ``address`` (or ``$RAY_ADDRESS``), else start a local Ray on 127.0.0.1."""
    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, **INIT_QUIET)
    else:
        ensure_auth_token()
        print("farm: starting a local Ray on 127.0.0.1 (its logs: /tmp/ray/session_latest/logs)",
              file=sys.stderr, flush=True)
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                 _node_ip_address="127.0.0.1", **INIT_QUIET)
    quiet_ray()


# -- the shared oracle ------------------------------------------------------------------------
def share_dataset(name: str) -> ray.ObjectRef:
    """Put dataset ``name``'s table (metadata in its schema) into the object store once."""
    from oracle.registry import load

    dataset = load(name)
    meta = dict(dataset.table.schema.metadata or {})
    meta[_META_KEY] = dataset.meta.to_json().encode()
    return ray.put(dataset.table.replace_schema_metadata(meta))


def _dataset_from_table(table: pa.Table):
    from oracle.dataset import Dataset, DatasetMeta

    return Dataset(table, DatasetMeta.from_json(table.schema.metadata[_META_KEY]))


def _shared_spans() -> list[tuple[int, int, int, str]]:
    """(start, end, file offset, file) of this process's shared-memory mappings (Linux)."""
    spans = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            path = parts[5] if len(parts) > 5 else ""
            if path.startswith(("/dev/shm", "/memfd:")) or "plasma" in path:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                spans.append((lo, hi, int(parts[2], 16), f"{parts[4]}:{path}"))
    return spans


def _buffers(table: pa.Table):
    for column in table.columns:
        for chunk in column.chunks:
            yield from (b for b in chunk.buffers() if b is not None and b.size)


def shared_memory_fraction(table: pa.Table) -> float:
    """Fraction of ``table``'s buffer bytes that live in a shared-memory mapping of this
    process (Ray's object store)."""
    return shared_memory_report(table)["fraction"]


def shared_memory_report(table: pa.Table) -> dict:
    """Where ``table``'s buffers live: the fraction of bytes in shared memory, and for each
    buffer its (inode:file, offset in that file), the same in every process that maps the
    same copy."""
    spans = _shared_spans()
    inside = total = 0
    locations = []
    for buf in _buffers(table):
        total += buf.size
        for lo, hi, offset, file in spans:
            if lo <= buf.address and buf.address + buf.size <= hi:
                inside += buf.size
                locations.append((file, offset + buf.address - lo))
                break
    return {"fraction": inside / total if total else 0.0, "locations": locations}


# -- the inner work ---------------------------------------------------------------------------
@ray.remote
def _map_chunk(fn: Callable, context: Any, chunk: Sequence) -> list:
    return [fn(context, item) for item in chunk]


class RayExecutor:
    """``map(fn, items, context)`` as Ray tasks, results in order.

    The items are split into ``chunk_size``-item chunks (0: one near-equal chunk per CPU of the
    cluster, so no CPU idles at the end); the context is put in the object store once. The
    caller computes the first chunk itself while Ray runs the others: it would only wait
    otherwise, and a task's start-up (~1 ms) is not small next to a chunk of look-ahead paths.
    """

    def __init__(self, chunk_size: int = 0):
        self.chunk_size = chunk_size
        self.cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))

    def map(self, fn: Callable, items: Sequence, context: Any = None) -> list:
        items = list(items)
        if not items:
            return []
        if self.chunk_size:
            bounds = list(range(0, len(items), self.chunk_size)) + [len(items)]
        else:
            n = min(len(items), self.cpus)
            bounds = [len(items) * k // n for k in range(n + 1)]
        chunks = [items[a:b] for a, b in zip(bounds, bounds[1:])]
        context_ref = ray.put(context) if len(chunks) > 1 else None
        refs = [_map_chunk.remote(fn, context_ref, chunk) for chunk in chunks[1:]]
        first = [fn(context, item) for item in chunks[0]]
        return first + [r for chunk in ray.get(refs) for r in chunk]

    def __repr__(self) -> str:
        return f"RayExecutor(chunk_size={self.chunk_size})"


# -- one actor per run ------------------------------------------------------------------------
@ray.remote(max_restarts=0)
class RunActor:
    """Hosts optimizer runs, one at a time, over the shared datasets.

    ``shared`` maps dataset name -> ObjectRef of its table (inside a dict, Ray hands over the
    reference itself: the table is mapped here when a run first needs it, then kept). The
    oracle's lookup index over it is built once per (dataset, problem) and reused by the runs.
    """

    def __init__(self, shared: dict[str, ray.ObjectRef], executor: str = "serial",
                 chunk_size: int = 0):
        self._oracles = OracleCache(lambda name: _dataset_from_table(ray.get(shared[name])))
        self._executor = RayExecutor(chunk_size) if executor == "ray" else None

    def where(self) -> dict:
        ctx = ray.get_runtime_context()
        return {"node_id": ctx.get_node_id(), "pid": os.getpid(),
                "ip": ray.util.get_node_ip_address()}

    def run(self, spec: RunSpec) -> tuple[RunResult, float, float]:
        """The run's result, and the CPU and wall time it took here."""
        c0, t0 = time.process_time(), time.perf_counter()
        result = run_one(spec, self._oracles.get(spec), self._executor)
        return result, time.process_time() - c0, time.perf_counter() - t0

    def shared_memory_report(self, name: str) -> dict:
        """Where this actor reads dataset ``name``'s table from (``shared_memory_report``)."""
        return shared_memory_report(self._oracles.datasets[name].table)


# -- a sweep's runs on a pool of actors ---------------------------------------------------------
# runs queued per actor: the next run is already there when one finishes, so an actor never
# waits for the driver to store a result and submit again
QUEUE_DEPTH = 2


def run_on_ray(runs: Sequence[RunSpec], *, max_in_flight: int = 0, max_retries: int = 2,
               executor: str = "serial", chunk_size: int = 0,
               on_submit: Callable[[RunSpec, dict], None] | None = None) -> Iterator[Outcome]:
    """Run ``runs`` on a pool of ``RunActor``s, yielding outcomes as they finish.

    ``max_in_flight`` actors (0: one per CPU of the cluster) each run one run at a time with
    ``QUEUE_DEPTH`` runs queued at most: back-pressure, nothing more is submitted. A run whose
    actor dies is re-run on a new actor up to ``max_retries`` times. Closing the generator
    (e.g. on Ctrl-C) kills the actors. ``on_submit(spec, where)`` is called as each run goes
    out.
    """
    if not runs:
        return
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    size = min(max_in_flight or cpus, len(runs))
    shared = {name: share_dataset(name) for name in sorted({r.dataset for r in runs})}
    # with the Ray executor an actor mostly waits for its tasks: it holds no CPU, so the
    # tasks can always be scheduled
    options = {"num_cpus": 0 if executor == "ray" else 1}

    def new_actor() -> list[tuple]:  # its slots; creation does not block
        actor = RunActor.options(**options).remote(shared, executor, chunk_size)
        return [(actor, actor.where.remote())] * QUEUE_DEPTH

    pending = list(reversed(runs))  # pop() from the end keeps the given order
    attempts: dict[str, int] = {}
    free = [slot for _ in range(size) for slot in new_actor()]
    dead: set[int] = set()
    in_flight: dict[ray.ObjectRef, tuple] = {}
    try:
        while pending or in_flight:
            while free and pending:
                (actor, where), spec = free.pop(0), pending.pop()
                attempts[spec.run_key] = attempts.get(spec.run_key, 0) + 1
                in_flight[actor.run.remote(spec)] = (actor, where, spec, time.perf_counter())
                if on_submit is not None:
                    on_submit(spec, ray.get(where))
            [done], _ = ray.wait(list(in_flight), num_returns=1)
            actor, where, spec, t0 = in_flight.pop(done)
            n = attempts[spec.run_key]
            try:
                result, cpu, wall = ray.get(done)
            except RayActorError as e:
                if id(actor) not in dead:  # replace it once, whatever it had queued
                    dead.add(id(actor))
                    ray.kill(actor)
                    free = [s for s in free if s[0] is not actor] + new_actor()
                if n <= max_retries:
                    pending.append(spec)
                    continue
                yield Outcome(spec, None, f"actor died {n} times: {error_line(e)}", n,
                              time.perf_counter() - t0, _where(where))
                continue
            except RayTaskError as e:
                free.append((actor, where))
                yield Outcome(spec, None, error_line(e), n, time.perf_counter() - t0,
                              ray.get(where))
                continue
            free.append((actor, where))
            yield Outcome(spec, result, None, n, wall, ray.get(where), cpu)
    finally:
        for actor in {id(a): a for a, _ in free + [v[:2] for v in in_flight.values()]}.values():
            ray.kill(actor)


def _where(ref: ray.ObjectRef) -> dict:
    """Where a (possibly dead) actor ran, if it got to say so."""
    try:
        return ray.get(ref, timeout=5)
    except Exception:  # the actor died before answering
        return {}
