"""The harness's deadline rule (``optfarm.farm.run.loop.Stepper``, a spec's ``deadline``): every
optimizer's runs stop at the problem's deadline and are charged as a job runner charges a
stopped job, the cost of running until it; Lynceus' own timeout caps apply on top; off, the
run keys and stored specs stay those from before the rule; on by default on a board."""

from __future__ import annotations

import math

import pytest

from optfarm.farm.run.loop import run_one
from optfarm.farm.run.spec import RunSpec
from optfarm.farm.sweep.board_spec import resolve_board
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.synthetic import make_synthetic


@pytest.fixture(scope="module")
def oracle():
    return Oracle(make_synthetic(), aggregate="mean")


def _runs(oracle, optimizer: str, deadline: bool, **params):
    spec = RunSpec(
        "synthetic",
        optimizer,
        seed=3,
        params=params,
        iterations=30,
        aggregate="mean",
        deadline=deadline,
    )
    trace = run_one(spec, oracle).trace.to_pylist()
    return [(r["config_id"], r["time"], r["cost"], r["timed_out"]) for r in trace]


@pytest.mark.parametrize("peer", ["random", "optuna-tpe"])
def test_a_peer_and_lynceus_are_stopped_and_charged_alike_at_the_deadline(oracle, peer):
    if peer.startswith("optuna"):
        pytest.importorskip("optuna", reason="the peers need optfarm[peers]")
    deadline = oracle.problem.deadline
    price = oracle.space.price_per_s
    full_time = oracle.true_time[:, -1]
    charged = {}
    for name, params in ((peer, {}), ("lynceus", {"timeout": "none"}), ("lynceus", {})):
        runs = _runs(oracle, name, True, **params)
        late = [r for r in runs if full_time[r[0]] > deadline]
        assert late, f"{name} ran no configuration past the deadline"
        for config_id, time, cost, timed_out in runs:
            assert time <= deadline * (1 + 1e-12), (name, config_id)
            if math.isclose(time, deadline):  # stopped by the harness: charged to the deadline
                assert timed_out and cost == pytest.approx(deadline * price[config_id])
                charged.setdefault(config_id, set()).add(round(cost, 12))
        if params.get("timeout") == "none":  # no cap of its own: the deadline stops them all
            assert all(math.isclose(r[1], deadline) and r[3] for r in late)
    assert charged and all(len(costs) == 1 for costs in charged.values())  # one charge each
    # without the rule the peer's late runs run to their end, charged in full
    off = _runs(oracle, peer, False)
    assert any(time > deadline for _, time, _, _ in off)


def test_the_rule_off_keeps_run_keys_and_a_board_turns_it_on():
    before = RunSpec("synthetic", "random", seed=1, iterations=5)
    assert (
        before.run_key
        == RunSpec("synthetic", "random", seed=1, iterations=5, deadline=False).run_key
    )
    assert (
        RunSpec("synthetic", "random", seed=1, iterations=5, deadline=True).run_key
        != before.run_key
    )
    board = {
        "name": "b",
        "datasets": ["synthetic"],
        "optimizers": ["random"],
        "seeds": 1,
        "board": {"budgets": [5.0], "evaluations": [5]},
    }
    assert resolve_board(board, "board").sweep.limits.deadline is True
    off = dict(board, limits={"deadline": False})
    assert resolve_board(off, "board").sweep.limits.deadline is False


def test_a_problem_without_a_time_limit_has_no_deadline(oracle):
    from optfarm.oracle.problem import Constraint, Objective, Problem

    assert oracle.problem.deadline == oracle.problem.constraint_on("time").threshold
    assert Problem(Objective("cost", "min"), (Constraint("time", ">=", 5.0),)).deadline is None
    assert Problem().deadline is None


def test_lynceus_learns_a_deadline_stop_as_a_run_that_cost_more(oracle):
    # it observes the suggestion as run (the deadline as its cap); without a cap of its own it
    # feeds the largest cost seen, as its max-cost policy does, not the cost at the deadline
    from optfarm.farm.run.loop import Stepper
    from optfarm.optimizers.registry import make_optimizer

    opt = make_optimizer("lynceus", oracle.space, oracle.problem, 3, timeout="none")
    stepper = Stepper(opt, oracle, 3, deadline=True)
    while stepper.stop_reason(25) is None and stepper.step() is not None:
        pass
    stops = [
        i
        for i, (s, o) in enumerate(opt.history)
        if o.timed_out and s.time_cap == oracle.problem.deadline
    ]
    assert stops and len(opt._cost_y) == len(opt.history)
    for i in stops:
        assert opt._cost_y[i] == max(opt._cost_y[:i] + [opt.history[i][1].cost])
