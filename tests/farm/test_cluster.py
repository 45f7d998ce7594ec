"""A two-node Ray cluster on this machine (``farm cluster up --nodes 2``: a head and a worker of
one CPU each, every listener on 127.0.0.1) runs a sweep whose runs land on both nodes, and
``farm cluster down`` leaves no process of it behind.

The nodes run in a temporary folder, each in its own process group, and are stopped by those
group ids (never ``ray stop``, which would stop other people's Ray too).
"""

from __future__ import annotations

import os

import pytest

from optfarm.farm.cli import main
from optfarm.farm.run.loop import run_one
from optfarm.farm.store.store import Store
from optfarm.farm.sweep.runner import run_sweep
from optfarm.farm.sweep.spec import expand, parse_spec

from .conftest import LOOPBACK, descendants, listeners_of, loopback_cluster, same_trace


@pytest.fixture(scope="module")
def two_node_cluster():
    import ray

    if ray.is_initialized():
        ray.shutdown()
    with loopback_cluster(2, "of-ray-") as cluster:
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            yield ray, cluster
        finally:
            ray.shutdown()


def test_sweep_runs_land_on_both_nodes(two_node_cluster, tmp_path):
    ray, cluster = two_node_cluster
    nodes = {n["NodeID"]: n for n in ray.nodes() if n["Alive"]}
    assert len(nodes) == 2 and set(cluster.node_ids().values()) == set(nodes)
    assert {n["NodeManagerAddress"] for n in nodes.values()} == {"127.0.0.1"}
    node2 = next(i for i, n in nodes.items() if "node:__internal_head__" not in n["Resources"])
    spec = parse_spec(
        {
            "name": "cluster",
            "datasets": ["synthetic"],
            "optimizers": ["random"],
            "seeds": 6,
            "limits": {"iterations": None},
            "runtime": {"max_in_flight": 2},
            "tracking": {"enabled": False},
        }
    )
    report = run_sweep(spec, tmp_path / "out", progress=False, on_submit=_hold_until_two_actors())
    assert report.complete and report.done == 6
    store = Store(tmp_path / "out")
    index = store.write_index().to_pylist()
    used = {r["node_id"] for r in index}
    assert used == set(nodes)  # one actor per node (one CPU each): both nodes ran runs
    assert any(r["node_id"] == node2 for r in index)
    on_node2 = next(r for r in expand(spec) if store.record(r.run_key)["where"]["node_id"] == node2)
    assert same_trace(store.trace(on_node2.run_key), run_one(on_node2).trace)
    sockets = listeners_of(descendants(os.getpid()))
    assert sockets and all(a.rsplit(":", 1)[0].strip("[]") in LOOPBACK for a, _ in sockets), sockets


def _hold_until_two_actors(timeout_s: float = 300.0):
    """An ``on_submit`` that holds the first run until both nodes' actors are alive: a run goes
    only to a placed actor, and on a loaded machine the head's actor could otherwise finish all
    six runs before the second node's worker process has started."""
    import time

    from ray._private.state import actors  # the GCS actor table, no dashboard needed

    held = []

    def hold(_spec, _where):
        if held:
            return
        held.append(True)
        end = time.monotonic() + timeout_s
        while (
            sum(
                a["ActorClassName"].endswith("RunActor")
                for a in actors(actor_state_name="ALIVE").values()
            )
            < 2
        ):
            assert time.monotonic() < end, "the second node's actor never started"
            time.sleep(0.2)

    return hold


def test_cluster_command_bad_input_and_no_cluster(tmp_path, capsys):
    assert main(["cluster", "up", "--nodes", "0", "--dir", str(tmp_path)]) == 2
    assert main(["cluster", "down", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("farm: error: --nodes and --cpus") and "no cluster here" in err[1]
    assert len(err) == 2


def test_a_node_gets_distinct_free_ports_none_of_them_taken():
    """The ports a node is started with are distinct and outside those already given (the
    head's GCS port): two of its flags on one port and ``ray start`` refuses ("... is trying to
    use a port number ... that is used by other components"), as it did on CI's machine."""
    import socket

    from optfarm.farm.runtime.ports import free_ports

    for _ in range(500):  # one port given twice in about 1 of 700 groups of 8 before
        taken = set(free_ports(1))
        ports = free_ports(8, taken=taken)
        assert len(set(ports)) == 8 and not taken & set(ports)
        for port in ports:  # each free now
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))


def test_ctrl_c_just_after_a_record_is_written_still_indexes_it(tmp_path, monkeypatch):
    """Ctrl-C that lands between a run's record reaching the disk and the sweep counting it
    (the window the SIGTERM test below met on a loaded machine): the index still lists every
    stored run."""
    import pyarrow.parquet as pq

    import optfarm.farm.store.store as store_module

    passes = []

    def interrupt_after_second_record(name):
        passes.append(name)
        if passes.count("after-record") == 2 and name == "after-record":
            raise KeyboardInterrupt

    monkeypatch.setattr(store_module, "fault_point", interrupt_after_second_record)
    spec = parse_spec(
        {
            "name": "ctrl-c",
            "datasets": ["synthetic"],
            "optimizers": ["random"],
            "seeds": 5,
            "limits": {"iterations": 5},
        }
    )
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, out, backend="serial", tracking=False, progress=False)
    stored = sorted(r["run_key"] for r in Store(out).records())
    assert len(stored) == 2
    assert sorted(pq.read_table(out / "index.parquet").column("run_key").to_pylist()) == stored


def test_driver_stopped_by_sigterm_keeps_the_store_consistent(tmp_path):
    """SIGTERM (a scheduler stopping the driver) ends a sweep as Ctrl-C does: exit 130, the
    finished runs stored and indexed, the MLflow sweep run FAILED; the next run resumes."""
    import signal
    import subprocess
    import sys
    import time

    import pyarrow.parquet as pq

    out = tmp_path / "out"
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
        "2000",
        "--out",
        str(out),
        "--serial",
        "--no-progress",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 300  # a guard against a hang: start-up is slow on a loaded machine
    while len(list((out / "runs").glob("*.json"))) < 2:
        assert proc.poll() is None and time.monotonic() < end
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130 and "interrupted" in proc.stderr.read()
    stored = sorted(r["run_key"] for r in Store(out).records())
    assert 2 <= len(stored) < 40
    assert sorted(pq.read_table(out / "index.parquet").column("run_key").to_pylist()) == stored
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.status for r in runs if "mlflow.parentRunId" not in r.data.tags] == ["FAILED"]


def _mlflow_statuses(out) -> dict:
    """(kind, status) -> count of the MLflow runs in the folder's own store."""
    import collections

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], max_results=5000
    )
    return collections.Counter((r.data.tags.get("optfarm.kind"), r.info.status) for r in runs)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_driver_on_ray_stopped_by_a_signal_exits_130(two_node_cluster, tmp_path, sig):
    """On the Ray path too (``--address`` of a cluster): SIGTERM, SIGHUP and Ctrl-C end the
    sweep with exit 130 and Ray's stack dump nowhere (Ray's own SIGTERM handlers end the
    driver with SIGABRT, 134), the finished runs stored and indexed, the MLflow sweep run
    FAILED and no MLflow run left RUNNING."""
    import signal
    import subprocess
    import sys
    import time

    import pyarrow.parquet as pq

    _, cluster = two_node_cluster
    out = tmp_path / "out"
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
        "400",
        "--out",
        str(out),
        "--address",
        cluster.address,
        "--no-progress",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 300
    while len(list((out / "runs").glob("*.json"))) < 2:
        assert proc.poll() is None and time.monotonic() < end, proc.stderr.read()
        time.sleep(0.1)
    proc.send_signal(getattr(signal, sig))
    assert proc.wait(timeout=120) == 130
    err = proc.stderr.read()
    assert "interrupted" in err and "SIGTERM received" not in err and "PC: @" not in err, err
    stored = sorted(r["run_key"] for r in Store(out).records())
    assert sorted(pq.read_table(out / "index.parquet").column("run_key").to_pylist()) == stored
    statuses = _mlflow_statuses(out)
    assert statuses[("sweep", "FAILED")] == 1 and not any(
        status == "RUNNING" for _, status in statuses
    ), statuses


def test_unreachable_cluster_one_line_exit_1_in_bounded_time(tmp_path):
    """``--address`` where no Ray answers: one line naming it and exit 1 at once (a connection
    refused, 2 s at most for one that hangs; not Ray's minute of retries and warnings), and no
    MLflow run started. The time printed includes two interpreter start-ups."""
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    t0 = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "optfarm",
            "sweep",
            "--datasets",
            "synthetic",
            "--optimizers",
            "random",
            "--seeds",
            "3",
            "--out",
            str(out),
            "--address",
            "127.0.0.1:1",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - t0
    err = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(err) == 1, done.stderr
    assert err[0].startswith("farm: error: no Ray cluster answers at 127.0.0.1:1"), err
    assert "--serial" in err[0]
    assert not (out / "mlflow.db").exists()
    print(f"\nunreachable cluster: exit 1 after {took:.1f} s (interpreter start-ups included)")


@pytest.mark.slow  # one or two starts of Ray's 30 s wait, then the sweep in-process
def test_local_ray_start_that_times_out_falls_back_to_serial_in_one_line(tmp_path):
    """A local Ray whose start times out every time (each new raylet stopped, SIGSTOP, the
    moment it appears: a raylet that gets no CPU on a loaded machine, issue 44): Ray gives up
    after its 30 s wait for the node ("The current node timed out during startup"), the farm
    tries again after a pause while ``--ray-start-wait 45`` allows (one line per new try), then
    says in one line that it runs the sweep in this process, as --serial, and does: exit 0,
    the run stored; no ``farm: error:`` line, no process of the tries left, and each try's
    stopped raylet gone before the next try's starts (Ray's reaper would end them only at
    exit)."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "optfarm",
            "sweep",
            "--datasets",
            "synthetic",
            "--optimizers",
            "random",
            "--seeds",
            "1",
            "--iterations",
            "5",
            "--out",
            str(out),
            "--no-progress",
            "--no-tracking",
            "--ray-start-wait",
            "45",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def alive(pid):
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    # every poll reads each process's name again: one seen between its fork and its exec
    # still bears its parent's name, and becomes a raylet a moment later
    stopped, seen, names, earlier_alive = [], set(), {}, []
    while proc.poll() is None and time.monotonic() - t0 < 600:
        for pid in descendants(proc.pid) - set(stopped):
            try:
                names[pid] = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            seen.add(pid)
            if names[pid] == "raylet":
                os.kill(pid, signal.SIGSTOP)
                earlier_alive += [p for p in stopped if alive(p)]
                stopped.append(pid)
        time.sleep(0.02)
    _, stderr = proc.communicate(timeout=60)
    took = time.monotonic() - t0
    lines = stderr.splitlines()
    fallback = [line for line in lines if "running the 1 runs in this process instead" in line]
    retries = [line for line in lines if "starting it again in" in line]
    assert proc.returncode == 0 and 1 <= len(stopped) <= 2, (stopped, stderr)
    assert len(fallback) == 1 and fallback[0].startswith("farm: a local Ray did not start in"), (
        stderr
    )
    assert "timed out during startup" in fallback[0] and "--ray-start-wait" in fallback[0]
    assert len(retries) == len(stopped) - 1 and not [ln for ln in lines if "farm: error" in ln]
    records = list(Store(out).records())
    assert len(records) == 1 and records[0]["status"] == "done"
    assert not earlier_alive, [(pid, names[pid]) for pid in earlier_alive]
    left = [(pid, names[pid]) for pid in seen if alive(pid)]
    assert not left, left
    print(f"\nlocal Ray start timed out {len(stopped)} times: in-process after {took:.1f} s")


@pytest.mark.slow  # a node start of Ray's 30 s wait, then one that works
def test_node_start_that_times_out_is_tried_again(capsys):
    """``farm cluster add`` whose first start times out (the new worker's raylet stopped,
    SIGSTOP, the moment it appears, as a raylet that gets no CPU on a loaded machine): one
    line naming the cause, a pause, and the second start joins the cluster; the stopped
    raylet ends with its first try's process group."""
    import signal
    import threading
    import time
    from pathlib import Path

    from optfarm.farm.cluster.local import ClusterError

    def raylets() -> set[int]:
        found = set()
        for pid in descendants(os.getpid()):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet":
                    found.add(pid)
            except OSError:
                continue
        return found

    with loopback_cluster(1, "of-retry-") as cluster:
        before, result = raylets(), {}

        def add():
            try:
                result["node"] = cluster.add_node()
            except ClusterError as e:  # the test's assertion says what
                result["error"] = e

        t0 = time.monotonic()
        adding = threading.Thread(target=add)
        adding.start()
        stopped = None
        while adding.is_alive() and stopped is None:
            for pid in raylets() - before:
                os.kill(pid, signal.SIGSTOP)
                stopped = pid
            time.sleep(0.02)
        adding.join(timeout=600)
        took = time.monotonic() - t0
        node = result.get("node")
        assert stopped is not None and node is not None, result
        assert node.alive() and node.name in cluster.node_ids()
        assert (
            not Path(f"/proc/{stopped}").exists()
            or Path(f"/proc/{stopped}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        )
        retries = [
            line
            for line in capsys.readouterr().err.splitlines()
            if line.startswith(f"farm: node {node.name} did not start")
        ]
        assert len(retries) == 1 and "timed out during startup" in retries[0], retries
        assert "(2/" in retries[0]
    print(f"\nnode {node.name}: first start timed out, joined on the second after {took:.1f} s")


def test_node_start_tries_and_pauses_follow_the_load(monkeypatch):
    """A node whose start Ray gave up on (its 15 s wait for the dashboard agent, which every
    node starts) is tried again: 5 tries with pauses of 5, 10, ... s on a quiet machine; at a
    load of 40 on 2 cores (where all 5 failed, issue 36) up to 9 tries with pauses up to a
    minute, so that a lull in the load can let the agent start in time."""
    from optfarm.farm.cluster import local

    monkeypatch.setattr(local.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(local.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert [local.start_schedule(a) for a in (1, 2, 4)] == [(5, 5.0), (5, 10.0), (5, 20.0)]
    monkeypatch.setattr(local.os, "getloadavg", lambda: (40.0, 40.0, 40.0))
    assert local.start_schedule(1) == (9, 25.0) and local.start_schedule(4) == (9, 60.0)
    monkeypatch.setattr(local.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert local.start_schedule(6, tries=9) == (9, 30.0)  # the tries granted stay granted
