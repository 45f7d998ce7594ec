"""The chaos soak (``farm bench-chaos``; its table: docs/results/chaos-soak.md): a sweep of
many short runs on the Ray path, stored on a real S3 server and tracked to a real ``mlflow
server`` through the late-answers proxy (``optfarm.farm.bench.chaos_services``), run again
until it is done while faults of every kind are injected at random points of its progress:

- ``worker-kill``: SIGKILL of one of the sweep's Ray actors (its run goes back to the queue);
- ``memory-kill``: Ray's own memory monitor kills a worker, as on a machine short of memory:
  each attempt's Ray starts with its threshold ``MEMORY_MARGIN`` above the machine's use then,
  and the fault is a process that takes the memory up to just past it for a second;
- ``driver-kill``: SIGKILL of the sweep's driver (its parent, ``farm sweep``, exits 1);
- ``tracking-stop``: the tracking server stopped (SIGSTOP) for 5-30 s, then continued;
- ``tracking-restart``: the tracking server killed (SIGKILL), restarted 1-5 s later;
- ``slow-replies``: for 20-40 s every answer of the tracking server 5-30 s late (the client's
  request timeout is 20 s: a ``runs/create`` answered after it was made twice before);
- ``s3-stop``: the S3 server stopped (SIGSTOP) for 5-30 s (past 20 s the driver's lease of
  the store runs out and it stops).

Faults come ``faults`` of each kind, at progress points drawn uniformly over 3-90% of the runs,
one of each kind at a time (the kinds side by side: a driver may be killed while the tracking
server is stopped); one that finds nothing to act on (no actor yet) tries again every second. An
attempt that ends unfinished is followed by another (``farm sweep`` again, the same command);
one that stores nothing for ``STALL_S`` is ended (SIGTERM, then SIGKILL) and counted. At the
end the soak checks what the issue asks: records = keys, one FINISHED MLflow run per key,
nothing RUNNING, nothing doubled.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from optfarm.farm.bench.chaos_services import CpuMeter, Services, in_session, processes

__all__ = ["KINDS", "MEMORY_MARGIN", "check", "soak"]

KINDS = (
    "worker-kill",
    "memory-kill",
    "driver-kill",
    "tracking-stop",
    "tracking-restart",
    "slow-replies",
    "s3-stop",
)
MEMORY_MARGIN = 5.0e9  # bytes above the machine's use (before its Ray starts) Ray kills at
HOG_OVER = 0.4e9  # the memory fault takes the machine this far past the threshold
HOG_MAX = 7.0e9  # and never takes more than this
STALL_S = 900.0  # an attempt that stores nothing for this long is ended
EXPERIMENT = "chaos-soak"
_PROGRESS = re.compile(rb"(\d+)/(\d+) \[")


@dataclass
class _Attempt:
    """One ``farm sweep`` of the soak, in its own session; its progress read from the bar."""

    proc: subprocess.Popen
    log: Path
    done: int = 0
    moved_at: float = field(default_factory=time.monotonic)

    @classmethod
    def start(cls, argv: list[str], env: dict[str, str], log: Path) -> _Attempt:
        with log.with_suffix(".out").open("w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "optfarm", *argv],
                stdout=out,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        attempt = cls(proc, log)
        threading.Thread(target=attempt._read, daemon=True).start()
        return attempt

    def _read(self) -> None:
        """Follow the progress bar on stderr; keep every other line in the log."""
        with self.log.open("wb") as log:
            for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):
                for piece in re.split(rb"[\r\n]", chunk):
                    found = _PROGRESS.search(piece)
                    if found:
                        if int(found[1]) != self.done:
                            self.done, self.moved_at = int(found[1]), time.monotonic()
                    elif piece.strip():
                        log.write(piece + b"\n")
                        log.flush()

    def finished(self) -> bool:
        """Whether it ended with every run done and logged (tracking went not offline)."""
        out = self.log.with_suffix(".out")
        return self.proc.returncode == 0 and "(offline" not in out.read_text(errors="replace")

    def below(self, marker: str) -> list[int]:
        """The pids below this attempt whose command line holds ``marker``."""
        return [pid for pid, cmd in processes(self.proc.pid).items() if marker in cmd]

    def end(self) -> None:
        """SIGTERM its group; after 30 s, or once it ended, SIGKILL every process left in its
        session (Ray's workers take process groups of their own)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)
        for pid in in_session(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()


@dataclass
class _Soak:
    """What the faults act on and what they count."""

    services: Services
    rng: random.Random
    root: Path
    attempt: _Attempt | None = None
    threshold: float = 0.0  # bytes of use at which the attempt's Ray kills for memory
    injected: Counter = field(default_factory=Counter)
    stop: threading.Event = field(default_factory=threading.Event)  # the soak is ending


def soak(runs: int, faults: int, root: Path, seed: int = 0, iterations: int = 5) -> dict:
    """Run the soak (the module docstring) in ``root`` (new): ``runs`` runs of ``iterations``
    evaluations, ``faults`` faults of each kind; what it did and found, as one dict."""
    root.mkdir(parents=True)
    spec = _write_spec(root, runs, iterations)
    rng = random.Random(seed)
    plan = sorted(zip(_points(runs, faults, rng), rng.sample(KINDS * faults, len(KINDS) * faults)))
    t0 = time.monotonic()
    previous = signal.signal(signal.SIGTERM, _interrupt)  # ends as Ctrl-C: servers stopped
    try:
        with CpuMeter() as cpu, Services(root) as services:
            out = services.s3.bucket("chaos") + "/soak"
            state = _Soak(services, rng, root)
            try:
                attempts = _until_done(state, plan, spec, out)
            finally:
                if state.attempt is not None:
                    state.attempt.end()
            found = check(spec, out, services.mlflow.url)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return {
        "runs": runs,
        "faults": dict(state.injected),
        "attempts": attempts,
        **found,
        "wall_s": time.monotonic() - t0,
        "cpu_s": cpu.seconds,
        "load": os.getloadavg(),
    }


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _write_spec(root: Path, runs: int, iterations: int) -> Path:
    """Random search on the synthetic dataset, two variants (``n_init`` 1 and 3): the spec's
    path."""
    spec = root / "soak.yaml"
    body = {
        "name": "chaos-soak",
        "datasets": ["synthetic"],
        "optimizers": [{"name": "random", "params": {"n_init": [1, 3]}}],
        "seeds": (runs + 1) // 2,
        "limits": {"iterations": iterations},
        "tracking": {"experiment": EXPERIMENT},
    }
    spec.write_text(json.dumps(body, indent=1))  # JSON is YAML
    return spec


def _points(runs: int, faults: int, rng: random.Random) -> list[int]:
    """Where (runs stored) each fault comes: uniform over 3-90% of the sweep."""
    n = len(KINDS) * faults
    return sorted(rng.randint(int(0.03 * runs), int(0.9 * runs)) for _ in range(n))


def _until_done(state: _Soak, plan: list[tuple[int, str]], spec: Path, out: str) -> list[int]:
    """Attempts until one ends done and tracked, faults injected as the sweep passes their
    points (one of each kind at a time, kinds side by side); the attempts' exit codes (``-1``:
    ended for storing nothing in ``STALL_S``). Faults not injected by then are not."""
    argv = ["sweep", str(spec), "--out", out, "--tracking-uri", state.services.tracking_uri]
    codes: list[int] = []
    running: dict[str, threading.Thread] = {}
    try:
        while not _follow(state, argv, codes):
            _start_faults(state, plan, running)
            time.sleep(0.5)
    finally:
        state.stop.set()
        for thread in running.values():
            thread.join()
    return codes


def _follow(state: _Soak, argv: list[str], codes: list[int]) -> bool:
    """Follow the attempt: one that ended is noted (and what it left running ended), and
    the next started unless it finished the sweep; one that stalled is ended. Whether the
    sweep is finished."""
    attempt = state.attempt
    if attempt is not None and attempt.proc.poll() is None:
        if time.monotonic() - attempt.moved_at > STALL_S:
            attempt.end()
            codes.append(-1)
            state.attempt = None
        return False
    if attempt is not None:
        attempt.end()  # what it left running (a killed driver's Ray)
        codes.append(attempt.proc.returncode)
        if attempt.finished():
            return True
    state.attempt = _next_attempt(state, argv, len(codes))
    return False


def _start_faults(
    state: _Soak, plan: list[tuple[int, str]], running: dict[str, threading.Thread]
) -> None:
    """Start the faults whose point the sweep passed, each kind's one at a time."""
    done = state.attempt.done if state.attempt is not None else 0
    for item in [p for p in plan if p[0] <= done]:
        thread = running.get(item[1])
        if thread is None or not thread.is_alive():
            plan.remove(item)
            running[item[1]] = threading.Thread(target=_fault, args=(state, item[1]), daemon=True)
            running[item[1]].start()


def _next_attempt(state: _Soak, argv: list[str], n: int) -> _Attempt:
    """The next ``farm sweep``; its Ray's memory monitor set ``MEMORY_MARGIN`` above the
    machine's use now."""
    total, used = _memory()
    state.threshold = used + MEMORY_MARGIN
    env = {
        **os.environ,
        **state.services.env(),
        "OPTFARM_DATA": str(state.root / "data"),
        "RAY_memory_usage_threshold": f"{state.threshold / total:.4f}",
        "RAY_memory_monitor_refresh_ms": "250",
    }
    return _Attempt.start(argv, env, state.root / f"attempt-{n + 1:03d}.err")


def _memory() -> tuple[float, float]:
    """(total, used) bytes of this machine, as Ray's memory monitor counts them."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    meminfo = Path("/proc/meminfo").read_text()
    available = int(meminfo.split("MemAvailable:")[1].split()[0]) * 1024
    return total, total - available


def _fault(state: _Soak, kind: str) -> None:
    """Inject a fault of ``kind``, trying every second while it finds nothing to act on (no
    actor yet), until the soak ends."""
    while not state.stop.is_set():
        if INJECT[kind](state):
            state.injected[kind] += 1
            return
        state.stop.wait(1.0)


def _kill_one(state: _Soak, marker: str) -> bool:
    attempt = state.attempt
    pids = attempt.below(marker) if attempt is not None else []
    if not pids:
        return False
    try:
        os.kill(state.rng.choice(pids), signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def _memory_kill(state: _Soak) -> bool:
    """A process that takes the machine just past the attempt's threshold for a second."""
    if state.attempt is None or not state.attempt.below("ray::RunActor"):
        return False
    need = state.threshold - _memory()[1] + HOG_OVER
    if not 0 < need <= HOG_MAX:
        return False
    code = (
        "import sys, time; b = bytearray(int(sys.argv[1])); "
        "b[::4096] = b'1' * len(range(0, len(b), 4096)); time.sleep(1.0)"
    )
    subprocess.run([sys.executable, "-c", code, str(int(need))], check=False, timeout=120)
    return True


def _pause(server, low: float, high: float, state: _Soak) -> bool:
    server.signal(signal.SIGSTOP)
    time.sleep(state.rng.uniform(low, high))
    server.signal(signal.SIGCONT)
    return True


def _restart(state: _Soak) -> bool:
    state.services.mlflow.kill()
    time.sleep(state.rng.uniform(1, 5))
    state.services.mlflow.start()
    return True


def _slow(state: _Soak) -> bool:
    proxy = state.services.proxy
    proxy.delay_s = state.rng.uniform(5, 30)
    time.sleep(state.rng.uniform(20, 40))
    proxy.delay_s = 0.0
    return True


INJECT = {
    "worker-kill": lambda state: _kill_one(state, "ray::RunActor"),
    "memory-kill": _memory_kill,
    "driver-kill": lambda state: _kill_one(state, "-m optfarm sweep"),
    "tracking-stop": lambda state: _pause(state.services.mlflow, 5, 30, state),
    "tracking-restart": _restart,
    "slow-replies": _slow,
    "s3-stop": lambda state: _pause(state.services.s3, 5, 30, state),
}


def check(spec: Path, out: str, tracking_uri: str) -> dict:
    """What the soak left: the keys the spec expands to, the runs stored done, and in MLflow
    (read from the server itself) the seed runs per key, FINISHED or not, those RUNNING of any
    kind, the keys with more than one run, the variant and sweep runs, the runs deleted."""
    from optfarm.farm.store.store import Store
    from optfarm.farm.sweep.spec import expand, load_spec

    keys = {r.run_key for r in expand(load_spec(spec))}
    records = Store(out).scan().records
    done = sum(1 for k, r in records.items() if k in keys and r["status"] == "done")
    return {"keys": len(keys), "records_done": done, **_tracked(tracking_uri, keys)}


def _tracked(tracking_uri: str, keys: set[str]) -> dict:
    """``check``'s MLflow part."""
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = _all_runs(client, exp.experiment_id, ViewType.ACTIVE_ONLY)
    kinds = Counter(r.data.tags.get("optfarm.kind") for r in runs)
    seeds = [r for r in runs if r.data.tags.get("optfarm.kind") == "run"]
    per_key = Counter(r.data.tags["optfarm.run_key"] for r in seeds)
    finished = {r.data.tags["optfarm.run_key"] for r in seeds if r.info.status == "FINISHED"}
    return {
        "seed_runs": kinds["run"],
        "keys_with_one_finished_run": sum(1 for k in keys if per_key[k] == 1 and k in finished),
        "keys_doubled": sum(1 for n in per_key.values() if n > 1),
        "running": sum(1 for r in runs if r.info.status == "RUNNING"),
        "variant_runs": kinds["variant"],
        "sweep_runs": kinds["sweep"],
        "deleted_runs": len(_all_runs(client, exp.experiment_id, ViewType.DELETED_ONLY)),
    }


def _all_runs(client, experiment_id: str, view) -> list:
    runs, token = [], None
    while True:
        page = client.search_runs(
            [experiment_id], run_view_type=view, max_results=50_000, page_token=token
        )
        runs += list(page)
        token = page.token
        if not token:
            return runs
