"""One definition of a run's quality (``optfarm.farm.run.metrics``): the sweep's summary table, the
store's index and ``farm report`` give the same numbers."""

from __future__ import annotations

import math

import numpy as np
import pyarrow.parquet as pq

from optfarm.farm.cli import main
from optfarm.farm.cli.sweep import print_summary
from optfarm.farm.report.analysis import analyse
from optfarm.farm.run.metrics import quantile, recommendation_quality, worse_quantile
from optfarm.farm.store.store import Store, spec_from_dict
from optfarm.farm.sweep.results import load_sweep
from optfarm.farm.sweep.runner import summary_rows
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.synthetic import make_synthetic


def test_an_infeasible_recommendation_has_cno_inf_and_keeps_its_cost_ratio():
    oracle = Oracle(make_synthetic())
    infeasible = int(np.flatnonzero(~oracle.feasible_mask())[0])
    q = recommendation_quality(oracle, infeasible)
    assert q["feasible"] is False and q["cno"] == math.inf
    best = oracle.optimum()
    expected = oracle.true_cost[infeasible, -1] / oracle.true_cost[best, -1]
    assert math.isclose(q["cno_raw"], expected)
    assert recommendation_quality(oracle, best) == {"cno": 1.0, "cno_raw": 1.0, "feasible": True}


def test_quantiles_are_order_statistics_and_the_worse_side_depends_on_the_metric():
    values = [1.0, 2.0, 3.0, 4.0, math.inf]
    assert quantile(values, 0.5) == 3.0  # an actual run's value, not 2.5 or 3.5
    assert quantile(values, 0.9) == math.inf
    assert worse_quantile([0.2, 0.5, 0.9, 0.95, 0.99], 0.9, "accuracy_c") == 0.2
    assert math.isnan(quantile([], 0.5))


def test_sweep_table_index_and_report_agree_and_say_never(tmp_path, capsys):
    out = tmp_path / "sweep"
    # 8 random evaluations on synthetic: some seeds end without a truly feasible incumbent
    assert (
        main(
            [
                "sweep",
                "--datasets",
                "synthetic",
                "--optimizers",
                "random",
                "--seeds",
                "10",
                "--iterations",
                "8",
                "--out",
                str(out),
                "--serial",
                "--no-tracking",
                "--no-progress",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    store = Store(out)
    records = store.verified().records
    keys = [spec_from_dict(r["spec"]).run_key for r in records.values()]
    (row,) = summary_rows(records, keys)
    stats = analyse(*load_sweep(out))["synthetic"].stats["random"]
    assert (row["final_p50"], row["final_p90"]) == (stats["final_p50"], stats["final_p90"])
    assert math.isfinite(row["final_p50"]) and math.isinf(row["final_p90"])
    assert "\nsynthetic: metric cno\n" in printed
    line = next(ln for ln in printed.splitlines() if ln.startswith("random"))
    assert f"{row['final_p50']:.4g}" in line and "never" in line and "inf" not in line
    index = pq.read_table(out / "index.parquet").to_pylist()
    finals = sorted(r["final_metric"] for r in index)
    assert quantile(finals, 0.5) == row["final_p50"]
    assert all(math.isinf(r["final_metric"]) != r["final_feasible"] for r in index)


def test_the_sweep_summary_fits_100_columns_with_long_names_and_parameters(capsys):
    """The papers' longest dataset names and a many-parameter grid point: each dataset is a
    table under its name, a row's parameters on the lines under it, wrapped at commas."""
    long_params = (
        "la=2,trees=random,n_trees=50,bootstrap=auto,timeout=true,"
        "gamma_mode=paper,reuse_models=false"
    )
    rows = [
        {
            "dataset": dataset,
            "optimizer": optimizer,
            "params": params,
            "runs": 20000,
            "failed": 1234,
            "metric": metric,
            "final_p50": 1.0234567,
            "final_p90": math.inf,
            "cost_p50": 12345.678,
            "evals_p50": 123.5,
            "latency_p50_s": 0.000123456,
        }
        for dataset, metric in (
            ("trimtuner-rnn", "accuracy_c"),
            ("lynceus-multilayer", "cno"),
            ("guindani-query26-vm-ram", "cno"),
        )
        for optimizer, params in (
            ("cherrypick-trees", long_params),
            ("optuna-cmaes", "-"),
            ("lynceus", long_params.replace(",", ",x_")),
        )
    ]
    print_summary(rows)
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    assert "guindani-query26-vm-ram: metric cno" in lines
    params = [ln for ln in lines if ln.startswith("  params: la=2, ")]
    assert len(params) == 6 and sum(ln.startswith(" " * 10) for ln in lines) == 6
    row = "cherrypick-trees  20000  1234    1.023      never"
    assert sum(ln.startswith(row) for ln in lines) == 3
