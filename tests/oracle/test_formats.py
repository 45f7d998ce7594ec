"""Golden facts of every public dataset, read by its loader from the shared folder."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from optfarm.oracle.formats import FORMATS
from optfarm.oracle.oracle import Oracle


@pytest.fixture(scope="module")
def datasets(shared_datasets):
    out = {}
    for fmt in ("trimtuner", "lynceus", "cherrypick", "scout", "guindani"):
        for d in FORMATS[fmt](shared_datasets / fmt):
            out[d.name] = d
    return out


def col(dataset, name):
    return dataset.table.column(name).to_numpy(zero_copy_only=False)


# hourly prices of the datasets README (independent of the loaders' tables)
PRICES = {"t2.small": 0.023, "t2.medium": 0.0464, "t2.xlarge": 0.1856, "t2.2xlarge": 0.3712}

EXPECTED = {  # name: (rows, configurations at s = 1)
    "trimtuner-cnn": (1440, 288),
    "trimtuner-rnn": (1440, 288),
    "lynceus-cnn": (384, 384),
    "lynceus-multilayer": (384, 384),
    "lynceus-rnn": (384, 384),
    "cherrypick-kmeans": (47, 47),
    "cherrypick-spark": (59, 59),
    "cherrypick-terasort": (72, 72),
    "cherrypick-tpcds": (61, 61),
    "cherrypick-tpch": (52, 52),
    "guindani-kmeans": (120, 20),
    "guindani-query26": (115, 20),
    "guindani-query26-vm-ram": (696, 41),
}


def test_row_and_configuration_counts(datasets):
    scout = sorted(n for n in datasets if n.startswith("scout-"))
    assert len(scout) == 18
    expected = EXPECTED | {n: (69, 69) for n in scout}
    assert sorted(datasets) == sorted(expected)
    got = {n: (d.table.num_rows, d.space().n_configs) for n, d in datasets.items()}
    assert got == expected


@pytest.mark.parametrize("net, feasible, near_best", [("cnn", 111, 39), ("rnn", 178, 28)])
def test_trimtuner_table_ii(datasets, net, feasible, near_best):
    """TrimTuner Table II: cost-feasible configurations at s = 1, and how many are within 95%
    of the best feasible accuracy."""
    oracle = Oracle(datasets[f"trimtuner-{net}"])
    mask = oracle.feasible_mask(1.0)
    acc = oracle.true_accuracy[:, -1]
    assert int(mask.sum()) == feasible
    assert int((acc[mask] >= 0.95 * acc[mask].max()).sum()) == near_best
    assert oracle.true_value(oracle.optimum(), metric="accuracy") == acc[mask].max()


def test_trimtuner_fidelities_and_cost_formula(datasets):
    d = datasets["trimtuner-cnn"]
    assert d.fidelities == pytest.approx((1 / 60, 1 / 10, 1 / 4, 1 / 2, 1.0))
    p = np.array([PRICES[f] for f in col(d, "vm_flavor")])
    readme = ((col(d, "n_workers") + 1) * p / 60 + 0.3712 / 60) * (col(d, "time") / 60)
    assert col(d, "cost") == pytest.approx(readme, rel=1e-12)
    assert {"time_std", "accuracy_std", "iterations_std", "intermediate_acc_values"} <= set(
        d.table.column_names
    )
    assert d.meta.problem.objective.metric == "accuracy"
    # VM types ordered by size, one feature (the TrimTuner authors' encoding); the Lynceus
    # data keeps them categorical
    flavor = d.meta.dimensions[0]
    assert (flavor.kind, flavor.values) == ("ordinal", tuple(PRICES))
    assert datasets["lynceus-cnn"].meta.dimensions[0].kind == "categorical"


@pytest.mark.parametrize(
    "net, t_max, feasible", [("cnn", 230.7, 192), ("multilayer", 332.2, 192), ("rnn", 61.84, 193)]
)
def test_lynceus_time_limit_leaves_about_half_feasible(datasets, net, t_max, feasible):
    d = datasets[f"lynceus-{net}"]
    oracle = Oracle(d)
    assert d.meta.problem.constraint_on("time").threshold == t_max
    assert int(oracle.feasible_mask().sum()) == feasible
    cost = oracle.true_cost[:, 0]
    best = cost[oracle.optimum()]
    within_2x = int((oracle.feasible_mask() & (cost <= 2 * best)).sum())
    assert 1 <= within_2x <= 20  # datasets README: single digits to about 20
    assert 1000 < cost.max() / best < 3000  # about 2000


def test_lynceus_extrapolates_runs_stopped_at_the_cap(datasets):
    d = datasets["lynceus-cnn"]
    raw, acc, time = col(d, "training_time"), col(d, "accuracy"), col(d, "time")
    stopped = (raw > 600) & (acc < 0.85)
    assert stopped.sum() > 0 and (col(d, "extrapolated") == stopped).all()
    assert time[stopped] == pytest.approx(raw[stopped] * 0.85 / acc[stopped])
    assert (time[~stopped] == raw[~stopped]).all()
    hourly = np.array([PRICES[f] for f in col(d, "vm_flavor")])
    cluster = col(d, "n_ps") + col(d, "n_workers") + 1
    assert col(d, "cost") == pytest.approx(time / 3600 * hourly * cluster, rel=1e-12)
    assert d.meta.curve_interval_s == 30.0


def test_cherrypick_vm_cost_is_per_vm(datasets, shared_datasets):
    for job in ("kmeans", "spark", "terasort", "tpcds", "tpch"):
        d = datasets[f"cherrypick-{job}"]
        assert [x.name for x in d.meta.dimensions] == ["vm_name", "num_machines"]
        expected = col(d, "time") / 3600 * col(d, "vm_cost") * col(d, "num_machines")
        assert col(d, "cost") == pytest.approx(expected)
        assert int(Oracle(d).feasible_mask().sum()) == pytest.approx(d.table.num_rows / 2, abs=1)


def test_scout_keeps_timed_out_runs(datasets):
    scout = [d for n, d in datasets.items() if n.startswith("scout-")]
    timed_out = sum(int(pc.sum(d.table.column("timed_out")).as_py()) for d in scout)
    completed = sum(int(pc.sum(d.table.column("completed")).as_py()) for d in scout)
    assert (completed, timed_out) == (1167, 1242 - 1167)
    d = datasets["scout-regression_bigdata_spark15"]
    out = col(d, "timed_out")
    assert (col(d, "time")[out] == col(d, "elapsed_time").max()).all()
    assert col(d, "time")[out].min() > 7200
    # a timed-out configuration is an observable, costly and infeasible run
    oracle = Oracle(d)
    first = d.table.filter(d.table.column("timed_out")).slice(0, 1).to_pylist()[0]
    cid = oracle.space.index({k: first[k] for k in oracle.space.names})
    obs = oracle.run(cid)
    assert obs.timed_out and obs.cost > 0 and not oracle.is_feasible(cid)


def test_scout_early_failures_are_not_cheap(datasets):
    """wordcount 20 x c4.xlarge failed after 8 s: it must not become the feasible optimum."""
    d = datasets["scout-wordcount-large_bigdata_hadoop"]
    oracle = Oracle(d)
    cid = oracle.space.index({"vm_family": "c4", "vcpus": 4, "n_vms": 20})
    assert oracle.run(cid).timed_out
    assert not oracle.is_feasible(cid) and oracle.optimum() != cid


def test_guindani_units_and_query26_vm_ram_optimum(datasets, shared_datasets):
    d = datasets["guindani-query26-vm-ram"]
    assert d.meta.cost_unit == "VM x ms"
    time, cost, n_vm = col(d, "time"), col(d, "cost"), col(d, "n_vm")
    assert cost == pytest.approx(time * 1000 * n_vm)
    feasible_rows = time <= 205.0
    best_row = np.argmin(np.where(feasible_rows, cost, np.inf))
    assert cost[best_row] == 4079658
    oracle = Oracle(d)
    assert oracle.space.config(oracle.optimum()) == {"n_vm": 22, "ram": 0.7}
    assert (col(d, "n_vm")[best_row], col(d, "ram")[best_row]) == (22, 0.7)


def test_guindani_time_limits(datasets):
    kmeans, q26 = datasets["guindani-kmeans"], datasets["guindani-query26"]
    assert str(kmeans.meta.problem.constraints[0]) == "time<=330"
    assert int(Oracle(kmeans).feasible_mask().sum()) == 9
    assert int(Oracle(q26).feasible_mask().sum()) == 10  # median rule: half of 20
