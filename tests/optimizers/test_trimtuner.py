"""TrimTuner, Fabulinus, FABOLAS and the EIc baselines on the TrimTuner data: bootstrap with
snapshots, farm loop metrics, executor independence, fantasies that never leak."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from scipy import stats

from optfarm.farm.run.loop import Stepper, run_one
from optfarm.farm.run.spec import RunSpec
from optfarm.optimizers.acquisition.analytic import constraints_log_pf
from optfarm.optimizers.acquisition.entropy import joint_samples
from optfarm.optimizers.base import Recommendation
from optfarm.optimizers.registry import make_optimizer
from optfarm.optimizers.trimtuner import acquisition_chunk
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.registry import import_datasets, load

FAST = {"hyper": "ml", "n_mc": 200, "n_representers": 20}


@pytest.fixture
def rnn(shared_datasets):
    import_datasets("trimtuner", shared_datasets / "trimtuner")
    ds = load("trimtuner-rnn")
    return Oracle(ds, ds.meta.problem)


class PicklingReversedExecutor:
    """Ships the context through pickle and runs the items in reverse order (like a pool
    whose workers finish out of order)."""

    def map(self, fn, items, context=None):
        ctx = pickle.loads(pickle.dumps(context))
        out = {i: fn(ctx, item) for i, item in reversed(list(enumerate(items)))}
        return [out[i] for i in range(len(items))]


def _drive(oracle, name, steps, executor=None, seed=0, **params):
    opt = make_optimizer(name, oracle.space, oracle.problem, seed, executor, **params)
    stepper = Stepper(opt, oracle, seed)
    trace = []
    for _ in range(steps):
        s = stepper.step().suggestion
        trace.append((s.config_id, s.fidelity, s.info.get("acquisition"), opt.recommend()))
    return opt, trace


def test_bootstrap_is_one_half_size_run_snapshotting_the_smaller_sizes(rnn):
    opt = make_optimizer("trimtuner", rnn.space, rnn.problem, 0, model="dt")
    s = opt.suggest()
    assert s.phase == "init" and math.isclose(s.fidelity, 0.5)
    assert [round(1 / f) for f in s.snapshots] == [60, 10, 4]


def test_farm_run_reports_accuracy_c_and_cost_to_reach(rnn, tmp_path):
    spec = RunSpec(
        "trimtuner-rnn",
        "trimtuner",
        seed=1,
        params={"model": "dt", "filter": "cea", "beta": 0.1},
        iterations=8,
    )
    result = run_one(spec)
    summary, trace = result.summary, result.trace.to_pylist()
    assert summary["metric"] == "accuracy_c"
    assert "acc_c>=0.9opt" in summary["exploration_cost_to_reach"]
    assert summary["recommendation"]["accuracy_c"] > 0
    first = trace[0]
    assert first["phase"] == "init" and math.isclose(first["fidelity"], 0.5)
    # the snapshots are free: the first step is charged one s = 1/2 run only
    assert math.isclose(first["cum_exploration_cost"], first["cost"])
    assert all(r["phase"] == "search" for r in trace[1:])
    assert math.isclose(summary["exploration_cost"], sum(r["cost"] for r in trace))


@pytest.mark.parametrize("model", ["dt", "gp"])
def test_same_suggestions_whatever_the_executor(rnn, model):
    _, serial = _drive(rnn, "trimtuner", 4, model=model, **FAST)
    _, other = _drive(rnn, "trimtuner", 4, PicklingReversedExecutor(), model=model, **FAST)
    assert serial == other


class WorkersExecutor(PicklingReversedExecutor):
    """As many workers as asked: TrimTuner hands it that many chunks of candidates."""

    def __init__(self, workers):
        self.workers, self.sizes = workers, []

    def map(self, fn, items, context=None):
        self.sizes.append([len(item) for item in items])
        return super().map(fn, items, context)


def test_same_suggestions_whatever_the_chunks(rnn):
    """One chunk per worker (serially one: the rows' posterior once a step) or many, the
    same choices and acquisition values."""
    _, one = _drive(rnn, "trimtuner", 4, model="gp", **FAST)
    five = WorkersExecutor(5)
    _, many = _drive(rnn, "trimtuner", 4, five, model="gp", **FAST)
    assert one == many
    assert five.sizes and all(len(sizes) == 5 for sizes in five.sizes)


def test_fantasies_do_not_leak_between_candidates(rnn):
    opt, _ = _drive(rnn, "trimtuner", 3, model="gp", **FAST)
    cids, fids = opt._untested()
    ctx, _ = opt._context(cids, fids)
    together = acquisition_chunk(ctx, np.array([5, 40, 77]))
    alone = np.vstack([acquisition_chunk(ctx, np.array([c])) for c in (77, 40, 5)])[::-1]
    np.testing.assert_array_equal(together, alone)
    assert np.all(together[:, 2] >= 0) and np.all(together[:, 2] <= 1)
    # the models in the context are untouched by the fantasies
    assert ctx.targets.models["cost"]._n == len(opt._runs)


def _tested_at_full_size(opt):
    ids = np.unique([cid for cid, *_ in opt._runs])
    pred = opt._targets.predict(opt._inputs(ids, np.ones(len(ids))))
    accuracy = opt._targets.quality(pred[opt._targets.objective][0])
    return ids, accuracy, np.exp(constraints_log_pf(opt._targets.constraints, pred))


def test_incumbent_rules_cea_by_default_and_the_papers_feasible_rule(rnn):
    opt, _ = _drive(rnn, "trimtuner", 6, model="dt")
    ids, accuracy, pf = _tested_at_full_size(opt)
    # the authors' code: the tested configuration with the best accuracy x P(feasible)
    assert opt.recommend() == Recommendation(ids[np.argmax(accuracy * pf)])
    strict = make_optimizer(
        "trimtuner",
        rnn.space,
        rnn.problem,
        0,
        model="dt",
        incumbent_rule="feasible",
        incumbent_pf=0.9,
    )
    strict._runs, strict._targets = opt._runs, opt._targets
    ok = pf >= 0.9
    assert ok.any()
    # the paper's text: the best predicted accuracy among the predicted feasible
    assert strict.recommend() == Recommendation(ids[ok][np.argmax(accuracy[ok])])


def test_gp_run_survives_a_covariance_the_default_eigensolver_rejects(rnn):
    # seed 1 with the random filter reaches, at its 4th step, a 288 x 288 representer
    # covariance on which LAPACK's default symmetric eigensolver does not converge
    result = run_one(
        RunSpec(
            "trimtuner-rnn",
            "trimtuner",
            seed=1,
            iterations=5,
            params={"model": "gp", "filter": "random", "hyper": "ml"},
        )
    )
    rows = result.trace.to_pylist()
    assert len(rows) == 5 and [r["phase"] for r in rows] == ["init"] + ["search"] * 4
    measured = {(rows[0]["config_id"], round(f, 6)) for f in (1 / 60, 1 / 10, 1 / 4, 1 / 2)}
    for r in rows[1:]:  # each step a pair not measured before (snapshots included)
        pair = (r["config_id"], round(r["fidelity"], 6))
        assert pair not in measured
        measured.add(pair)
    # its own pick is a configuration it ran at some size; the farm credits only a run at
    # s = 1 (none when it ran none there: which sizes it picks depends on the machine's BLAS)
    assert result.summary["pick"]["config_id"] in {c for c, _ in measured}
    at_full_size = {r["config_id"] for r in rows if round(r["fidelity"], 6) == 1.0}
    credited = result.summary["recommendation"]
    assert (
        credited is None
        if not at_full_size
        else credited is None or credited["config_id"] in at_full_size
    )


def test_joint_samples_of_a_rank_deficient_covariance():
    # 40 points of a rank-3 covariance: the samples have that covariance (Monte Carlo check)
    rng = np.random.default_rng(0)
    B = rng.standard_normal((40, 3))
    cov, mean = B @ B.T, rng.standard_normal(40)
    samples = joint_samples(mean, cov, rng.standard_normal((20000, 40)))
    np.testing.assert_allclose(samples.mean(axis=0), mean, atol=0.1)
    np.testing.assert_allclose(np.cov(samples.T), cov, atol=0.15 * np.abs(cov).max())
    assert np.linalg.matrix_rank(samples - mean, tol=1e-2) == 3  # up to the 1e-10 jitter


def test_fabolas_recommends_an_evaluated_configuration_and_fabulinus_bootstraps_3_percent(rnn):
    fab, trace = _drive(rnn, "fabolas", 4, **{**FAST, "beta": 0.02})
    assert fab.recommend().config_id in {cid for cid, *_ in fab._runs}
    ful = make_optimizer("fabulinus", rnn.space, rnn.problem, 0, **FAST)
    assert len(ful._bootstrap) == math.ceil(0.03 * 288)
    assert all(s.fidelity == 0.5 and s.snapshots for s in ful._bootstrap)


def test_eic_baselines_start_with_four_lhs_points_at_full_size(rnn):
    opt, trace = _drive(rnn, "eic", 6, hyper="ml")
    assert [h[0].phase for h in opt.history] == ["init"] * 4 + ["search"] * 2
    assert all(f == 1.0 for _, f, *_ in trace)
    assert len({cid for cid, *_ in trace}) == 6
    usd, _ = _drive(rnn, "eic-usd-gp", 5, hyper="ml")
    ids = np.flatnonzero(~usd.tested())
    acq, _, _ = usd.acquisition(ids)
    # EIc per dollar from the models' predictions, with scipy's normal: the objective is
    # log(1 - accuracy), y* the best observed among the feasible runs (cost <= C_max)
    t = usd._targets
    pred = t.predict(rnn.space.features[ids])
    mu, sd = pred["accuracy"]
    cap = rnn.problem.constraint_on("cost").threshold
    runs = [o for _, o in usd.history]
    feasible = [np.log(1 - o.accuracy) for o in runs if o.cost <= cap]
    best = min(feasible) if feasible else (max(np.log(1 - o.accuracy) for o in runs) + 3 * sd.max())
    z = (best - mu) / sd
    ei = (best - mu) * stats.norm.cdf(z) + sd * stats.norm.pdf(z)
    pf = stats.norm.cdf(np.log(cap), *pred["cost"])
    np.testing.assert_allclose(acq, ei * pf / np.exp(pred["cost"][0]), rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("name", ["trimtuner", "fabolas", "fabulinus"])
def test_hyper_samples_scores_that_many_walkers_and_every_one_by_default(rnn, name):
    assert make_optimizer(name, rnn.space, rnn.problem, 0)._make_model("cost").max_samples is None
    opt, _ = _drive(rnn, name, 2, hyper_samples=4)
    model = opt._targets.models["cost"]
    assert model.max_samples == 4 and len(model.theta_) == 4
