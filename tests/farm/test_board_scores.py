"""The leaderboard's anytime score, its budgets in the table's own terms, its places, the
optimizers it shows once, and the power estimate behind "how many seeds or tables would
separate them", on hand-made runs and against a simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import wilcoxon

from optfarm.farm.board.leaderboard import Budget, build_boards, statistics_rows, tidy_scores
from optfarm.farm.report.analysis import analyse
from optfarm.farm.run.metrics import shortfall_area
from optfarm.farm.stats.power import blocks_needed
from tests.farm.test_report import make_run, sweep

# costs 1, 3, 4 (paid by $1, $4, $8), CNO 4, 2, 1 (scores 2, 1, 0); mean configuration cost 2
PRICED = {"mean_config_cost": 2.0, "table": {"configurations": 3, "exhaustive_cost": 6.0}}


def _anytime(budgets, cap, extra=PRICED):
    trace, summaries = sweep(
        [make_run("a", "myjob", "opt", 0, [1, 3, 4], [4.0, 2.0, 1.0], [True] * 3, extra=extra)]
    )
    tidy = tidy_scores(analyse(trace, summaries), budgets, cap).set_index("budget")
    return tidy


def test_the_anytime_score_is_the_normalised_area_under_log2_cno_against_log_budget():
    # budgets $2 and $8, price unknown: score 2 from $2 to $4, 1 from $4 to $8 on a log axis
    # spanning log 4: (2 log 2 + 1 log 2) / (4 log 4) = 3/8
    tidy = _anytime([Budget("cost", 1), Budget("cost", 4)], None, {"mean_config_cost": 2.0})
    assert tidy.loc["anytime", "score"] == pytest.approx(3 / 8)
    # the price is $6: 4x ($8) buys the whole table, is marked exhaustive and left out of the
    # anytime window, which spans $2 to $4 where the score is 2: 2 / 4
    tidy = _anytime([Budget("cost", 1), Budget("cost", 2), Budget("cost", 4)], None)
    assert tidy.loc["4x", "exhaustive"] and not tidy.loc["2x", "exhaustive"]
    assert tidy.loc[["1x", "2x", "4x"], "share"].tolist() == pytest.approx([1 / 3, 2 / 3, 4 / 3])
    assert tidy.loc["anytime", "score"] == pytest.approx(0.5)
    # capped at a quarter of the price ($1.5) every budget is $1.5 and nothing is exhaustive;
    # one budget: the score there over the cap
    tidy = _anytime([Budget("cost", 1), Budget("cost", 4), Budget("evaluations", 3)], 0.25)
    assert tidy.loc["4x", "share"] == pytest.approx(0.25) and not tidy["exhaustive"].any()
    assert tidy.loc["3 evals", "share"] == pytest.approx(1 / 3)  # capped at 1 of 3
    assert tidy.loc["3 evals", "score"] == 2.0
    assert tidy.loc["anytime", "score"] == pytest.approx(0.5)


def test_shortfall_area_holds_the_cap_before_the_first_step_and_the_last_value_after():
    # window $1 to $100 (two decades): nothing until $10 (the cap, 1), then 0.5
    assert shortfall_area(np.array([2.0]), np.array([10.0]), 1.0, 100.0, 4.0) == pytest.approx(
        (1.0 + 0.5) / 2
    )
    assert shortfall_area(np.array([2.0]), np.array([10.0]), 10.0, 1.0, 4.0) == 0.5


def _board(cnos: dict[str, list[float]], budgets, seeds: int = 3):
    runs = [
        make_run(
            f"{o}-{s}",
            "lynceus-cnn",
            o,
            s,
            [1.0, 1.0],
            c,
            [True, True],
            extra={"mean_config_cost": 1.0},
        )
        for o, c in cnos.items()
        for s in range(seeds)
    ]
    return build_boards(analyse(*sweep(runs)), budgets)["cno"]


def test_places_only_where_the_data_separate_and_no_tied_optimizer_is_called_best():
    # at 2x: A and B reach CNO 1, C stays at 2, in every seed; 3 seeds cannot separate them
    board = _board(
        {"A": [8.0, 1.0], "B": [4.0, 1.0], "C": [8.0, 2.0]}, [Budget("cost", 1), Budget("cost", 2)]
    )
    at = board.at["2x"]
    assert at.mean_ranks.to_dict() == {"A": 1.5, "B": 1.5, "C": 3.0}
    assert at.places().to_dict() == {"A": 1, "B": 1, "C": 1} and at.ahead() == ["A", "B", "C"]
    row = next(r for r in statistics_rows(board) if r["budget"].startswith("2x"))
    assert row["first place (not separated)"] == "A, B, C" and "best" not in str(row)
    assert row["seeds"] == 3  # one table: its seeds are the blocks, and say so
    # over 8 seeds the signed-rank test separates C from A and B (Holm p 0.023): C is third
    board = _board(
        {"A": [8.0, 1.0], "B": [4.0, 1.0], "C": [8.0, 2.0]},
        [Budget("cost", 1), Budget("cost", 2)],
        seeds=8,
    )
    at = board.at["2x"]
    assert at.places().to_dict() == {"A": 1, "B": 1, "C": 3} and at.ahead() == ["A", "B"]
    row = next(r for r in statistics_rows(board) if r["budget"].startswith("2x"))
    assert row["first place (not separated)"] == "A, B"


def test_an_optimizer_making_anothers_choices_is_shown_once_with_a_note():
    board = _board(
        {"random": [4.0, 1.0], "nephele": [4.0, 1.0], "C": [8.0, 2.0]}, [Budget("cost", 2)]
    )
    assert set(board.tidy["optimizer"]) == {"random", "C"}
    note = "nephele: the same configurations as random in every run (shown once, as random)"
    assert board.same_as == [note]


def _simulated_blocks(effect: float, spread: float, alpha: float, power: float) -> int:
    """The smallest n at which the signed-rank test rejects in ``power`` of 2,000 simulated
    samples of n normal differences."""
    rng = np.random.default_rng(7)
    n = 6
    while True:
        d = rng.normal(effect, spread, (2000, n))
        if np.mean(wilcoxon(d, axis=1).pvalue <= alpha) >= power:
            return n
        n += 1


@pytest.mark.parametrize("effect, spread, alpha", [(0.05, 0.1, 0.05), (0.3, 0.4, 0.01)])
def test_the_power_estimate_is_within_20_percent_of_a_simulation(effect, spread, alpha):
    estimate = blocks_needed(effect, spread, alpha, 0.8)
    simulated = _simulated_blocks(effect, spread, alpha, 0.8)
    assert abs(estimate - simulated) <= 0.2 * simulated


def test_the_power_estimate_edges():
    assert blocks_needed(0.0, 1.0) is None  # no difference to detect
    assert blocks_needed(0.1, 0.0) == math.ceil(math.log2(2 / 0.05))  # 6: the exact test
    assert blocks_needed(1e-6, 1.0) is None  # more than 100,000


def test_same_choices_on_most_tables_name_the_others():
    runs = [
        make_run(
            f"{o}-{t}-{s}",
            t,
            o,
            s,
            [1.0, 1.0],
            [4.0, 2.0 if (o, t) == ("nephele", "scout-c") else 1.0],
            [True, True],
            extra={"mean_config_cost": 1.0},
        )
        for t in ("scout-a", "scout-b", "scout-c")
        for o in ("random", "nephele")
        for s in range(2)
    ]
    board = build_boards(analyse(*sweep(runs)), [Budget("cost", 2)])["cno"]
    assert set(board.tidy["optimizer"]) == {"random", "nephele"}
    note = "nephele: the same configurations as random on 2 of 3 tables, all but scout-c"
    assert board.same_as == [note]


def test_the_power_where_scipys_noncentral_t_gives_no_number():
    # a noncentrality of about 44: scipy's nct gives NaN, which the blocks' search once took
    # for enough power at 12 blocks; the normal approximation gives all but 1
    from optfarm.farm.stats.power import signed_rank_power

    assert signed_rank_power(13, -0.9619, 0.2366, 0.05 / 78) == pytest.approx(1.0, abs=1e-6)
    assert blocks_needed(-0.9619, 0.2366, 0.05 / 78) == 12
