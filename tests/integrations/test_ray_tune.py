"""OptfarmSearch drives a real Ray Tune experiment on a local Ray (127.0.0.1): Lynceus
(timeout policy TG: the job stops itself at the cap and reports timed_out) chooses the same
configurations as ``farm run`` with the same seed on the synthetic job, and reaches
CNO <= 1.1 at the same evaluation."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "ray.tune", reason="Ray Tune's dependencies come with optfarm[peers]", exc_type=ImportError
)

from optfarm.farm.run.metrics import cno  # noqa: E402

from .synthetic_job import (  # noqa: E402
    EVALUATIONS,
    OPTIMIZER,
    PARAMS,
    SEED,
    evaluations_to,
    farm_run,
    oracle,
    run_job,
)


def synthetic_trainable(config):
    from ray import tune

    run = config["optfarm"]
    obs = run_job(
        {k: v for k, v in config.items() if k != "optfarm"}, run["fidelity"], run["time_cap"]
    )
    tune.report(
        {"time": obs.time, "cost": obs.cost, "accuracy": obs.accuracy, "timed_out": obs.timed_out}
    )


def test_ray_tune_runs_lynceus_as_farm_run_does(ray_local, tmp_path):
    from ray import tune

    from optfarm.integrations.ray_tune import OptfarmSearch

    trace = farm_run()
    search = OptfarmSearch(
        OPTIMIZER, oracle().space, oracle().problem, seed=SEED, evaluations=EVALUATIONS, **PARAMS
    )
    cnos, feasible = [], []

    class Score(tune.Callback):
        def on_trial_complete(self, iteration, trials, trial, **info):
            rec = search.optimizer.recommend()
            cnos.append(cno(oracle(), rec.config_id) if rec is not None else float("nan"))
            feasible.append(rec is not None and oracle().is_feasible(rec.config_id))

    tuner = tune.Tuner(
        synthetic_trainable,
        tune_config=tune.TuneConfig(search_alg=search, num_samples=EVALUATIONS, reuse_actors=True),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="lynceus", callbacks=[Score()], verbose=0
        ),
    )
    results = tuner.fit()
    assert not results.errors
    ids = [s.config_id for s, _ in search.optimizer.history]
    assert ids == trace.column("config_id").to_pylist()
    timed_out = [o.timed_out for _, o in search.optimizer.history]
    assert timed_out == trace.column("timed_out").to_pylist() and any(timed_out)
    reached = evaluations_to(cnos, feasible)
    assert reached is not None
    assert reached == evaluations_to(
        trace.column("incumbent_cno").to_pylist(), trace.column("incumbent_feasible").to_pylist()
    )
    assert search.recommendation() == oracle().space.config(
        trace.column("incumbent_config_id").to_pylist()[-1]
    )
