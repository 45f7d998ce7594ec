"""The peers' equal rules (issue 33): the penalty told to a peer without a constraint mechanism
never ranks an infeasible configuration below the cheapest feasible one seen; CMA-ES restarts
draw independent seed streams (``optfarm.optimizers.seeds``); SMAC repeats its sequence for a seed
in every process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from optfarm.optimizers.peers.grid import INFEASIBLE_MARGIN, penalised_objective
from optfarm.optimizers.registry import make_optimizer
from optfarm.optimizers.seeds import spawned_seed
from optfarm.oracle import Constraint, Objective, Observation, Problem
from optfarm.oracle.oracle import Oracle


# -- the penalty -----------------------------------------------------------------------------
def test_an_infeasible_run_is_told_worse_than_the_best_feasible_seen():
    problem = Problem(Objective("cost", "min"), (Constraint("time", "<=", 100.0),))
    cheap_late = Observation(101.0, 2.0)  # 1% over the deadline, cost 2
    stopped = Observation(100.0, 1.0, timed_out=True)  # stopped at the deadline, cost 1
    assert penalised_objective(problem, cheap_late) == pytest.approx(2.02)  # cost x (1 + v)
    for obs in (cheap_late, stopped):
        assert penalised_objective(problem, obs, best_feasible=5.0) > 5.0
    # the floor keeps the violations' order; an expensive infeasible run keeps cost x (1 + v)
    assert (
        penalised_objective(problem, Observation(150.0, 2.0), 5.0)
        > penalised_objective(problem, cheap_late, 5.0)
        >= 5.0 * (1 + INFEASIBLE_MARGIN)
    )
    assert penalised_objective(problem, Observation(200.0, 9.0), 5.0) == pytest.approx(18.0)
    assert penalised_objective(problem, Observation(50.0, 7.0), 5.0) == 7.0  # feasible: as is
    accuracy = Problem(Objective("accuracy", "max"), (Constraint("cost", "<=", 1.0),))
    assert penalised_objective(accuracy, Observation(1.0, 1.1, 0.95), best_feasible=0.8) < 0.8


def _told_in_order(opt) -> list[tuple[float, bool]]:
    """(value told the library, observed feasible) per evaluation, in the run's order."""
    return [(opt.answers[s.config_id][0], opt.observed_feasible(o)) for s, o in opt.history]


@pytest.mark.slow  # 6 runs of 30 evaluations with SMAC and CMA-ES: minutes
@pytest.mark.parametrize(
    "table", ["guindani-query26-vm-ram", "cherrypick-tpch", "scout-join_bigdata_spark"]
)
@pytest.mark.parametrize("name", ["optuna-cmaes", "smac-hpo"])
def test_no_infeasible_configuration_is_told_below_the_cheapest_feasible(
    shared_datasets, table, name
):
    # the three tables where cost x (1 + violation) told an infeasible configuration less
    # than the cheapest feasible one seen (issue 33); runs stopped at the deadline as a board
    # runs them
    pytest.importorskip("smac", reason="the peers need optfarm[peers]")
    from optfarm.farm.run.loop import Stepper
    from optfarm.oracle.formats import FORMATS

    family = table.split("-", 1)[0]
    dataset = next(d for d in FORMATS[family](shared_datasets / family) if d.name == table)
    oracle = Oracle(dataset)
    opt = make_optimizer(name, oracle.space, oracle.problem, 0, evaluations=30)
    stepper = Stepper(opt, oracle, 0, deadline=True)
    while stepper.stop_reason(30) is None and stepper.step() is not None:
        pass
    best, infeasible_after_a_feasible = None, 0
    for value, feasible in _told_in_order(opt):
        if feasible:
            best = value if best is None else min(best, value)
        elif best is not None:
            infeasible_after_a_feasible += 1
            assert value > best, (table, name, value, best)
    assert infeasible_after_a_feasible > 0  # the case the rule is for occurred


# -- restart seeds -----------------------------------------------------------------------------
def test_child_seeds_are_independent_across_runs():
    seeds = {(s, k): spawned_seed(s, k) for s in range(20) for k in range(8)}
    assert len(set(seeds.values())) == len(seeds)  # s + k would give 27 distinct of 160
    assert all(seeds[s, k] != seeds[s + 1, k - 1] for s in range(19) for k in range(1, 8))


def test_cma_es_restart_k_of_seed_s_is_not_restart_k_minus_1_of_seed_s_plus_1():
    pytest.importorskip("cmaes", reason="optuna-cmaes needs optfarm[peers]")
    from optfarm.oracle.synthetic import make_synthetic

    oracle = Oracle(make_synthetic())

    def restart_points(seed: int, restart: int) -> list[dict]:
        # the restart's study as the peer makes it, from the same mean and population
        peer = make_optimizer("optuna-cmaes", oracle.space, oracle.problem, seed)
        peer.restarts, peer.popsize = restart, 12
        peer.x0 = {name: 1.0 for name in peer.ranked}
        study = peer.new_study()
        return [study.ask(peer.distributions).params for _ in range(12)]

    for seed, k in ((0, 1), (4, 2), (7, 3)):
        assert restart_points(seed, k) != restart_points(seed + 1, k - 1)
        assert restart_points(seed, k) == restart_points(seed, k)  # and a seed repeats


# -- SMAC repeatability ---------------------------------------------------------------------------
_SMAC_SEQUENCE = """
from optfarm.farm.run.loop import run_one
from optfarm.farm.run.spec import RunSpec
trace = run_one(RunSpec("synthetic", "smac-hpo", seed=0, iterations=30)).trace
print(trace.column("config_id").to_pylist())
"""


def test_smac_repeats_its_sequence_for_a_seed_in_every_process():
    # SMAC 2.3 ordered its local search's start points by their strings' hashes, which
    # differ per process (PYTHONHASHSEED): one seed gave a new sequence in every process
    pytest.importorskip("smac", reason="smac-hpo needs optfarm[peers]")
    sequences = set()
    for hash_seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        r = subprocess.run(
            [sys.executable, "-c", _SMAC_SEQUENCE],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert r.returncode == 0, r.stderr
        sequences.add(r.stdout.strip().splitlines()[-1])
    assert len(sequences) == 1, sequences
    assert len(np.unique(json.loads(next(iter(sequences))))) == 30
