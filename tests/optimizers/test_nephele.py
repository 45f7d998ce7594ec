"""Nephele over (configuration, dataset size) on the TrimTuner tables."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from optfarm.farm.run.loop import run_one
from optfarm.farm.run.spec import RunSpec
from optfarm.optimizers.lookahead import PathContext, explore_chunk, level_predictions
from optfarm.optimizers.registry import make_optimizer
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.registry import import_datasets, load

PROBLEM = {"objective": "min cost", "constraints": ("accuracy>=0.85", "time<=300")}


@pytest.fixture
def trimtuner(shared_datasets):
    import_datasets("trimtuner", shared_datasets / "trimtuner")


def test_nephele_searches_dataset_sizes_and_recommends_a_pair(trimtuner):
    spec = RunSpec(
        "trimtuner-cnn",
        "nephele",
        seed=3,
        iterations=35,
        params={"b_init": 0.3, "la": 1},
        **PROBLEM,
    )
    result = run_one(spec)
    t = result.trace
    fids = set(t.column("fidelity").to_pylist())
    assert len(fids) > 1 and min(fids) < 1.0
    phases = t.column("phase").to_pylist()
    cum = t.column("cum_exploration_cost").to_numpy()
    n_init = phases.count("init")
    assert cum[n_init - 2] < 0.3 <= cum[n_init - 1]  # random pairs until B_init is spent
    assert phases[n_init:] == ["search"] * (len(phases) - n_init)
    rec = result.summary["recommendation"]
    assert rec is not None and rec["feasible"]
    oracle = Oracle(load("trimtuner-cnn"), spec.problem(load("trimtuner-cnn")))
    # CNO of a (x, s) recommendation: its cost at s over the best s = 1 configuration's
    assert rec["cno"] == pytest.approx(
        oracle.true_value(rec["config_id"], rec["fidelity"], "cost")
        / oracle.true_value(oracle.optimum(), 1.0, "cost")
    )
    last = t.slice(len(phases) - 1)
    assert last.column("incumbent_fidelity")[0].as_py() == rec["fidelity"]
    pairs = list(zip(t.column("config_id").to_pylist(), t.column("fidelity").to_pylist()))
    assert len(set(pairs)) == len(pairs)


def test_nephele_deterministic_and_defaults(trimtuner):
    d = load("trimtuner-cnn")
    spec = RunSpec("trimtuner-cnn", "nephele", seed=1, iterations=25, **PROBLEM)
    oracle = Oracle(d, spec.problem(d))
    opt = make_optimizer("nephele", oracle.space, oracle.problem, seed=1)
    assert (
        opt.config["la"],
        opt.config["k"],
        opt.config["k_acc"],
        opt.config["n_trees"],
        opt.config["gamma"],
    ) == (0, 3, 1, 5, 0.9)
    assert len(opt._cand_config) == 288 * 5
    a = run_one(spec).trace.column("config_id").to_pylist()
    assert a == run_one(spec).trace.column("config_id").to_pylist()


def _ei(mu, sd, best):
    """E[max(best - Y, 0)], Y ~ N(mu, sd^2), from scipy's normal (independent of the code)."""
    z = (best - mu) / sd
    return (best - mu) * stats.norm.cdf(z) + sd * stats.norm.pdf(z)


@pytest.mark.parametrize("k_acc", [1, 3])
def test_bivariate_quadrature_by_hand(k_acc):
    """Lynceus' three-configuration problem (test_lynceus_lookahead) with an accuracy model:
    A tested (cost 1, accuracy 0.8), B untested with A's features, X elsewhere; LA = 1,
    A_min = 0.79. The accuracy nodes a_j = mu_a + sd_a t_j decide whether the simulated run
    of X is feasible, hence whether the simulated incumbent becomes min(1, c_i) or stays 1:

        R_X = EIc(X) + gamma sum_i sum_j w_i v_j EI(1, R s_i, y*_ij) P_a(B),
        y*_ij = min(1, c_i) if a_j >= A_min else 1.

    With one accuracy node every simulated run is feasible; with three the lowest node is
    not, which raises the reward of the branch where X came out cheaper than A."""
    R, gamma, acc_min = 0.1, 0.9, 0.79
    F = np.array([[0.0], [0.0], [1.0]])
    gh_t, gh_w = np.polynomial.hermite.hermgauss(3)
    ga_t, ga_w = np.polynomial.hermite.hermgauss(k_acc)
    ctx = PathContext(
        Xc=F[:1].copy(),
        yc=np.array([1.0]),
        nc=1,
        Xa=F[:1].copy(),
        ya=np.array([0.8]),
        na=1,
        F=F,
        price=np.ones(3),
        untested=np.array([False, True, True]),
        budget=np.inf,
        time_max=np.inf,
        cost_max=np.inf,
        acc_min=acc_min,
        best=1.0,
        worst=1.0,
        gh_t=np.sqrt(2) * gh_t,
        gh_w=gh_w / np.sqrt(np.pi),
        gha_t=np.sqrt(2) * ga_t,
        gha_w=ga_w / np.sqrt(np.pi),
        la=1,
        gamma=gamma,
        discount_cost=False,
        key=123,
        n_trees=1,
        n_trees_acc=1,
        max_features=1,
        floor_rel=R,
    )
    _, _, mu_a, sd_a, _, _ = level_predictions(ctx)
    assert mu_a[1] == mu_a[2] == pytest.approx(0.8) and sd_a[2] > 0
    p_acc = stats.norm.sf(acc_min, mu_a[1], sd_a[1])  # P(A(B) >= A_min), as for X
    want = _ei(1.0, R, 1.0) * p_acc
    for t_i, w_i in zip(np.sqrt(2) * gh_t, gh_w / np.sqrt(np.pi)):
        c_i = 1 + R * t_i
        spread = abs(c_i - 1) / 2 or 1.0
        for t_j, v_j in zip(np.sqrt(2) * ga_t, ga_w / np.sqrt(np.pi)):
            feasible = mu_a[2] + sd_a[2] * t_j >= acc_min
            best = min(1.0, c_i) if feasible else 1.0
            want += gamma * w_i * v_j * _ei(1.0, R * spread, best) * p_acc
    ((r, c),) = explore_chunk(ctx, [2])
    assert r == pytest.approx(want, rel=1e-9)
    assert c == pytest.approx(2.0)
    if k_acc == 3:  # the infeasible node's branch is worth more than under one node
        ctx1 = ctx._replace(gha_t=np.zeros(1), gha_w=np.ones(1))
        assert r > explore_chunk(ctx1, [2])[0, 0]
