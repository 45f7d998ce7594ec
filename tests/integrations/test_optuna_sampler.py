"""OptfarmSampler drives a real Optuna study: Lynceus (timeout policy TG: time caps as pruned
trials) chooses the same configurations as ``farm run`` with the same seed on the synthetic
job, and reaches CNO <= 1.1 at the same evaluation."""

from __future__ import annotations

import pytest

optuna = pytest.importorskip("optuna", reason="the Optuna adapter needs optfarm[peers]")

from optfarm.farm.run.metrics import cno  # noqa: E402
from optfarm.integrations.optuna_sampler import OptfarmSampler  # noqa: E402

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


def _study(sampler, n_trials):
    space = oracle().space

    def objective(trial):
        config = {
            d.name: trial.suggest_categorical(d.name, list(d.values)) for d in space.dimensions
        }
        s = sampler.suggestion(trial)
        obs = run_job(config, s.fidelity, s.time_cap)
        trial.set_user_attr("time", obs.time)
        trial.set_user_attr("accuracy", obs.accuracy)
        if obs.timed_out:
            trial.set_user_attr("cost", obs.cost)
            raise optuna.TrialPruned()
        return obs.cost

    study = optuna.create_study(sampler=sampler)
    cnos, feasible = [], []

    def score(study, trial):
        rec = sampler.optimizer.recommend()
        cnos.append(cno(oracle(), rec.config_id) if rec is not None else float("nan"))
        feasible.append(rec is not None and oracle().is_feasible(rec.config_id))

    study.optimize(objective, n_trials=n_trials, callbacks=[score])
    return study, cnos, feasible


def test_optuna_study_runs_lynceus_as_farm_run_does():
    trace = farm_run()
    sampler = OptfarmSampler(
        OPTIMIZER, oracle().space, oracle().problem, seed=SEED, evaluations=EVALUATIONS, **PARAMS
    )
    study, cnos, feasible = _study(sampler, EVALUATIONS)
    ids = [sampler.suggestion(t).config_id for t in study.trials]
    assert ids == trace.column("config_id").to_pylist()
    pruned = [t.state == optuna.trial.TrialState.PRUNED for t in study.trials]
    assert pruned == trace.column("timed_out").to_pylist() and any(pruned)
    reached = evaluations_to(cnos, feasible)
    assert reached is not None
    assert reached == evaluations_to(
        trace.column("incumbent_cno").to_pylist(), trace.column("incumbent_feasible").to_pylist()
    )
    assert sampler.recommendation() == oracle().space.config(
        trace.column("incumbent_config_id").to_pylist()[-1]
    )


def test_a_parameter_outside_the_space_is_named():
    sampler = OptfarmSampler("random", oracle().space, oracle().problem, seed=0)
    study = optuna.create_study(sampler=sampler)
    with pytest.raises(ValueError, match="parameter 'gpu' is not a dimension"):
        study.optimize(lambda t: len(t.suggest_categorical("gpu", ["a100", "h100"])), n_trials=1)


def test_the_sampler_stops_the_study_when_the_optimizer_stops():
    # eic-usd stops on its own (1% marginal-reward rule); the study then ends at once: every
    # trial ran a job the optimizer chose and was told (none runs after the stop)
    sampler = OptfarmSampler("eic-usd", oracle().space, oracle().problem, seed=1)
    study, _, _ = _study(sampler, 200)
    assert len(study.trials) < 200
    assert len(sampler.optimizer.history) == len(study.trials)
    assert not any(sampler.recommended(t) for t in study.trials)
    # asked outside optimize(), a trial after the stop gets the recommendation
    trial = study.ask()
    assert sampler.recommended(trial)
    assert sampler.suggestion(trial).config_id == sampler.optimizer.recommend().config_id


def test_best_trial_is_the_best_feasible_one_as_with_optunas_own_samplers():
    """Optuna's samplers store the constraint values on each trial (``Trial.set_constraint``)
    so that ``best_trial`` / ``best_params`` skip infeasible ones: so does OptfarmSampler.
    Random search on the synthetic job meets cheap infeasible configurations (accuracy or
    time), which ``best_trial`` would otherwise return."""
    o = oracle()
    traps = 0
    for seed in range(5):
        sampler = OptfarmSampler("random", o.space, o.problem, seed=seed)
        study, _, _ = _study(sampler, 30)
        done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        assert all(len(t.constraints) == len(o.problem.constraints) for t in done)
        feasible = [t for t in done if all(v <= 0 for v in t.constraints.values())]
        if not feasible:  # as Optuna says of a constrained study with no feasible trial
            with pytest.raises(ValueError):
                _ = study.best_trial
            continue
        traps += min(t.value for t in done) < min(t.value for t in feasible)
        assert study.best_trial.value == min(t.value for t in feasible)
        assert o.is_feasible(o.space.index(study.best_params))  # mean job: observed = true
    assert traps  # in some study the cheapest trial broke a constraint: best_trial skipped it
