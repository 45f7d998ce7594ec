"""farm.run.metrics.quality_auc: the area under a run's quality curve, on hand-made traces over
the synthetic dataset's oracle, against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from farm.run.metrics import quality_auc
from oracle.oracle import Oracle
from oracle.registry import load


@pytest.fixture(scope="module")
def oracle():
    return Oracle(load("synthetic"))


def trace(steps):
    """A trace from (cumulative cost, incumbent CNO, feasible) steps."""
    cost, cno, feasible = zip(*steps) if steps else ((), (), ())
    return pa.table({"cum_exploration_cost": pa.array(cost, pa.float64()),
                     "incumbent_cno": pa.array(cno, pa.float64()),
                     "incumbent_feasible": pa.array(feasible, pa.bool_())})


def window(oracle):
    best = oracle.optimum()
    c_opt = oracle.true_value(best, metric="cost")
    c_all = np.nansum([oracle.true_value(c, 1.0, "cost") for c in range(oracle.space.n_configs)])
    return c_opt, math.log10(c_all / c_opt)


def test_the_optimum_from_the_first_run_scores_0_and_nothing_feasible_scores_1(oracle):
    c_opt, _ = window(oracle)
    assert quality_auc(trace([(c_opt, 1.0, True)]), oracle) == pytest.approx(0.0)
    assert quality_auc(trace([(c_opt, 1.0, False), (2 * c_opt, 1.5, False)]), oracle) == 1.0
    assert quality_auc(trace([]), oracle) == 1.0


def test_a_step_curve_against_its_area_computed_by_hand(oracle):
    c_opt, hi = window(oracle)
    # nothing until 10 x c_opt (one decade at 1), then CNO 2 (log2 2 / 4 = 0.25) to the end
    auc = quality_auc(trace([(10 * c_opt, 2.0, True)]), oracle)
    assert auc == pytest.approx((1.0 + 0.25 * (hi - 1.0)) / hi)
    # an infeasible incumbent counts as no incumbent, CNO beyond 16 saturates
    assert quality_auc(trace([(10 * c_opt, 1.0, False)]), oracle) == 1.0
    assert quality_auc(trace([(c_opt, 40.0, True)]), oracle) == pytest.approx(1.0)


def test_finding_the_optimum_later_scores_worse(oracle):
    c_opt, _ = window(oracle)
    early = quality_auc(trace([(c_opt, 2.0, True), (3 * c_opt, 1.0, True)]), oracle)
    late = quality_auc(trace([(c_opt, 2.0, True), (30 * c_opt, 1.0, True)]), oracle)
    assert 0 < early < late < 0.25
