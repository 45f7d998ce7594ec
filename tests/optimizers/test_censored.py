"""A run stopped at its time cap is censored (issue 41): the GP family's models read it as a
run that would have taken longer than the cap (``models/targets.py``, ``PAR_K``), not as one
that took exactly the cap, so their time constraint stays informative where most runs stop."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from optfarm.optimizers import make_optimizer
from optfarm.optimizers.acquisition.analytic import constraints_log_pf
from optfarm.optimizers.base import stopped_at_cap
from optfarm.optimizers.models.gp import GaussianProcess
from optfarm.optimizers.models.targets import PAR_K, Targets
from optfarm.oracle import Constraint, Dimension, Objective, Observation, Problem, SearchSpace
from optfarm.oracle.contract import Suggestion

T = 600.0  # the deadline
PROBLEM = Problem(Objective("cost", "min"), (Constraint("time", "<=", T),))


def _space():
    return SearchSpace.product(
        [
            Dimension("vm", "categorical", ("small", "large")),
            Dimension("workers", "ordinal", (1, 2, 4, 8, 16, 32), log=True),
        ],
        price_per_s=lambda c: c["workers"] * (0.1 if c["vm"] == "small" else 0.2) / 3600,
    )


def _job(space, config_id: int, cap: float) -> Observation:
    """The job: 4,800 s on one small worker, linear speed-up, twice as fast on large ones;
    stopped at ``cap`` as the harness stops it."""
    cfg = space.config(config_id)
    t = 4800.0 / cfg["workers"] / (2.0 if cfg["vm"] == "large" else 1.0)
    price = space.price_per_s[config_id]
    return Observation(min(t, cap), min(t, cap) * price, timed_out=t > cap)


def test_a_run_stopped_at_its_cap_is_censored_and_a_finished_one_is_not():
    s = Suggestion(3, 1.0, time_cap=T)
    assert stopped_at_cap(s, Observation(T, 1.0, timed_out=True))
    assert not stopped_at_cap(s, Observation(450.0, 1.0))
    # a measurement's own time limit (no cap given) is the dataset's, not a stop by the cap
    assert not stopped_at_cap(Suggestion(3, 1.0), Observation(T, 1.0, timed_out=True))


def test_targets_feed_a_censored_run_time_and_cost_at_par_k():
    X = np.array([[0.0], [0.5], [1.0]])
    observed = {"cost": np.array([1.0, 2.0, 3.0]), "time": np.array([T, 300.0, T])}
    censored = np.array([True, False, True])
    fed = Targets(PROBLEM, lambda basis: GaussianProcess(hyper="ml")).fit(X, observed, censored)
    for metric in ("time", "cost"):
        want = np.log(np.where(censored, PAR_K, 1.0) * observed[metric])
        y = fed.models[metric]._y  # what the GP was fitted on, on the model scale
        np.testing.assert_allclose(y, want)


def _eic_told_stops(censor: bool):
    """EIc told its 4 initial runs and 4 more as a board runs them (deadline T); with
    ``censor`` False, the stops are told without their cap (as a run that took T)."""
    space = _space()
    opt = make_optimizer("eic", space, PROBLEM, seed=0, hyper="ml")
    stopped = []
    for _ in range(8):
        s = replace(opt.suggest(), time_cap=T)
        obs = _job(space, s.config_id, T)
        opt.observe(s if censor else replace(s, time_cap=None), obs)
        if obs.timed_out:
            stopped.append(s.config_id)
    return opt, space, stopped


@pytest.mark.parametrize("censor", [True, False])
def test_eic_reads_a_deadline_stop_as_infeasible(censor):
    opt, space, stopped = _eic_told_stops(censor)
    assert len(stopped) >= 2  # the case the rule is for occurred
    targets = opt._targets
    pf = np.exp(constraints_log_pf(targets.constraints, targets.predict(space.features[stopped])))
    if censor:
        assert np.all(pf < 0.2), pf  # known to take longer than T: read as infeasible
    else:
        assert np.all(np.abs(pf - 0.5) < 0.2), pf  # as a run that took T: a coin flip
    assert not math.isnan(pf.sum())


def test_trimtuner_through_the_harness_deadline_feeds_its_stops_at_par_k():
    # the entropy-search family reads the harness's deadline stops the same way: on the
    # synthetic job (time <= its median at s = 1), runs stopped at T reach the time and cost
    # models at PAR_K x what they spent; the sub-sampled snapshots are not censored
    from optfarm.farm.run.loop import Stepper
    from optfarm.oracle.oracle import Oracle
    from optfarm.oracle.synthetic import make_synthetic

    oracle = Oracle(make_synthetic())
    opt = make_optimizer("trimtuner", oracle.space, oracle.problem, 0, hyper="ml")
    stepper = Stepper(opt, oracle, 0, deadline=True)
    for _ in range(12):
        if stepper.step() is None:
            break
    stops = [stopped_at_cap(s, o) for s, o in opt.history]
    assert any(stops)  # the case the rule is for occurred
    runs = opt._runs  # (config, s, time, cost, accuracy, censored) per row the models see
    assert sum(r[5] for r in runs) == sum(stops)
    fed = {m: opt._targets.models[m]._y for m in ("time", "cost")}
    for i, (_, _, t, c, _, censored) in enumerate(runs):
        k = PAR_K if censored else 1.0
        assert fed["time"][i] == pytest.approx(math.log(k * t))
        assert fed["cost"][i] == pytest.approx(math.log(k * c))
