"""One definition of a run's quality (``farm.run.metrics``): the sweep's summary table, the
store's index and ``farm report`` give the same numbers."""

from __future__ import annotations

import math

import numpy as np
import pyarrow.parquet as pq

from farm.cli import main
from farm.report.analysis import analyse, load_sweep
from farm.run.metrics import quantile, recommendation_quality, worse_quantile
from farm.sweep.runner import summary_rows
from farm.sweep.store import Store, spec_from_dict
from oracle.oracle import Oracle
from oracle.synthetic import make_synthetic


def test_an_infeasible_recommendation_has_cno_inf_and_keeps_its_cost_ratio():
    oracle = Oracle(make_synthetic())
    infeasible = int(np.flatnonzero(~oracle.feasible_mask())[0])
    q = recommendation_quality(oracle, infeasible)
    assert q["feasible"] is False and q["cno"] == math.inf
    best = oracle.optimum()
    expected = oracle.true_cost[infeasible, -1] / oracle.true_cost[best, -1]
    assert math.isclose(q["cno_raw"], expected)
    assert recommendation_quality(oracle, best) == {"cno": 1.0, "cno_raw": 1.0,
                                                    "feasible": True}


def test_quantiles_are_order_statistics_and_the_worse_side_depends_on_the_metric():
    values = [1.0, 2.0, 3.0, 4.0, math.inf]
    assert quantile(values, 0.5) == 3.0            # an actual run's value, not 2.5 or 3.5
    assert quantile(values, 0.9) == math.inf
    assert worse_quantile([0.2, 0.5, 0.9, 0.95, 0.99], 0.9, "accuracy_c") == 0.2
    assert math.isnan(quantile([], 0.5))


def test_sweep_table_index_and_report_agree_and_say_never(tmp_path, capsys):
    out = tmp_path / "sweep"
    # 8 random evaluations on synthetic: some seeds end without a truly feasible incumbent
    assert main(["sweep", "--datasets", "synthetic", "--optimizers", "random", "--seeds", "10",
                 "--iterations", "8", "--out", str(out), "--serial", "--no-tracking",
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    store = Store(out)
    records = store.verified().records
    runs = [spec_from_dict(r["spec"]) for r in records.values()]
    (row,) = summary_rows(records, runs)
    stats = analyse(*load_sweep(out))["synthetic"].stats["random"]
    assert (row["final_p50"], row["final_p90"]) == (stats["final_p50"], stats["final_p90"])
    assert math.isfinite(row["final_p50"]) and math.isinf(row["final_p90"])
    line = next(ln for ln in printed.splitlines() if ln.startswith("synthetic"))
    assert f"{row['final_p50']:.4g}" in line and "never" in line and "inf" not in line
    index = pq.read_table(out / "index.parquet").to_pylist()
    finals = sorted(r["final_metric"] for r in index)
    assert quantile(finals, 0.5) == row["final_p50"]
    assert all(math.isinf(r["final_metric"]) != r["final_feasible"] for r in index)
