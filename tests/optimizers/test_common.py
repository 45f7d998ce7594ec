"""One suite over every registered optimizer (ARCHITECTURE.md, "Habits" 6): the ask/tell
contract on the synthetic dataset — suggestions inside the space, budget respected,
deterministic per seed, no configuration run twice (unless the algorithm says it repeats),
NaN/inf observations rejected, unknown parameters rejected, fixed parameters held."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from optfarm.farm.run.loop import Stepper, execute
from optfarm.optimizers.base import ParameterError, Recommendation
from optfarm.optimizers.registry import get, is_peer, make_optimizer
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.synthetic import make_synthetic

from .extras import optimizer_names

# A few evaluations are enough to exercise each optimizer's whole loop; slow defaults
# (MCMC chains) are shortened where an optimizer exposes them.
FAST_PARAMS: dict[str, dict] = {
    "trimtuner": {"hyper": "ml", "n_mc": 200, "n_representers": 20, "beta": 0.03},
    "fabolas": {"hyper": "ml", "n_mc": 200, "n_representers": 20, "beta": 0.02},
    "fabulinus": {"hyper": "ml", "n_mc": 200, "n_representers": 20, "beta": 0.03},
    "eic": {"hyper": "ml"},
    "eic-usd-gp": {"hyper": "ml"},
    "bo-ei": {"hyper": "ml"},
}
STEPS = 8


@pytest.fixture(scope="module")
def oracle():
    return Oracle(make_synthetic())


def _drive(oracle, name, seed, budget=math.inf, steps=STEPS):
    problem = oracle.problem.with_overrides(budget=budget)
    opt = make_optimizer(name, oracle.space, problem, seed, **FAST_PARAMS.get(name, {}))
    stepper = Stepper(opt, Oracle(oracle.dataset, problem), seed)
    trace = []
    while stepper.stop_reason(steps) is None and (step := stepper.step()) is not None:
        s = step.suggestion
        trace.append((s.config_id, s.fidelity, s.phase, round(step.observation.cost, 12)))
    return opt, trace, stepper.spent


@pytest.mark.parametrize("name", optimizer_names())
def test_suggestions_are_in_the_space(oracle, name):
    opt, trace, _ = _drive(oracle, name, seed=1)
    assert trace, f"{name} suggested nothing"
    for cid, s, phase, _ in trace:
        assert 0 <= cid < oracle.space.n_configs
        assert s in oracle.space.fidelities
        assert phase in ("init", "search")
    rec = opt.recommend()
    assert rec is None or isinstance(rec, Recommendation)
    if rec is not None:
        assert 0 <= rec.config_id < oracle.space.n_configs
        assert rec.fidelity in oracle.space.fidelities
        assert opt.uses_fidelity or rec.fidelity == 1.0


@pytest.mark.parametrize("name", optimizer_names())
def test_same_seed_same_trace(oracle, name):
    _, a, _ = _drive(oracle, name, seed=3)
    _, b, _ = _drive(oracle, name, seed=3)
    assert a == b


@pytest.mark.parametrize("name", optimizer_names())
def test_budget_is_respected(oracle, name):
    # a budget of about three average runs: the optimizer stops, or the loop does, with at
    # most one run beyond the budget
    budget = 3 * float(np.nanmean(oracle.true_cost[:, -1]))
    _, trace, spent = _drive(oracle, name, seed=2, budget=budget, steps=40)
    assert trace
    last = trace[-1][3]
    assert spent - last < budget


@pytest.mark.parametrize("name", optimizer_names())
def test_unknown_parameter_is_rejected(oracle, name):
    with pytest.raises(ParameterError, match="no_such_param"):
        make_optimizer(name, oracle.space, oracle.problem, 0, no_such_param=1)


@pytest.mark.parametrize("name", optimizer_names())
def test_parameters_are_documented(name):
    cls = get(name)
    assert cls.summary, f"{name} has no summary line for `farm optimizers`"
    for p in cls.params:
        assert p.doc, f"{name}: parameter {p.name} has no doc"
        assert p.validate(name, p.default) == p.default


def test_out_of_range_parameter_names_parameter_and_value(oracle):
    with pytest.raises(ParameterError, match=r"random: parameter 'n_init' = -1 is outside"):
        make_optimizer("random", oracle.space, oracle.problem, 0, n_init=-1)


def _runs(trace_suggestions):
    """Every (config_id, fidelity) a list of suggestions measured, snapshots included."""
    return [(s.config_id, f) for s in trace_suggestions for f in (s.fidelity, *s.snapshots)]


@pytest.mark.parametrize("name", optimizer_names(lambda cls: not cls.repeats))
def test_never_repeats_a_configuration(oracle, name):
    problem = oracle.problem.with_overrides(budget=math.inf)
    opt = make_optimizer(name, oracle.space, problem, 4, **FAST_PARAMS.get(name, {}))
    noise = np.random.default_rng(4)
    suggestions = []
    for _ in range(14):
        s = opt.suggest()
        if s is None:
            break
        opt.observe(s, execute(oracle, s, noise))
        suggestions.append(s)
    runs = _runs(suggestions)
    assert len(suggestions) >= 6 and len(set(runs)) == len(runs), runs


@pytest.mark.parametrize("name", optimizer_names(lambda cls: cls.repeats))
def test_an_optimizer_that_repeats_says_so(oracle, name):
    # an optimizer that declares ``repeats`` is seen running a configuration again (Guindani's
    # taboo queue releases a configuration after q runs, and its recurring job re-runs the
    # incumbent once the search has stopped); the others are held to never doing it by
    # test_never_repeats_a_configuration
    _, trace, _ = _drive(oracle, name, seed=4, steps=60)
    runs = [(cid, s) for cid, s, _, _ in trace]
    repeated = [k for k, run in enumerate(runs) if run in runs[:k]]
    assert repeated, f"{name} declares repeats but ran {len(runs)} distinct configurations"


@pytest.mark.parametrize("name", optimizer_names())
def test_rejects_nan_and_inf_observations(oracle, name):
    opt = make_optimizer(name, oracle.space, oracle.problem, 0, **FAST_PARAMS.get(name, {}))
    s = opt.suggest()
    good = execute(oracle, s, np.random.default_rng(0))
    for field, value in (
        ("time", math.nan),
        ("cost", math.inf),
        ("cost", math.nan),
        ("time", -1.0),
        ("accuracy", math.inf),
        ("accuracy", -math.inf),
    ):
        with pytest.raises(ValueError, match=rf"{name}: observation {field} = {value!r}"):
            opt.observe(s, replace(good, **{field: value}))
        assert opt.history == []  # nothing recorded
    opt.observe(s, good)  # and the optimizer carries on
    assert len(opt.history) == 1 and opt.suggest() is not None


class _RecordedConfig(dict):
    """An optimizer's ``config`` that records every name read from it, however it is read."""

    def __init__(self, values):
        super().__init__(values)
        self.read: set[str] = set()

    def __getitem__(self, name):
        self.read.add(name)
        return super().__getitem__(name)

    def get(self, name, default=None):
        self.read.add(name)
        return super().get(name, default)

    def __contains__(self, name):
        self.read.add(name)
        return super().__contains__(name)


@pytest.mark.parametrize("name", optimizer_names())
def test_every_parameter_the_code_reads_is_in_the_table(oracle, name, monkeypatch):
    # variants fix parameters instead of dropping them (``derive``): every name the code reads
    # from config, building the optimizer and running it into its model-guided phase, is in
    # its table; a fixed one accepts its value (a resolved run spec passes it back) but no other
    cls = get(name)
    resolve = cls.resolve_params.__func__
    monkeypatch.setattr(
        cls,
        "resolve_params",
        classmethod(lambda klass, params: _RecordedConfig(resolve(klass, params))),
    )
    opt, trace, _ = _drive(oracle, name, seed=1, steps=16)
    assert isinstance(opt.config, _RecordedConfig) and trace
    assert is_peer(name) or any(phase == "search" for _, _, phase, _ in trace), (
        f"{name} never left its bootstrap"
    )
    declared = [p.name for p in cls.params]
    assert list(opt.config) == declared
    assert opt.config.read <= set(declared), (
        f"{name} reads {sorted(opt.config.read - set(declared))}, which its table lacks"
    )
    monkeypatch.undo()
    for p in get(name).params:
        if p.fixed:
            make_optimizer(name, oracle.space, oracle.problem, 0, **{p.name: p.default})
