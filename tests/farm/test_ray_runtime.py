"""The farm on a real local Ray (started once for the module): traces identical to the
serial loop, the oracle table shared zero-copy, a killed actor retried, an interrupted sweep
resumed, the Ray executor, and Ray listening on loopback only."""

from __future__ import annotations

import itertools
import operator
import os
import signal
import time

import pytest

from optfarm.farm.run.checkpoint import Checkpoint
from optfarm.farm.run.loop import run_one
from optfarm.farm.run.spec import RunSpec
from optfarm.farm.store.store import Store
from optfarm.farm.sweep.runner import run_sweep
from optfarm.farm.sweep.spec import expand, parse_spec
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.registry import load

from .conftest import LOOPBACK, descendants, listeners_of, same_trace


def _spec(seeds=3, iterations=40, **extra):
    return parse_spec(
        {
            "name": "ray-test",
            "datasets": [
                "synthetic",
                {"name": "synthetic", "problem": {"constraints": ["time<=2000"]}},
            ],
            "optimizers": [{"name": "random", "params": {"n_init": [1, 3]}}],
            "seeds": seeds,
            "limits": {"iterations": iterations},
            "runtime": {"max_in_flight": 2},
            "tracking": {"enabled": False},
            **extra,
        }
    )


def test_sweep_traces_equal_the_serial_loop(ray_local, tmp_path):
    spec = _spec()
    report = run_sweep(spec, tmp_path / "out", progress=False)
    assert report.complete and report.done == 12
    store = Store(tmp_path / "out")
    for run in expand(spec):
        serial = run_one(run).trace
        stored = store.trace(run.run_key)
        assert same_trace(stored, serial), run
    pids = {r["where"]["pid"] for r in store.records()}
    assert len(pids) == 2 and os.getpid() not in pids  # two actors, not this process


class _Stop(Exception):
    pass


def test_a_run_on_ray_resumes_from_its_checkpoint(ray_local, tmp_path, capsys):
    """An actor on the driver's node resumes a run from the sweep's checkpoint of it
    (``optfarm.farm.run.checkpoint``), counts the CPU spent before, and the store removes the
    checkpoint once the run is stored; the driver says so (the actor's own line is Ray's)."""
    spec = _spec(seeds=1, iterations=12, optimizers=["lynceus"], datasets=["synthetic"])
    (run,) = expand(spec)
    path = tmp_path / "out" / "checkpoints" / f"{run.run_key}.pkl"

    def stop(row):
        if row["step"] == 5:
            raise _Stop

    with pytest.raises(_Stop):  # the run stopped mid-way in another process
        run_one(run, checkpoint=Checkpoint(path, run.run_key, every_s=0), on_step=stop)
    oracle = Oracle(load("synthetic"), load("synthetic").meta.problem)
    state = Checkpoint(path, run.run_key).load(oracle, None)
    state.cpu_s = 1e4  # marks the CPU of the stopped part: counted only if the run resumed
    Checkpoint(path, run.run_key).save(state, oracle, None)
    capsys.readouterr()

    report = run_sweep(spec, tmp_path / "out", progress=False)
    assert report.complete and report.done == 1
    said = f"run lynceus on synthetic seed 0 resumes from its checkpoint after {len(state.rows)} "
    assert said + "evaluations (10000 CPU-s)" in capsys.readouterr().err
    store = Store(tmp_path / "out")
    assert store.record(run.run_key)["cpu_s"] >= 1e4
    assert same_trace(store.trace(run.run_key), run_one(run).trace)
    assert not path.exists()


def test_oracle_table_is_shared_zero_copy_one_copy(ray_local):
    from optfarm.farm.runtime.ray_runtime import RunActor, share_dataset, shared_memory_fraction

    ray = ray_local
    ref = share_dataset("synthetic")
    actors = [RunActor.remote({"synthetic": ref}) for _ in range(2)]
    spec = RunSpec(dataset="synthetic", optimizer="random", seed=1, iterations=5)
    ray.get([a.run.remote(spec) for a in actors])
    reports = ray.get([a.shared_memory_report.remote("synthetic") for a in actors])
    for rep in reports:
        assert rep["fraction"] > 0.99  # the table's buffers are the object store's memory
    # both actors read the very same bytes of the same shared-memory file: one copy
    assert reports[0]["locations"] == reports[1]["locations"]
    here = ray.get(ref)
    assert shared_memory_fraction(here) > 0.99
    for a in actors:
        ray.kill(a)


def test_killed_actor_is_retried_and_every_run_done_once(ray_local, tmp_path, capfd):
    spec = _spec(seeds=2, iterations=None)  # whole runs (360 evaluations): long enough to kill
    killed = []

    def kill_first(run, where):
        if not killed:
            killed.append(run.run_key)
            os.kill(where["pid"], signal.SIGKILL)

    report = run_sweep(spec, tmp_path / "out", progress=False, on_submit=kill_first)
    time.sleep(2)  # Ray's driver prints what its cluster publishes from a thread of its own
    out, err = capfd.readouterr()
    # the death is one line (issue 44), not Ray's paragraph on it
    assert [line for line in err.splitlines() if "died (node " in line], err
    assert not [line for line in (out + err).splitlines() if "Worker ID" in line], out + err
    store = Store(tmp_path / "out")
    records = list(store.records())
    assert report.complete and report.done == len(records) == 8
    assert len({r["run_key"] for r in records}) == 8
    retried = store.record(killed[0])
    assert retried["attempts"] == 2 and retried["where"]["pid"] != killed[0]
    run = next(r for r in expand(spec) if r.run_key == killed[0])
    assert same_trace(store.trace(run.run_key), run_one(run).trace)


def test_interrupted_sweep_finishes_only_the_missing_runs(ray_local, tmp_path):
    spec = _spec(seeds=2, iterations=60)

    def interrupt(run, where):  # the submission that follows the third stored result
        if len(list(Store(tmp_path / "out").records())) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path / "out", progress=False, on_submit=interrupt)
    store = Store(tmp_path / "out")
    before = {r["run_key"]: r["finished_at"] for r in store.records()}
    assert len(before) == 3
    assert not list((tmp_path / "out").rglob("*.tmp"))

    report = run_sweep(spec, tmp_path / "out", progress=False)
    assert report.skipped == len(before) and report.done == 8 - len(before)
    records = list(store.records())
    assert len(records) == 8 and all(r["attempts"] == 1 for r in records)
    assert all(
        before[r["run_key"]] == r["finished_at"] for r in records if r["run_key"] in before
    )  # finished runs were not run again
    assert store.write_index().num_rows == 8


def test_ray_executor_is_the_serial_map_in_chunks(ray_local):
    from optfarm.farm.runtime.ray_runtime import RayExecutor
    from optfarm.optimizers.executor import SerialExecutor

    items = list(range(23))
    expected = SerialExecutor().map(operator.mul, items, 3)
    for chunk in (0, 1, 5, 100):
        assert RayExecutor(chunk).map(operator.mul, items, 3) == expected
    assert RayExecutor().map(operator.mul, [], 3) == []


def test_lynceus_paths_over_ray_tasks_match_serial(ray_local):
    from optfarm.farm.runtime.ray_runtime import RayExecutor
    from optfarm.optimizers.registry import available

    if "lynceus" not in available():
        pytest.skip("lynceus is not registered yet")
    spec = RunSpec(
        dataset="synthetic",
        optimizer="lynceus",
        seed=0,
        iterations=8,
        params={"la": 1, "n_trees": 5},
    )
    serial = run_one(spec).trace
    parallel = run_one(spec, executor=RayExecutor(chunk_size=2)).trace
    assert same_trace(parallel, serial)


def test_sweep_with_inner_ray_tasks_matches_serial(ray_local, tmp_path):
    from optfarm.optimizers.registry import available

    if "lynceus" not in available():
        pytest.skip("lynceus is not registered yet")
    spec = parse_spec(
        {
            "name": "inner",
            "datasets": ["synthetic"],
            "optimizers": [{"name": "lynceus", "params": {"la": 1, "n_trees": 5}}],
            "seeds": 2,
            "limits": {"iterations": 7},
            "runtime": {"executor": "ray", "chunk_size": 2},
            "tracking": {"enabled": False},
        }
    )
    assert run_sweep(spec, tmp_path / "out", progress=False).complete
    store = Store(tmp_path / "out")
    for run in expand(spec):
        assert same_trace(store.trace(run.run_key), run_one(run).trace)


def test_ray_listens_on_loopback_only(ray_local):
    sockets = listeners_of(descendants(os.getpid()) | {os.getpid()})
    assert sockets, "expected Ray's servers among this process's children"
    for address, pid in sockets:
        host = address.rsplit(":", 1)[0].strip("[]")
        assert host in LOOPBACK, (address, pid)


def _requested() -> int:
    """CPUs in the autoscaler request recorded by the head (the v1 autoscaler's key)."""
    import json

    from optfarm.farm.runtime.ray_private import autoscaler_v1_channel, internal_kv_get

    return len(json.loads(internal_kv_get(autoscaler_v1_channel()) or "[]"))


def test_autoscaler_request_follows_the_sweep_and_is_released(ray_local):
    """What a simulated cluster can show of autoscaling: the CPUs the sweep asks the head for
    (``request_resources``' record in the GCS), bounded by max_in_flight, lowered as the sweep
    drains, withdrawn at its end. Nodes really launched and ended by an autoscaler need a
    cloud run (docs/guide/cluster.md)."""
    from optfarm.farm.runtime.ray_runtime import run_on_ray

    runs = expand(_spec(seeds=3))[:10]
    seen = [_requested() for _ in run_on_ray(runs, max_in_flight=4, autoscale=True)]
    assert seen[0] == 4 and set(seen) <= {4, 3, 2, 1}, seen  # runs left, at most max_in_flight
    assert all(a >= b for a, b in zip(seen, seen[1:])), seen
    assert _requested() == 0


def test_autoscaler_request_of_a_big_sweep_is_what_the_cluster_could_start_next(ray_local):
    """Without --max-in-flight, 250 runs on 2 CPUs ask for the cluster's CPUs plus 200 (Ray
    Tune's bound on pending trials), not for every run left: the request for all 20,000 runs
    of a sweep made Ray's v1 autoscaler monitor bin-pack 20,000 entries at every update. It
    comes down as the sweep drains below that, and is withdrawn at the end."""
    from optfarm.farm.runtime.capacity import AHEAD, wanted_cpus
    from optfarm.farm.runtime.ray_runtime import run_on_ray

    runs = expand(_spec(seeds=63, iterations=2))[:250]
    seen = [_requested() for _ in run_on_ray(runs, max_in_flight=0, autoscale=True)]
    assert seen[0] == 2 + AHEAD < len(runs) and max(seen) == 2 + AHEAD, seen[:5]
    assert seen[-1] < seen[0] and all(a >= b for a, b in itertools.pairwise(seen))
    assert _requested() == 0
    assert wanted_cpus(0, 1000, 20_000) == 2100  # a big cluster: 1.1 x its CPUs beyond them
    assert wanted_cpus(4, 1000, 20_000) == 4 and wanted_cpus(0, 2, 3) == 3


def test_autoscaler_request_is_written_at_most_once_a_second(ray_local):
    """A 20,000-run sweep without --max-in-flight: the request moves with every run stored,
    the head is asked when it moved by a tenth, once a second at most (it was once per run,
    20,000 entries each time: 9x slower), and the withdrawal goes at once."""
    from optfarm.farm.runtime.capacity import Demand, HeadWatch

    demand = Demand(HeadWatch(ray_local.get_runtime_context().gcs_address))
    t0 = time.monotonic()
    for left in range(20_000, 0, -1):
        demand.request(left)
    if time.monotonic() - t0 < 1.0:
        assert demand.sent == 1 and _requested() == 20_000
    time.sleep(1.0)
    demand.request(19_000)  # less than a tenth less: not asked
    assert demand.requested == 20_000
    demand.request(17_999)
    assert demand.requested == 17_999 and _requested() == 17_999
    demand.request(0)
    assert _requested() == 0 and demand.requested == 0


def test_runs_no_node_can_take_end_the_sweep_in_bounded_time(ray_local):
    from optfarm.farm.runtime.capacity import ClusterLost
    from optfarm.farm.runtime.ray_runtime import run_on_ray

    ray = ray_local

    @ray.remote(num_cpus=1)
    def hold() -> None:
        import time

        time.sleep(600)

    holders = [hold.remote() for _ in range(2)]  # every CPU of the cluster taken
    try:
        t0 = time.monotonic()
        with pytest.raises(ClusterLost, match="no node could take one"):
            list(run_on_ray(expand(_spec(seeds=1))[:2], placement_timeout=3))
        assert time.monotonic() - t0 < 30
    finally:
        for ref in holders:
            ray.cancel(ref, force=True)


def test_head_watch_gives_up_once_the_head_stops_answering():
    import socket

    from optfarm.farm.runtime.capacity import ClusterLost, HeadWatch

    server = socket.create_server(("127.0.0.1", 0))
    watch = HeadWatch(f"127.0.0.1:{server.getsockname()[1]}", timeout=0.5)
    assert watch.check()
    server.close()
    assert not watch.check()  # a warning, not yet the end
    time.sleep(0.6)
    with pytest.raises(ClusterLost, match="no answer"):
        watch.check()


def test_head_watch_warns_once_of_a_silence_and_not_of_one_missed_call(capsys, monkeypatch):
    """A loaded machine's GCS misses a call and answers the next: no warning. A head silent
    for HEAD_WARN_S is warned of once, then given up at the timeout."""
    import socket

    import optfarm.farm.runtime.capacity as capacity

    now = [100.0]
    monkeypatch.setattr(capacity.time, "monotonic", lambda: now[0])
    server = socket.create_server(("127.0.0.1", 0))
    watch = capacity.HeadWatch(f"127.0.0.1:{server.getsockname()[1]}", timeout=10.0)
    for _ in range(3):  # one missed GCS call, then an answer
        watch.missed("RpcError from its GCS")
        now[0] += 1.0
        assert watch.check()
    assert capsys.readouterr().err == ""
    server.close()
    for _ in range(9):  # silent from t = 0 to t = 8 s
        assert not watch.check()
        now[0] += 1.0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"farm: warning: the Ray head {watch.address} has not answered for "
        f"{capacity.HEAD_WARN_S:.0f} s; giving up in {10 - capacity.HEAD_WARN_S:.0f} s"
    ]
    now[0] += 1.0
    with pytest.raises(capacity.ClusterLost, match="no answer for 10 s"):
        watch.check()
