"""One thread per run on the farm (``optfarm.optimizers.blas.OneThread`` in
``optfarm.farm.run.loop.run_one``): inside a run, every numeric library threadpoolctl sees, and
torch's pool once an optimizer has imported it mid-run, runs one thread, in this process and in a
Ray actor; after the run the process has its own limits back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from optfarm.farm.run.loop import run_one
from optfarm.farm.run.spec import RunSpec
from tests.farm.thread_probe import NAME, register, threads

SPEC = RunSpec(dataset="synthetic", optimizer=NAME, seed=0, iterations=4)


def _phases(result) -> list[str]:
    return result.trace.column("phase").to_pylist()


@pytest.fixture
def ray_with_probe():
    """A local Ray whose workers know the probe (a set-up hook registers it) and start their
    libraries on two threads (so that one inside a run is the run's doing)."""
    import ray

    from optfarm.farm.runtime.ray_setup import start_local_ray

    if ray.is_initialized():
        ray.shutdown()
    root = str(Path(__file__).resolve().parents[2])  # the workers import tests.farm too
    start_local_ray(
        1,
        log_to_driver=False,
        runtime_env={
            "worker_process_setup_hook": "tests.farm.thread_probe.register",
            "env_vars": {
                "OMP_NUM_THREADS": "2",
                "OPENBLAS_NUM_THREADS": "2",
                "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
            },
        },
    )
    yield ray
    ray.shutdown()


def test_a_serial_run_runs_one_thread_and_gives_the_limits_back():
    register()
    with threadpool_limits(limits=2):
        before = {lib["filepath"]: lib["num_threads"] for lib in threadpool_info()}
        assert max(before.values()) == 2  # so that one thread inside is the run's doing
        assert _phases(run_one(SPEC)) == ["threads=1"] * 4
        after = {lib["filepath"]: lib["num_threads"] for lib in threadpool_info()}
        assert {k: after[k] for k in before} == before


def test_a_run_in_a_ray_actor_runs_one_thread(ray_with_probe):
    from optfarm.farm.runtime.ray_runtime import RunActor, share_dataset

    ray = ray_with_probe
    assert ray.get(ray.remote(threads).remote()) == 2
    actor = RunActor.remote({"synthetic": share_dataset("synthetic")})
    result, _, _ = ray.get(actor.run.remote(SPEC))
    assert _phases(result) == ["threads=1"] * 4
    ray.kill(actor)
