"""Bring your own job: tables of jobs optfarm has never seen import from their raw form (no
pre-processing), and their facts match an independent pandas computation."""

from __future__ import annotations

import json
import math

import pytest

from optfarm.farm.cli import main
from optfarm.oracle import registry
from optfarm.oracle.oracle import Oracle

from .corpus import TABLES, expected_facts


def write_job(job, folder, suffix=".optfarm.yaml"):
    """The raw CSV and its description next to it; returns the CSV's path."""
    path = folder / f"{job.name}.csv"
    job.frame.to_csv(path, index=False)
    path.with_name(job.name + suffix).write_text(job.description)
    return path


@pytest.mark.parametrize("name", sorted(TABLES))
def test_a_raw_table_imports_as_it_is_with_the_right_facts(name, tmp_path, isolated_cache, capsys):
    job = TABLES[name](seed=0)
    suffix = ".yaml" if name.endswith("1d") else ".optfarm.yaml"  # marker key, or suffix
    assert main(["datasets", "import", "csv", "--from", str(write_job(job, tmp_path, suffix))]) == 0
    out = capsys.readouterr()
    want = expected_facts(job)
    assert f"feasible: {want['n_feasible']} of {want['n_configs']} configurations" in out.out
    assert "warning" not in out.err
    d = registry.load(job.name)
    facts = Oracle(d).summary()
    assert (facts["n_rows"], facts["n_configs"], facts["n_feasible"]) == (
        want["n_rows"],
        want["n_configs"],
        want["n_feasible"],
    )
    oracle = Oracle(d)
    best = oracle.optimum()
    assert oracle.true_value(best, metric="cost") == pytest.approx(want["optimum_cost"], rel=1e-9)
    config = oracle.space.config(best)
    raw = want["optimum"] if isinstance(want["optimum"], tuple) else (want["optimum"],)
    assert [_plain(v) for v in config.values()] == [_plain(v) for v in raw]
    for metric in job.metrics:
        assert metric in d.meta.measured and math.isfinite(oracle.true_value(best, metric=metric))


def test_the_corpus_covers_the_shapes_asked_for():
    jobs = {name: TABLES[name](seed=0) for name in TABLES}
    facts = {name: expected_facts(job) for name, job in jobs.items()}
    assert len(jobs) >= 8
    assert any(len(j.dims) == 1 and facts[n]["n_configs"] == 20 for n, j in jobs.items())
    assert any(len(j.dims) == 4 and facts[n]["n_configs"] == 10_000 for n, j in jobs.items())
    assert any(
        len(j.dims) == 8 and j.constraints[0][0] not in ("time", "cost") for j in jobs.values()
    )
    assert any(j.time_scale == 1e-3 for j in jobs.values())  # time in ms
    names = [c for j in jobs.values() for c in j.frame.columns]
    assert (
        any("#" in c for c in names)
        and any("-" in c for c in names)
        and any(" " in c for c in names)
    )
    assert all(facts[n]["n_rows"] > facts[n]["n_configs"] for n in jobs)  # repeated rows
    assert all(0 < facts[n]["n_feasible"] < facts[n]["n_configs"] for n in jobs)


def test_the_guindani_format_takes_any_vm_time_cost_table(tmp_path, isolated_cache):
    """A ``#vm,time,-cost`` table imports with the built-in guindani format too, with the
    same facts under the same limit."""
    job = TABLES["spark-vms-1d"](seed=0)
    path = tmp_path / "myquery.csv"
    job.frame.to_csv(path, index=False)
    assert main(["datasets", "import", "guindani", "--from", str(path)]) == 0
    d = registry.load("guindani-myquery")
    oracle = Oracle(d, d.meta.problem.with_overrides(constraints=[c for c in [_constraint(job)]]))
    want = expected_facts(job)
    assert int(oracle.feasible_mask().sum()) == want["n_feasible"]
    assert oracle.true_value(oracle.optimum(), metric="cost") == pytest.approx(
        want["optimum_cost"], rel=1e-9
    )


def _plain(value):
    """A dimension value as a number where it is one (1 and 1.0 alike), else its text."""
    try:
        return float(value)
    except ValueError:
        return str(value)


def _constraint(job):
    from optfarm.oracle.problem import Constraint

    metric, op, thr = job.constraints[0]
    return Constraint(metric, op, thr)


def test_farm_run_on_a_table_constrained_on_a_named_metric(tmp_path, isolated_cache, capsys):
    job = TABLES["hpc-energy-2d"](seed=0)
    assert main(["datasets", "import", "csv", "--from", str(write_job(job, tmp_path))]) == 0
    capsys.readouterr()
    assert (
        main(
            ["run", "--dataset", job.name, "--optimizer", "guindani", "--iterations", "5", "--json"]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["recommendation"] is None or summary["recommendation"]["config_id"] >= 0
    # the trace carries energy (its metrics map): Table 1 counts on it, the check shows it
    assert 0 <= summary["recurring_job"]["unfeasible_executions"] <= 5
    if summary["recommendation"] is not None:
        [check] = [c for c in summary["recommendation"]["constraints"] if c["metric"] == "energy"]
        assert check["observed"] and all(v > 0 for v in check["observed"])
