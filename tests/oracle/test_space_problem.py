"""Unit tests of the core data types: SearchSpace encoding, Objective/Constraint parsing,
Dataset round trip and the Oracle on the built-in synthetic dataset."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from optfarm.farm.run.metrics import accuracy_c, cno, true_quality
from optfarm.oracle.dataset import Dataset, DatasetError, DatasetMeta
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.problem import Constraint, Objective, Problem
from optfarm.oracle.space import Dimension, SearchSpace
from optfarm.oracle.synthetic import make_synthetic


def small_space() -> SearchSpace:
    dims = (
        Dimension("vm", "categorical", ("a", "b", "c")),
        Dimension("lr", "ordinal", (1e-4, 1e-3, 1e-2), log=True),
        Dimension("n", "numeric", (2, 4, 10)),
    )
    configs = {
        "vm": np.array(["a", "b", "c", "a"], dtype=object),
        "lr": np.array([1e-4, 1e-3, 1e-2, 1e-2]),
        "n": np.array([2, 4, 10, 4]),
    }
    return SearchSpace(dims, configs, np.array([1.0, 2.0, 3.0, 4.0]), (0.25, 0.5, 1.0))


def test_features_one_hot_log_and_linear_scaling():
    space = small_space()
    assert space.features.shape == (4, 5)
    assert space.features[:, :3].tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]]
    assert space.features[:, 3] == pytest.approx([0.0, 0.5, 1.0, 1.0])  # log10 spaced
    assert space.features[:, 4] == pytest.approx([0.0, 0.25, 1.0, 0.25])  # (n - 2) / 8
    assert not space.features.flags.writeable


def test_ordinal_labels_are_encoded_by_rank():
    size = Dimension("vm", "ordinal", ("small", "medium", "large"))
    column = np.array(["large", "small", "medium"], dtype=object)
    assert size.encode(column)[:, 0] == pytest.approx([1.0, 0.0, 0.5])
    with pytest.raises(ValueError, match="positive numbers"):
        Dimension("vm", "ordinal", ("small", "large"), log=True)


def test_fidelity_encoding_and_feature_rows():
    space = small_space()
    assert space.encode_fidelity([0.25, 0.5, 1.0]) == pytest.approx([0.0, 0.5, 1.0])
    rows = space.feature_rows([1, 3], [0.5, 1.0])
    assert rows.shape == (2, 6) and rows[:, -1].tolist() == [0.5, 1.0]
    assert space.has_fidelity and space.names == ("vm", "lr", "n")


def test_config_and_index_round_trip():
    space = small_space()
    for cid in range(space.n_configs):
        assert space.index(space.config(cid)) == cid
    assert space.config(2) == {"vm": "c", "lr": 0.01, "n": 10}
    with pytest.raises(KeyError, match="not in the search space"):
        space.index({"vm": "b", "lr": 1e-4, "n": 2})
    with pytest.raises(KeyError, match="lacks"):
        space.index({"vm": "a"})
    with pytest.raises(KeyError):
        space.config(4)


def test_dimension_rejects_bad_declarations():
    with pytest.raises(ValueError, match="unknown kind"):
        Dimension("x", "nominal", (1, 2))
    with pytest.raises(ValueError, match="repeated"):
        Dimension("x", "ordinal", (1, 1))
    with pytest.raises(ValueError, match="positive numbers"):
        Dimension("x", "ordinal", (0, 1), log=True)


def test_objective_and_constraint_parsing():
    assert Objective.parse("max accuracy") == Objective("accuracy", "max")
    assert str(Objective.parse("min cost")) == "min cost"
    c = Constraint.parse(" time <= 300 ")
    assert (c.metric, c.op, c.threshold) == ("time", "<=", 300.0)
    assert Constraint.parse("accuracy>=0.85").holds(np.array([0.8, 0.85, 0.9])).tolist() == [
        False,
        True,
        True,
    ]
    assert not Constraint.parse("time<=1").holds(math.nan)
    for bad in ("time < 3", "sp eed<=3", "time<=x", "time<=3 parsecs", "rmsd<=2 A", "time<=1e"):
        with pytest.raises(ValueError):
            Constraint.parse(bad)
    with pytest.raises(ValueError):
        Objective.parse("maximise accuracy")
    # any measured metric may be constrained or optimised; a time may carry its unit
    assert Constraint.parse("rmsd <= 2.1") == Constraint("rmsd", "<=", 2.1)
    assert Constraint.parse("p95_ms>=-3e2").threshold == -300.0
    assert Constraint.parse("time<=205000 ms") == Constraint("time", "<=", 205.0)
    assert Constraint.parse("time <= 2 h").threshold == 7200.0
    assert Objective.parse("min energy") == Objective("energy", "min")


def test_problem_round_trip_and_metric():
    p = Problem(Objective("accuracy", "max"), (Constraint("cost", "<=", 0.1),), budget=5.0)
    assert Problem.from_dict(p.to_dict()) == p
    assert p.metric == "accuracy_c" and p.constraint_on("cost").threshold == 0.1
    assert Problem().metric == "cno" and Problem().constraint_on("time") is None
    with pytest.raises(ValueError):
        Problem(budget=0)


@pytest.fixture(scope="module")
def synthetic():
    return make_synthetic()


def test_synthetic_dataset_round_trips_through_parquet(synthetic, tmp_path):
    path = synthetic.write(tmp_path / "s.parquet")
    back = Dataset.read(path)
    assert back.meta == synthetic.meta
    assert back.table.equals(synthetic.table.replace_schema_metadata(back.table.schema.metadata))
    assert back.space().n_configs == 4 * 5 * 3 * 3 * 2


def test_oracle_on_synthetic(synthetic):
    oracle = Oracle(synthetic)
    space = oracle.space
    assert space.fidelities == (0.1, 0.25, 0.5, 1.0)
    best = oracle.optimum()
    mask = oracle.feasible_mask()
    assert mask[best] and 0 < mask.sum() < space.n_configs
    assert oracle.true_cost[best, -1] == oracle.true_cost[mask, -1].min()
    assert cno(oracle, best) == 1.0 and cno(oracle, None) == math.inf
    obs = oracle.run(best, fidelity=0.25, rng=np.random.default_rng(0))
    assert obs.cost == pytest.approx(obs.time * space.price_per_s[best])
    with pytest.raises(KeyError, match="fidelity"):
        oracle.run(best, fidelity=0.3)
    with pytest.raises(KeyError):
        oracle.run(space.n_configs)
    infeasible = int(np.flatnonzero(~mask)[0])
    assert not oracle.is_feasible(infeasible) and oracle.is_feasible(best)


def test_accuracy_c_penalises_cost_overruns(synthetic):
    c_max = float(np.median(Oracle(synthetic).true_cost[:, -1]))
    problem = Problem(Objective("accuracy", "max"), (Constraint("cost", "<=", c_max),))
    oracle = Oracle(synthetic, problem)
    cost = oracle.true_cost[:, -1]
    over = int(np.argmax(cost))
    acc = oracle.true_value(over, metric="accuracy")
    assert accuracy_c(oracle, over) == pytest.approx(acc * c_max / cost[over])
    under = int(np.argmin(cost))
    assert accuracy_c(oracle, under) == oracle.true_value(under, metric="accuracy")
    assert true_quality(oracle, None) == 0.0


def test_dataset_validation_names_column_and_row():
    meta = DatasetMeta("t", (Dimension("k", "categorical", ("a",)),), Problem())
    good = {
        "k": ["a", "a"],
        "fidelity": [1.0, 1.0],
        "time": [1.0, 2.0],
        "cost": [1.0, 2.0],
        "price_per_s": [1.0, 1.0],
        "timed_out": [False, False],
    }
    Dataset(pa.table(good), meta)
    with pytest.raises(DatasetError, match=r"column 'time', row 1: negative"):
        Dataset(pa.table(good | {"time": [1.0, -2.0]}), meta)
    with pytest.raises(DatasetError, match=r"column 'k', row 1: value 'b'"):
        Dataset(pa.table(good | {"k": ["a", "b"]}), meta)
    with pytest.raises(DatasetError, match="'cost' is missing"):
        Dataset(pa.table({k: v for k, v in good.items() if k != "cost"}), meta)
