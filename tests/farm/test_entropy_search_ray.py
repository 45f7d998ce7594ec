"""TrimTuner's candidates as Ray tasks: its suggestion through the farm's Ray executor on a
real local Ray runtime is the serial one, acquisition values bit for bit."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from optfarm.farm.run.loop import Stepper
from optfarm.optimizers.registry import make_optimizer
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.registry import import_datasets, load


@pytest.fixture
def driven(shared_datasets):
    """TrimTuner (GP, fast settings) after three steps on trimtuner-rnn."""
    import_datasets("trimtuner", shared_datasets / "trimtuner")
    ds = load("trimtuner-rnn")
    oracle = Oracle(ds, ds.meta.problem)
    opt = make_optimizer(
        "trimtuner",
        oracle.space,
        oracle.problem,
        0,
        None,
        model="gp",
        hyper="ml",
        n_mc=200,
        n_representers=20,
    )
    stepper = Stepper(opt, oracle, 0)
    for _ in range(3):
        stepper.step()
    return opt


@pytest.mark.parametrize("chunk_size", [0, 1])
def test_trimtuner_suggest_over_ray_tasks_is_the_serial_choice(ray_local, driven, chunk_size):
    from optfarm.farm.runtime.ray_runtime import RayExecutor

    serial = copy.deepcopy(driven)
    on_ray = copy.deepcopy(driven)
    on_ray.executor = RayExecutor(chunk_size)
    expected = serial.suggest()
    assert on_ray.suggest() == expected and expected.phase == "search"
    # the values the argmax was taken over, candidate by candidate
    cids, fids = driven._untested()
    ctx, scores = driven._context(cids, fids)
    idx = np.sort(np.argsort(-scores, kind="stable")[:40])
    np.testing.assert_array_equal(on_ray._evaluate(ctx, idx), serial._evaluate(ctx, idx))
