"""A run killed for memory is that run's failure, never the sweep's (issue 41 item 3, issue 44
item 2): on a real local Ray whose memory monitor kills a worker once the machine uses 2 GB
more than when the test started (``memory_hog.ray_memory_monitor_env``), a run that grows
to 4.5 GB (``memory_hog.MemoryHog``) is killed as Ray kills one on a machine short of memory
(``ray.exceptions.OutOfMemoryError``), goes back to the queue once, runs again alone on its
node, and is stored; killed again, it is recorded as failed with the reason. Every other run
is stored exactly once, the sweep goes on, and each kill is one line on stderr (not Ray's
dump of the node's memory, nor its paragraph on a dead worker).

The monitor counts the whole machine's memory: another process's growth meanwhile may have a
light run killed too; it is then run again alone as well, which the assertions allow."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from optfarm.farm.cli import main
from optfarm.farm.run.loop import run_one
from optfarm.farm.store.store import Store, spec_from_dict
from optfarm.farm.sweep.runner import run_sweep
from optfarm.farm.sweep.spec import expand, parse_spec

from .conftest import same_trace
from .memory_hog import NAME, ray_memory_monitor_env, register

HOG_MB = 4500  # at most: it grows until killed
MARGIN = 2.0e9
# what Ray says of a kill for memory or of a dead worker: none of it reaches the terminal
RAY_DUMP = ("worker(s) were killed", "Lease ID", "Object store memory usage", "Traceback")


@pytest.fixture
def ray_with_hog():
    """A local two-CPU Ray whose workers know the hog and whose memory monitor kills at the
    machine's use now plus ``MARGIN`` (started for each test: the machine's use moves)."""
    import ray

    from optfarm.farm.runtime.ray_setup import start_local_ray

    if ray.is_initialized():
        ray.shutdown()
    register()
    monitor = ray_memory_monitor_env(MARGIN)
    saved = {k: os.environ.get(k) for k in monitor}
    os.environ.update(monitor)  # the raylet reads them as it starts
    root = str(Path(__file__).resolve().parents[2])  # the workers import tests.farm too
    try:
        start_local_ray(
            2,
            log_to_driver=False,
            runtime_env={
                "worker_process_setup_hook": "tests.farm.memory_hog.register",
                "env_vars": {
                    "PYTHONPATH": os.pathsep.join(
                        p for p in (root, os.environ.get("PYTHONPATH")) if p
                    )
                },
            },
        )
        yield ray
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _hog_spec(seeds: int, **params):
    return parse_spec(
        {
            "name": "memory-kills",
            "datasets": ["synthetic"],
            "optimizers": [{"name": NAME, "params": {"hog_mb": HOG_MB, **params}}],
            "seeds": seeds,
            "limits": {"iterations": 40},
            "runtime": {"max_in_flight": 2},
            "tracking": {"enabled": False},
        }
    )


def _check_terminal(err: str) -> list[str]:
    """The kill lines of stderr; Ray's own account of a kill or a death is nowhere."""
    assert not [line for line in err.splitlines() if any(d in line for d in RAY_DUMP)], err
    return [line for line in err.splitlines() if "killed for memory" in line]


def test_a_run_killed_for_memory_runs_again_alone_and_the_sweep_exits_0(
    ray_with_hog, tmp_path, capfd
):
    """``farm sweep`` on Ray: the hog (seed 1, memory taken on its first attempt only) is
    killed by Ray's memory monitor, runs again and is stored with 2 attempts and the trace
    of the serial loop; the sweep exits 0 with each of its 4 runs stored once."""
    out, marker = tmp_path / "out", tmp_path / "hogged"
    code = main(
        [
            "sweep",
            "--datasets",
            "synthetic",
            "--optimizers",
            NAME,
            "--seeds",
            "4",
            "--iterations",
            "40",
            "--param",
            f"{NAME}.hog_mb={HOG_MB}",
            "--param",
            f"{NAME}.hog_seed=1",
            "--param",
            f"{NAME}.once={marker}",
            "--out",
            str(out),
            "--no-progress",
            "--no-tracking",
        ]
    )
    err = capfd.readouterr().err
    kills = _check_terminal(err)
    store = Store(out)
    records = list(store.records())
    assert code == 0, err
    assert len(records) == 4 and len({r["run_key"] for r in records}) == 4
    assert all(r["status"] == "done" for r in records)
    hog = next(r for r in records if r["spec"]["seed"] == 1)
    assert marker.exists() and hog["attempts"] == 2, (
        f"the hog ran {hog['attempts']} time(s): the machine's other processes freed more than "
        f"{HOG_MB / 1e3 - MARGIN / 1e9:.1f} GB meanwhile, or Ray's monitor missed it",
        err,
    )
    assert any(
        "run memory-hog on synthetic seed 1 was killed for memory (Ray's memory monitor" in line
        and line.endswith("it runs again, alone")
        for line in kills
    ), err
    assert len(kills) == sum(r["attempts"] - 1 for r in records), err  # one line per kill
    assert same_trace(store.trace(hog["run_key"]), run_one(spec_from_dict(hog["spec"])).trace)


def test_a_run_killed_for_memory_twice_is_recorded_failed_and_the_rest_stored(
    ray_with_hog, tmp_path, capfd
):
    """The hog (seed 2) takes its memory on every attempt: killed, it runs again alone (on a
    node with nothing else in flight, and nothing else is sent there until it ends), is
    killed again, and is recorded as failed with the reason; the 4 other runs are stored once,
    done."""
    spec = _hog_spec(5, hog_seed=2)
    out = tmp_path / "out"
    sent: list[tuple[str, set[str]]] = []  # (run key, the keys stored) as each run is sent

    def log(run, where):
        sent.append((run.run_key, {r["run_key"] for r in Store(out).records()}))

    report = run_sweep(spec, out, progress=False, on_submit=log)
    err = capfd.readouterr().err
    kills = _check_terminal(err)
    records = {r["run_key"]: r for r in Store(out).records()}
    hog_key = next(r.run_key for r in expand(spec) if r.seed == 2)
    hog = records[hog_key]
    assert report.failed == 1 and report.done == 4 and len(records) == 5, err
    assert hog["status"] == "failed" and hog["attempts"] == 2
    assert hog["error"].startswith("killed for memory twice, the second time alone on its node")
    assert all(r["status"] == "done" for k, r in records.items() if k != hog_key)
    assert any("seed 2 was killed for memory again, alone" in line for line in kills), err
    # alone: every run sent before the hog's second attempt was stored by then or sent again
    # (killed), and nothing was sent after it until it had ended
    second = [i for i, (key, _) in enumerate(sent) if key == hog_key][1]
    before = {key for key, _ in sent[:second]} - {hog_key}
    again = {key for key, _ in sent[second + 1 :]}
    assert before <= sent[second][1] | again, (sent, err)
    assert all(hog_key in stored for _, stored in sent[second + 1 :]), sent
