"""``farm sweep --address`` on a real multi-node cluster on this machine (``farm cluster up``: a
head and two workers of one CPU each, every listener on 127.0.0.1) while nodes come and go:

1. a worker killed mid-sweep: the sweep finishes by itself (exit 0), every run exactly once in
   the store and in MLflow, the re-run runs' traces equal to the serial loop's;
2. a worker added mid-sweep runs a share of the remaining runs, its first one within seconds;
3. the head killed: exit 1, one line naming the resume command within ``line_bound_s()`` of the
   kill (printed by ``farm sweep``, the driver's parent), the store and its index
   consistent, MLflow's sweep run FAILED, and the same sweep with ``--serial`` completes
   exactly the missing runs; the workers end by themselves, their
   agents included;
4. the head of a one-node cluster killed 10 times in a row, at different moments of 10
   sweeps: the line every time within ``line_bound_s()`` (15 s up to a load of 4 per core,
   more above), the store consistent, nothing RUNNING in MLflow
   after the resume (its own clusters, one after another).

Tests 1-3 share one cluster and run in this order (each brings the workers it needs). Slow
(about 4 minutes on 2 cores for 1-3, 14 for 4 at load 13-22): ``pytest -m slow
tests/farm/test_cluster_nodes.py``. The timings
they print (``-s``) are those of the issue's note.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from optfarm.farm.cli import main
from optfarm.farm.cluster.local import LocalCluster
from optfarm.farm.run.loop import run_one
from optfarm.farm.runtime.capacity import HEAD_TIMEOUT_S
from optfarm.farm.store.store import Store
from optfarm.farm.sweep.spec import expand, inline_spec

from .conftest import loopback_cluster, same_trace

pytestmark = pytest.mark.slow
LINE_BOUND_S = 15.0  # from a head killed to the resume line (the README's 10 s, and a margin)
LOADED_PER_CORE = 4.0


def line_bound_s() -> float:
    """``LINE_BOUND_S`` on a machine whose load average per core is at most
    ``LOADED_PER_CORE``; above it, the margin beyond the head's ``HEAD_TIMEOUT_S`` grows with
    the load (at load 40-49 on 2 cores one line came after 15.3 s: its processes, and the
    read of the store the line counts, got a twentieth of a core)."""
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    margin = LINE_BOUND_S - HEAD_TIMEOUT_S
    return HEAD_TIMEOUT_S + margin * max(1.0, per_core / LOADED_PER_CORE)


@pytest.fixture(scope="module")
def cluster():
    t0 = time.monotonic()
    with loopback_cluster(3, "of-nodes-") as started:
        print(f"\ncluster of 3 nodes up in {time.monotonic() - t0:.1f} s")
        yield started


def _sweep(cluster: LocalCluster, out: Path, seeds: int, *extra: str) -> subprocess.Popen:
    """``farm sweep`` of ``seeds`` random runs (360 evaluations each) in a new process."""
    args = [
        sys.executable,
        "-m",
        "optfarm",
        "sweep",
        "--datasets",
        "synthetic",
        "--optimizers",
        "random",
        "--seeds",
        str(seeds),
        "--out",
        str(out),
        "--address",
        cluster.address,
        "--no-progress",
        *extra,
    ]
    log = out.parent / f"{out.name}.log"
    return subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _output(out: Path) -> str:
    return (out.parent / f"{out.name}.log").read_text()


def _wait_stored(out: Path, n: int, proc: subprocess.Popen, timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while len(list((out / "runs").glob("*.json"))) < n:
        assert proc.poll() is None, _output(out)
        assert time.monotonic() < end, f"fewer than {n} runs stored after {timeout} s"
        time.sleep(0.2)


def _live_workers(cluster: LocalCluster, n: int) -> list:
    """At least ``n`` live worker nodes, started if missing."""
    while len(workers := [w for w in cluster.nodes[1:] if w.alive()]) < n:
        cluster.add_node()
    return workers


def _runs(seeds: int) -> dict:
    return {r.run_key: r for r in expand(inline_spec("synthetic", "random", seeds))}


def _mlflow_runs(out: Path) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    return client.search_runs(
        [e.experiment_id for e in client.search_experiments()], max_results=1000
    )


def _exactly_once(out: Path, runs: dict) -> list[dict]:
    """Every run stored once, done, in the index, and in MLflow once as FINISHED."""
    store = Store(out)
    records = list(store.records())
    assert sorted(r["run_key"] for r in records) == sorted(runs)
    assert all(r["status"] == "done" for r in records)
    assert store.write_index().num_rows == len(runs)
    nested = [r for r in _mlflow_runs(out) if "optfarm.run_key" in r.data.tags]  # seed runs
    assert sorted(r.data.tags["optfarm.run_key"] for r in nested) == sorted(runs)
    assert {r.info.status for r in nested} == {"FINISHED"}
    return records


def test_worker_killed_mid_sweep_the_sweep_finishes_by_itself(cluster, tmp_path):
    victim = _live_workers(cluster, 2)[-1]
    victim_id = cluster.node_ids()[victim.name]
    out, runs = tmp_path / "out", _runs(36)
    t0 = time.monotonic()
    proc = _sweep(cluster, out, 36)
    _wait_stored(out, 8, proc)
    killed = time.monotonic()
    cluster.stop_node(victim.name, signal.SIGKILL)  # the node crashes, agents and all
    assert proc.wait(timeout=300) == 0, _output(out)
    done = time.monotonic()
    records = _exactly_once(out, runs)
    retried = [r for r in records if r["attempts"] > 1]
    assert retried and all(r["where"]["node_id"] != victim_id for r in retried)
    assert "died (node " in _output(out)  # one line per death, not Ray's paragraph
    by_node = collections.Counter(r["where"]["node_id"] for r in records)
    for rec in retried + [next(r for r in records if r["where"]["node_id"] == n) for n in by_node]:
        assert same_trace(Store(out).trace(rec["run_key"]), run_one(runs[rec["run_key"]]).trace)
    print(
        f"\nworker killed after {killed - t0:.1f} s: sweep done {done - killed:.1f} s later "
        f"(total {done - t0:.1f} s), runs per node {sorted(by_node.values())}, "
        f"{len(retried)} re-run"
    )


def test_worker_added_mid_sweep_runs_a_share(cluster, tmp_path):
    """The driver is paused (SIGSTOP) while the node starts, so the sweep cannot end first
    however slowly a node starts on a busy machine; its actors finish what they hold. The
    driver is the child of ``farm sweep`` that holds the folder's lock
    (optfarm.farm.runtime.driver): stopping ``farm sweep`` itself would leave the sweep running."""
    out, runs = tmp_path / "out", _runs(60)
    proc = _sweep(cluster, out, 60, "--no-tracking")
    _wait_stored(out, 4, proc)
    driver = json.loads((out / "lock").read_text())["pid"]
    assert driver != proc.pid  # the watched driver, not its parent
    os.kill(driver, signal.SIGSTOP)
    try:
        node = cluster.add_node()
    finally:
        os.kill(driver, signal.SIGCONT)
    resumed = time.time()
    stored_before = len(list((out / "runs").glob("*.json")))
    assert proc.wait(timeout=600) == 0, _output(out)
    records = list(Store(out).records())
    assert sorted(r["run_key"] for r in records) == sorted(runs)
    new = [r for r in records if r["where"]["node_id"] == cluster.node_ids()[node.name]]
    nodes = {r["where"]["node_id"] for r in records}
    assert new, "the node that joined ran nothing"
    first = min(r["finished_at"] - r["duration_s"] for r in new)
    print(
        f"\nnode joined with {stored_before}/{len(runs)} runs stored; it ran {len(new)} "
        f"runs, the first one started {first - resumed:.1f} s after the driver could see it"
    )
    # a quarter of a fair share of what was left when it joined, at least (its first run
    # starts a worker process and maps the dataset; 4 nodes share 2 cores)
    assert len(new) >= max(2, (len(runs) - stored_before) / len(nodes) / 4), len(new)


def test_head_killed_exit_1_in_bounded_time_then_resume_serially(cluster, tmp_path):
    out, runs = tmp_path / "out", _runs(24)
    proc = _sweep(cluster, out, 24)
    _wait_stored(out, 6, proc)
    killed = time.monotonic()
    cluster.stop_node("head", signal.SIGKILL)
    line_s = _line_after(killed, out, proc)
    bound = line_bound_s()
    assert proc.wait(timeout=HEAD_TIMEOUT_S + 110) == 1, _output(out)
    took = time.monotonic() - killed
    assert line_s is not None and line_s <= bound, (line_s, bound, _output(out))
    output = _output(out)
    lost = [line for line in output.splitlines() if line.startswith("farm: error: lost")]
    assert len(lost) == 1 and "resume with: farm sweep" in lost[0] and str(out) in lost[0], output
    store = Store(out)
    before = {r["run_key"]: r["finished_at"] for r in store.records()}
    assert 6 <= len(before) < len(runs) and not list(out.rglob("*.tmp"))
    import pyarrow.parquet as pq

    assert sorted(pq.read_table(out / "index.parquet").column("run_key").to_pylist()) == sorted(
        before
    )  # the index the driver wrote on its way out
    parent = [r for r in _mlflow_runs(out) if "mlflow.parentRunId" not in r.data.tags]
    assert [r.info.status for r in parent] == ["FAILED"]

    assert (
        main(
            [
                "sweep",
                "--datasets",
                "synthetic",
                "--optimizers",
                "random",
                "--seeds",
                "24",
                "--out",
                str(out),
                "--serial",
                "--no-progress",
            ]
        )
        == 0
    )
    records = _exactly_once(out, runs)
    assert all(r["attempts"] == 1 for r in records)
    assert all(
        before[r["run_key"]] == r["finished_at"] for r in records if r["run_key"] in before
    )  # the stored runs were not run again
    # the workers end by themselves after Ray's 60 s without their GCS, agents included
    while any(w.alive() for w in cluster.nodes[1:]) and time.monotonic() < killed + 120:
        time.sleep(1)
    assert not any(n.alive() for n in cluster.nodes)
    print(
        f"\nhead killed with {len(before)}/{len(runs)} runs stored: the line after {line_s} s, "
        f"exit 1 after {took:.1f} s;"
        f" --serial finished the {len(runs) - len(before)} missing runs; the workers were gone"
        f" {time.monotonic() - killed:.0f} s after the head"
    )


def _line_after(killed: float, out: Path, proc: subprocess.Popen) -> float | None:
    """Seconds from the kill to the resume line in the sweep's output (None: it never came
    before the driver ended, or within 120 s)."""
    while time.monotonic() - killed < 120:
        ended = proc.poll() is not None
        if "resume with:" in _output(out):
            return round(time.monotonic() - killed, 1)
        if ended:
            return None
        time.sleep(0.05)
    return None


# (runs stored, then seconds more) before each kill: early and late in the sweep, between
# results and while one is being stored and logged. The sweep must still have runs to do at
# the kill on an idle machine too: at load ~10 the one-node cluster stored 3 runs/s (16 runs
# and a kill at 2 stored + 3.0 s had 11 stored at the kill), so at most 2 + 1.4 s x 10 runs/s
# here of KILL_SEEDS.
KILL_SEEDS = 24
KILLS = [
    (1, 0.0),
    (2, 0.4),
    (3, 0.0),
    (1, 1.3),
    (4, 0.7),
    (2, 0.0),
    (5, 0.2),
    (3, 1.2),
    (12, 0.0),
    (2, 1.4),
]


def test_head_killed_ten_times_in_a_row_reported_every_time(tmp_path):
    """The head (the driver's own raylet: a one-node cluster of 2 CPUs) SIGKILLed 10 times at
    different moments of 10 sweeps: every time exit 1 and the resume line within
    ``line_bound_s()`` of the kill, the store consistent (its index the stored runs, no temporary
    file), and after the resume (``--serial``) every run exactly once and no MLflow run left
    RUNNING."""
    seeds, runs, rows = KILL_SEEDS, _runs(KILL_SEEDS), []
    for i, (stored, delay) in enumerate(KILLS):
        out = tmp_path / f"out{i}"
        with loopback_cluster(1, "of-kill-", cpus=2) as one:
            proc = _sweep(one, out, seeds)
            _wait_stored(out, stored, proc)
            time.sleep(delay)
            n_before = len(list((out / "runs").glob("*.json")))
            killed = time.monotonic()
            one.stop_node("head", signal.SIGKILL)
            assert n_before < seeds, f"the sweep had finished before kill {i + 1}"
            line_s = _line_after(killed, out, proc)
            bound = line_bound_s()
            proc.wait(timeout=120)
            exit_s = time.monotonic() - killed
        output = _output(out)
        lost = [x for x in output.splitlines() if x.startswith("farm: error: lost the Ray head")]
        store = Store(out)
        before = sorted(r["run_key"] for r in store.records())
        import pyarrow.parquet as pq

        index = sorted(pq.read_table(out / "index.parquet").column("run_key").to_pylist())
        rows.append(
            {
                "kill": i + 1,
                "stored_at_kill": n_before,
                "exit": proc.returncode,
                "line_s": line_s,
                "exit_s": round(exit_s, 1),
                "stored": len(before),
                "index_ok": index == before,
                "tmp": len(list(out.rglob("*.tmp"))),
            }
        )
        assert proc.returncode == 1 and len(lost) == 1, output
        assert "resume with: farm sweep" in lost[0] and str(out) in lost[0], output
        assert line_s is not None and line_s <= bound, (line_s, bound, output)
        assert index == before and rows[-1]["tmp"] == 0
        assert (
            main(
                [
                    "sweep",
                    "--datasets",
                    "synthetic",
                    "--optimizers",
                    "random",
                    "--seeds",
                    str(seeds),
                    "--out",
                    str(out),
                    "--serial",
                    "--no-progress",
                ]
            )
            == 0
        )
        _exactly_once(out, runs)
        running = [
            (r.data.tags.get("optfarm.kind"), r.info.run_name)
            for r in _mlflow_runs(out)
            if r.info.status == "RUNNING"
        ]
        rows[-1]["running_after_resume"] = len(running)
        print(f"\n{rows[-1]}", flush=True)  # as it goes: a later failure keeps the earlier rows
        assert not running, running
