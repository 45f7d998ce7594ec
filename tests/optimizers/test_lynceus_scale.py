"""Lynceus on large tables: NextStep's bounded scan, the first steps whose paths are explored
(``first_steps``), and the generated tables of ``farm bench --lynceus-scale``."""

from __future__ import annotations

import numpy as np

from optfarm.farm.bench.lynceus_scale import scale_table, step_cost
from optfarm.optimizers.lookahead_kernels import _next_step, _score_level
from optfarm.optimizers.lynceus import PATH_WORK
from optfarm.optimizers.registry import make_optimizer
from optfarm.oracle.oracle import Oracle


def _lynceus(dataset, **params):
    oracle = Oracle(dataset)
    return make_optimizer("lynceus", oracle.space, oracle.problem, 0, **params)


def test_every_first_step_is_explored_up_to_the_limit_then_the_best_by_eic_per_cost():
    opt = _lynceus(scale_table(384), first_steps=3)
    gamma = np.array([2, 5, 7, 11, 13])
    eic = np.zeros(384)
    mu = np.ones(384)
    eic[[2, 5, 7, 11, 13]] = [1.0, 4.0, 3.0, 2.0, 9.0]
    mu[13] = 10.0  # EIc 9 but per cost 0.9: not among the best 3
    assert opt._first_steps(gamma, eic, mu).tolist() == [5, 7, 11]
    assert opt._first_steps(gamma[:3], eic, mu).tolist() == [2, 5, 7]  # all: <= 3
    by_reward = _lynceus(scale_table(384), first_steps=3, first_step="reward")
    assert by_reward._first_steps(gamma, eic, mu).tolist() == [5, 7, 13]


def test_by_default_a_table_of_the_papers_size_explores_every_first_step():
    small, large = _lynceus(scale_table(384)), _lynceus(scale_table(10_000))
    gamma = np.arange(1_500)
    assert len(small._first_steps(gamma[:380], np.ones(384), np.ones(384))) == 380
    assert len(large._first_steps(gamma, np.ones(10_000), np.ones(10_000))) == PATH_WORK // 10_000


def test_generated_tables_and_a_benchmark_row():
    assert [scale_table(n).space().n_configs for n in (384, 2000, 10_000)] == [384, 1715, 10_000]
    row = step_cost(384, sample=5, max_step_s=60.0)
    assert row["configs"] == 384 and row["first_steps"] == row["gamma"] > 300
    assert row["step"] == "measured" and row["step_s"] > 0 and row["path_ms"] > 0
    assert row["all_paths"] == "extrapolated" and row["all_paths_s"] > row["root_s"]


def test_lookahead_next_step_is_the_full_scan_argmax():
    """NextStep's bounded scan (``_next_step``) picks the candidate the full scan
    (``_score_level``) picks, first index among equal maxima, with the same EIc: with and
    without a feasible incumbent, budget, cost cap and accuracy model, tied predictions."""
    rng = np.random.default_rng(1)
    m = 400
    for trial in range(40):
        mu = rng.lognormal(0.0, 1.0, m)
        sd = rng.uniform(0.01, 2.0, m) * (rng.random(m) < 0.9)  # some at 0
        sd = np.maximum(sd, 1e-3)
        mu_a, sd_a = rng.uniform(0.7, 0.95, m), rng.uniform(0.01, 0.1, m)
        price = rng.uniform(0.005, 0.02, m)
        low = np.argsort(mu)[:30]  # 30 tied best candidates
        for a in (mu, sd, mu_a, sd_a, price):
            a[low] = a[low[0]]
        untested = rng.random(m) < 0.8
        has_acc = bool(trial % 2)
        budget = np.inf if trial % 3 else float(rng.uniform(1, 20))
        best = np.inf if trial % 5 == 0 else float(rng.uniform(0.2, 3))
        cost_max = np.inf if trial % 4 else 5.0
        args = (
            mu,
            sd,
            mu_a,
            sd_a,
            has_acc,
            price,
            300.0,
            cost_max,
            0.85,
            untested,
            budget,
            best,
            6.0,
        )
        eic = np.empty(m)
        want = _score_level(*args, eic)
        hints = rng.choice(m, 8, replace=False)
        got, top = _next_step(*args, hints)
        assert got == want
        assert top == (eic[want] if want >= 0 else -1.0)
