"""The generic CSV/Parquet import driven by a YAML description."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from optfarm.farm.cli import main
from optfarm.oracle import registry
from optfarm.oracle.oracle import Oracle

TABLE = """vm,n,runtime_ms,hourly,acc,failed,frac
small,2,100000,0.2,0.80,0,0.5
small,2,120000,0.2,0.82,0,1
small,2,130000,0.2,0.84,no,1
small,4,60000,0.4,0.85,false,1
large,2,80000,0.8,0.90,1,1
large,4,50000,1.6,0.91,0,1
"""

DESCRIPTION = """optfarm: table/1
name: my-job
title: a tiny job
source: hand-written
dimensions:
  - {name: vm, kind: categorical, values: [small, large]}
  - {name: n, kind: ordinal, log: true}
columns: {time: runtime_ms, accuracy: acc, timed_out: failed, fidelity: frac}
price: {column: hourly}
units: {time: ms}
objective: max accuracy
constraints: ["cost<=0.02", "time<=100000"]  # in the file's unit, ms
"""


def test_csv_with_description_next_to_it(tmp_path, capsys):
    (tmp_path / "job.csv").write_text(TABLE)
    (tmp_path / "job.yaml").write_text(DESCRIPTION)
    assert main(["datasets", "import", "csv", "--from", str(tmp_path / "job.csv")]) == 0
    d = registry.load("my-job")
    assert d.table.num_rows == 6 and d.fidelities == (0.5, 1.0)
    assert d.table.column("time").to_pylist()[:2] == [100.0, 120.0]  # ms -> s
    assert d.table.column("cost").to_pylist()[1] == pytest.approx(120 / 3600 * 0.2)
    assert d.table.column("timed_out").to_pylist() == [False, False, False, False, True, False]
    assert d.meta.dimensions[0].values == ("small", "large")
    oracle = Oracle(d)
    assert oracle.space.n_configs == 4
    assert oracle.true_value(oracle.space.index({"vm": "small", "n": 2}), metric="time") == 125
    # cost<=0.02 and time<=100: small/4 (acc 0.85) and large/2 (80 s, $0.0178, acc 0.90);
    # large/4 costs $0.0222 and small/2 takes 125 s
    assert oracle.feasible_mask().tolist() == [True, False, False, True]
    assert oracle.space.config(oracle.optimum()) == {"vm": "large", "n": 2}


def test_parquet_with_a_price_formula_and_an_explicit_description(tmp_path):
    pq.write_table(
        pa.table({"n": [1, 2, 4, 8], "seconds": [400.0, 210.0, 120.0, 90.0]}),
        tmp_path / "scale.parquet",
    )
    desc = tmp_path / "elsewhere.yml"
    desc.write_text(
        "name: scale\ndimensions: [{name: n, kind: numeric, log: true}]\n"
        "columns: {time: seconds}\nprice: {formula: '0.1 * n + 0.05'}\n"
        "constraints: ['time<=150']\nlicence: CC0\n"
    )
    assert (
        main(
            [
                "datasets",
                "import",
                "csv",
                "--from",
                str(tmp_path / "scale.parquet"),
                "--description",
                str(desc),
            ]
        )
        == 0
    )
    d = registry.load("scale")
    assert d.table.column("price_per_s").to_pylist()[2] == pytest.approx(0.45 / 3600)
    assert d.meta.licence == "CC0"
    oracle = Oracle(d)
    assert oracle.space.config(oracle.optimum()) == {"n": 4}  # 120 s x 0.45 < 90 s x 0.85


def test_a_measured_cost_column_gives_a_per_configuration_price(tmp_path):
    (tmp_path / "c.csv").write_text("k,t,c\na,10,1.0\na,12,1.3\nb,5,2.0\n")
    (tmp_path / "c.yaml").write_text(
        "optfarm: table/1\nname: costly\ndimensions: [{name: k, kind: categorical}]\n"
        "columns: {time: t}\nprice: {cost_column: c}\n"
    )
    assert main(["datasets", "import", "csv", "--from", str(tmp_path / "c.csv")]) == 0
    d = registry.load("costly")
    assert d.table.column("cost").to_pylist() == [1.0, 1.3, 2.0]  # measured, kept
    price = d.space().price_per_s
    assert price[0] == pytest.approx((1.0 / 10 + 1.3 / 12) / 2) and price[1] == 0.4


def test_a_description_whose_problem_needs_an_unmapped_column(tmp_path, capsys):
    (tmp_path / "c.csv").write_text("k,t,p\na,10,1.0\nb,5,2.0\n")
    (tmp_path / "c.yaml").write_text(
        "optfarm: table/1\nname: x\ndimensions: [{name: k, kind: categorical}]\n"
        "columns: {time: t}\nprice: {column: p}\n"
        "objective: max accuracy\n"
    )
    assert main(["datasets", "import", "csv", "--from", str(tmp_path / "c.csv")]) == 2
    err = capsys.readouterr().err
    assert "c.yaml" in err and "'accuracy'" in err and "columns.accuracy" in err
