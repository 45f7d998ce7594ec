"""Nephele over (configuration, dataset size) on the TrimTuner tables."""

from __future__ import annotations

import numpy as np
import pytest

from farm.run.loop import run_one
from farm.run.spec import RunSpec
from optimizers.registry import make_optimizer
from oracle.oracle import Oracle
from oracle.registry import import_datasets, load

PROBLEM = {"objective": "min cost", "constraints": ("accuracy>=0.85", "time<=300")}


@pytest.fixture
def trimtuner(shared_datasets):
    import_datasets("trimtuner", shared_datasets / "trimtuner")


def test_nephele_searches_dataset_sizes_and_recommends_a_pair(trimtuner):
    spec = RunSpec("trimtuner-cnn", "nephele", seed=3, iterations=35,
                   params={"b_init": 0.3, "la": 1}, **PROBLEM)
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
    assert rec["cno"] == pytest.approx(oracle.true_value(rec["config_id"], rec["fidelity"],
                                                         "cost")
                                       / oracle.true_value(oracle.optimum(), 1.0, "cost"))
    last = t.slice(len(phases) - 1)
    assert last.column("incumbent_fidelity")[0].as_py() == rec["fidelity"]
    pairs = list(zip(t.column("config_id").to_pylist(), t.column("fidelity").to_pylist()))
    assert len(set(pairs)) == len(pairs)


def test_nephele_deterministic_and_defaults(trimtuner):
    d = load("trimtuner-cnn")
    spec = RunSpec("trimtuner-cnn", "nephele", seed=1, iterations=25, **PROBLEM)
    oracle = Oracle(d, spec.problem(d))
    opt = make_optimizer("nephele", oracle.space, oracle.problem, seed=1)
    assert (opt.config["la"], opt.config["k"], opt.config["k_acc"], opt.config["n_trees"],
            opt.config["gamma"]) == (0, 3, 1, 5, 0.9)
    assert len(opt._cand_config) == 288 * 5
    a = run_one(spec).trace.column("config_id").to_pylist()
    assert a == run_one(spec).trace.column("config_id").to_pylist()


def test_bivariate_quadrature_changes_paths(trimtuner):
    d = load("trimtuner-rnn")
    spec = RunSpec("trimtuner-rnn", "nephele", seed=2, **PROBLEM)
    oracle = Oracle(d, spec.problem(d))
    noise = np.random.default_rng(0)
    picks = {}
    for k_acc in (1, 3):
        opt = make_optimizer("nephele", oracle.space, oracle.problem, seed=2, la=1,
                             k_acc=k_acc, b_init=0.05)
        while (s := opt.suggest()).phase == "init":
            opt.observe(s, oracle.run(s.config_id, s.fidelity, noise))
        picks[k_acc] = s.info["reward"]
    assert picks[1] != picks[3]
