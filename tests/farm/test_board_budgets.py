"""The board's default budgets on any table size (issue 41, optfarm/farm/sweep/board_spec.py):
they grow with the table, an initial design takes at most half of the smallest budget, the
model guides 10 steps or more by the largest, and no budget reaches the price."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optfarm.farm.run.loop import run_one
from optfarm.farm.run.metrics import exhaustive_cost, mean_config_cost, table_size
from optfarm.farm.sweep.board_spec import (
    DEFAULT_COST_BUDGETS,
    DEFAULT_EVALUATIONS,
    DESIGN_SHARE,
    PRICE_SHARE_CAP,
    planned_evaluations,
    resolve_board,
    size_factor,
    table_budget,
    table_evaluations,
)
from optfarm.optimizers.base import INIT_SHARE

SIZES = (12, 20, 41, 47, 69, 288, 360, 384, 1_000, 9_216, 50_176, 100_352)


def test_the_size_factor_is_one_up_to_the_tf_jobs_then_one_more_per_doubling():
    assert [size_factor(n) for n in (1, 20, 69, 384)] == [1.0, 1.0, 1.0, 1.0]
    assert size_factor(768) == pytest.approx(2.0)
    assert size_factor(9_216) == pytest.approx(math.log2(48))
    assert size_factor(None) == 1.0  # a summary stored before sizes were kept
    factors = [size_factor(n) for n in SIZES]
    assert factors == sorted(factors)


@pytest.mark.parametrize("n", SIZES)
def test_defaults_never_reach_the_price_and_leave_the_model_its_steps(n):
    mean = 3.0  # any unit: every rule is in the table's own terms
    price = mean * n
    cost = [table_budget(k, mean, price, PRICE_SHARE_CAP, n) for k in DEFAULT_COST_BUDGETS]
    evals = [table_evaluations(e, n, PRICE_SHARE_CAP) for e in DEFAULT_EVALUATIONS]
    assert cost == sorted(cost) and max(cost) <= PRICE_SHARE_CAP * price < price
    assert evals == sorted(evals) and max(evals) <= max(1, PRICE_SHARE_CAP * n) < n
    plan = planned_evaluations(min(DEFAULT_COST_BUDGETS), mean, price, PRICE_SHARE_CAP, n)
    design = math.floor(INIT_SHARE * plan)  # the largest initial design (init_share of it)
    assert design <= DESIGN_SHARE * cost[0] / mean  # half of the smallest budget at most
    if n >= 48:  # a quarter of the table holds the design and 10 more
        assert cost[-1] / mean - design >= 10 and evals[-1] - design >= 10
    if n >= 9_216:  # large tables: budgets grow with them, designs are not cut to nothing
        assert cost[-1] / mean >= 100 and design >= 13


BOARD = {
    "name": "budgets",
    "datasets": ["synthetic", "cloud-grid-9216"],
    "optimizers": ["eic-usd", "cherrypick-trees", "guindani", "optuna-tpe"],
    "seeds": 1,
    "tracking": {"enabled": False},
    "board": {},
}


@pytest.fixture(scope="module")
def board_runs():
    resolved = resolve_board(BOARD, "test")
    return resolved.settings, resolved.sweep


def test_a_board_plans_every_run_and_sets_its_budget(board_runs):
    settings, sweep = board_runs
    from optfarm.farm.sweep.spec import expand
    from optfarm.oracle.oracle import Oracle
    from optfarm.oracle.registry import load

    runs = expand(sweep, "test")
    assert len(runs) == 8
    for run in runs:
        oracle = Oracle(load(run.dataset))
        mean, n = mean_config_cost(oracle), table_size(oracle)
        assert run.budget == pytest.approx(
            table_budget(20.0, mean, exhaustive_cost(oracle), 0.25, n), rel=1e-5
        )
        assert run.planned_evaluations == (10 if n <= 384 else 55)
        assert run.iterations is None and run.deadline  # planned, not stopped there
    assert settings.budgets == list(DEFAULT_COST_BUDGETS)


@pytest.mark.parametrize("dataset", ["synthetic", "cloud-grid-9216"])
@pytest.mark.parametrize("optimizer", ["eic-usd", "cherrypick-trees", "guindani", "optuna-tpe"])
def test_every_model_based_optimizer_gets_guided_steps_by_the_largest_budget(
    board_runs, dataset, optimizer
):
    """Its initial design (trace phase ``init``) within half of the smallest budget's worth of
    evaluations; 10 or more model-guided steps (``search``) paid within the largest, unless
    its own rule ended the search after guided steps (Guindani's stopping band: the recurring
    job then runs its best, ``exploit``)."""
    from optfarm.farm.sweep.spec import expand

    _, sweep = board_runs
    (run,) = [r for r in expand(sweep, "test") if (r.dataset, r.optimizer) == (dataset, optimizer)]
    result = run_one(run)
    trace = result.trace
    phase = np.array(trace.column("phase").to_pylist())
    paid = trace.column("cum_exploration_cost").to_numpy() <= run.budget * (1 + 1e-9)
    smallest = min(DEFAULT_COST_BUDGETS) * size_factor(result.summary["table"]["configurations"])
    assert 1 <= np.count_nonzero(phase == "init") <= DESIGN_SHARE * smallest
    guided = np.count_nonzero((phase == "search") & paid)
    if "exploit" in phase or result.summary["stop_reason"] == "converged":
        assert guided >= 1 and phase[-1] != "init"
    else:
        assert guided >= 10
