"""optfarm.farm.board.leaderboard and ``farm leaderboard``: runs read at equal budgets (the last
paid step, censored before any), the board's ranks and families on hand-made runs, and the
whole command on a user's own imported table (real runs, real Parquet, the report page)."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from optfarm.farm.board.decision import budget_lines, decision, decision_rows
from optfarm.farm.board.leaderboard import (
    Budget,
    best_by_family,
    build_boards,
    failure_rows,
    family,
    headroom_rows,
    heat_values,
    last_budget,
    pair_rows,
    percent,
    standings_rows,
    statistics_rows,
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
NAN = re.compile(r"\bnan\b", re.IGNORECASE)


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
    # every budget row states its share of the 12-configuration table's price; 5x, 10x and
    # 20x are capped at a quarter of it (3 mean costs), so they buy the same and show as one
    # row, as do 5, 10 and 20 evaluations (capped at 3); no budget is exhaustive
    shares = {r["budget"]: r["share of the table"] for r in board["budgets"]}
    assert shares == {
        "5x = 10x = 20x": "25% of the price (the cap: they buy the same)",
        "5 = 10 = 20 evals": "25% of the configurations (the cap: they buy the same)",
    }
    assert all(r["exhaustive"] == "-" for r in board["budgets"])
    # the statistics count seeds, never "tables" that are seeds
    assert all("seeds" in r and "tables" not in r for r in board["statistics"])
    decision = board["decision"]
    assert decision.startswith("On myjob (5 seeds), ") and "random search" in decision
    assert len(decision.split()) <= 80 and "at 5x = 10x = 20x (25% of the price)" in decision
    # 5 seeds cannot separate two optimizers (a signed-rank test needs 6): nothing beats
    # random search, and every optimizer shares the first place
    assert "nothing here beats random search at 5x = 10x = 20x" in decision
    assert decision.endswith(
        "5 seeds cannot separate any two optimizers (the signed-rank test needs 6)."
    )
    assert {r["place"] for r in board["standings"]} == {1}
    assert board["detail"][0].startswith("5x = 10x = 20x (25% of the price): all ")
    page = (out / "leaderboard" / "report.html").read_text()
    first = re.search(r"<h1>.*?</h1>\s*<p[^>]*>(.*?)</p>", page, re.S).group(1)
    assert html.unescape(first) == decision
    assert page.index(decision[:40]) < page.index("data:image/png")
    assert "leaderboard_cost_against_budget.png" in {Path(f).name for f in result["files"]}
    assert "optfarm leaderboard: leaderboard-myjob" in page
    assert not NAN.search(printed) and not NAN.search(page)


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
        re.fullmatch(r"\d+(\.\d)?% of the (price|configurations)", r["share of the table"])
        and r["exhaustive"] == "-"
        for r in rows
    )
    assert rows[1]["share of the table"] == "21% of the price"  # 10 of 47 mean costs
    assert rows[2]["share of the table"] == "25% of the price"  # 20 capped at 11.75
    assert rows[5]["share of the table"] == "23% of the configurations"  # 20 capped at 11


# -- the decision ---------------------------------------------------------------------------
PRICED = {"mean_config_cost": 1.0, "table": {"exhaustive_cost": 40.0, "configurations": 40}}


def decided_board(cnos, seeds=8, table="lynceus-cnn", extra=PRICED):
    """A one-table board of runs of two steps of cost 1 each, every seed the same: credited
    CNO ``cnos[name][0]`` after $1, ``cnos[name][1]`` after $2 (inf: nothing feasible)."""
    runs = [
        make_run(
            f"{name}-{seed}",
            table,
            name,
            seed,
            [1.0, 1.0],
            [c if math.isfinite(c) else 1.0 for c in cno],
            [math.isfinite(c) for c in cno],
            extra=extra,
        )
        for name, cno in cnos.items()
        for seed in range(seeds)
    ]
    return build_boards(analyse(*sweep(runs)), [Budget("cost", 1), Budget("cost", 2)])["cno"]


def test_the_decision_names_what_beats_random_search_with_ties_listed():
    # at 2x A and B reach the optimum, random search twice its cost, C and D four times; every
    # seed the same, so that over 9 seeds each pair that differs is separated (p 2 / 2^9, Holm
    # over the 10 pairs 0.039)
    board = decided_board(
        {"random": [8, 2], "A": [8, 1], "B": [16, 1], "C": [8, 4], "D": [math.inf, 4]}, seeds=9
    )
    text = decision(board)
    assert text == (
        "On lynceus-cnn (9 seeds), nothing here beats random search at 1x (2.5% of the price): "
        "it is at 8 times the optimum's cost in half the seeds (0 of 9 with nothing feasible); "
        "at 2x (5% of the price) use A (or any of A, B): separated from random search, median "
        "CNO 1.00 vs 2.00, p = 0.039."
    )
    assert len(text.split()) <= 80
    # places only where the data separate: A and B share the first, random search is third
    assert board.at["2x"].places().to_dict() == {"A": 1, "B": 1, "random": 3, "C": 4, "D": 4}
    assert board.at["1x"].places().to_dict() == {"A": 1, "C": 1, "random": 1, "B": 4, "D": 5}
    assert [r["use"] for r in decision_rows(board)] == [[], ["A", "B"]]
    lines = budget_lines(board)
    assert lines[1].startswith("2x (5% of the price): 1st: A, B; 3rd: random search; 4th: C, D;")
    assert "the data separate A from random search (Holm p = 0.039 over 9 seeds)" in lines[1]


def test_nothing_beats_random_search_says_how_close_it_is_and_its_infeasible_runs():
    # 3 of 8 random runs have nothing feasible at 1x; 5 seeds could not separate anything
    runs = {"random": [1.1, 1.0], "A": [1.2, 1.0]}
    board = decided_board(runs, seeds=5)
    text = decision(board)
    assert (
        "nothing here beats random search at 1x (2.5% of the price): it is within 10% of " in text
    )
    assert "nor at 2x (5%): at the optimum (0 of 5)." in text
    assert board.headline.places().to_dict() == {"random": 1, "A": 1}


def test_a_long_decision_counts_the_tied_instead_of_naming_them():
    # 12 optimizers, each a different first step (or they would be shown once), all at the
    # optimum after $2, where random search stays at twice its cost in all 12 seeds
    names = [f"optimizer-with-a-long-name-{i}" for i in range(12)]
    board = decided_board(
        {"random": [2, 2], **{n: [1 + i / 100, 1] for i, n in enumerate(names)}}, seeds=12
    )
    text = decision(board)
    assert len(text.split()) <= 80 and "random search" in text
    assert "(or any of the 12 tied with it)" in text


def test_a_board_without_random_search_says_so():
    board = decided_board({"A": [8, 1], "B": [8, 2]}, seeds=3)
    assert "random search is not on this board" in decision(board)


# -- boards of partial sweeps ---------------------------------------------------------------
def partial_board(seeds: dict[str, int], tables=("lynceus-cnn",)):
    """A board whose optimizers ran ``seeds[name]`` seeds (0, 1, ...) on each table."""
    runs = [
        make_run(
            f"{t}-{name}-{seed}",
            t,
            name,
            seed,
            [1.0, 1.0],
            [4.0, 1.0 + i / 4 + seed / 100],
            [True, True],
            extra=PRICED,
        )
        for t in tables
        for i, (name, n) in enumerate(seeds.items())
        for seed in range(n)
    ]
    return build_boards(analyse(*sweep(runs)), [Budget("cost", 1), Budget("cost", 2)])["cno"]


def _every_row(board) -> str:
    rows = [
        standings_rows(board),
        statistics_rows(board),
        pair_rows(board),
        headroom_rows(board),
        [{"": line} for line in budget_lines(board)],
        [{"": decision(board)}],
    ]
    return json.dumps(rows, default=str)


def test_an_optimizer_with_fewer_seeds_is_left_out_by_name():
    board = partial_board({"random": 6, "A": 6, "B": 1})
    assert set(board.headline.mean_ranks.index) == {"random", "A"}
    assert board.left_out == ["B: 1 of 6 seeds, fewer than the others"]
    assert board.tidy.groupby("optimizer")["seed"].nunique().to_dict() == {"A": 6, "random": 6}
    assert not NAN.search(_every_row(board))


def test_seeds_not_every_optimizer_has_are_left_out():
    # the first seed of every optimizer, then random search's next three (a board stopped
    # just after its first seed): ranked on seed 0, the others named
    board = partial_board({"random": 4, "A": 1, "B": 1})
    assert board.left_out == ["lynceus-cnn seeds 1-3: not run by every optimizer on it"]
    assert set(board.tidy["seed"]) == {0} and set(board.tidy["optimizer"]) == {"random", "A", "B"}
    text = _every_row(board)
    assert not NAN.search(text)
    assert "1 seed cannot separate any pair: the signed-rank test needs 6" in " ".join(
        budget_lines(board)
    )


def test_a_table_with_fewer_seeds_of_some_optimizer_is_left_off():
    runs = {"random": 3, "A": 3}
    board = partial_board(runs, tables=("lynceus-cnn", "lynceus-rnn"))
    assert board.left_out == []
    full = [
        make_run(f"x-{n}-{s}", "scout-x", n, s, [1.0], [1.0], [True], extra=PRICED)
        for n, k in (("random", 3), ("A", 1))
        for s in range(k)
    ]
    trace, summaries = sweep(
        [
            make_run(f"{t}-{n}-{s}", t, n, s, [1.0], [1.0 + i], [True], extra=PRICED)
            for t in ("lynceus-cnn", "lynceus-rnn")
            for i, n in enumerate(runs)
            for s in range(3)
        ]
        + full
    )
    board = build_boards(analyse(trace, summaries), [Budget("cost", 1)])["cno"]
    assert board.tables == ["lynceus-cnn", "lynceus-rnn"]
    assert board.left_out == ["scout-x: only some seeds of A (1 of 3)"]
    assert not NAN.search(_every_row(board))


def test_budget_shares_keep_two_digits_on_large_tables():
    assert [percent(s) for s in (0.25, 0.043, 0.0034, 0.0, 1.0, 1e-6)] == [
        "25%",
        "4.3%",
        "0.34%",
        "0%",
        "100%",
        "< 0.01%",
    ]


def test_the_heat_map_tells_missing_from_nothing_feasible():
    board = decided_board({"random": [8, 2], "A": [8, math.inf]}, seeds=3)
    values = heat_values(board)
    assert values.loc[:, "A"].tolist() == [math.inf] * 3 and values["random"].tolist() == [2.0] * 3
    board.at[last_budget(board).budget.label].scores.iloc[0, 0] = math.nan  # a missing run
    assert math.isnan(heat_values(board).iloc[0, 0])


# -- every flag checked (issue 44) ------------------------------------------------------------
@pytest.mark.parametrize(
    "flags, words",
    [
        (["--seeds", "0"], ["--seeds must be at least 1, got 0"]),
        (["--seeds", "-1"], ["--seeds must be at least 1, got -1"]),
        (["--seeds", "4294967297"], ["--seeds", "at most 4294967295"]),
        (["--budgets", "nan"], ["--budgets 'nan'", "positive finite"]),
        (["--budgets", "inf"], ["--budgets 'inf'", "positive finite"]),
        (["--budgets", "2,2"], ["--budgets '2,2'", "once"]),
        (["--budgets", ""], ["--budgets ''"]),
        (["--evaluations", "0"], ["--evaluations '0'"]),
        (["--evaluations", "1.5"], ["--evaluations '1.5'"]),
        (["--max-in-flight", "0"], ["--max-in-flight must be at least 1, got 0"]),
        (["--plan-seconds", "0"], ["--plan-seconds must be a positive number, got 0"]),
        (["--plan-seconds", "nan"], ["--plan-seconds must be a positive number, got nan"]),
        (["--plan-check", "-1"], ["--plan-check must be at least 1, got -1"]),
        (["--cpus", "-2"], ["--cpus must be at least 1, got -2"]),
    ],
)
def test_every_leaderboard_flag_is_checked_before_anything_is_written(
    flags, words, tmp_path, monkeypatch, capsys
):
    from .test_cli_edges import one_line_error

    monkeypatch.chdir(tmp_path)  # the default --out, sweeps-out/leaderboard-synthetic, is here
    args = ["leaderboard", "--datasets", "synthetic", *flags, "--serial", "--no-tracking"]
    assert main(args) == 2
    one_line_error(capsys, *words)
    assert list(tmp_path.iterdir()) == []


def test_a_board_over_the_run_limit_names_its_runs(tmp_path, monkeypatch, capsys):
    """--seeds 20000 on one table: the runs counted over the board's optimizers as installed
    (Optuna's GP sampler only with optfarm[peers]: the README's install leaves it out)."""
    from .test_cli_edges import one_line_error

    monkeypatch.chdir(tmp_path)
    optimizers = len(load_board_spec(FIRST_LOOK, ["synthetic"]).sweep.optimizer_entries())
    args = ["leaderboard", "--datasets", "synthetic", "--seeds", "20000", "--serial"]
    assert main([*args, "--no-tracking"]) == 2
    one_line_error(capsys, f"{20000 * optimizers:,} runs, more than 200,000: give fewer --seeds")
    assert list(tmp_path.iterdir()) == []


def test_a_board_folder_refuses_flags_that_run_a_spec(tmp_path, capsys):
    from .test_cli_edges import one_line_error

    (tmp_path / "sweep.json").write_text("{}")
    assert main(["leaderboard", str(tmp_path), "--seeds", "3", "--no-tracking"]) == 2
    one_line_error(capsys, "--seeds runs a spec")


# -- must show (issue 42): a board stopped after its first seed, read as it is ----------------
STOPPED = """name: stopped-board
datasets: [myjob]
optimizers: [random, guindani, eic-usd, optuna-tpe]
seeds: 20
board: {budgets: [2, 5], evaluations: [3]}
"""


def test_a_board_stopped_after_its_first_seed_is_read_without_nan_or_short_optimizers(
    imported, capsys
):
    import os
    import signal
    import subprocess
    import sys
    import time

    (imported / "stopped.yaml").write_text(STOPPED)
    out = imported / "out"
    command = [sys.executable, "-m", "optfarm", "leaderboard", str(imported / "stopped.yaml")]
    command += ["--serial", "--no-tracking", "--no-progress", "--out", str(out)]
    board = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        for line in board.stdout:  # the first seed of every optimizer is done when it prints
            if line.startswith("CPU estimate"):
                break
        deadline = time.monotonic() + 300
        while len(list((out / "runs").glob("*.json"))) < 4 + 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        board.send_signal(signal.SIGTERM)
        assert board.wait(timeout=120) != 0
    finally:
        board.kill()
    _, summaries = load_sweep(out)
    assert 4 <= len(summaries) < 80  # stopped: every optimizer's first seed, not all 80 runs
    capsys.readouterr()
    assert main(["leaderboard", str(out), "--no-tracking"]) == 0
    printed = capsys.readouterr().out
    print(printed)
    page = (out / "leaderboard" / "report.html").read_text()
    assert not NAN.search(printed) and not NAN.search(page)
    said = " ".join(printed.split())
    assert f"{80 - len(summaries)} of its 80 runs are missing" in said
    assert f"Resume: farm leaderboard {imported / 'stopped.yaml'} --serial" in said
    # no optimizer ranked on fewer seeds than another: those with fewer left out by name, or
    # the seeds not every optimizer has
    ranked = build_boards(analyse(*load_sweep(out)), [Budget("cost", 2)])["cno"]
    seeds = ranked.tidy.groupby("optimizer")["seed"].unique().map(frozenset)
    assert seeds.nunique() == 1
    assert ranked.left_out and all(note in said for note in ranked.left_out)
    first = re.search(r"<h1>.*?</h1>\s*<p[^>]*>(.*?)</p>", page, re.S).group(1)
    assert "random search" in first and len(first.split()) <= 80
