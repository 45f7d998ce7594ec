"""A two-node Ray cluster on this machine (``ray start --head`` plus a second node with its
own resources joining it on 127.0.0.1) runs a sweep whose runs land on both nodes.

Both nodes run in a temporary folder, in their own process groups, and are stopped by those
group ids at the end (never ``ray stop``, which would stop other people's Ray too). The head
keeps to loopback with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``; a joining node needs that flag
at 1, and then Ray rewrites "127.0.0.1" into the machine's external address, so the node joins
through a host name that resolves to 127.0.0.1 instead (this machine's name, via /etc/hosts).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import pytest

from farm.run.loop import run_one
from farm.sweep.ray_setup import ensure_auth_token
from farm.sweep.runner import run_sweep
from farm.sweep.store import Store
from farm.sweep.spec import expand, parse_spec

from .conftest import (
    LOOPBACK,
    descendants,
    free_port,
    listeners_of,
    same_trace,
    start_group,
    stop_groups,
    wait_for_port,
)


def _loopback_name() -> str | None:
    for name in (socket.gethostname(), socket.getfqdn()):
        try:
            if name and socket.gethostbyname(name) == "127.0.0.1" and name != "localhost":
                return name
        except OSError:
            continue
    return None


# every process of the cluster uses Ray's token file (~/.ray/auth_token), made if missing
# (a first run: `ray start` does not make it) by ensure_auth_token()
AUTH = {"RAY_AUTH_MODE": "token"}


@pytest.fixture(scope="module")
def two_node_cluster():
    import ray

    host = _loopback_name()
    if host is None:
        pytest.skip("no host name of this machine resolves to 127.0.0.1")
    if ray.is_initialized():
        ray.shutdown()
    ensure_auth_token()
    tmp = Path(tempfile.mkdtemp(prefix="of-ray-", dir="/tmp"))  # short: Ray's socket paths
    ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
    port = free_port()
    head = start_group([ray_bin, "start", "--head", "--block", "--node-ip-address=127.0.0.1",
                        f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                        f"--temp-dir={tmp / 'ray'}", "--disable-usage-stats"],
                       tmp / "head.log", {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", **AUTH})
    procs = [head]
    try:
        wait_for_port(port, head, 120, tmp / "head.log")
        node2 = start_group([ray_bin, "start", "--block", f"--address={host}:{port}",
                             "--num-cpus=1", '--resources={"node2": 1}',
                             "--disable-usage-stats"],
                            tmp / "node2.log", {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1",
                                                **AUTH})
        procs.append(node2)
        ray.init(address=f"127.0.0.1:{port}", log_to_driver=False)
        end = time.monotonic() + 120
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            if time.monotonic() > end or node2.poll() is not None:
                raise RuntimeError(f"second node did not join: {(tmp / 'node2.log').read_text()}")
            time.sleep(0.5)
        yield ray
    finally:
        if ray.is_initialized():
            ray.shutdown()
        stop_groups(procs)
        shutil.rmtree(tmp, ignore_errors=True)


def test_sweep_runs_land_on_both_nodes(two_node_cluster, tmp_path):
    ray = two_node_cluster
    nodes = {n["NodeID"]: n for n in ray.nodes() if n["Alive"]}
    assert len(nodes) == 2
    assert {n["NodeManagerAddress"] for n in nodes.values()} == {"127.0.0.1"}
    node2 = next(i for i, n in nodes.items() if "node2" in n["Resources"])
    spec = parse_spec({"name": "cluster", "datasets": ["synthetic"], "optimizers": ["random"],
                       "seeds": 6, "limits": {"iterations": 60},
                       "runtime": {"max_in_flight": 2}, "tracking": {"enabled": False}})
    report = run_sweep(spec, tmp_path / "out", progress=False)
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
