"""``farm leaderboard SPEC --plan``: the board's runs and price, nothing run or written; the
plan's model of a run (``optfarm.farm.board.plan``: evaluations under the board's budget,
deadline and cost spread, CPU per evaluation beyond the measured ones); the resume estimate
of a one-table board (``remaining_cost``)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from optfarm.farm.board.plan import (
    Measurement,
    Table,
    anchors,
    board_tables,
    evaluations,
    measure,
    remaining_cost,
    resamplings,
    run_cpu,
)
from optfarm.farm.cli import main
from optfarm.farm.run.loop import run_one
from optfarm.farm.run.spec import RunSpec
from optfarm.farm.sweep.board_spec import resolve_board
from optfarm.farm.sweep.spec import expand
from optfarm.optimizers.models.gp import LARGE_N
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
    assert main(["leaderboard", str(spec), "--plan", "--cpus", "4", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert _files(spec.parent) == before  # no sweep folder, no store, no MLflow
    rows = {r["optimizer"]: r for r in plan["rows"]}
    assert set(rows) == {"random", "eic-usd"} and plan["runs"] == 6
    for name, r in rows.items():  # each seed-0 run timed whole on the board's one table
        (m,) = [Measurement.from_dict(d) for d in plan["measurements"][name]]
        assert m.dataset == "synthetic" and m.stop_reason in ("budget", "converged")
        assert r["runs"] == 3 and r["evaluations_per_run"] == m.evaluations
        assert r["measured_on"] == "synthetic: whole run"
        one = run_cpu(m, m.evaluations)
        assert one == pytest.approx(m.fixed_s + sum(m.step_s))
        assert r["cpu_hours"] == pytest.approx((3 * one + r["startup_s"]) / 3600)
        assert r["startup_s"] == pytest.approx(m.startup_s * 3)  # once per worker: 3 runs
    total = sum(r["cpu_hours"] for r in rows.values())
    assert plan["cpu_hours"] == pytest.approx(total) and plan["cpus"] == 4
    longest = max(r["longest_run_s"] for r in rows.values()) / 3600
    assert plan["wall_hours"] == pytest.approx(max(total / 4, longest))

    # priced again from those measurements: the same plan, and as a table
    (spec.parent / "plan.json").write_text(json.dumps(plan))
    again = ["leaderboard", str(spec), "--plan", "--measurements", str(spec.parent / "plan.json")]
    assert main([*again, "--cpus", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == plan["rows"]
    assert main([*again, "--cpus", "2", "--seeds", "5"]) == 0
    text = capsys.readouterr().out
    assert "plan-board: 10 runs, nothing run or written" in text and "as measured in" in text
    assert "random" in text and "eic-usd" in text and "on 2 CPUs (--cpus)" in text
    assert not (spec.parent / "sweeps-out").exists()


def test_plan_with_measurements_lacking_an_optimizer_is_one_line(spec, capsys):
    (spec.parent / "plan.json").write_text(json.dumps({"measurements": {"random": []}}))
    code = main(
        ["leaderboard", str(spec), "--plan", "--measurements", str(spec.parent / "plan.json")]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no measurement of eic-usd, random" in err[0]


@pytest.mark.parametrize("flag", [["--plan-seconds", "0"], ["--plan-check", "-1"]])
def test_plan_options_that_are_not_positive_are_one_line(spec, capsys, flag):
    assert main(["leaderboard", str(spec), "--plan", *flag]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag[0] in err[0] and f"got {flag[1]}" in err[0]


def test_plan_needs_a_cluster_it_can_count(spec, capsys, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:8265")
    assert main(["leaderboard", str(spec), "--plan"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give them with --cpus N" in err[0]
    assert main(["leaderboard", str(spec.parent), "--plan"]) == 2  # a folder: nothing to price
    assert "--plan prices a SPEC" in capsys.readouterr().err


def _cut(m: Measurement, k: int) -> Measurement:
    """``m`` as if the plan had stopped timing it after ``k`` evaluations."""
    return replace(
        m,
        step_s=m.step_s[: k - 1],
        phases=m.phases[:k],
        quantiles=m.quantiles[:k],
        stop_reason=None,
    )


def test_two_plans_agree_and_count_the_evaluations_the_runs_make(tmp_path, monkeypatch):
    """The model, not the clock: a plan that timed each seed-0 run for 12 evaluations and one
    that timed it for 16 (as two calls on a machine under different loads would) predict the
    evaluations of a run within 1.25x of each other and of the seed-0 run's own count; random
    search's within 1.25x of the mean its 16 seeds count, where the budget over the mean
    configuration cost (the plan before issue 42: 20 evaluations) is more than 1.25x off:
    the deadline caps the dear configurations' charges."""
    monkeypatch.setenv("OPTFARM_DATA", str(tmp_path / "cache"))
    board = resolve_board(
        {
            "name": "plan-model",
            "datasets": ["synthetic"],
            "optimizers": ["random", "lynceus-to-budget"],
            "seeds": 16,
            "board": {"budgets": [2, 20], "cap": None},
        },
        "plan-model",
    )
    runs = expand(board.sweep, "plan-model")
    tables = board_tables(runs)
    measured = measure(runs, tables, seconds=600)  # whole runs, cut below by count
    for name, (m,) in measured.items():
        assert m.stop_reason == "budget" and m.evaluations > 16
        first, second = (evaluations(_cut(m, k), tables["synthetic"]) for k in (12, 16))
        assert max(first, second) / min(first, second) <= 1.25, (name, first, second)
        for n in (first, second):
            assert 1 / 1.25 <= n / m.evaluations <= 1.25, (name, n, m.evaluations)
    counted = np.mean(
        [run_one(r).summary["n_evaluations"] for r in runs if r.optimizer == "random"]
    )
    (m,) = measured["random"]
    assert 1 / 1.25 <= evaluations(_cut(m, 12), tables["synthetic"]) / counted <= 1.25
    assert counted / 20 > 1.25


def _table(configs=100, budget=100.0) -> Table:
    return Table("t", configs, budget, None, np.arange(1.0, configs + 1))


def _measured(charges, phases, stop=None, steps=None, dataset="m", configs=100) -> Measurement:
    t = _table(configs)
    return Measurement(
        optimizer="o",
        dataset=dataset,
        configs=configs,
        budget=t.budget,
        startup_s=0.0,
        fixed_s=0.5,
        step_s=steps if steps is not None else [1.0] * (len(charges) - 1),
        phases=phases,
        quantiles=[t.quantile(c) for c in charges],
        stop_reason=stop,
        utc="",
    )


def test_evaluations_follow_the_budget_the_spread_and_the_optimizers_own_stop():
    # a bootstrap charged 50, then three guided evaluations of the cheapest configurations
    # left (charged 2, 3 and 4): the next ones take the cheapest left too (1, then 5, 6, ...),
    # until the budget of 100 is spent: 1 + 5 + ... + 10 = 46 > 41, 7 more
    m = _measured([50, 2, 3, 4], ["init", "bo", "bo", "bo"])
    assert evaluations(m, _table()) == 4 + 7
    # no guided evaluation measured: the bootstrap's ranks among those left, in turn; drawn
    # across the spread (the middle, a fifth, four fifths), about random search's count, the
    # budget over the mean charge (1000 / 50.5: 20)
    drawn = _measured([50, 20, 80], ["init"] * 3)
    assert evaluations(drawn, _table(budget=1000)) == 21
    # the same quantiles on a table whose charges are ten times dearer: the bootstrap's
    # evaluation (500 there) spends the budget, and the run stops after it
    dear = Table("dear", 100, 100.0, None, np.arange(10.0, 1001, 10))
    assert evaluations(m, dear) == 1
    # ... and where the measured evaluations spend it: the run stops at the one that does
    assert evaluations(_measured([20, 30, 40, 50], m.phases), _table(budget=60)) == 3
    # at most the table's configurations, and the spec's iteration limit
    assert evaluations(m, _table(budget=1e6)) == 100
    assert evaluations(m, replace(_table(), iterations=10)) == 10
    # an optimizer that stopped itself (the whole run measured, on another table of 100):
    # converged after 4 of 100 configurations -> 2 of 50; exhausted -> all 50; its own
    # iteration limit -> the same 4
    half = Table("half", 50, 1e6, None, np.arange(1.0, 51))
    for stop, n in (("converged", 2), ("exhausted", 50), ("iterations", 4)):
        assert evaluations(_measured([50, 2, 3, 4], m.phases, stop=stop), half) == n
    # a run measured whole on the table priced, under the same budget: its own count
    whole = _measured([50, 2, 3, 4], m.phases, stop="budget", dataset="t")
    assert evaluations(whole, _table()) == 4


def test_later_evaluations_keep_the_level_the_guided_ones_trend_to():
    # guided evaluations charged 60, 50, 40, 30, 20: their ranks among those left fall by a
    # tenth each (a trend, Kendall's p 0.017), so the later ones take the last one's rank,
    # a fifth (charges 19, 21, 22, ...: 7 more for the 150 left), not 0.6, 0.5, ... in turn
    # (61 + 52 + 42: 3 more)
    trend = _measured([50, 60, 50, 40, 30, 20], ["init"] + ["bo"] * 5)
    assert evaluations(trend, _table(budget=400)) == 6 + 7
    # the same charges in an order that shows no trend: their ranks in turn
    mixed = _measured([50, 60, 20, 50, 30, 40], trend.phases)
    assert evaluations(mixed, _table(budget=400)) == 6 + 4


def test_the_tables_measured_cover_the_boards_sizes_within_a_factor_of_2():
    sizes = {
        "g1": 20,
        "g2": 20,
        "g3": 41,
        "c": 47,
        "s1": 69,
        "s2": 69,
        "s3": 69,
        "l": 384,
        "y": 1440,
    }
    tables = [Table(name, n, 1.0, None, np.ones(n)) for name, n in sizes.items()]
    # 20 and 41 by 20; 41-138 by 69, the most common size up to twice 47; 384; 1440
    assert [t.name for t in anchors(tables)] == ["g1", "s1", "l", "y"]
    assert [t.name for t in anchors(tables[-2:-1])] == ["l"]  # a one-table board


def test_cpu_beyond_the_measured_evaluations_follows_the_guided_steps_line():
    # the guided steps' CPU grows by 0.1 per evaluation (one slow step under load ignored)
    steps = [0.2 + 0.1 * i for i in range(1, 10)]
    steps[4] = 9.0
    m = _measured([1] * 10, ["init"] + ["bo"] * 9, steps=steps)
    line = [0.2 + 0.1 * i for i in range(10, 20)]
    assert run_cpu(m, 20) == pytest.approx(0.5 + sum(steps) + sum(line))
    assert run_cpu(m, 5) == pytest.approx(0.5 + sum(steps[:4]))
    # 40 guided steps that grow with the square of their index (TrimTuner's do): the curve
    # read from them, not the line (the line: 0.55x of the run's CPU here)
    square = [1.0 + 0.001 * i**2 for i in range(1, 41)]
    grown = replace(_measured([1] * 41, ["init"] + ["bo"] * 40, steps=square), optimizer="eic")
    later = [1.0 + 0.001 * i**2 for i in range(41, LARGE_N + 1)]
    assert run_cpu(grown, LARGE_N + 1) == pytest.approx(0.5 + sum(square) + sum(later))
    # beyond LARGE_N evaluations an emcee GP keeps its samples: its steps drop to the
    # cheapest tenth of the timed guided ones, but for those that sample anew (the 101st,
    # then as the observations grow by a quarter), on the curve; a GP of its own (Optuna's
    # sampler) keeps growing
    assert resamplings(200) == [LARGE_N + 1, 127, 159, 199] and resamplings(127) == [101]
    kept = float(np.quantile(square, 0.1))
    beyond = [1.0 + 0.001 * i**2 if i == 101 else kept for i in range(LARGE_N + 1, 120)]
    assert run_cpu(grown, 120) == pytest.approx(0.5 + sum(square) + sum(later) + sum(beyond))
    # measured in its bootstrap only: the kept samples' steps at its steps' level
    design = replace(grown, phases=["init"] * 41)
    assert run_cpu(design, LARGE_N + 3) - run_cpu(design, LARGE_N + 2) == pytest.approx(
        float(np.quantile(square, 0.1))
    )
    peer = replace(grown, optimizer="optuna-gp")
    further = [1.0 + 0.001 * i**2 for i in range(41, 120)]
    assert run_cpu(peer, 120) == pytest.approx(0.5 + sum(square) + sum(further))
    # Lynceus' steps shrink with the configurations left: never below 0
    shrinking = _measured([1] * 10, m.phases, steps=[1.0 - 0.1 * i for i in range(1, 10)])
    assert run_cpu(shrinking, 100) == pytest.approx(0.5 + sum(1.0 - 0.1 * i for i in range(1, 10)))


def _record(
    optimizer: str, seed: int, cpu: float, wall: float, pid: int, end: float = 1000.0
) -> tuple[str, dict]:
    """(run key, stored record) of a done run on table ``t``, ended at ``end``."""
    run = RunSpec("t", optimizer, seed)
    spec = {"optimizer": optimizer, "dataset": "t", "params": {}, "seed": seed}
    return run.run_key, {
        "status": "done",
        "spec": spec,
        "cpu_s": cpu,
        "duration_s": wall,
        "finished_at": end,
        "where": {"node_id": "n", "pid": pid},
    }


def test_the_resume_estimate_prices_the_runs_left_at_their_own_optimizers_pace():
    # random search's runs cheap, Lynceus' dear
    runs = [RunSpec("t", name, seed) for seed in range(5) for name in ("random", "lynceus")]
    first = [r.run_key for r in runs if r.seed == 0]
    records = dict([_record("random", 0, 1.0, 2.0, 1), _record("lynceus", 0, 100.0, 120.0, 2)])
    # a resume: every cheap run done by an earlier call, the dear ones left
    records.update(_record("random", s, 1.0, 2.0, 1) for s in range(1, 5))
    left = remaining_cost(records, first, runs)
    assert (left.runs, left.cpu_s, left.workers) == (4, 400.0, 2)  # not 4 x the mean, 202
    assert left.wall_s == 4 * 120.0 / 2 and left.first_cpu_s == 101.0
    # the same stored records give the same estimate, whichever call ran which of them
    assert remaining_cost(dict(reversed(records.items())), first, runs) == left
    # a failed run is run again: left, at its optimizer's pace
    records[runs[2].run_key] = {**records[runs[2].run_key], "status": "failed"}
    assert (
        remaining_cost(records, first, runs).runs,
        remaining_cost(records, first, runs).cpu_s,
    ) == (5, 401.0)
    assert remaining_cost({}, first, runs) is None


def test_the_resume_estimate_counts_the_workers_that_ran_at_one_time_and_a_resumed_runs_cpu():
    """A first seed run one run at a time by three processes (a board stopped and resumed
    twice) had one worker, not three; a run resumed from a checkpoint records its last
    attempt's wall time (10 s) and its CPU over every attempt (100 s): it takes at least its
    CPU (before, '3 workers' and the 10 s gave a wall time a sixth of the truth)."""
    names = ("random", "lynceus", "eic")
    runs = [RunSpec("t", name, seed) for seed in range(3) for name in names]
    first = [r.run_key for r in runs if r.seed == 0]
    records = dict(
        [
            _record("random", 0, 1.0, 2.0, pid=1, end=100.0),
            _record("lynceus", 0, 50.0, 60.0, pid=2, end=200.0),
            _record("eic", 0, 100.0, 10.0, pid=3, end=300.0),  # resumed
        ]
    )
    left = remaining_cost(records, first, runs)
    assert (left.runs, left.workers, left.cpu_s) == (6, 1, 302.0)
    assert left.wall_s == 2 * (2.0 + 60.0 + 100.0)
    # two at one time: the wall time halved, never below the longest run's
    records.update([_record("lynceus", 0, 50.0, 60.0, pid=2, end=305.0)])
    left = remaining_cost(records, first, runs)
    assert left.workers == 2 and left.wall_s == 162.0
    one = [r for r in runs if r.optimizer == "eic" and r.seed == 1]
    assert remaining_cost(records, first, one).wall_s == 100.0


def test_a_resumed_board_estimates_what_is_left_from_its_stored_first_seed(spec, capsys):
    """A board whose first seed an earlier call ran: its resume says what the runs left take
    at their own optimizers' stored first-seed CPU and wall time (before issue 42 it read the
    resume's own wall time, the skipped first seed's well under a second: '1.0 minutes' for
    runs that took far more, 'in 0 s')."""
    from optfarm.farm.store.store import Store

    out = spec.parent / "out"
    board = ["leaderboard", str(spec), "--serial", "--no-tracking", "--no-progress"]
    assert main([*board, "--seeds", "1", "--out", str(out)]) == 0  # the first seed only
    records = Store(out).scan().records
    first = {r["spec"]["optimizer"]: r for r in records.values()}
    assert set(first) == {"random", "eic-usd"}
    capsys.readouterr()
    # the resume: 20 seeds of each left (a first seed of both took 0.09-0.6 s here, by load)
    assert main([*board, "--seeds", "21", "--out", str(out)]) == 0
    (line,) = [s for s in capsys.readouterr().out.splitlines() if s.startswith("CPU estimate")]
    cpu = 20 * sum(r["cpu_s"] for r in first.values())
    wall = 20 * sum(r["duration_s"] for r in first.values())
    assert f"the other 40 runs take about {cpu:.0f} s of CPU, {wall:.0f} s on 1 worker" in line
    assert wall >= 1.0  # so that a resume's own sub-second wall time would not read the same
