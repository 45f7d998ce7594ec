"""Fault injection on the record layer: real ``farm sweep`` drivers (subprocesses) on a real
Ray cluster (``ray start --head`` on 127.0.0.1), a real ``mlflow server`` on 127.0.0.1, real
files, real disk-full (a small tmpfs). Every case ends with exactly one stored run, one trace
and one MLflow seed run per run key, one variant run holding them, and one parent run per
sweep.

Faults: two sweeps on one folder; the driver SIGKILLed at three points (``$FARM_FAULT``, see
``optfarm.farm.store.store.fault_point``), one of them between creating a nested MLflow run and
logging it; the tracking server killed mid-sweep, then ``farm sync`` twice; the folder copied
elsewhere (and its MLflow cache lost) and run again; a truncated trace, a bit-flipped trace, a
truncated record, a truncated ``sweep.json`` and MLflow cache; disk full during a run and
during the creation of the folder's MLflow store, then space freed and the sweep run again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from optfarm.farm.store.store import Store
from optfarm.farm.sweep.spec import expand, inline_spec

from .conftest import start_ray_head, stop_groups

SEEDS, ITERATIONS = 4, 6

# each case starts two to four `farm sweep` drivers (a Ray client each): about a minute a case
# on a quiet 2-CPU machine, several on a loaded one
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_head():
    """A one-node Ray cluster with 2 CPUs on 127.0.0.1; its address."""
    tmp = Path(tempfile.mkdtemp(prefix="of-faults-", dir="/tmp"))  # short: Ray's socket paths
    head, port = start_ray_head(tmp, num_cpus=2)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop_groups([head])
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def tmpfs(tmp_path):
    """``tmpfs(size)``: a new folder on a tmpfs of that size (root only); ``.resize(size)``
    frees space."""
    mounts = []

    class Disk:
        def __init__(self, path: Path):
            self.path = path

        def resize(self, size: str) -> None:
            subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)

    def mount(size: str) -> Disk:
        path = tmp_path / f"small-disk-{len(mounts)}"
        path.mkdir()
        if subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
        ).returncode:
            pytest.skip("cannot mount a tmpfs here (not root?)")
        mounts.append(path)
        return Disk(path)

    yield mount
    for path in mounts:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _keys(name: str) -> set[str]:
    return {
        r.run_key
        for r in expand(inline_spec("synthetic", "random", SEEDS, name=name, iterations=ITERATIONS))
    }


def _sweep_args(name: str, out: Path, address: str, uri: str | None) -> list[str]:
    return [
        "sweep",
        "--datasets",
        "synthetic",
        "--optimizers",
        "random",
        "--seeds",
        str(SEEDS),
        "--iterations",
        str(ITERATIONS),
        "--name",
        name,
        "--out",
        str(out),
        "--address",
        address,
        "--no-progress",
        *(["--tracking-uri", uri] if uri else []),
    ]


def _env(**extra) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MLFLOW_TRACKING_URI", "FARM_FAULT", "RAY_ADDRESS")
    }
    return {**env, **extra}


def farm(args: list[str], **env) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(
        [sys.executable, "-m", "optfarm", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(**env),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        stop_groups([proc], grace=2.0)  # whatever a killed driver left behind
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def start_farm(args: list[str], **env) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "optfarm", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(**env),
        start_new_session=True,
    )


def _children(pid: int) -> list[int]:
    """The pids of ``pid``'s child processes (from /proc)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def _wait_for(condition, timeout: float = 180.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError("condition not met")
        time.sleep(0.05)


def _nested(uri: str, experiment: str) -> tuple[Counter, Counter, int, Counter]:
    """(seed runs per run key, their statuses, parent runs, variant runs per (variant key,
    status, whether every seed run is nested in it)) of ``experiment`` at ``uri``."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=10_000) if exp else []
    nested = [r for r in runs if r.data.tags.get("optfarm.kind") == "run"]
    parents = [r for r in runs if r.data.tags.get("optfarm.kind") == "sweep"]
    variants = [r for r in runs if r.data.tags.get("optfarm.kind") == "variant"]
    return (
        Counter(r.data.tags["optfarm.run_key"] for r in nested),
        Counter(r.info.status for r in nested),
        len(parents),
        Counter(
            (
                v.data.tags["optfarm.variant_key"],
                v.info.status,
                all(r.data.tags["mlflow.parentRunId"] == v.info.run_id for r in nested),
            )
            for v in variants
        ),
    )


def assert_exactly_once(out: Path, uri: str, name: str) -> None:
    keys = _keys(name)
    scan = Store(out).scan()
    assert not scan.damaged, scan.damaged
    assert set(scan.records) == keys and all(r["status"] == "done" for r in scan.records.values())
    assert {p.stem for p in (out / "runs").glob("*.parquet")} == keys
    per_key, statuses, parents, variants = _nested(uri, name)
    assert per_key == Counter({k: 1 for k in keys}), per_key
    assert statuses == Counter({"FINISHED": len(keys)}) and parents == 1
    # one variant (synthetic x random), logged once, finished, holding every seed run
    (((_, status, holds_all), count),) = variants.items()
    assert (count, status, holds_all) == (1, "FINISHED", True), variants


def _lines(text: str, word: str) -> list[str]:
    return [line for line in text.splitlines() if word in line]


def test_a_second_sweep_on_a_busy_folder_exits_2_naming_the_holder(ray_head, server, tmp_path):
    out = tmp_path / "out"
    args = _sweep_args("busy", out, ray_head, server.url)
    first = start_farm(args)
    try:
        lock = out / "lock"
        # the folder is held by the sweep's driver: on the Ray path a child of `farm sweep`
        # (optfarm.farm.runtime.driver), so the holder is read from the lock, not assumed to be
        # `first`
        _wait_for(lambda: lock.exists() and '"pid"' in lock.read_text())
        holder = json.loads(lock.read_text())["pid"]
        assert holder in (first.pid, *_children(first.pid))
        os.kill(holder, signal.SIGSTOP)  # the first driver holds the folder, stopped
        second = farm(args)
        os.kill(holder, signal.SIGCONT)
        assert second.returncode == 2
        err = second.stderr.strip()
        assert len(err.splitlines()) == 1 and f"pid {holder}" in err and "in use" in err
        _, stderr = first.communicate(timeout=300)
        assert first.returncode == 0, stderr
    finally:
        stop_groups([first])
    assert_exactly_once(out, server.url, "busy")


@pytest.mark.parametrize("point", ["after-trace:2", "after-mlflow-create:2", "after-record:3"])
def test_driver_killed_then_rerun_runs_and_logs_each_key_once(point, ray_head, server, tmp_path):
    name = f"killed-{point.split(':')[0]}"
    out = tmp_path / "out"
    args = _sweep_args(name, out, ray_head, server.url)
    killed = farm(args, FARM_FAULT=point)
    # on the Ray path the driver is a child of `farm sweep`: the parent outlives it, ends the
    # MLflow runs it left RUNNING and says so in one line
    assert killed.returncode == 1, killed.stderr
    err = killed.stderr.strip()
    assert len(err.splitlines()) == 1 and "ended with signal SIGKILL" in err, err
    scan = Store(out).scan()
    if point.startswith("after-trace"):  # a trace without its record: not a finished run
        assert len(scan.records) == 1 and len(list((out / "runs").glob("*.parquet"))) == 2
    if point.startswith("after-mlflow-create"):
        # orphans: seed runs in MLflow (the bulk endpoint writes them whole) that the driver
        # did not live to remember; none left RUNNING
        statuses = _nested(server.url, name)[1]
        assert statuses.total() >= 1 and statuses["RUNNING"] == 0, statuses
    if point.startswith("after-record"):
        assert len(scan.records) == 3
    again = farm(args)
    assert again.returncode == 0, again.stderr
    assert f"{SEEDS} runs, {len(scan.records)} already done" in again.stdout
    assert_exactly_once(out, server.url, name)


def test_server_killed_mid_sweep_then_sync_twice(ray_head, server, tmp_path):
    out = tmp_path / "out"
    driver = start_farm(_sweep_args("server-lost", out, ray_head, server.url))
    try:
        _wait_for(lambda: len(list((out / "runs").glob("*.json"))) >= 1)
        os.kill(driver.pid, signal.SIGSTOP)
        server.stop()
        os.kill(driver.pid, signal.SIGCONT)
        stdout, stderr = driver.communicate(timeout=300)
    finally:
        stop_groups([driver])
        if server.proc.poll() is not None:
            server.start()
    assert driver.returncode == 0, stderr
    assert len(_lines(stderr, "warning")) == 1 and "farm sync" in stderr
    finished_before = _nested(server.url, "server-lost")[1]["FINISHED"]
    assert finished_before < SEEDS
    first = farm(["sync", str(out)])  # no --tracking-uri: the sweep's own, from sweep.json
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"synced {SEEDS - finished_before} runs to {server.url}"
    second = farm(["sync", str(out)])
    assert second.returncode == 0 and second.stdout.startswith("synced 0 runs"), second
    assert_exactly_once(out, server.url, "server-lost")


def test_copied_folder_with_its_cache_lost_logs_nothing_twice(ray_head, tmp_path):
    out, copy = tmp_path / "out", tmp_path / "elsewhere" / "out"
    first = farm(_sweep_args("copied", out, ray_head, None))  # the folder's own sqlite store
    assert first.returncode == 0, first.stderr
    shutil.copytree(out, copy)
    (copy / "mlflow_runs.jsonl").unlink()
    again = farm(_sweep_args("copied", copy, ray_head, None))
    assert again.returncode == 0, again.stderr
    assert f"{SEEDS} runs, {SEEDS} already done, 0 run now" in again.stdout
    assert_exactly_once(copy, f"sqlite:///{copy / 'mlflow.db'}", "copied")
    assert_exactly_once(out, f"sqlite:///{out / 'mlflow.db'}", "copied")


def test_damaged_files_are_refused_by_readers_then_quarantined_and_redone(
    ray_head, server, tmp_path
):
    out = tmp_path / "out"
    args = _sweep_args("damaged", out, ray_head, server.url)
    assert farm(args).returncode == 0
    k_trunc, k_flip, k_record, _ = sorted(_keys("damaged"))
    store = Store(out)
    trace = store.trace_path(k_trunc)
    trace.write_bytes(trace.read_bytes()[: trace.stat().st_size // 2])
    flipped = bytearray(store.trace_path(k_flip).read_bytes())
    flipped[len(flipped) // 2] ^= 0x01  # one bit
    store.trace_path(k_flip).write_bytes(bytes(flipped))
    record = store.record_path(k_record)
    record.write_text(record.read_text()[:100])
    for command in (["report", str(out), "--no-tracking"], ["sync", str(out)]):
        refused = farm(command)
        err = refused.stderr.strip()
        assert refused.returncode == 2 and len(err.splitlines()) == 1, refused
        assert str(out / "runs") in err and "run the sweep again" in err
    again = farm(args)
    assert again.returncode == 0, again.stderr
    lines = _lines(again.stderr, "quarantine")
    assert len(lines) == 3
    assert any(f"{k_trunc}.parquet: trace truncated" in line for line in lines)
    assert any(
        f"{k_flip}.parquet: trace content does not match its sha256" in line for line in lines
    )
    assert any(f"{k_record}.json: not valid JSON" in line for line in lines)
    assert f"{SEEDS} runs, 1 already done, 3 run now" in again.stdout
    assert len(list((out / "quarantine").iterdir())) == 6  # each run's record and trace
    assert_exactly_once(out, server.url, "damaged")
    # a truncated MLflow cache is a warning naming it; a truncated sweep.json one line, exit 2
    cache = out / "mlflow_runs.jsonl"
    cache.write_text(cache.read_text()[:-30])
    resumed = farm(args)
    assert resumed.returncode == 0 and len(_lines(resumed.stderr, str(cache))) == 1, resumed
    assert_exactly_once(out, server.url, "damaged")
    spec = out / "sweep.json"
    spec.write_text(spec.read_text()[:50])
    for command in (args, ["report", str(out)], ["sync", str(out)]):
        broken = farm(command)
        err = broken.stderr.strip()
        assert broken.returncode == 2 and len(err.splitlines()) == 1, broken
        assert err.startswith(f"farm: error: {spec}: not valid JSON"), err


def test_disk_full_during_a_run_then_freed(ray_head, server, tmpfs):
    disk = tmpfs("48k")
    out = disk.path / "out"
    args = _sweep_args("disk-full", out, ray_head, server.url)
    full = farm(args)
    assert full.returncode == 1, full
    err = full.stderr.strip()
    assert len(_lines(err, "No space left on device")) == 1 and str(out) in err, err
    assert err.endswith("; the runs stored so far are kept, run the sweep again when fixed")
    assert 0 < len(Store(out).scan().records) < SEEDS
    disk.resize("64m")
    again = farm(args)
    assert again.returncode == 0, again.stderr
    assert_exactly_once(out, server.url, "disk-full")


def test_disk_full_while_the_mlflow_store_is_created_then_freed(ray_head, tmpfs, tmp_path):
    disk = tmpfs("200k")
    out = disk.path / "out"
    args = _sweep_args("store-full", out, ray_head, None)
    full = farm(args)
    # where MLflow's store creation stopped decides whether the runs' files still fit on the
    # disk: either the sweep ends incomplete (exit 1), or every run is stored and MLflow is
    # reported offline (exit 0); the store's warning comes once either way
    assert full.returncode in (0, 1), full
    assert full.returncode == 1 or "offline, run `farm sync` later" in full.stdout, full
    assert len(_lines(full.stderr, f"{out / 'mlflow.db'} cannot be opened")) == 1, full.stderr
    assert "free space" in full.stderr
    disk.resize("64m")
    again = farm(args)
    assert again.returncode == 0, again.stderr
    assert_exactly_once(out, f"sqlite:///{out / 'mlflow.db'}", "store-full")
    # where creation stopped depends on the free space left; a store whose tables were
    # created half-way (here: by MLflow alone on a bare 200k tmpfs) is moved aside, made again
    half = _half_created_store(tmpfs("200k"))
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(half, out / "mlflow.db")
    recreated = farm(_sweep_args("store-half", out, ray_head, None))
    assert recreated.returncode == 0, recreated.stderr
    assert len(_lines(recreated.stderr, "was left half-created")) == 1, recreated.stderr
    assert len(list(out.glob("mlflow.db.broken-*"))) == 1
    assert_exactly_once(out, f"sqlite:///{out / 'mlflow.db'}", "store-half")


def _half_created_store(disk) -> Path:
    """An MLflow sqlite store whose creation ran out of space on ``disk``, then freed."""
    code = (
        "from mlflow.tracking import MlflowClient; import sys; "
        "MlflowClient(sys.argv[1]).search_experiments()"
    )
    db = disk.path / "mlflow.db"
    assert (
        subprocess.run(
            [sys.executable, "-c", code, f"sqlite:///{db}"], env=_env(), capture_output=True
        ).returncode
        != 0
    )
    disk.resize("64m")
    reopened = subprocess.run(
        [sys.executable, "-c", code, f"sqlite:///{db}"], env=_env(), capture_output=True, text=True
    )
    assert "already exists" in reopened.stderr, reopened.stderr[-2000:]
    return db
