"""`farm run` end to end on the built-in synthetic dataset: the run loop, trace and summary."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from optfarm.farm.cli import main
from optfarm.farm.run.loop import TIMING_COLUMNS, TRACE_SCHEMA, run_one
from optfarm.farm.run.spec import RunSpec


def test_run_json_summary_has_the_documented_fields(capsys):
    assert (
        main(["run", "--optimizer", "random", "--seed", "4", "--iterations", "25", "--json"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    for key in (
        "dataset",
        "optimizer",
        "seed",
        "n_evaluations",
        "exploration_cost",
        "recommendation",
        "exploration_cost_to_reach",
        "recommendation_latency_s",
    ):
        assert key in out
    assert out["dataset"] == "synthetic" and out["optimizer"] == "random" and out["seed"] == 4
    assert out["n_evaluations"] == 25
    assert set(out["exploration_cost_to_reach"]) == {"cno<=2", "cno<=1.1", "cno<=1"}
    assert out["recommendation_latency_s"]["median"] >= 0
    if out["recommendation"] is not None:
        assert out["recommendation"]["cno"] >= 1.0 or not out["recommendation"]["feasible"]


def test_trace_rows_add_up(tmp_path):
    result = run_one(RunSpec("synthetic", "random", seed=2, iterations=30))
    trace = result.trace
    assert trace.schema.equals(TRACE_SCHEMA)
    assert trace.num_rows == 30
    cost = trace.column("cost").to_pylist()
    cum = trace.column("cum_exploration_cost").to_pylist()
    assert cum == pytest.approx([sum(cost[: i + 1]) for i in range(len(cost))])
    assert trace.column("step").to_pylist() == list(range(30))
    assert len(set(trace.column("config_id").to_pylist())) == 30  # random never repeats
    assert result.summary["exploration_cost"] == pytest.approx(cum[-1])
    # the incumbent's CNO is >= 1 whenever it is truly feasible
    for cno, feasible in zip(
        trace.column("incumbent_cno").to_pylist(), trace.column("incumbent_feasible").to_pylist()
    ):
        assert not feasible or cno >= 1.0 - 1e-12


def test_cost_to_reach_is_the_first_crossing():
    result = run_one(RunSpec("synthetic", "random", seed=5))  # runs every configuration
    s = result.summary
    assert s["stop_reason"] == "exhausted" and s["n_evaluations"] == 360
    t = result.trace.to_pylist()
    for label, thr in (("cno<=2", 2.0), ("cno<=1.1", 1.1)):
        first = next((r for r in t if r["incumbent_feasible"] and r["incumbent_cno"] <= thr), None)
        expected = None if first is None else first["cum_exploration_cost"]
        assert s["exploration_cost_to_reach"][label] == expected


def test_budget_stops_the_run():
    result = run_one(RunSpec("synthetic", "random", seed=1, budget=5.0))
    s = result.summary
    assert s["stop_reason"] == "budget"  # the loop's or random's own budget check
    cum = result.trace.column("cum_exploration_cost").to_pylist()
    assert cum[-2] < 5.0  # every run but the last started under the budget


def test_until_stops_at_the_first_step_that_meets_the_target():
    full = run_one(RunSpec("synthetic", "random", seed=5)).summary
    spec = RunSpec("synthetic", "random", seed=5, until="cno<=1.1")
    result = run_one(spec)
    s, cno = result.summary, result.trace.column("incumbent_cno").to_pylist()
    assert s["stop_reason"] == "target" and cno[-1] <= 1.1 and min(cno[:-1]) > 1.1
    assert (
        s["exploration_cost_to_reach"]["cno<=1.1"]
        == full["exploration_cost_to_reach"]["cno<=1.1"]
        == result.trace.column("cum_exploration_cost").to_pylist()[-1]
    )
    # a key written before the field existed still matches; the target is part of the key
    assert RunSpec("synthetic", "random", seed=9).run_key == "269b20208bc4fe83"
    assert spec.run_key != RunSpec("synthetic", "random", seed=5).run_key
    with pytest.raises(ValueError, match="not a target of this cno problem"):
        run_one(RunSpec("synthetic", "random", until="acc_c>=0.9opt"))


def test_same_spec_same_trace_and_key():
    a = run_one(RunSpec("synthetic", "random", seed=9, iterations=12))
    b = run_one(RunSpec("synthetic", "random", seed=9, iterations=12))
    drop = list(TIMING_COLUMNS)
    assert a.trace.drop_columns(drop).to_pandas().equals(b.trace.drop_columns(drop).to_pandas())
    assert a.summary["run_key"] == b.summary["run_key"]
    assert (
        RunSpec("synthetic", "random", seed=9).run_key
        != RunSpec("synthetic", "random", seed=10).run_key
    )
    # defaults made explicit do not change the key
    assert (
        RunSpec("synthetic", "random", params={"n_init": 1}).run_key
        == RunSpec("synthetic", "random").run_key
    )


def test_run_keys_survive_an_added_parameter_and_change_with_the_version(monkeypatch):
    from optfarm.optimizers.base import Param
    from optfarm.optimizers.registry import get

    lynceus = get("lynceus")
    plain = RunSpec("lynceus-cnn", "lynceus", seed=3)
    tuned = RunSpec("lynceus-cnn", "lynceus", seed=3, params={"la": 2, "gamma": 0.5})
    before = plain.run_key, tuned.run_key
    monkeypatch.setattr(lynceus, "params", lynceus.params + (Param("new_knob", 3),))
    assert (plain.run_key, tuned.run_key) == before  # stored runs still match
    assert RunSpec("lynceus-cnn", "lynceus", seed=3, params={"new_knob": 3}).run_key == before[0]
    assert RunSpec("lynceus-cnn", "lynceus", seed=3, params={"new_knob": 4}).run_key != before[0]
    monkeypatch.setattr(lynceus, "version", lynceus.version + 1)
    assert plain.run_key != before[0] and tuned.run_key != before[1]


def test_constraint_override_changes_the_problem(capsys):
    assert (
        main(
            [
                "run",
                "--optimizer",
                "random",
                "--iterations",
                "5",
                "--constraint",
                "time<=100000",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["problem"]["constraints"] == ["time<=100000"]


def test_trace_file_is_written(tmp_path, capsys):
    path = tmp_path / "trace.parquet"
    assert main(["run", "--optimizer", "random", "--iterations", "7", "--trace", str(path)]) == 0
    assert pq.read_table(path).num_rows == 7
    assert "recommended" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--optimizer", "nope"], "unknown optimizer 'nope'"),
        (["run", "--dataset", "nope"], "unknown dataset 'nope'"),
        (["run", "--param", "n_init"], "is not of the form key=value"),
        (["run", "--param", "n_init=abc"], "parameter 'n_init' must be int"),
        (["run", "--iterations", "0"], "--iterations must be at least 1, got 0"),
        (["run", "--budget", "-1"], "--budget must be positive"),
        (["run", "--until", "cno<1"], "--until 'cno<1' is not a target"),
        (["run", "--param", "bogus=1"], "unknown parameter 'bogus'"),
        (["run", "--constraint", "time<300"], "is not of the form"),
        (["run", "--objective", "cheapest"], "is not of the form"),
        # a problem the optimizer cannot pose (ProblemError)
        (
            ["run", "--optimizer", "lynceus", "--objective", "max accuracy"],
            "lynceus: the objective must be 'min cost'",
        ),
        (
            ["run", "--optimizer", "guindani", "--objective", "min time"],
            "guindani: the objective must be 'min cost'",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_console_script_runs_the_default_job():
    out = subprocess.run(
        [sys.executable, "-m", "optfarm", "run", "--iterations", "3"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # a 3-evaluation run: a bootstrap of 2 (init_share), then Lynceus may stop by itself
    assert re.match(r"lynceus on synthetic, seed 0: [23] evaluations in [\d.]+ s; ", out)


def test_latency_is_observe_plus_suggest_with_the_first_step_apart():
    result = run_one(RunSpec("synthetic", "lynceus", seed=2, iterations=8, params={"la": 0}))
    t = result.trace.to_pylist()
    lat = result.summary["recommendation_latency_s"]
    assert t[0]["recommendation_latency_s"] != t[0]["recommendation_latency_s"]  # NaN
    assert lat["warmup"] == t[0]["warmup_s"] > 0
    later = [r["recommendation_latency_s"] for r in t[1:]]
    assert all(r["warmup_s"] != r["warmup_s"] for r in t[1:])
    assert lat["median"] == statistics.median(later)
    # each step's latency includes the observe() of the step before it (model fits)
    assert all(later[i] >= t[i]["model_fit_s"] for i in range(len(later)))
