"""The farm on Ray: one actor per optimizer run over a shared, zero-copy Arrow oracle, and a Ray
executor for the optimizers' inner work (ARCHITECTURE.md, "One run's data flow").

- Each dataset's Arrow table goes into the object store once (``share_dataset``); actors read
  it with ``ray.get``, which maps the table's buffers from shared memory instead of copying
  them, and build the oracle's index once per (dataset, problem).
- ``RunActor`` hosts one optimizer run at a time; a run is submitted only when an actor is
  free (back-pressure), each outcome is yielded as it finishes.
- ``run_on_ray`` keeps an elastic pool of them busy, sized to the cluster's CPUs as nodes join
  and leave (``optfarm.farm.runtime.capacity``), and re-queues the runs of an actor that died.
- ``RayExecutor`` implements ``optfarm.optimizers.executor.Executor``: the context is put into the
  object store once per ``map`` and the items go out as a few chunked tasks.

A local Ray instance started here stays on 127.0.0.1: unless ``RAY_ADDRESS`` names a cluster
to join on another machine, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is set before Ray is
imported, which makes Ray use the loopback address for every server it starts (and for this
driver on a cluster joined at 127.0.0.1, e.g. ``farm cluster up``'s).
"""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

if os.environ.get("RAY_ADDRESS", "127.0.0.1").startswith(("127.", "localhost")):
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")

import pyarrow as pa  # noqa: E402  (after the environment Ray reads at import)
import ray  # noqa: E402
from ray.exceptions import (  # noqa: E402
    ObjectLostError,
    OutOfMemoryError,
    RayActorError,
    RayError,
    RayTaskError,
)

from optfarm.farm.run.checkpoint import Checkpoints  # noqa: E402
from optfarm.farm.run.loop import RunResult, run_one  # noqa: E402
from optfarm.farm.run.spec import RunSpec  # noqa: E402
from optfarm.farm.runtime.capacity import (  # noqa: E402
    HEAD_CALL_S,
    HEAD_TIMEOUT_S,
    PLACEMENT_TIMEOUT_S,
    POLL_S,
    ClusterLost,
    Demand,
    HeadWatch,
    RayStartError,
    target_actors,
    wanted_cpus,
)
from optfarm.farm.runtime.driver import notify  # noqa: E402
from optfarm.farm.runtime.memory import gb, kernel_oom_kills, memory_kill, run_memory  # noqa: E402
from optfarm.farm.runtime.ray_private import drop_driver_errors  # noqa: E402
from optfarm.farm.runtime.ray_setup import (  # noqa: E402
    INIT_QUIET,
    LocalRayDidNotStart,
    quiet_ray,
    start_local_ray,
)
from optfarm.farm.runtime.serial import (  # noqa: E402
    OracleCache,
    Outcome,
    error_line,
    run_words,
    say,
)
from optfarm.optimizers.blas import OneThread  # noqa: E402
from optfarm.oracle.dependency_api import DependencyAPIError  # noqa: E402

__all__ = [
    "QUEUE_DEPTH",
    "RayExecutor",
    "RayStartError",
    "RunActor",
    "init_ray",
    "run_on_ray",
    "share_dataset",
]

_joined_cluster = False  # init_ray joined an existing cluster (it may have an autoscaler)
# what a sweep that lost its head held of Ray (its pool's object refs and actor handles, its
# watch's GCS client): dropping one makes Ray release it in the object store, which is gone with
# the head, and Ray then ends this process on the spot; kept, the driver records what it has
# first (the index, MLflow's runs)
_LOST: list[tuple[_ActorPool, _ClusterWatch]] = []


def init_ray(
    address: str | None = None, num_cpus: int | None = None, start_wait: float | None = None
) -> None:
    """Join ``address`` (or ``$RAY_ADDRESS``), else start a local Ray on 127.0.0.1, trying for
    ``start_wait`` seconds (``ray_setup.start_local_ray``); raises ``RayStartError`` (one line)
    when the cluster does not answer or Ray cannot be started, ``LocalRayDidNotStart`` when a
    local start's tries took their whole wait. The process's own handlers of SIGINT,
    SIGTERM and SIGHUP are kept: ``ray.init`` replaces SIGTERM's with an exit, and Ray's core
    worker its C-level one with a stack dump and an abort. A watching parent
    (``optfarm.farm.runtime.driver``) is told the head's address."""
    global _joined_cluster
    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        if address:
            _check_answers(address)
            ray.init(address=address, **INIT_QUIET)
            _joined_cluster = True
        else:
            print(
                "farm: starting a local Ray on 127.0.0.1 (its logs: /tmp/ray/session_latest/logs)",
                file=sys.stderr,
                flush=True,
            )
            start_local_ray(num_cpus, start_wait, **INIT_QUIET)
    except (RayStartError, LocalRayDidNotStart, DependencyAPIError):  # said as they are
        raise
    except Exception as e:
        ray.shutdown()
        where = f"join the Ray cluster at {address}" if address else "start a local Ray"
        raise RayStartError(f"could not {where}: {error_line(e)}") from None
    finally:
        if threading.current_thread() is threading.main_thread():
            for sig, handler in handlers.items():
                if handler is not None:
                    signal.signal(sig, handler)
    quiet_ray()
    notify(head=ray.get_runtime_context().gcs_address, joined=_joined_cluster)


def _reported_here(error: str) -> bool:
    """An error the cluster publishes that ``run_on_ray`` reports itself, in one line: a
    worker that died, workers killed for memory."""
    return error.startswith("A worker died or was killed") or "running low on memory" in error


def _check_answers(address: str) -> None:
    """A cluster address ``host:port`` whose port takes no connection within ``HEAD_CALL_S``
    is refused at once: ``ray.init`` would retry it for a minute, printing warnings."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or "://" in address:
        return  # "auto", a Ray client address: Ray's own resolution
    try:
        socket.create_connection((host, int(port)), timeout=HEAD_CALL_S).close()
    except OSError as e:
        raise RayStartError(
            f"no Ray cluster answers at {address} ({e.strerror or type(e).__name__})"
        ) from None


# -- the shared oracle ------------------------------------------------------------------------
def share_dataset(name: str) -> ray.ObjectRef:
    """Put dataset ``name``'s table (metadata in its schema) into the object store once."""
    from optfarm.oracle.registry import load

    return ray.put(load(name).to_table())


def _dataset_from_table(table: pa.Table):
    from optfarm.oracle.dataset import Dataset

    return Dataset.from_table(table)


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
    with OneThread():  # one thread per task, as in the run it works for
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
        self.workers = self.cpus  # items at once (optfarm.optimizers.executor)

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

    def __init__(
        self, shared: dict[str, ray.ObjectRef], executor: str = "serial", chunk_size: int = 0
    ):
        self._oracles = OracleCache(lambda name: _dataset_from_table(ray.get(shared[name])))
        self._executor = RayExecutor(chunk_size) if executor == "ray" else None

    def where(self) -> dict:
        ctx = ray.get_runtime_context()
        return {
            "node_id": ctx.get_node_id(),
            "pid": os.getpid(),
            "ip": ray.util.get_node_ip_address(),
        }

    def run(
        self, spec: RunSpec, checkpoints: tuple[str, Checkpoints] | None = None
    ) -> tuple[RunResult, float, float]:
        """The run's result, and the CPU and wall time it took here. ``checkpoints``: the
        driver's node and its checkpoints: on that node the run resumes from and writes its
        checkpoint (``optfarm.farm.run.checkpoint``)."""
        c0, t0 = time.process_time(), time.perf_counter()
        checkpoint = None
        if checkpoints is not None and checkpoints[0] == ray.get_runtime_context().get_node_id():
            checkpoint = checkpoints[1].for_run(spec)
        result = run_one(spec, self._oracles.get(spec), self._executor, checkpoint=checkpoint)
        cpu_s = result.cpu_s_before + time.process_time() - c0
        return result, cpu_s, time.perf_counter() - t0

    def shared_memory_report(self, name: str) -> dict:
        """Where this actor reads dataset ``name``'s table from (``shared_memory_report``)."""
        return shared_memory_report(self._oracles.datasets[name].table)


# -- a sweep's runs on an elastic pool of actors ----------------------------------------------
# runs queued per actor: the next run is already there when one finishes, so an actor never
# waits for the driver to store a result and submit again
QUEUE_DEPTH = 2
SETTLE_S = 5.0  # after a kill for memory, no run is sent for this long (_ActorPool.submit)


class _Actor:
    """One ``RunActor`` of the pool, holding ``memory`` bytes of its node's ``memory``
    resource; placed on a node once ``where`` has answered."""

    def __init__(self, handle, memory: int):
        self.handle = handle
        self.memory = memory
        self.where_ref = handle.where.remote()
        self.where: dict | None = None
        self.refs: list[ray.ObjectRef] = []  # runs submitted to it, not returned, in order
        self.dead = False  # it died, and the run it was running is accounted for

    @property
    def runs(self) -> int:
        return len(self.refs)

    @property
    def node(self) -> str | None:
        return None if self.where is None else self.where["node_id"]


@dataclass
class _Sent:
    """A run out on an actor: since when, and the kernel's OOM kills counted then."""

    actor: _Actor
    spec: RunSpec
    t0: float
    oom_kills: int | None


def run_on_ray(
    runs: Sequence[RunSpec],
    *,
    max_in_flight: int = 0,
    max_retries: int = 2,
    executor: str = "serial",
    chunk_size: int = 0,
    on_submit: Callable[[RunSpec, dict], None] | None = None,
    checkpoints: Checkpoints | None = None,
    autoscale: bool | None = None,
    head_timeout: float = HEAD_TIMEOUT_S,
    placement_timeout: float = PLACEMENT_TIMEOUT_S,
) -> Iterator[Outcome]:
    """Run ``runs`` on an elastic pool of ``RunActor``s, yielding outcomes as they finish.

    The pool follows the cluster (``optfarm.farm.runtime.capacity``): every ``POLL_S`` seconds it is
    sized to the cluster's CPUs at that moment (at most ``max_in_flight``, 0: no limit, and at
    most the runs left), so a node that joins gets actors and a lost node's actors are not
    replaced. Each actor holds as much of its node's ``memory`` resource as the largest run
    waiting needs (``memory.run_memory``); a run that needs more than any node has fails at
    once. A run goes only to a placed actor that holds the memory it needs, at most
    ``QUEUE_DEPTH`` per actor, the least loaded first; an idle actor the sweep no longer needs
    is ended, so it holds no CPU that a queued run needs. A run whose actor died goes back to
    the queue up to ``max_retries`` times; one killed for memory goes back once, to run alone
    on a node (``_ActorPool``; here, from its ``checkpoints``); one line on stderr each, not Ray's.
    ``autoscale`` (default: when joined to a cluster) asks the autoscaler for a CPU per run
    that could be in flight (``capacity.wanted_cpus``, ``capacity.Demand``). Every
    call to the head is bounded (``capacity.HeadWatch``); ``ClusterLost`` ends it when the head
    has not answered for ``head_timeout`` s, or when runs waited ``placement_timeout`` s with
    none running, and is told a watching parent first (``optfarm.farm.runtime.driver``).
    Closing the generator (Ctrl-C) kills the actors; ``on_submit(spec, where)``: each run out."""
    if not runs:
        return
    pool = _ActorPool(runs, executor, chunk_size, max_retries, on_submit, checkpoints)
    head = HeadWatch(ray.get_runtime_context().gcs_address, head_timeout)
    asks = _joined_cluster if autoscale is None else autoscale
    watch = _ClusterWatch(head, Demand(head if asks else None), max_in_flight, placement_timeout)
    try:
        yield from pool.too_big(head.largest("memory"))
        while pool.waiting or pool.in_flight:
            now = time.monotonic()
            watch.follow(pool, now)
            pool.submit()
            watch.check_placement(pool, now)
            for ref in pool.wait():
                if (outcome := pool.collect(ref)) is not None:
                    yield outcome
    except ClusterLost as e:
        notify(lost=str(e))  # first: a watching parent prints it, whatever Ray does next
        raise
    except (OSError, RayError) as e:  # e.g. a broken pipe to a raylet that died with the head
        if head.reachable():
            raise
        raise _head_lost(head, e) from e
    finally:
        if head.lost_since is None:  # the head answers: end our actors and our request
            pool.end()
            watch.demand.request(0)
        else:  # see _LOST
            _LOST.append((pool, watch))


class _ActorPool:
    """The ``RunActor``s of one ``run_on_ray`` and the runs they hold.

    ``submit`` sends queued runs to placed actors, ``wait`` returns what finished (a run, or an
    actor's placement), ``collect`` turns a finished run into its outcome and ``died`` puts a
    run whose actor died back in the queue. A run killed for memory waits in ``alone`` for a
    node with nothing else in flight (``reserved``: the node chosen, which takes no other run
    from then on) and runs there by itself (``solo``), the next such run after it. The pool
    holds every Ray reference of the sweep (see ``_LOST``): the shared datasets, the actors,
    the runs in flight, the actors being placed and what the last wait returned, the last run
    collected, and a result while its trace is copied out of the object store.
    """

    def __init__(
        self,
        runs: Sequence[RunSpec],
        executor: str,
        chunk_size: int,
        max_retries: int,
        on_submit: Callable[[RunSpec, dict], None] | None,
        checkpoints: Checkpoints | None = None,
    ):
        from optfarm.oracle.registry import load

        drop_driver_errors(_reported_here)  # the pool says its actors' deaths itself
        # a folder of this machine: the runs on other nodes write no checkpoint
        here = ray.get_runtime_context().get_node_id()
        self.checkpoints = None if checkpoints is None else (here, checkpoints)

        datasets = {name: load(name) for name in sorted({r.dataset for r in runs})}
        self.shared = {name: ray.put(d.to_table()) for name, d in datasets.items()}
        self.needs = {
            (r.optimizer, r.dataset): run_memory(r, datasets[r.dataset])
            for r in {(r.optimizer, r.dataset): r for r in runs}.values()
        }
        # with the Ray executor an actor mostly waits for its tasks: it holds no CPU, so the
        # tasks can always be scheduled
        self.options = {"num_cpus": 0 if executor == "ray" else 1}
        self.executor, self.chunk_size = executor, chunk_size
        self.max_retries, self.on_submit = max_retries, on_submit
        self.pending = list(reversed(runs))  # pop() from the end keeps the given order
        self.attempts: dict[str, int] = {}
        self.memory_kills: dict[str, int] = {}
        self.alone: list[RunSpec] = []
        self.reserved: str | None = None
        self.solo: str | None = None
        self.settled_at = -math.inf  # no run is sent before (a kill for memory: SETTLE_S)
        self.actors: list[_Actor] = []
        self.unplaced_deaths = [0]  # actors that died before they were placed
        self.in_flight: dict[ray.ObjectRef, _Sent] = {}
        self.placing: dict[ray.ObjectRef, _Actor] = {}
        self.received: list[ray.ObjectRef] = []
        self.collected: _Sent | None = None
        self.reading: tuple[RunResult, float, float] | None = None

    @property
    def waiting(self) -> int:
        """Runs not sent yet (those to run alone included)."""
        return len(self.pending) + len(self.alone)

    def need(self, spec: RunSpec) -> int:
        return self.needs[(spec.optimizer, spec.dataset)]

    def too_big(self, largest: float | None) -> Iterator[Outcome]:
        """The failures of the runs that need more memory than the ``largest`` node's (None:
        not known), taken out of the queue."""
        if largest is None:
            return
        for spec in [s for s in self.pending if self.need(s) > largest]:
            self.pending.remove(spec)
            say(
                f"{run_words(spec)} needs about {gb(self.need(spec))} of memory, more than "
                f"any node has ({gb(largest)}); not run, recorded as failed"
            )
            yield Outcome(
                spec,
                None,
                f"not run: needs about {gb(self.need(spec))} of memory, the largest node "
                f"has {gb(largest)}",
                0,
                0.0,
                {},
            )

    def resize(self, target: int) -> None:
        need = max((self.need(s) for s in self.pending + self.alone), default=0)
        _resize(
            self.actors,
            target,
            need,
            lambda: _Actor(
                RunActor.options(**self.options, memory=max(need, 1)).remote(
                    self.shared, self.executor, self.chunk_size
                ),
                need,
            ),
        )

    def submit(self) -> None:
        """Queued runs to placed actors that hold the memory they need, at most
        ``QUEUE_DEPTH`` each, the least loaded first; none to the ``reserved`` node, and none
        at all for ``SETTLE_S`` after a kill for memory (the killed worker's memory takes a
        moment to come back, and a run sent meanwhile may be killed in its place)."""
        if time.monotonic() < self.settled_at:
            return
        self._submit_alone()
        while self.pending:
            spec = self.pending[-1]
            ready = [
                a
                for a in self.actors
                if a.where is not None
                and a.runs < QUEUE_DEPTH
                and a.node != self.reserved
                and a.memory >= self.need(spec)
            ]
            if not ready:
                break
            self._send(min(ready, key=lambda a: a.runs), self.pending.pop())

    def _submit_alone(self) -> None:
        """The next run killed for memory to a node with nothing else in flight: the
        ``reserved`` node (the one with the fewest runs in flight, chosen once), which takes
        no other run while it drains and while the run is there."""
        if not self.alone or self.solo is not None:
            return
        nodes: dict[str, list[_Actor]] = {}
        for actor in self.actors:
            if actor.node is not None:
                nodes.setdefault(actor.node, []).append(actor)
        if self.reserved not in nodes:
            self.reserved = min(nodes, key=lambda n: sum(a.runs for a in nodes[n]), default=None)
        if self.reserved is None or any(a.runs for a in nodes[self.reserved]):
            return
        spec = self.alone.pop(0)
        self.solo = spec.run_key
        self._send(max(nodes[self.reserved], key=lambda a: a.memory), spec)

    def _send(self, actor: _Actor, spec: RunSpec) -> None:
        self.attempts[spec.run_key] = self.attempts.get(spec.run_key, 0) + 1
        if self.checkpoints is not None and actor.node == self.checkpoints[0]:
            self.checkpoints[1].for_run(spec).announce()  # the actor's own line is not shown
        ref = actor.handle.run.remote(spec, self.checkpoints)
        self.in_flight[ref] = _Sent(actor, spec, time.perf_counter(), kernel_oom_kills())
        actor.refs.append(ref)
        if self.on_submit is not None:
            self.on_submit(spec, actor.where)

    def wait(self) -> list[ray.ObjectRef]:
        """What finished within ``POLL_S`` (one run or one actor's placement at most); with
        nothing out, nothing after a ``POLL_S`` pause."""
        self.placing = {a.where_ref: a for a in self.actors if a.where is None}
        refs = list(self.in_flight) + list(self.placing)
        if not refs:
            time.sleep(POLL_S)
            return []
        self.received, _ = ray.wait(refs, num_returns=1, timeout=POLL_S)
        return self.received

    def collect(self, ref: ray.ObjectRef) -> Outcome | None:
        """The outcome of the run ``ref``; None when ``ref`` placed an actor, or when the run
        went back to the queue (``died``)."""
        if ref in self.placing:
            _placed(self.placing[ref], self.actors, self.unplaced_deaths)
            return None
        self.collected = sent = self.in_flight.pop(ref)
        ran = sent.actor.refs[: sent.actor.refs.index(ref)]  # an actor runs its runs in order
        sent.actor.refs.remove(ref)
        if sent.spec.run_key == self.solo:
            self.solo = None
            self.reserved = self.reserved if self.alone else None
        n = self.attempts[sent.spec.run_key]
        try:
            self.reading = ray.get(ref)  # kept until its trace is out of the store (_LOST)
            result, cpu, wall = self.reading
            result = _off_the_store(result)
            self.reading = None
        except (RayActorError, ObjectLostError, OutOfMemoryError) as e:
            # the actor died, or it had finished and its result was lost with its
            # node's object store (ObjectReconstructionFailedError): the run again
            return self.died(sent, e, _ran(sent.actor, ran))
        except RayTaskError as e:
            return Outcome(sent.spec, None, error_line(e), n, _since(sent), sent.actor.where)
        return Outcome(sent.spec, result, None, n, wall, sent.actor.where, cpu)

    def died(self, sent: _Sent, error: BaseException, running: bool) -> Outcome | None:
        """Drop ``sent``'s actor, which died (once, whatever it had queued), and put the run
        back in the queue (None): uncounted if it had not started (``running``: it was running
        when the actor died, ``_ran``); killed for memory, to run alone, once; else while it
        has attempts left. Otherwise its failure. One line on stderr when it was running."""
        spec, actor = sent.spec, sent.actor
        if actor in self.actors:
            _drop(actor, self.actors)
        if not running:
            self.attempts[spec.run_key] -= 1
            self.pending.append(spec)
            return None
        actor.dead = True
        n = self.attempts[spec.run_key]
        if not isinstance(error, ObjectLostError) and (why := memory_kill(error, sent.oom_kills)):
            kills = self.memory_kills[spec.run_key] = self.memory_kills.get(spec.run_key, 0) + 1
            self.settled_at = time.monotonic() + SETTLE_S
            if kills == 1:
                say(f"{run_words(spec)} was killed for memory ({why}); it runs again, alone")
                self.alone.append(spec)
                return None
            say(f"{run_words(spec)} was killed for memory again, alone ({why}); failed")
            reason = f"killed for memory twice, the second time alone on its node ({why})"
            return Outcome(spec, None, reason, n, _since(sent), actor.where or {})
        cause = _death_words(error, actor)
        if n <= self.max_retries:
            say(f"the worker of {run_words(spec)} died ({cause}); it runs again")
            self.pending.append(spec)
            return None
        say(f"the worker of {run_words(spec)} died ({cause}) {n} times; failed")
        return Outcome(
            spec, None, f"its worker died {n} times ({cause})", n, _since(sent), actor.where or {}
        )

    def end(self) -> None:
        for actor in self.actors:
            ray.kill(actor.handle)


@dataclass
class _ClusterWatch:
    """What one ``run_on_ray`` knows of the cluster: its head, the sweep's request to the
    autoscaler, the CPUs at the last poll, and since when queued runs have had none running."""

    head: HeadWatch
    demand: Demand
    max_in_flight: int
    placement_timeout: float
    cpus: int = 0
    polled: float = -math.inf
    starved_since: float = field(default_factory=time.monotonic)

    def follow(self, pool: _ActorPool, now: float) -> None:
        """Every ``POLL_S``: the pool sized to the cluster's CPUs, if the head answers; then
        the CPUs the runs left could use asked of the autoscaler."""
        if now - self.polled >= POLL_S:
            self.polled = now
            if self.head.check() and (answer := self.head.cpus()) is not None:
                self.cpus = answer
                busy = sum(1 for a in pool.actors if a.runs)
                pool.resize(target_actors(self.max_in_flight, self.cpus, pool.waiting + busy))
        if self.head.lost_since is None:
            self.demand.request(
                wanted_cpus(self.max_in_flight, self.cpus, pool.waiting + len(pool.in_flight))
            )

    def check_placement(self, pool: _ActorPool, now: float) -> None:
        """``ClusterLost`` when queued runs waited ``placement_timeout`` s with none running."""
        if pool.in_flight or not pool.waiting:
            self.starved_since = now
        elif now - self.starved_since > self.placement_timeout:
            raise ClusterLost(
                f"{pool.waiting} runs waited {self.placement_timeout:.0f} s "
                f"and no node could take one ({self.cpus} CPUs in the cluster)"
            )


def _head_lost(head: HeadWatch, error: BaseException) -> ClusterLost:
    """The head's loss, which ``error`` (a broken pipe, a Ray error) revealed, told a watching
    parent first."""
    head.lost_since = head.lost_since or time.monotonic()
    lost = ClusterLost(f"lost the Ray head {head.host}:{head.port} ({error_line(error)})")
    notify(lost=str(lost))
    return lost


def _off_the_store(result: RunResult) -> RunResult:
    """``result`` with its trace copied into this process's memory. Read from the object
    store, the table maps the store's memory, and it is released whenever the last reference
    to it goes (e.g. once MLflow's logger is done with it): after the head's node, and with it
    the store, is gone, that release makes Ray end the process on the spot (see ``_LOST``)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, result.trace.schema) as writer:
        writer.write_table(result.trace)
    return replace(result, trace=pa.ipc.open_stream(sink.getvalue()).read_all())


def _resize(actors: list[_Actor], target: int, need: int, new: Callable[[], _Actor]) -> None:
    """End the idle actors beyond ``target``, or holding less memory than ``need`` (those
    still waiting for a CPU first), then start actors up to ``target`` (they wait for a CPU,
    or memory, if none is free)."""
    idle = sorted(
        (a for a in actors if not a.runs), key=lambda a: (a.memory >= need, a.where is not None)
    )
    small = sum(1 for a in idle if a.memory < need)
    for actor in idle[: max(small, len(actors) - target)]:
        actors.remove(actor)
        ray.kill(actor.handle)
    actors.extend(new() for _ in range(target - len(actors)))


def _placed(actor: _Actor, actors: list[_Actor], deaths: list[int]) -> None:
    """``actor`` placed on its node; or, when it died first (its node lost, unschedulable,
    killed for memory), dropped: one line for the 1st, 10th, 100th... such death of the sweep
    (``deaths``: their count), since an actor replaced on a machine short of memory may die
    again and again."""
    try:
        actor.where = ray.get(actor.where_ref)
    except RayError as e:
        if actor in actors:
            _drop(actor, actors)
            deaths[0] += 1
            if math.log10(deaths[0]).is_integer():
                why = memory_kill(e, None)
                what = f"killed for memory ({why})" if why else f"died ({_death_words(e, actor)})"
                say(f"an actor {what} before it ran anything ({deaths[0]} so far)")


def _drop(actor: _Actor, actors: list[_Actor]) -> None:
    actors.remove(actor)
    ray.kill(actor.handle)


def _ran(actor: _Actor, before: list[ray.ObjectRef]) -> bool:
    """Whether a run of ``actor``, which died, was running then, given the runs sent to it
    ``before`` it and not collected yet: it was when they all had finished (an actor runs
    its runs one at a time, in order), unless the run it was running is accounted for."""
    if actor.dead:
        return False
    if not before:
        return True
    ready, _ = ray.wait(before, num_returns=len(before), timeout=0, fetch_local=False)
    if len(ready) < len(before):  # one of them was still running
        return False
    try:  # finished: from another node, their results come over first
        ray.get(before, timeout=HEAD_CALL_S)
    except RayError:  # one of them died running (or did not come over in time)
        return False
    return True


def _since(sent: _Sent) -> float:
    return time.perf_counter() - sent.t0


def _death_words(error: BaseException, actor: _Actor) -> str:
    """Why an actor died, in a few words (Ray's own account is many lines): its node, and
    what ended it."""
    where = actor.where or {}
    node = f"node {(where.get('node_id') or '?')[:8]} {where.get('ip', '?')}"
    if isinstance(error, ObjectLostError):
        return f"{node}: its result was lost with the node's object store"
    exit_type = re.search(r"Worker exit type: (\w+)", str(error))
    if exit_type and "unexpectedly exits" in str(error):
        return f"{node}: its process ended without a word, SIGKILL or a crash"
    if exit_type:
        return f"{node}: {type(error).__name__}, worker exit {exit_type.group(1)}"
    return f"{node}: {error_line(error)[:120]}"
