"""optfarm.farm.board.leaderboard and ``farm leaderboard``: runs read at equal budgets (the last
paid step, censored before any), the board's ranks and families on hand-made runs, and the
whole command on a user's own imported table (real runs, real Parquet, the report page)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from optfarm.farm.board.leaderboard import (
    Budget,
    best_by_family,
    build_boards,
    failure_rows,
    family,
    tidy_scores,
)
from optfarm.farm.cli import main
from optfarm.farm.cli.leaderboard import FIRST_LOOK
from optfarm.farm.report.analysis import analyse
from optfarm.farm.sweep.board_spec import load_board_spec
from optfarm.farm.sweep.results import load_sweep
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.registry import load
from tests.farm.test_report import make_run, sweep

MEAN = {"mean_config_cost": 2.0}


def test_a_run_is_read_at_the_last_step_it_paid_for_within_each_budget():
    # costs 1, 3, 4 (cumulative 1, 4, 8), CNO 4, 2, 1; the mean configuration cost is 2
    trace, summaries = sweep(
        [
            make_run(
                "a",
                "lynceus-cnn",
                "opt",
                0,
                [1, 3, 4],
                [4.0, 2.0, 1.0],
                [True, True, True],
                extra=MEAN,
            )
        ]
    )
    budgets = [
        Budget("cost", 0.25),
        Budget("cost", 2),
        Budget("cost", 3.9),
        Budget("cost", 50),
        Budget("evaluations", 1),
        Budget("evaluations", 40),
    ]
    tidy = tidy_scores(analyse(trace, summaries), budgets).set_index("budget")["score"]
    assert tidy["0.25x"] == math.inf  # $0.5: not even the first run paid for
    assert tidy["2x"] == 1.0  # $4: two runs, CNO 2 = one doubling
    assert tidy["3.9x"] == 1.0  # $7.8 < $8: the third run is not paid for
    assert tidy["50x"] == 0.0  # the run stopped: its last recommendation holds
    assert tidy["1 evals"] == 2.0 and tidy["40 evals"] == 0.0


def test_an_infeasible_recommendation_is_censored():
    trace, summaries = sweep(
        [make_run("a", "scout-x", "opt", 0, [1, 1], [1.0, 1.0], [False, True], extra=MEAN)]
    )
    tidy = tidy_scores(
        analyse(trace, summaries), [Budget("evaluations", 1), Budget("evaluations", 2)]
    )
    assert tidy["score"].tolist() == [math.inf, 0.0]


# the 3 x 4 example of tests/farm/test_ranks.py as runs: final CNO = 2^score
EXAMPLE = {
    "lynceus-cnn": {"A": 1.0, "B": 2.0, "C": 4.0},
    "lynceus-rnn": {"A": 1.0, "B": 1.0, "C": 2.0},
    "scout-join": {"A": 2.0, "B": math.inf, "C": 2**0.5},
    "cherrypick-tpch": {"A": 2**0.5, "B": math.inf, "C": math.inf},
}


def example_board():
    runs = []
    for table, by in EXAMPLE.items():
        for optimizer, cno in by.items():
            for seed in range(3):
                feasible = math.isfinite(cno)
                runs.append(
                    make_run(
                        f"{table}-{optimizer}-{seed}",
                        table,
                        optimizer,
                        seed,
                        [1.0, 1.0],
                        [8.0, cno if feasible else 1.0],
                        [True, feasible],
                        extra=MEAN,
                    )
                )
    # the anytime score spans $1 to $4: CNO 8 for its first half, the final CNO for the other
    return build_boards(
        analyse(*sweep(runs)), [Budget("cost", 0.5), Budget("cost", 1), Budget("cost", 2)]
    )["cno"]


def test_the_board_ranks_the_tables_as_computed_by_hand():
    board = example_board()
    assert board.headline.budget.label == "anytime"
    h = board.at["1x"]
    assert h.mean_ranks.to_dict() == {"A": 1.375, "B": 2.25, "C": 2.375}
    assert h.friedman[0] == pytest.approx(19 / 7)
    # at 0.5x ($1) every run has paid for one run, CNO 8: all tied
    assert board.at["0.5x"].mean_ranks.to_dict() == {"A": 2.0, "B": 2.0, "C": 2.0}
    assert h.cliques == [["A", "B", "C"]]


def test_best_per_family_and_where_each_optimizer_fails():
    board = example_board()
    best = best_by_family(board)
    assert best["Lynceus TF"] == (["A"], 1.25)
    assert best["Scout"] == (["C"], 1.0)
    assert best["CherryPick"] == (["A"], 1.0)
    fails = {r["optimizer"]: r for r in failure_rows(board)}
    assert fails["B"]["no feasible recommendation (most seeds)"] == (
        "cherrypick-tpch (3/3), scout-join (3/3)"
    )
    assert fails["C"]["last alone on"] == "lynceus-cnn, lynceus-rnn"
    assert fails["A"]["worst family"] == "Scout"


def test_families_by_table_name():
    assert [
        family(n)
        for n in (
            "lynceus-rnn",
            "scout-lr_huge_spark",
            "cherrypick-tpch",
            "guindani-kmeans",
            "synthetic",
            "trimtuner-cnn",
            "cloud-grid-9216",
            "myjob",
        )
    ] == [
        "Lynceus TF",
        "Scout",
        "CherryPick",
        "Guindani",
        "synthetic",
        "TrimTuner",
        "large grids",
        "your tables",
    ]


# -- the command on a user's own table ------------------------------------------------------
TABLE = """n_vm,tier,time_s,usd_per_h
1,hdd,900,0.10
2,hdd,520,0.20
4,hdd,300,0.40
8,hdd,210,0.80
1,ssd,700,0.14
2,ssd,380,0.28
4,ssd,200,0.56
8,ssd,150,1.12
1,nvme,650,0.20
2,nvme,330,0.40
4,nvme,190,0.80
8,nvme,120,1.60
"""
DESCRIPTION = """optfarm: table/1
name: myjob
dimensions:
  - {name: n_vm, kind: ordinal, log: true}
  - {name: tier, kind: categorical, values: [hdd, ssd, nvme]}
columns:
  time: time_s
price:
  column: usd_per_h
units: {time: s, cost: USD}
objective: min cost
constraints: ["time<=400"]
"""
SPEC = """name: my-board
datasets: [synthetic]
optimizers: [random, guindani, eic-usd]
seeds: 2
tracking: {enabled: false}
board: {budgets: [2, 8], evaluations: [2, 4]}
"""


@pytest.fixture
def imported(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTFARM_DATA", str(tmp_path / "cache"))
    (tmp_path / "job.csv").write_text(TABLE)
    (tmp_path / "job.optfarm.yaml").write_text(DESCRIPTION)
    assert main(["datasets", "import", "csv", "--from", str(tmp_path / "job.csv")]) == 0
    (tmp_path / "board.yaml").write_text(SPEC)
    return tmp_path


def test_one_table_board_is_named_after_the_job_and_runs_20_seeds(imported):
    resolved = load_board_spec(FIRST_LOOK, ["myjob"])
    assert resolved.sweep.name == "leaderboard-myjob" and resolved.sweep.seeds == 20
    assert "myjob" in resolved.sweep.description and "first look" not in resolved.sweep.name
    # the light peers are part of the default install: on the board, none left out (Optuna's
    # GP sampler needs optfarm[peers]: a note where it is missing)
    light = ("optuna-tpe", "optuna-cmaes", "optuna-random")
    names = {e.name for e in resolved.sweep.optimizer_entries()}
    assert set(light) <= names
    assert not [note for note in resolved.notes if any(name in note for name in light)]


def test_leaderboard_on_an_imported_table(imported, capsys):
    out = imported / "out"
    capsys.readouterr()
    code = main(
        [
            "leaderboard",
            "--datasets",
            "myjob",
            "--seeds",
            "5",
            "--serial",
            "--no-progress",
            "--no-tracking",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "CPU estimate: the other" in printed  # said before the other seeds ran
    assert "1 table, 5 seeds; headline: the anytime score" in printed
    assert "share of the table" in printed and not re.search(r"\d+ tables", printed)
    assert main(["leaderboard", str(out), "--no-tracking", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["name"] == "leaderboard-myjob"
    board = result["boards"]["cno"]
    assert board["tables"] == 1 and board["seeds"] == 5 and board["blocks"] == "seeds"
    assert board["headline"] == "anytime"
    # the peers are on it: ranked, or shown once as the optimizer whose choices they made
    # (TPE's first trials are its random sampler's, all this 3-evaluation budget buys)
    shown = {r["optimizer"] for r in board["standings"]}
    once = {note.split(":")[0] for note in board["shown_once"]}
    assert {"optuna-tpe", "optuna-cmaes", "optuna-random"} <= shown | once
    assert not shown & once
    # every budget row states its share of the 12-configuration table's price; each is capped
    # at a quarter of it (3 mean costs, 3 configurations), so no budget is exhaustive
    shares = {r["budget"]: r["share of the table"] for r in board["budgets"]}
    assert shares == {
        "5x": "25% of the price",
        "10x": "25% of the price",
        "20x": "25% of the price",
        "5 evals": "25% of the configurations",
        "10 evals": "25% of the configurations",
        "20 evals": "25% of the configurations",
    }
    assert all(r["exhaustive"] == "-" for r in board["budgets"])
    # the statistics count seeds, never "tables" that are seeds
    assert all("seeds" in r and "tables" not in r for r in board["statistics"])
    verdict = board["verdict"]
    assert verdict.startswith("On myjob (5 seeds)") and "At 5x (25% of the price)" in verdict
    assert "ahead" in verdict or "tie" in verdict
    page = (out / "leaderboard" / "report.html").read_text()
    assert page.index(verdict[:40]) < page.index("data:image/png")
    assert "leaderboard_cost_against_budget.png" in {Path(f).name for f in result["files"]}
    assert "optfarm leaderboard: leaderboard-myjob" in page
    # places: tied optimizers share one, and no tied optimizer is called best
    places = [r["place"] for r in board["standings"]]
    assert places == sorted(places) and places[0] == 1


def test_leaderboard_bad_input_is_one_line(imported, capsys):
    assert (
        main(
            [
                "leaderboard",
                str(imported / "board.yaml"),
                "--datasets",
                "nosuchjob",
                "--serial",
                "--no-tracking",
                "--out",
                str(imported / "o"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nosuchjob" in err[0]
    assert main(["leaderboard", "--budgets", "5,-1", "--datasets", "myjob"]) == 2
    assert "--budgets" in capsys.readouterr().err
    assert not (imported / "o").exists()


def test_a_partial_sweep_ranks_the_tables_every_optimizer_finished():
    runs = [
        make_run(f"{t}-{o}", t, o, 0, [1.0], [1.0 + i], [True], extra=MEAN)
        for t in ("lynceus-cnn", "lynceus-rnn", "scout-join")
        for i, o in enumerate("ABC")
        if (t, o) != ("scout-join", "C")
    ]
    board = build_boards(analyse(*sweep(runs)), [Budget("cost", 1)])["cno"]
    assert board.tables == ["lynceus-cnn", "lynceus-rnn"]
    assert board.left_out == ["scout-join: no runs of C on it"]
    assert board.headline.mean_ranks.to_dict() == {"A": 1.0, "B": 2.0, "C": 3.0}


def test_accuracy_tables_score_the_shortfall_from_the_optimum():
    # Accuracy_C 0 (no recommendation yet), 0.4, 0.8 against the optimum's 0.8
    trace, summaries = sweep(
        [
            make_run(
                "a",
                "trimtuner-cnn",
                "opt",
                0,
                [1, 1, 1],
                [0.0, 0.4, 0.8],
                [False, True, True],
                metric="accuracy_c",
                optimum=0.8,
                extra=MEAN,
            )
        ]
    )
    tidy = tidy_scores(analyse(trace, summaries), [Budget("evaluations", n) for n in (1, 2, 3)])
    assert tidy["metric"].unique().tolist() == ["accuracy_c"]
    assert tidy["score"].tolist() == [math.inf, 0.5, 0.0]


KMEANS_BOARD = """name: kmeans-board
datasets: [cherrypick-kmeans]
optimizers: [random, optuna-random]
seeds: 3
tracking: {enabled: false}
"""


def test_the_default_board_never_buys_the_whole_of_cherrypick_kmeans(
    shared_datasets, monkeypatch, tmp_path, capsys
):
    # random search and Optuna's random sampler ran this 47-configuration table to its end
    # at the old 50x headline budget (106% of its price)
    monkeypatch.setenv("OPTFARM_DATASETS_DIR", str(shared_datasets))
    (tmp_path / "board.yaml").write_text(KMEANS_BOARD)
    out = tmp_path / "out"
    assert (
        main(
            [
                "leaderboard",
                str(tmp_path / "board.yaml"),
                "--serial",
                "--no-progress",
                "--no-tracking",
                "--out",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    _, summaries = load_sweep(out)
    assert len(summaries) == 6
    assert not [s for s in summaries if s["stop_reason"] == "exhausted"]
    price = summaries[0]["table"]
    assert price["configurations"] == 47
    # a run stops at its first step that spends the budget (a quarter of the price here): it
    # overshoots by that configuration's cost at most
    costliest = float(np.nanmax(Oracle(load("cherrypick-kmeans")).true_cost[:, -1]))
    quarter = price["exhaustive_cost"] * 0.25
    assert all(s["exploration_cost"] < quarter + costliest for s in summaries)
    assert quarter + costliest < 0.5 * price["exhaustive_cost"]
    rows = result["boards"]["cno"]["budgets"]
    assert [r["budget"] for r in rows] == ["5x", "10x", "20x", "5 evals", "10 evals", "20 evals"]
    assert all(
        re.fullmatch(r"\d+% of the (price|configurations)", r["share of the table"])
        and r["exhaustive"] == "-"
        for r in rows
    )
    assert rows[1]["share of the table"] == "21% of the price"  # 10 of 47 mean costs
    assert rows[2]["share of the table"] == "25% of the price"  # 20 capped at 11.75
    assert rows[5]["share of the table"] == "23% of the configurations"  # 20 capped at 11
