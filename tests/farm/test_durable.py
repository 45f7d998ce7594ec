"""A sweep whose output is on S3 (``--out s3://BUCKET/PATH``), on a real S3-compatible server on
127.0.0.1 (moto's standalone server, ``conftest.S3Server``): the store's guarantees as on a
local folder (exactly once, atomic writes, checksums, resume), and its lock, a lease object
that two drivers cannot both hold (``optfarm.farm.store.locks``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

from optfarm.farm.cli import main
from optfarm.farm.store.location import Location
from optfarm.farm.store.store import FolderBusy, Store
from optfarm.farm.sweep.spec import expand, inline_spec


def _objects(uri: str) -> list[str]:
    """Every object under ``uri`` (keys relative to it), listed through pyarrow.fs."""
    import pyarrow.fs as pafs

    location = Location.of(uri)
    listed = location.fs.get_file_info(
        pafs.FileSelector(str(location.root), recursive=True, allow_not_found=True)
    )
    return sorted(
        i.path[len(str(location.root)) + 1 :] for i in listed if i.type == pafs.FileType.File
    )


def _sweep(out: str, seeds: int, *extra: str) -> int:
    return main(
        [
            "sweep",
            "--datasets",
            "synthetic",
            "--optimizers",
            "random",
            "--seeds",
            str(seeds),
            "--iterations",
            "8",
            "--out",
            out,
            "--serial",
            "--no-progress",
            *extra,
        ]
    )


def _seed_runs(url: str, out: str) -> list:
    """The seed runs of the sweep stored in ``out`` on the tracking server ``url``."""
    from mlflow.tracking import MlflowClient

    sweep_id = Store(out).read_sweep()["sweep_id"]
    client = MlflowClient(url)
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], max_results=1000
    )
    return [
        r
        for r in runs
        if "optfarm.run_key" in r.data.tags and r.data.tags.get("optfarm.sweep_id") == sweep_id
    ]


def test_a_sweep_on_s3_stores_each_run_once_and_resumes(s3, server, capsys):
    out = s3.bucket("sweeps") + "/quick"
    keys = sorted(r.run_key for r in expand(inline_spec("synthetic", "random", 4, iterations=8)))
    assert _sweep(out, 4, "--tracking-uri", server.url) == 0
    # no temporary object, and no lease: it is deleted when the driver ends; the four traces
    # again in one segment (optfarm.farm.store.trace_segments), named by its sha256
    segment = [o for o in _objects(out) if o.startswith("traces/")]
    assert len(segment) == 1 and len(segment[0]) == len("traces/.parquet") + 64
    assert _objects(out) == sorted(
        ["index.parquet", "sweep.json", "verified.json", *segment]
        + [f"runs/{k}.{ext}" for k in keys for ext in ("json", "parquet")]
    )
    assert Store(out).read_segments({k: Store(out).record(k)["trace_sha256"] for k in keys})[
        1
    ] == set(keys)
    store = Store(out)
    assert sorted(store.finished()) == keys and store.write_index().num_rows == 4
    capsys.readouterr()
    assert _sweep(out, 4) == 0  # resumed: the tracking server is kept in sweep.json
    assert "4 already done, 0 run now" in capsys.readouterr().out
    assert sorted(r.data.tags["optfarm.run_key"] for r in _seed_runs(server.url, out)) == keys

    # damage: a record rewritten, a trace replaced by one of the same size, a trace deleted
    a, b, c = keys[:3]
    time.sleep(1.1)  # S3's modification times have whole seconds (see VerifiedFiles)
    record = store.record(a)
    record["summary"]["exploration_cost"] += 1.0
    s3_put(store, store.record_path(a), json.dumps(record).encode())
    trace = bytearray(s3_get(store, store.trace_path(b)))
    trace[len(trace) // 2] ^= 0x04
    s3_put(store, store.trace_path(b), bytes(trace))
    store.fs.delete_file(str(store.trace_path(c)))
    assert main(["report", out, "--no-tracking"]) == 2
    assert f"{out}/runs/" in capsys.readouterr().err  # refused, naming the object
    assert _sweep(out, 4) == 0
    captured = capsys.readouterr()
    assert "1 already done, 3 run now" in captured.out
    quarantined = [line for line in captured.err.splitlines() if "quarantine" in line]
    assert len(quarantined) == 3 and f"moved to {out}/quarantine" in quarantined[0]
    assert sorted(Store(out).finished()) == keys
    seed_runs = _seed_runs(server.url, out)  # redone runs complete their MLflow run: none twice
    assert sorted(r.data.tags["optfarm.run_key"] for r in seed_runs) == keys
    assert {r.info.status for r in seed_runs} == {"FINISHED"}


def s3_put(store: Store, path, data: bytes) -> None:
    with store.fs.open_output_stream(str(path)) as f:
        f.write(data)


def s3_get(store: Store, path) -> bytes:
    with store.fs.open_input_stream(str(path)) as f:
        return f.read()


def test_an_s3_output_without_a_tracking_server_says_where_mlflow_goes(s3, server, capsys):
    """One line says where the runs are tracked; ``farm sync`` uploads them later."""
    out = s3.bucket("local-tracking") + "/x"
    assert _sweep(out, 2) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "mlflow.db" in line]
    assert len(lines) == 1 and f"{out} cannot hold mlflow.db" in lines[0], err
    local = Location.of(out).local_dir
    assert local.name == "x" and (local / "mlflow.db").exists()
    assert "mlflow.db" not in _objects(out)
    assert _seed_runs(f"sqlite:///{local / 'mlflow.db'}", out)
    for _ in range(2):  # a second sync finds them there
        assert main(["sync", out, "--tracking-uri", server.url]) == 0
    assert len(_seed_runs(server.url, out)) == 2
    assert "synced 0 runs" in capsys.readouterr().out


def test_a_regression_gate_keeps_its_sweeps_and_report_on_s3(s3, tmp_path, capsys):
    spec = tmp_path / "tiny.yaml"
    spec.write_text(
        "name: tiny\ndatasets: [synthetic]\noptimizers: [random]\nseeds: 3\n"
        "limits: {iterations: 6}\n"
    )
    out = s3.bucket("gate") + "/nightly"
    args = [
        "regress",
        str(spec),
        "--baseline",
        str(tmp_path / "b.json"),
        "--out",
        out,
        "--serial",
        "--no-progress",
    ]
    assert main([*args, "--update-baseline"]) == 0
    assert len(Store(f"{out}/tiny").finished()) == 3
    assert main(args) == 2  # a gate runs afresh: a kept --out is refused
    assert f"--out {out} is not empty" in capsys.readouterr().err
    assert main(["report", f"{out}/tiny", "--no-tracking"]) == 0
    assert f"{out}/tiny/report/report.html" in capsys.readouterr().out
    assert "tiny/report/report.html" in _objects(out)


def test_an_output_that_no_driver_can_lock_is_bad_input(s3, capsys):
    for out, why in (
        ("nosuchscheme://x/y", "cannot open nosuchscheme://x/y"),
        ("mock:///x", "a sweep cannot lock a mock store"),
    ):
        assert _sweep(out, 1, "--no-tracking") == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and why in err, err
    assert _sweep("s3://no-such-bucket/x", 1, "--no-tracking") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "s3://no-such-bucket/x/lock" in err, err


# -- the lease ---------------------------------------------------------------------------------
def _lease(uri: str, **kw):
    from optfarm.farm.store.locks import ObjectLease

    return ObjectLease(Location.of(uri), **{"term_s": 4.0, "renew_s": 0.5, "margin_s": 1.5, **kw})


def test_two_drivers_racing_for_the_lease_one_wins(s3):
    """Ten races of two drivers started together: each time exactly one holds the lease, the
    other is refused naming it (after one renewal period: the holder renewed it)."""
    base = s3.bucket("race")
    for i in range(10):
        leases = [_lease(f"{base}/{i}") for _ in range(2)]
        start, outcome = threading.Barrier(2), {}
        threads = [threading.Thread(target=_take, args=(lease, start, outcome)) for lease in leases]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(v == "held" for v in outcome.values()) == [False, True], outcome
        refused = next(v for v in outcome.values() if v != "held")
        assert f"{base}/{i} is in use by another sweep (pid {os.getpid()}" in refused
        for lease in leases:
            lease.release()
        assert "lock" not in _objects(f"{base}/{i}")


def _take(lease, start: threading.Barrier, outcome: dict) -> None:
    start.wait()
    try:
        lease.acquire()
        outcome[id(lease)] = "held"
    except FolderBusy as e:
        outcome[id(lease)] = str(e)


HOLDER = textwrap.dedent("""
    import sys, time
    from optfarm.farm.store.locks import ObjectLease
    from optfarm.farm.store.location import Location, StoreError, write_atomically
    location = Location.of(sys.argv[1])
    lease = ObjectLease(location, term_s=4.0, renew_s=0.5, margin_s=1.5)
    lease.acquire()
    print("held", flush=True)
    n = 0
    while True:  # as the store writes: the lease checked before each write
        try:
            lease.check()
        except StoreError as e:
            sys.exit(str(e))
        write_atomically(location.fs, location.root / f"w{n}", b"x")
        n += 1
        time.sleep(0.1)
""")


def _holder(uri: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "held", proc.stderr.read()
    return proc


def test_a_stalled_holder_loses_the_lease_and_stops_writing(s3):
    """A holder paused past the lease's term (SIGSTOP: a stalled machine) is taken over by a
    driver elsewhere once the server says the lease is that old; resumed, it starts no write
    and ends naming the lost lease."""
    out = s3.bucket("stall") + "/x"
    proc = _holder(out)
    time.sleep(1.0)
    proc.send_signal(signal.SIGSTOP)
    stopped = time.monotonic()
    other = _lease(out)
    other.acquire()  # waits: the holder is alive (this host, its pid exists) but silent
    waited = time.monotonic() - stopped
    try:
        # the term, less the last renewal period and the server's whole seconds
        assert 4.0 - 2.0 <= waited < 4.0 + 30.0, waited
        written = [o for o in _objects(out) if o.startswith("w")]
        proc.send_signal(signal.SIGCONT)
        assert proc.wait(timeout=30) == 1
        assert "lost the lease" in proc.stderr.read()
        # the write in flight when it stalled may land (the fencing limit that locks.py
        # states); none is started after the lease ran out
        after = [o for o in _objects(out) if o.startswith("w")]
        assert set(written) <= set(after) and len(after) <= len(written) + 1, (written, after)
        other.check()  # the new holder still holds it
    finally:
        proc.kill()
        other.release()


def test_a_killed_holders_lease_on_this_host_is_taken_over_at_once(s3, capsys):
    out = s3.bucket("killed") + "/x"
    proc = _holder(out)
    proc.kill()
    proc.wait()
    t0 = time.monotonic()
    with _lease(out, term_s=60.0):
        assert time.monotonic() - t0 < 5.0  # its pid is gone: no need to wait for the term
    assert f"took over {out}/lock from pid {proc.pid}" in capsys.readouterr().err
