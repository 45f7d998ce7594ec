"""Candidate filters: CEA ordering on a hand-made problem, budgets, search filters."""

from __future__ import annotations

import numpy as np
import pytest

from optfarm.optimizers.acquisition.analytic import log_probability_of_feasibility
from optfarm.optimizers.acquisition.filters import FILTERS, cea, n_selected, select


def test_cea_orders_by_accuracy_times_probability_of_feasibility():
    # four (x, s): accurate but surely too expensive, accurate and cheap, mediocre and cheap,
    # accurate with a coin-flip cost
    accuracy = np.array([0.95, 0.90, 0.60, 0.92])
    cost_mu, cost_sd = np.array([3.0, 0.5, 0.2, 1.0]), np.array([0.1, 0.1, 0.1, 0.3])
    scores = cea(accuracy, log_probability_of_feasibility(cost_mu, cost_sd, 1.0))
    assert list(np.argsort(-scores)) == [1, 2, 3, 0]
    np.testing.assert_allclose(scores[3], 0.92 * 0.5)
    calls = []

    def evaluate(idx):
        calls.append(idx.copy())
        return -idx.astype(float)

    idx, values = select("cea", np.eye(4), 0.5, evaluate, np.random.default_rng(0), scores)
    assert sorted(idx.tolist()) == [1, 2]
    assert len(calls) == 1 and np.array_equal(values, -idx.astype(float))


def test_budget_and_random_and_none():
    assert n_selected(1440, 0.1) == 144
    assert n_selected(5, 0.0) == 1 and n_selected(5, 1.0) == 5
    feats = np.random.default_rng(0).random((50, 3))

    def ev(idx):
        return feats[idx, 0]

    a, _ = select("random", feats, 0.1, ev, np.random.default_rng(1))
    b, _ = select("random", feats, 0.1, ev, np.random.default_rng(1))
    assert len(a) == 5 and len(set(a.tolist())) == 5 and np.array_equal(a, b)
    c, v = select("none", feats, 0.1, ev, np.random.default_rng(1))
    assert len(c) == 50 and np.array_equal(v, feats[:, 0])
    with pytest.raises(ValueError, match="unknown filter 'grid'"):
        select("grid", feats, 0.1, ev, np.random.default_rng(1))
    with pytest.raises(ValueError, match="CEA score"):
        select("cea", feats, 0.1, ev, np.random.default_rng(1))


@pytest.mark.parametrize("method", ["direct", "cmaes"])
def test_search_filters_stay_in_budget_and_find_a_good_candidate(method):
    rng = np.random.default_rng(2)
    grid = np.array([[i / 9, j / 9] for i in range(10) for j in range(10)])
    target = np.array([0.7, 0.3])
    acq = -((grid - target) ** 2).sum(1)
    seen = []

    def evaluate(idx):
        seen.extend(idx.tolist())
        return acq[idx]

    idx, values = select(method, grid, 0.15, evaluate, rng)
    assert len(idx) <= 15 and len(set(seen)) == len(seen) == len(idx)
    np.testing.assert_array_equal(values, acq[idx])
    # better than the median candidate: the optimizer moved towards the maximum
    assert values.max() > np.quantile(acq, 0.9)


def test_every_filter_is_known():
    assert set(FILTERS) == {"cea", "direct", "cmaes", "random", "none"}
