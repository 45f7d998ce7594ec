"""The oracle replaying real measurements: repeated rows, the time cap, the ground truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optfarm.farm.run.metrics import cno
from optfarm.oracle.formats import FORMATS
from optfarm.oracle.oracle import Oracle


@pytest.fixture(scope="module")
def kmeans(shared_datasets):
    return FORMATS["guindani"](shared_datasets / "guindani" / "kmeans_monodimensional.csv")[0]


@pytest.fixture(scope="module")
def lynceus_cnn(shared_datasets):
    return FORMATS["lynceus"](shared_datasets / "lynceus" / "t2_cnn_intermediate_values.csv")[0]


def test_sample_draws_the_repeated_rows_and_mean_averages_them(kmeans):
    oracle = Oracle(kmeans, aggregate="sample")
    cid = oracle.space.index({"n_vm": 20})
    rows = (
        kmeans.table.filter(np.asarray(kmeans.table.column("n_vm").to_numpy() == 20))
        .column("time")
        .to_numpy()
    )
    assert len(rows) == 6
    rng = np.random.default_rng(3)
    drawn = [oracle.run(cid, rng=rng).time for _ in range(200)]
    assert set(drawn) == set(rows.tolist())  # every repeated measurement, nothing else
    again = [oracle.run(cid, rng=np.random.default_rng(3)).time for _ in range(3)]
    assert len(set(again)) == 1  # the run's generator decides the draw
    mean = Oracle(kmeans, aggregate="mean").run(cid, rng=np.random.default_rng(3))
    assert mean.time == pytest.approx(rows.mean())
    assert mean.time == pytest.approx(oracle.true_value(cid, metric="time"))
    assert mean.cost == pytest.approx(rows.mean() * 20 * 1000)


def test_time_cap_charges_the_cap_and_reveals_only_the_known_curve(lynceus_cnn):
    oracle = Oracle(lynceus_cnn)
    times = oracle.true_time[:, 0]
    cid = int(np.flatnonzero(times > 200)[0])
    full = oracle.run(cid)
    curve = full.accuracy_curve
    assert len(curve) >= 4
    stopped = oracle.run(cid, time_cap=95.0)
    price = oracle.space.price_per_s[cid]
    assert stopped.timed_out and stopped.time == 95.0
    assert stopped.cost == pytest.approx(95.0 * price)
    assert stopped.accuracy_curve == curve[:3]  # 30, 60, 90 s
    assert stopped.accuracy == curve[2]
    early = oracle.run(cid, time_cap=20.0)
    assert early.accuracy_curve == () and math.isnan(early.accuracy)
    assert oracle.run(cid, time_cap=full.time + 1).time == full.time  # not reached: no effect


def test_ground_truth_is_the_cheapest_feasible(lynceus_cnn):
    oracle = Oracle(lynceus_cnn)
    mask = oracle.feasible_mask()
    cost = oracle.true_cost[:, 0]
    best = oracle.optimum()
    assert mask[best] and cost[best] == cost[mask].min()
    assert cno(oracle, best) == 1.0
    worst_feasible = int(np.argmax(np.where(mask, cost, -np.inf)))
    assert cno(oracle, worst_feasible) == pytest.approx(cost[worst_feasible] / cost[best])
