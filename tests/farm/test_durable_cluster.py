"""A cluster sweep whose results are on S3 survives its head: ``farm sweep --out s3://...`` on a
loopback cluster (``farm cluster up``: a head and a worker, one CPU each) with the head killed
mid-sweep ends with exit 1 (how it reports the loss is ``test_cluster_nodes``' subject: here
the driver may also die without a word, its lease left behind); a new driver on another node
(a second loopback Ray started afterwards, its own working folder and machine-local cache,
nothing of the first driver's but the bucket and the tracking server) resumes from the bucket
and finishes: every run exactly once in the bucket and in MLflow.

The S3 server is moto's on 127.0.0.1 (``conftest.S3Server``), MLflow a real ``mlflow server``
(an S3 output cannot hold ``mlflow.db``: a team's sweep tracks to a server). Slow (a few
minutes on 2 cores): ``pytest -m slow tests/farm/test_durable_cluster.py -s``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from optfarm.farm.cli import main
from optfarm.farm.cluster.local import LocalCluster, loopback_name
from optfarm.farm.runtime.capacity import HEAD_TIMEOUT_S
from optfarm.farm.store.store import Store
from optfarm.farm.sweep.spec import expand, inline_spec

from .test_durable import _objects, _seed_runs

pytestmark = pytest.mark.slow


def _cluster(nodes: int) -> LocalCluster:
    root = Path(tempfile.mkdtemp(prefix="of-s3-", dir="/tmp"))  # short: Ray's socket paths
    assert main(["cluster", "up", "--nodes", str(nodes), "--dir", str(root)]) == 0
    return LocalCluster.load(root)


def _down(cluster: LocalCluster | None) -> None:
    if cluster is not None:
        main(["cluster", "down", "--dir", str(cluster.root)])
        shutil.rmtree(cluster.root, ignore_errors=True)


def _driver(
    cluster: LocalCluster, out: str, seeds: int, tracking: str, s3, home: Path
) -> subprocess.Popen:
    """``farm sweep`` as run on a node of ``cluster``: its own working folder and local cache
    (``$OPTFARM_DATA``), the bucket and the tracking server shared."""
    home.mkdir(parents=True, exist_ok=True)
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
        out,
        "--address",
        cluster.address,
        "--tracking-uri",
        tracking,
        "--no-progress",
    ]
    env = {**os.environ, **s3.env, "OPTFARM_DATA": str(home / "data")}
    return subprocess.Popen(
        args, cwd=home, env=env, stdout=(home / "driver.log").open("w"), stderr=subprocess.STDOUT
    )


def test_head_killed_then_another_node_resumes_from_the_bucket(s3, server, tmp_path):
    if loopback_name() is None:
        pytest.skip("no host name of this machine resolves to 127.0.0.1")
    seeds = 24
    runs = {r.run_key for r in expand(inline_spec("synthetic", "random", seeds))}
    out = s3.bucket("cluster") + "/head-killed"
    first = second = None
    try:
        first = _cluster(2)
        proc = _driver(first, out, seeds, server.url, s3, tmp_path / "node-a")
        end = time.monotonic() + 300
        while sum(o.endswith(".json") for o in _objects(out) if o.startswith("runs/")) < 6:
            assert proc.poll() is None, (tmp_path / "node-a" / "driver.log").read_text()
            assert time.monotonic() < end, "fewer than 6 runs stored after 300 s"
            time.sleep(0.5)
        killed = time.monotonic()
        first.stop_node("head", signal.SIGKILL)
        assert proc.wait(timeout=HEAD_TIMEOUT_S + 30) == 1
        took = time.monotonic() - killed
        before = {r["run_key"]: r["finished_at"] for r in Store(out).records()}
        assert 6 <= len(before) < len(runs)
        assert not any(o.endswith(".tmp") for o in _objects(out))

        second = _cluster(1)  # another node: a Ray of its own, started after the loss
        proc = _driver(second, out, seeds, server.url, s3, tmp_path / "node-b")
        assert proc.wait(timeout=600) == 0, (tmp_path / "node-b" / "driver.log").read_text()
        resumed = (tmp_path / "node-b" / "driver.log").read_text()
        assert f"{len(before)} already done, {len(runs) - len(before)} run now" in resumed

        store = Store(out)
        records = {r["run_key"]: r for r in store.records()}
        assert set(records) == runs and all(r["status"] == "done" for r in records.values())
        assert all(before[k] == records[k]["finished_at"] for k in before)  # not run again
        nodes_b = set(second.node_ids().values())
        assert {records[k]["where"]["node_id"] for k in runs - set(before)} <= nodes_b
        assert sorted(o for o in _objects(out) if o.startswith("runs/")) == sorted(
            f"runs/{k}.{ext}" for k in runs for ext in ("json", "parquet")
        )
        assert store.write_index().num_rows == len(runs)
        seed_runs = _seed_runs(server.url, out)
        assert sorted(r.data.tags["optfarm.run_key"] for r in seed_runs) == sorted(runs)
        assert {r.info.status for r in seed_runs} == {"FINISHED"}
        print(
            f"\nhead killed with {len(before)}/{len(runs)} runs in {out}: exit 1 after "
            f"{took:.1f} s; a driver on another node ran the {len(runs) - len(before)} "
            "missing runs; each run once in the bucket and in MLflow"
        )
    finally:
        _down(first)
        _down(second)
