"""The described-table format's expressions, units, metrics and discovery: what each
feature computes, and malformed input rejected with one line naming the file, the key or
column and the 1-based CSV line."""

from __future__ import annotations

import pytest

from optfarm.farm.cli import main
from optfarm.oracle import registry
from optfarm.oracle.oracle import Oracle

# a MALIBOO-style table: "#vm", time in ms, "-cost" the negated VM x ms
TABLE = """#vm,time,-cost,p95 latency (ms)
2,300000,-600000,90
2,310000,-620000,95
4,200000,-800000,70
8,150000,-1200000,40
"""
HEAD = "optfarm: table/1\nname: byo\n"
DIMS = 'dimensions: [{name: n_vm, column: "#vm", kind: ordinal}]\n'


def _import(tmp_path, description, table=TABLE, name="job"):
    (tmp_path / f"{name}.csv").write_text(table)
    (tmp_path / f"{name}.optfarm.yaml").write_text(description)
    return main(["datasets", "import", "csv", "--from", str(tmp_path / f"{name}.csv")])


def test_quoted_columns_negation_and_the_files_own_time_unit(tmp_path, isolated_cache, capsys):
    desc = (
        HEAD + DIMS + 'columns: {time: time}\nprice: {cost_column: "-`-cost`"}\n'
        'units: {time: ms, cost: VM x ms}\nconstraints: ["time<=205000"]\n'
    )
    assert _import(tmp_path, desc) == 0
    out = capsys.readouterr().out
    assert "constraint time<=205 s: 2 of 3 configurations meet it" in out
    assert "feasible: 2 of 3 configurations" in out
    d = registry.load("byo")
    assert d.table.column("cost").to_pylist() == [600000.0, 620000.0, 800000.0, 1200000.0]
    assert d.meta.problem.constraints[0].threshold == 205.0  # 205000 ms, stored in seconds
    assert d.meta.cost_unit == "VM x ms" and d.meta.dimensions[0].name == "n_vm"
    oracle = Oracle(d)
    assert oracle.space.config(oracle.optimum()) == {"n_vm": 4}


def test_an_explicit_unit_and_a_price_formula_over_quoted_names(tmp_path, isolated_cache, capsys):
    desc = (
        HEAD + DIMS + 'columns: {time: "`time` / 1000"}\n'
        'price: {formula: "`#vm` * 0.5"}\nconstraints: ["time <= 3.5 min"]\n'
    )
    assert _import(tmp_path, desc) == 0
    d = registry.load("byo")
    assert d.table.column("time").to_pylist()[0] == 300.0
    assert d.table.column("price_per_s").to_pylist()[2] == pytest.approx(2.0 / 3600)
    assert str(d.meta.problem.constraints[0]) == "time<=210"
    assert "feasible: 2 of 3" in capsys.readouterr().out


def test_a_constraint_on_a_named_metric_in_its_declared_unit(tmp_path, isolated_cache, capsys):
    desc = (
        HEAD + DIMS + 'columns: {time: time}\nmetrics: {p95_s: "`p95 latency (ms)` / 1000"}\n'
        'price: {formula: "`#vm` * 0.5"}\nunits: {time: ms, p95_s: s}\n'
        'constraints: ["p95_s <= 0.08 s"]\n'
    )
    assert _import(tmp_path, desc) == 0
    d = registry.load("byo")
    assert d.meta.measured == ("time", "cost", "p95_s")
    oracle = Oracle(d)
    assert oracle.true_value(0, metric="p95_s") == pytest.approx(0.0925)
    assert oracle.feasible_mask().tolist() == [False, True, True]
    obs = oracle.run(0)  # the named metric is replayed to the optimizers
    assert obs.value("p95_s") == pytest.approx(0.0925) and obs.metrics == {
        "p95_s": obs.value("p95_s")
    }


def test_a_constraint_every_or_no_configuration_meets_is_a_warning(
    tmp_path, isolated_cache, capsys
):
    desc = (
        HEAD + DIMS + 'columns: {time: time}\nprice: {formula: "`#vm` * 0.5"}\n'
        'units: {time: ms}\nconstraints: ["time<=205 s", "time <= 99 h"]\n'
    )
    assert _import(tmp_path, desc) == 0
    err = capsys.readouterr().err
    assert (
        "warning: constraint time<=356400 s: 3 of 3 configurations meet it (every "
        "configuration meets it"
    ) in err


def test_repeated_rows_ten_times_apart_are_a_one_line_warning(tmp_path, isolated_cache, capsys):
    """Two rows of one configuration whose times differ 10x or more (a unit mixed up, a run
    that hung): one line on stderr naming the widest configuration and its spread; the 3%
    apart of TABLE's #vm=2 says nothing."""
    desc = HEAD + DIMS + 'columns: {time: time}\nprice: {formula: "`#vm` * 0.5"}\n'
    desc += "units: {time: ms}\n"
    assert _import(tmp_path, desc) == 0
    assert "warning" not in capsys.readouterr().err
    spread = TABLE + "4,2000000,-8000000,70\n8,1600000,-1200000,40\n"  # 10x and 10.7x
    assert _import(tmp_path, desc.replace("name: byo", "name: spread"), spread, "spread") == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == [
        "  warning: 2 configuration(s) have repeated rows whose times differ 10x or more; "
        "the widest, n_vm=8: 150 s to 1,600 s (10.7x); a run draws one of them"
    ]


def test_only_our_description_is_discovered(tmp_path, isolated_cache, capsys):
    (tmp_path / "job.csv").write_text(TABLE)
    (tmp_path / "job.yaml").write_text("general_setting: {dataset: job.csv}\n")  # another tool's
    assert main(["datasets", "import", "csv", "--from", str(tmp_path / "job.csv")]) == 2
    err = capsys.readouterr().err
    assert "job.optfarm.yaml" in err and "job.yaml has no top-level 'optfarm:' key" in err
    (tmp_path / "job.optfarm.yaml").write_text(
        HEAD + DIMS + "columns: {time: time}\nprice: {formula: '`#vm` * 0.5'}\n"
    )
    assert main(["datasets", "import", "csv", "--from", str(tmp_path / "job.csv")]) == 0


BASE = HEAD + DIMS + "columns: {time: time}\nunits: {time: ms}\n"
CASES = {
    "unquoted # in a formula": (
        BASE + "price: {formula: '#vm * 3600000'}\n",
        ["job.optfarm.yaml", "'price.formula'", "'#vm * 3600000'", "backticks"],
    ),
    "unclosed backtick": (
        BASE + "price: {formula: '`#vm * 2'}\n",
        ["job.optfarm.yaml", "'price.formula'", "unclosed backtick"],
    ),
    "misspelt quoted column": (
        BASE + "price: {formula: '`#vms` * 2'}\n",
        ["job.optfarm.yaml", "'price.formula'", "'#vms'", "'#vm'", "misspelt"],
    ),
    "a call in a formula": (
        BASE + "price: {formula: \"__import__('os').getpid()\"}\n",
        ["job.optfarm.yaml", "'price.formula'", "not allowed"],
    ),
    "formula not positive on a row": (
        BASE + "price: {formula: '`#vm` - 4'}\n",
        ["job.csv", "price.formula = `#vm` - 4", "row 1 (line 2)", "must be positive"],
    ),
    "negative cost column without negation": (
        BASE + "price: {cost_column: -cost}\n",
        ["job.csv", "'-cost'", "row 1 (line 2)", "negative value"],
    ),
    "non-numeric cell in a formula's column": (
        BASE + "price: {formula: '`#vm` * 2'}\nmetrics: {p95: '`p95 latency (ms)` / 1000'}\n",
        ["job.csv", "'p95 latency (ms)'", "row 3 (line 4)", "'fast'"],
    ),
    "wrong unit for a named metric": (
        BASE.replace("units: {time: ms}", "units: {time: ms, p95: ms}")
        + "price: {formula: '`#vm` * 2'}\nmetrics: {p95: '`p95 latency (ms)`'}\n"
        "constraints: ['p95 <= 0.1 s']\n",
        ["job.optfarm.yaml", "'constraints'", "'p95 <= 0.1 s'", "unit 's'", "'ms'"],
    ),
    "unknown time unit in a constraint": (
        BASE + "price: {formula: '`#vm` * 2'}\nconstraints: ['time <= 3 weeks']\n",
        ["job.optfarm.yaml", "'constraints'", "'weeks'"],
    ),
    "unknown time unit": (
        HEAD + DIMS + "columns: {time: time}\nunits: {time: msec}\nprice: {formula: '`#vm`'}\n",
        ["job.optfarm.yaml", "'units'", "'msec'"],
    ),
    "units of an unmeasured metric": (
        BASE.replace("units: {time: ms}", "units: {time: ms, rmsd: A}")
        + "price: {formula: '`#vm`'}\n",
        ["job.optfarm.yaml", "'units.rmsd'", "not a measured metric"],
    ),
    "a metric name with spaces": (
        BASE + "price: {formula: '`#vm`'}\nmetrics: {p95 ms: '`p95 latency (ms)`'}\n",
        ["job.optfarm.yaml", "'metrics'", "'p95 ms'"],
    ),
    "a constraint on an unmapped metric": (
        BASE + "price: {formula: '`#vm`'}\nconstraints: ['rmsd <= 2']\n",
        ["job.optfarm.yaml", "'rmsd'", "metrics.rmsd is not given"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_expressions_and_units_are_rejected_with_one_line(
    case, tmp_path, isolated_cache, capsys
):
    desc, expected = CASES[case]
    table = (
        TABLE.replace("4,200000,-800000,70", "4,200000,-800000,fast")
        if case.startswith("non-numeric")
        else TABLE
    )
    assert _import(tmp_path, desc, table) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("farm: error: ") and "\n" not in err, err
    for part in expected:
        assert part in err, f"{part!r} not in {err!r}"
    assert list(isolated_cache.iterdir()) == []
