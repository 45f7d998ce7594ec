"""``farm leaderboard SPEC --plan``: the board's runs and price, nothing run or written."""

from __future__ import annotations

import json

import pytest

from optfarm.farm.cli import main
from optfarm.oracle.registry import load

SPEC = """name: plan-board
datasets: [synthetic]
optimizers: [random, eic-usd]
seeds: 3
tracking: {enabled: false}
board: {budgets: [2, 8], evaluations: [2, 4]}
"""


@pytest.fixture
def spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPTFARM_DATA", str(tmp_path / "cache"))
    load("synthetic")  # the dataset cache is made by the first load, plan or not
    (tmp_path / "board.yaml").write_text(SPEC)
    return tmp_path / "board.yaml"


def _files(folder):
    return sorted(p.relative_to(folder) for p in folder.rglob("*"))


def test_plan_prints_runs_and_price_and_runs_nothing(spec, capsys):
    before = _files(spec.parent)
    assert (
        main(["leaderboard", str(spec), "--plan", "--plan-steps", "2", "--cpus", "4", "--json"])
        == 0
    )
    plan = json.loads(capsys.readouterr().out)
    assert _files(spec.parent) == before  # no sweep folder, no store, no MLflow
    rows = {r["optimizer"]: r for r in plan["rows"]}
    assert set(rows) == {"random", "eic-usd"} and plan["runs"] == 6
    assert all(r["runs"] == 3 and r["evaluations_per_run"] == 8 for r in rows.values())
    for name, r in rows.items():  # priced with what was measured
        cost = plan["step_costs"][name]
        assert cost["dataset"] == "synthetic" and cost["evaluations"] == 2
        assert cost["after_bootstrap"] and cost["cpu_per_evaluation_s"] > 0
        assert r["cpu_hours"] == pytest.approx(3 * 8 * cost["cpu_per_evaluation_s"] / 3600)
    total = sum(r["cpu_hours"] for r in rows.values())
    assert plan["cpu_hours"] == pytest.approx(total) and plan["cpus"] == 4
    longest = max(r["longest_run_s"] for r in rows.values()) / 3600
    assert plan["wall_hours"] == pytest.approx(max(total / 4, longest))

    # priced again from that measurement, as a table
    (spec.parent / "costs.json").write_text(json.dumps(plan))
    assert (
        main(
            [
                "leaderboard",
                str(spec),
                "--plan",
                "--step-costs",
                str(spec.parent / "costs.json"),
                "--cpus",
                "2",
                "--seeds",
                "5",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "plan-board: 10 runs, nothing run or written" in text and "from " in text
    assert "random" in text and "eic-usd" in text and "on 2 CPUs (--cpus)" in text
    assert not (spec.parent / "sweeps-out").exists()


def test_plan_with_costs_lacking_an_optimizer_is_one_line(spec, capsys):
    (spec.parent / "costs.json").write_text(json.dumps({"step_costs": {"random": {}}}))
    assert (
        main(["leaderboard", str(spec), "--plan", "--step-costs", str(spec.parent / "costs.json")])
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no measurement of eic-usd" in err[0]


def test_plan_needs_a_cluster_it_can_count(spec, capsys, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:8265")
    assert main(["leaderboard", str(spec), "--plan"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give them with --cpus N" in err[0]
    assert main(["leaderboard", str(spec.parent), "--plan"]) == 2  # a folder: nothing to price
    assert "--plan prices a SPEC" in capsys.readouterr().err
