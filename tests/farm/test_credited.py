"""The farm's recommendation rule (``optfarm.farm.run.recommendation``): every statistic credits the
best configuration the run tested and observed feasible, never the optimizer's own untested pick.

The hand-made optimizer below runs the dearest configurations first and recommends the true
optimum from its first step on without ever running it: the summary, the reach costs,
``quality_auc``, ``until``, the report's statistics and the regression gate's values must all
ignore that pick, and the pick must still be reported, in its own columns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optfarm.farm.gate.regress import quality_values
from optfarm.farm.report.analysis import analyse
from optfarm.farm.run.loop import run_one
from optfarm.farm.run.metrics import first_reach, quality_auc, recommendation_quality
from optfarm.farm.run.spec import RunSpec
from optfarm.optimizers.base import Optimizer, Recommendation, Suggestion
from optfarm.optimizers.registry import OPTIMIZERS
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.registry import load

RUNS = 25


class ClaimsTheOptimum(Optimizer):
    """Runs the dearest untested configurations (never the optimum) and recommends the
    optimum, which it reads off the oracle's ground truth: a model pick nobody tested."""

    name = "claims-the-optimum"
    optimum: int = -1  # set by the test from the oracle

    def suggest(self) -> Suggestion | None:
        untested = ~self.tested()
        untested[self.optimum] = False
        ids = np.flatnonzero(untested)
        if not len(ids):
            return None
        return Suggestion(int(ids[np.argmax(self.space.price_per_s[ids])]))

    def recommend(self) -> Recommendation | None:
        return Recommendation(self.optimum)


@pytest.fixture
def claimed(monkeypatch):
    monkeypatch.setitem(OPTIMIZERS, ClaimsTheOptimum.name, f"{__name__}:ClaimsTheOptimum")
    dataset = load("synthetic")
    spec = RunSpec("synthetic", ClaimsTheOptimum.name, 0, {}, iterations=RUNS)
    oracle = Oracle(dataset, spec.problem(dataset))
    monkeypatch.setattr(ClaimsTheOptimum, "optimum", oracle.optimum())
    return spec, oracle, run_one(spec, oracle=oracle)


def _by_hand(trace, oracle):
    """The credited configuration after each step, from the trace's observations alone: the
    cheapest run whose observed time and accuracy met the constraints."""
    best, out = None, []
    for row in trace.to_pylist():
        ok = not row["timed_out"] and all(
            c.holds(row[c.metric]) for c in oracle.problem.constraints
        )
        if ok and (best is None or row["cost"] < best[1]):
            best = (row["config_id"], row["cost"])
        out.append(None if best is None else best[0])
    return out


def test_the_summary_credits_the_best_tested_configuration(claimed):
    spec, oracle, result = claimed
    s, trace = result.summary, result.trace
    credited = _by_hand(trace, oracle)
    assert credited[-1] is not None and credited[-1] != oracle.optimum()
    assert trace.column("incumbent_config_id").to_pylist() == credited
    assert s["recommendation"]["config_id"] == credited[-1]
    # the pick is reported beside it, untested, at CNO 1
    assert s["pick"]["config_id"] == oracle.optimum() and s["pick"]["tested"] is False
    assert set(trace.column("pick_config_id").to_pylist()) == {oracle.optimum()}
    assert s["pick"]["cno"] == pytest.approx(1.0)
    assert s["recommendation"]["cno"] > 1.0


def test_no_statistic_credits_the_untested_pick(claimed):
    spec, oracle, result = claimed
    s, trace = result.summary, result.trace
    # reach costs: the optimum never, by the credited rule; its pick "reached" it at once
    assert s["exploration_cost_to_reach"]["cno<=1"] is None
    assert s["pick_exploration_cost_to_reach"]["cno<=1"] == pytest.approx(
        trace.column("cum_exploration_cost")[0].as_py()
    )
    # quality_auc: of the credited curve, computed here from the hand-made incumbents
    quality = np.array(
        [
            recommendation_quality(oracle, c)["cno"] if c is not None else math.inf
            for c in _by_hand(trace, oracle)
        ]
    )
    cum = trace.column("cum_exploration_cost").to_numpy()
    assert s["quality_auc"] == pytest.approx(quality_auc(quality, cum, oracle))
    assert s["pick_quality_auc"] < s["quality_auc"]
    assert first_reach(quality, "cno", 1.0, 1.0) is None
    # the report's statistics
    a = next(iter(analyse(trace, [s]).values()))
    stats = a.stats[ClaimsTheOptimum.name]
    assert stats["reach_frac:cno<=1"] == 0.0 and math.isinf(stats["reach_p90:cno<=1"])
    assert stats["final_p50"] == pytest.approx(s["recommendation"]["cno"])
    assert stats["pick_reach_frac:cno<=1"] == 1.0 and stats["pick_final_p50"] == 1.0
    # the regression gate's values
    gated = quality_values([s])[f"synthetic / {ClaimsTheOptimum.name}"]["seeds"][0]
    assert math.isinf(gated["cost_to_cno<=1.1"])
    assert gated["final_cno"] == pytest.approx(s["recommendation"]["cno"])
    assert gated["quality_auc"] == s["quality_auc"]


def test_an_untested_pick_does_not_meet_the_until_target(claimed):
    spec, oracle, _ = claimed
    from dataclasses import replace

    result = run_one(replace(spec, until="cno<=1"), oracle=oracle)
    assert result.summary["stop_reason"] == "iterations"
    assert result.summary["n_evaluations"] == RUNS


def test_sub_sampled_runs_and_noisy_draws():
    """Only runs at s = 1 count (unless the optimizer deploys at a size of its choice), and
    a configuration run several times counts on the mean of its draws."""
    from optfarm.farm.run.recommendation import TestedIncumbent
    from optfarm.oracle.oracle import Observation
    from optfarm.oracle.problem import Problem

    problem = Problem.from_dict({"objective": "min cost", "constraints": ["time<=10"]})
    credited = TestedIncumbent(problem)
    credited.add(3, 0.25, Observation(time=1.0, cost=0.1))  # sub-sampled: not credited
    assert credited.best() == (None, 1.0) and not credited.tested(3, 1.0)
    credited.add(5, 1.0, Observation(time=9.0, cost=2.0))
    credited.add(7, 1.0, Observation(time=8.0, cost=1.0))
    assert credited.best() == (7, 1.0)
    credited.add(7, 1.0, Observation(time=14.0, cost=1.2))  # mean time 11: infeasible
    assert credited.best() == (5, 1.0)
    credited.add(5, 1.0, Observation(time=20.0, cost=2.0, timed_out=True))
    assert credited.best() == (None, 1.0)
    pairs = TestedIncumbent(problem, any_fidelity=True)  # Nephele's (x, s) pairs
    pairs.add(3, 0.25, Observation(time=1.0, cost=0.1))
    assert pairs.best() == (3, 0.25)
