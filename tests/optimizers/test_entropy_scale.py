"""Entropy search on large tables (issue 41): a suggestion's memory grows with the table, never
with its square, and what goes through in blocks (GP predictions, the fantasies' incumbent
rows, the nearest candidate of DIRECT's points) gives what one block gives."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import optfarm.optimizers.models.gp as gp_module
import optfarm.optimizers.trimtuner as trimtuner_module
from optfarm.farm.bench.lynceus_scale import scale_table
from optfarm.farm.run.loop import Stepper
from optfarm.optimizers.acquisition.analytic import expected_improvement
from optfarm.optimizers.acquisition.incumbent import IncumbentScan, choose_incumbent
from optfarm.optimizers.models.gp import GaussianProcess
from optfarm.optimizers.registry import make_optimizer
from optfarm.optimizers.trimtuner import acquisition_chunk
from optfarm.oracle.oracle import Oracle

FAST = {"hyper": "ml", "n_mc": 200, "n_representers": 20, "max_candidates": 8}


def _driven(name: str, n_configs: int, steps: int, **params):
    """``name`` on a generated table of about ``n_configs`` configurations, ``steps``
    evaluations in."""
    dataset = scale_table(n_configs)
    oracle = Oracle(dataset)
    opt = make_optimizer(name, dataset.space(), oracle.problem, 0, **{**FAST, **params})
    stepper = Stepper(opt, oracle, 0)
    for _ in range(steps):
        stepper.step()
    return opt


def _suggest_peak(opt) -> int:
    """Peak bytes allocated (numpy arrays included) during one ``suggest``."""
    tracemalloc.start()
    try:
        assert opt.suggest() is not None
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("trimtuner", {}),  # incumbent among the tested configurations
        ("fabulinus", {"init_fraction": 0.002}),  # incumbent among all: rows in blocks
        ("fabolas", {}),  # DIRECT's points snapped to candidates
    ],
)
def test_a_suggestions_memory_grows_with_the_table_not_its_square(name, params):
    small, large = _driven(name, 864, 3, **params), _driven(name, 4096, 3, **params)
    ratio = large.space.n_configs / small.space.n_configs  # 4.7
    peak_small, peak_large = _suggest_peak(small), _suggest_peak(large)
    # before: (samples, n, n) covariances, 134 MB at 4,096 configurations and ratio^2 = 22
    # times the smaller table's
    assert peak_large < 8 * large.space.n_configs**2 / 4
    assert peak_large < 1.5 * ratio * peak_small, (peak_small, peak_large)


def test_blocked_predictions_equal_one_block(monkeypatch):
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(15, 3))
    gp = GaussianProcess(basis="loss", hyper="mcmc", burn_in=20, chain_length=20, seed=2)
    gp.fit(X, np.sin(3 * X[:, 0]) + X[:, 2])
    Q = rng.uniform(size=(300, 3))
    whole = gp.predict_per_sample(Q, noise=True)
    monkeypatch.setattr(gp_module, "PREDICT_BLOCK", 7)
    for one, blocked in zip(whole, gp.predict_per_sample(Q, noise=True)):
        np.testing.assert_allclose(blocked, one, rtol=1e-12, atol=1e-14)
    # the joint moments, summed over samples one at a time, are the per-sample ones averaged
    means, covs = gp.predict_per_sample(Q[:40], full_cov=True)
    mean, cov = gp.predict_joint(Q[:40])
    centred = means - means.mean(axis=0)
    np.testing.assert_array_equal(mean, means.mean(axis=0))
    np.testing.assert_allclose(cov, covs.mean(axis=0) + centred.T @ centred / len(means))


@pytest.mark.parametrize("rule", ["cea", "feasible"])
@pytest.mark.parametrize("min_pf", [0.5, 0.999999])
def test_incumbent_scanned_in_blocks_is_the_one_a_single_call_chooses(rule, min_pf):
    rng = np.random.default_rng(5)
    for trial in range(200):
        n = int(rng.integers(1, 40))
        quality = rng.choice([0.2, 0.5, 0.9], n) if trial % 2 else rng.uniform(size=n)
        mean = rng.choice([-1.0, 0.0], n) if trial % 3 else rng.normal(size=n)
        log_pf = np.log(rng.choice([0.3, 0.6, 1.0], n))
        j = choose_incumbent(rule, quality, mean, log_pf, min_pf)
        for block in (1, 3, 7, 64):
            scan = IncumbentScan(rule, min_pf)
            for b in range(0, n, block):
                rows = slice(b, b + block)
                scan.add(quality[rows], mean[rows], log_pf[rows])
            assert (scan.quality, scan.log_pf) == (quality[j], log_pf[j]), (trial, block)


def test_the_first_row_wins_a_tie_across_blocks():
    # rows 1 and 3 are both feasible with the same objective: the scan keeps row 1
    quality, mean = np.array([0.1, 0.7, 0.2, 0.4]), np.array([0.0, -1.0, 0.0, -1.0])
    log_pf = np.log([0.1, 0.6, 0.1, 0.9])
    scan = IncumbentScan("feasible", 0.5)
    scan.add(quality[:2], mean[:2], log_pf[:2])
    scan.add(quality[2:], mean[2:], log_pf[2:])
    assert (scan.quality, scan.log_pf) == (0.7, math.log(0.6))


@pytest.mark.parametrize(
    ("name", "params"),
    [("fabulinus", {"init_fraction": 0.02}), ("trimtuner", {"incumbent": "all"})],
)
def test_fantasy_factors_with_rows_in_blocks_equal_one_block(name, params, monkeypatch):
    opt = _driven(name, 200, 4, **params)
    ctx, _ = opt._context(*opt._untested())
    idx = np.array([0, 7, 31, 90])
    whole = acquisition_chunk(ctx, idx)
    assert len(ctx.X_full) <= trimtuner_module.ROW_BLOCK
    monkeypatch.setattr(trimtuner_module, "ROW_BLOCK", 9)
    np.testing.assert_allclose(acquisition_chunk(ctx, idx), whole, rtol=1e-10, atol=1e-14)
    assert np.all(whole[:, 2] > 0)  # a constraint factor was computed


def test_representers_come_from_the_pool_with_the_largest_expected_improvement():
    opt = _driven("trimtuner", 864, 3, representer_pool=60)
    X_full = opt._inputs(np.arange(opt.space.n_configs), np.ones(opt.space.n_configs))
    obj = opt._targets.models[opt._targets.objective]
    mean, std = obj.predict(X_full)
    ei = expected_improvement(mean, std, mean.min())
    pool = opt._representer_pool(obj, X_full)
    assert len(pool) == 60 and ei[pool].min() >= np.delete(ei, pool).max()
    # the objective's prediction the context already made gives the same pool
    np.testing.assert_array_equal(opt._representer_pool(obj, X_full, (mean, std)), pool)
    assert set(opt._representers(X_full)) <= set(pool.tolist())
    # a table no larger than the pool draws over every configuration
    everything = _driven("trimtuner", 200, 3, representer_pool=512)
    assert len(everything._representer_pool(obj, X_full[:200])) == 200
