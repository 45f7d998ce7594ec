"""optfarm.farm.run.metrics.quality_auc: the area under a run's quality curve, on hand-made traces
over the synthetic dataset's oracle, against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optfarm.farm.run.metrics import quality_auc, step_quality
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.registry import load


@pytest.fixture(scope="module")
def oracle():
    return Oracle(load("synthetic"))


def auc(steps, oracle):
    """quality_auc of a run given as (cumulative cost, incumbent CNO, feasible) steps."""
    cost, cno, feasible = zip(*steps) if steps else ((), (), ())
    quality = step_quality(
        {
            "incumbent_cno": np.array(cno, dtype=float),
            "incumbent_feasible": np.array(feasible, dtype=bool),
        },
        "cno",
    )
    return quality_auc(quality, np.array(cost, dtype=float), oracle)


def window(oracle):
    best = oracle.optimum()
    c_opt = oracle.true_value(best, metric="cost")
    c_all = np.nansum([oracle.true_value(c, 1.0, "cost") for c in range(oracle.space.n_configs)])
    return c_opt, math.log10(c_all / c_opt)


def test_the_optimum_from_the_first_run_scores_0_and_nothing_feasible_scores_1(oracle):
    c_opt, _ = window(oracle)
    assert auc([(c_opt, 1.0, True)], oracle) == pytest.approx(0.0)
    assert auc([(c_opt, 1.0, False), (2 * c_opt, 1.5, False)], oracle) == 1.0
    assert auc([], oracle) == 1.0


def test_a_step_curve_against_its_area_computed_by_hand(oracle):
    c_opt, hi = window(oracle)
    # nothing until 10 x c_opt (one decade at 1), then CNO 2 (log2 2 / 4 = 0.25) to the end
    area = auc([(10 * c_opt, 2.0, True)], oracle)
    assert area == pytest.approx((1.0 + 0.25 * (hi - 1.0)) / hi)
    # an infeasible incumbent counts as no incumbent, CNO beyond 16 saturates
    assert auc([(10 * c_opt, 1.0, False)], oracle) == 1.0
    assert auc([(c_opt, 40.0, True)], oracle) == pytest.approx(1.0)


def test_finding_the_optimum_later_scores_worse(oracle):
    c_opt, _ = window(oracle)
    early = auc([(c_opt, 2.0, True), (3 * c_opt, 1.0, True)], oracle)
    late = auc([(c_opt, 2.0, True), (30 * c_opt, 1.0, True)], oracle)
    assert 0 < early < late < 0.25
