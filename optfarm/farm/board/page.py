"""The leaderboard's page (``farm leaderboard``), from the boards of
``optfarm.farm.board.leaderboard``: it opens on each board's decision
(``optfarm.farm.board.decision``) and what a partial sweep lacks; then one picture, each
optimizer's median CNO (or Accuracy_C / optimum's) with its interquartile band against budget
in a panel of its own beside random search's, over a row per budget (the places the data
back, random search's median, the first optimizer against it); then the standings, the
statistics per budget, the pairs with the blocks each would need, the headroom random search
leaves on each table, the budgets in the tables' own terms, best per family, where each
optimizer fails, what was left out or shown once, and how to read it all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from optfarm.farm.board import plots
from optfarm.farm.board.decision import decision, detail_rows
from optfarm.farm.board.leaderboard import (
    BASELINE,
    BOARD_TITLES,
    INTRO,
    Board,
    Price,
    budget_name,
    budget_rows,
    cost_labels,
    failure_rows,
    family_rows,
    headroom_rows,
    heat_values,
    last_budget,
    pair_rows,
    standings_rows,
    statistics_rows,
)
from optfarm.farm.report.analysis import DatasetAnalysis
from optfarm.farm.report.sections import Section
from optfarm.farm.run.metrics import SCORE_CAP, quality_score, quantile, step_quality

__all__ = ["board_figures", "budget_curves", "intro", "sections"]

VALUE = {"cno": "CNO", "accuracy_c": "Accuracy_C / optimum's"}


def intro(boards: Mapping[str, Board], partial: str | None = None) -> list[str]:
    """The page's opening paragraphs: each board's decision (the first is the page's lead),
    what a partial sweep lacks (``partial``) and what was left off the board; each budget's
    detail follows under the picture (``sections``)."""
    out = [decision(b) for b in boards.values()]
    out += [partial] if partial else []
    for b in boards.values():
        out += [f"Left off the board: {note}." for note in b.left_out]
    return out


# -- the picture ---------------------------------------------------------------------------------
def _cost_amounts(board: Board) -> list[float]:
    """The cost budgets' amounts (a merged budget's each), in multiples of the mean
    configuration cost, ascending."""
    return sorted(a for b in board.budgets if b.axis == "cost" for a in (b.amount, *b.also))


def budget_curves(
    board: Board, analyses: Mapping[str, DatasetAnalysis], points: int = 40
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The budgets (multiples of each table's budget unit, a log grid from 1x or
    the first budget to the last cost budget) and per optimizer on the board, in order of
    place, the 25th, 50th and 75th percentiles (rows) over the runs the board ranks (tables
    x seeds) of the credited CNO (or Accuracy_C / optimum's) at each; a run without a
    feasible recommendation counts at the cap (CNO 16, Accuracy_C 0). Each table's budgets
    stop at the board's cap."""
    cost = _cost_amounts(board)
    x = np.geomspace(min(1.0, cost[0]), cost[-1], points)
    names = list(board.headline.places().index)
    ranked = set(zip(board.tidy["table"], board.tidy["optimizer"], board.tidy["seed"]))
    values: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for table in board.tables:
        a = analyses[table]
        for name in names:
            g = a.groups[name]
            for seed, summary, run in zip(g.seeds, g.summaries, g.traces):
                if (table, name, seed) in ranked:
                    values[name].append(_curve(run, Price.of(summary), x, board.cap, a))
    return x, {
        n: np.array([[quantile(col, q) for col in np.array(v).T] for q in (0.25, 0.5, 0.75)])
        for n, v in values.items()
    }


def _curve(run, price: Price, x: np.ndarray, cap: float | None, a: DatasetAnalysis):
    """One run's credited CNO (or Accuracy_C / optimum's) at budgets ``x`` (multiples of the
    table's budget unit, capped at ``cap`` x the price); the cap's value before the first
    step paid for."""
    limits = np.minimum(x * price.unit, (cap or math.inf) * price.cost)
    last = np.searchsorted(run["cum_exploration_cost"], limits * (1 + 1e-12), side="right") - 1
    score = np.asarray(quality_score(step_quality(run, a.metric), a.metric, a.optimum), dtype=float)
    at = np.where(last >= 0, score[np.maximum(last, 0)], SCORE_CAP[a.metric])
    return 2.0**at if a.metric == "cno" else 1.0 - at


def _ahead_of_random(board: Board) -> dict[str, list[float]]:
    """Per optimizer, the cost budgets (amounts) at which the data separate it from random
    search and rank it ahead: the panels' marks."""
    out: dict[str, list[float]] = {}
    for label in cost_labels(board):
        at = board.at[label]
        for name in at.beat():
            out.setdefault(name, []).append(at.budget.amount)
    return out


def board_figures(
    board: Board, analyses: Mapping[str, DatasetAnalysis], out_dir: Path
) -> list[Path]:
    """The CD diagram, rank-vs-budget curves and heat map of one board as PNG files."""
    h = board.headline
    slug = "cost" if board.metric == "cno" else "accuracy"
    n_seeds = board.tidy["seed"].nunique()
    over = (
        f"{h.scores.shape[0]} seeds of {board.tables[0]}"
        if board.blocks == "seeds"
        else f"{h.scores.shape[0]} tables ({n_seeds} seeds each)"
    )
    files = [
        plots.plot_cd(
            out_dir / f"leaderboard_cd_{slug}.png",
            h.mean_ranks,
            h.cliques,
            h.cd,
            f"Average rank by the {h.budget.label} score over {over}; bars: not separated by "
            "Wilcoxon-Holm (alpha 0.05)",
        )
    ]
    curves: dict[str, dict[str, pd.Series]] = {}
    for label, at in board.at.items():
        axis = {
            "cost": "budget (multiples of the table's budget unit)",
            "evaluations": "budget (evaluations, within the cost cap)",
            "anytime": "over the cost budgets",
        }[at.budget.axis]
        curves.setdefault(axis, {})[label] = at.mean_ranks
    files.append(
        plots.plot_rank_budget(
            out_dir / f"leaderboard_rank_budget_{slug}.png", curves, "Average rank against budget"
        )
    )
    last = last_budget(board)
    values = heat_values(board)[list(h.mean_ranks.index)]
    files.append(
        plots.plot_heatmap(
            out_dir / f"leaderboard_heatmap_{slug}.png",
            values,
            board.metric,
            f"Median over seeds at {budget_name(board, last.budget.label)} "
            "(black: nothing feasible; hatched: not run)",
        )
    )
    return files


def _picture(board: Board, analyses: Mapping[str, DatasetAnalysis], out_dir: Path) -> Path:
    """The page's picture: each optimizer's median and interquartile band against budget in
    a panel of its own, random search's in every panel (``plots.plot_small_multiples``)."""
    slug = "cost" if board.metric == "cno" else "accuracy"
    x, curves = budget_curves(board, analyses)
    n_seeds = int(board.tidy["seed"].nunique())
    runs = (
        f"{n_seeds} seeds of {board.tables[0]}"
        if len(board.tables) == 1
        else f"{len(board.tables)} tables x {n_seeds} seeds"
    )
    capped = f", each budget at most {board.cap:.0%} of the price" if board.cap else ""
    return plots.plot_small_multiples(
        out_dir / f"leaderboard_{slug}_against_budget.png",
        x,
        curves,
        BASELINE if BASELINE in curves else None,
        _cost_amounts(board),
        _ahead_of_random(board),
        board.metric,
        f"Median {VALUE[board.metric]} (line) and interquartile band over {runs}{capped}; "
        "grey: random search; dot: separated from random search and ahead of it",
    )


# -- the page ------------------------------------------------------------------------------------
def sections(boards: Mapping[str, Board], analyses: Mapping[str, DatasetAnalysis]) -> list[Section]:
    """The leaderboard's sections of ``report.html`` (``optfarm.farm.report.page.write_report``;
    ``intro`` is its introduction), per board."""
    out = []
    for board in boards.values():
        what = BOARD_TITLES[board.metric]
        h = board.headline.budget.label
        out += [
            Section(
                f"{VALUE[board.metric]} against budget, each optimizer beside random search, "
                f"{what}; per budget, the places the data back",
                lambda _, b=board: detail_rows(b),
                figures=lambda _, d, b=board: [_picture(b, analyses, d)],
                figures_first=True,
            ),
            Section(
                f"Leaderboard, {what}, by the {h} score",
                lambda _, b=board: standings_rows(b),
                figures=lambda _, d, b=board: board_figures(b, analyses, d),
            ),
            Section(
                f"Statistics per budget, {what} (Friedman, Nemenyi, Wilcoxon-Holm)",
                lambda _, b=board: statistics_rows(b),
            ),
            Section(
                f"Pairs by the {h} score, {what}: win/tie/loss over tables x seeds, "
                "Wilcoxon signed-rank with Holm's correction, and the blocks that would "
                "separate those not separated",
                lambda _, b=board: pair_rows(b),
            ),
            Section(
                f"Headroom, {what}: random search's median at each budget, and its runs "
                "with nothing feasible",
                lambda _, b=board: headroom_rows(b),
                empty="random search is not on this board",
            ),
            Section(
                f"The budgets in the tables' own terms, {what}", lambda _, b=board: budget_rows(b)
            ),
            Section(
                f"Lowest mean rank per table family, {what}", lambda _, b=board: family_rows(b)
            ),
            Section(f"Where each optimizer fails, {what}", lambda _, b=board: failure_rows(b)),
        ]
        notes = [
            *(("left out", n) for n in board.left_out),
            *(("shown once", n) for n in board.same_as),
        ]
        if notes:
            out.append(
                Section(
                    f"Left out of the board or shown once ({what})",
                    lambda _, n=notes: [
                        {"": kind, "what": text.split(": ", 1)[0], "why": text.split(": ", 1)[1]}
                        for kind, text in n
                    ],
                )
            )
    out.append(Section("How to read this board", lambda _: [], empty=INTRO))
    return out
