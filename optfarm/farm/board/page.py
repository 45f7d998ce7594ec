"""The leaderboard's page (``farm leaderboard``), from the boards of
``optfarm.farm.board.leaderboard``: a one-paragraph verdict per board, then a picture of median CNO
(or Accuracy_C / optimum's) with its interquartile band against budget per optimizer, then
the standings, the statistics per budget, the pairs with the blocks each would need, the
headroom random search leaves on each table, best per family, where each optimizer fails,
what was left out or shown once, and how to read it all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from optfarm.farm.board import plots
from optfarm.farm.board.leaderboard import (
    BOARD_TITLES,
    INTRO,
    AtBudget,
    Board,
    Price,
    budget_name,
    budget_rows,
    failure_rows,
    family_rows,
    headroom_rows,
    heat_values,
    last_budget,
    needed_text,
    pair_rows,
    standings_rows,
    statistics_rows,
)
from optfarm.farm.report.analysis import DatasetAnalysis
from optfarm.farm.report.sections import Section
from optfarm.farm.run.metrics import (
    CNO_CAP,
    SCORE_CAP,
    quality_score,
    quantile,
    score_quality,
    step_quality,
)

__all__ = ["board_figures", "budget_curves", "sections", "verdict"]

VALUE = {"cno": "CNO", "accuracy_c": "Accuracy_C / optimum's"}


# -- the verdict ---------------------------------------------------------------------------------
def _median_text(at: AtBudget, name: str, metric: str) -> str:
    """An optimizer's median over the blocks at a budget, as read: CNO (">= CNO_CAP" at the
    cap) or Accuracy_C / optimum's; the anytime score itself."""
    score = quantile(at.scores[name].to_numpy(), 0.5)
    if at.budget.axis == "anytime":
        return f"{score:.3f}"
    if metric == "cno" and score >= SCORE_CAP[metric]:
        return f">= {CNO_CAP:g}"
    return f"{score_quality(min(score, SCORE_CAP[metric]), metric):.2f}"


def _how_sure(board: Board, at: AtBudget, lead: str, first: str, following: str) -> str:
    """Whether the data separate the first optimizer ahead from the next, and if not, the
    blocks that would."""
    pair = next(r for r in at.pairs.itertuples() if {r.a, r.b} == {first, following})
    over = f"Wilcoxon-Holm p = {pair.p_holm:.2g} over {at.scores.shape[0]} {board.blocks}"
    if pair.significant:
        return f"the data separate {lead} from {following} ({over})"
    if pair.needed is None or (isinstance(pair.needed, float) and math.isnan(pair.needed)):
        why = (
            "a run without a feasible recommendation leaves the difference unmeasured"
            if math.isnan(pair.effect)
            else "their mean difference is nil"
        )
        return f"the data do not separate {first} from {following} ({over}; {why})"
    return (
        f"the data do not separate {first} from {following} ({over}; "
        f"{needed_text(pair.needed, board.blocks)} would detect their mean difference "
        f"of {abs(pair.effect):.3g} with 80% power)"
    )


def _at_text(board: Board, label: str) -> str:
    """One budget's sentence: who is ahead, by how much, how sure."""
    at = board.at[label]
    value = "anytime score" if at.budget.axis == "anytime" else VALUE[board.metric]
    ahead = at.ahead()
    rest = [n for n in at.mean_ranks.index if n not in ahead]
    where = (
        "By the anytime score" if at.budget.axis == "anytime" else f"At {budget_name(board, label)}"
    )
    shown = {n: _median_text(at, n, board.metric) for n in at.mean_ranks.index}
    lead = " and ".join(ahead) if len(ahead) < 3 else ", ".join(ahead[:-1]) + f" and {ahead[-1]}"
    if not rest:
        return f"{where} all {len(ahead)} optimizers tie (median {value} {shown[ahead[0]]})."
    following = rest[0]
    separated = sum(
        1
        for r in at.pairs.itertuples()
        if r.significant and ({r.a, r.b} & set(ahead)) and ({r.a, r.b} & set(rest))
    )
    return (
        f"{where} {lead} {'is' if len(ahead) == 1 else 'are'} ahead (median {value} "
        + ", ".join(shown[n] for n in ahead)
        + f", against {shown[following]} for {following}, the next); "
        + _how_sure(board, at, lead, ahead[0], following)
        + f"; {separated} of the {len(ahead) * len(rest)} pairs between the optimizers "
        "ahead and the rest are separated."
    )


def verdict(board: Board) -> str:
    """One paragraph: at each cost budget below the price and by the anytime score, which
    optimizers are ahead, by how much, and how sure."""
    n_tables, n_seeds = len(board.tables), int(board.tidy["seed"].nunique())
    on = (
        f"On {board.tables[0]} ({n_seeds} seeds)"
        if n_tables == 1
        else f"On {n_tables} tables ({n_seeds} seeds each)"
    )
    labels = [
        b.label
        for b in board.budgets
        if b.axis == "cost"
        and not board.tidy.loc[board.tidy["budget"] == b.label, "exhaustive"].any()
    ]
    if board.headline.budget.axis == "anytime":
        labels.append("anytime")
    text = " ".join(_at_text(board, label) for label in labels)
    left = "" if not board.left_out else " Left off the board: " + "; ".join(board.left_out) + "."
    once = "" if not board.same_as else " Same choices: " + "; ".join(board.same_as) + "."
    return f"{on}, {BOARD_TITLES[board.metric]}: {text}{left}{once}"


# -- the picture ---------------------------------------------------------------------------------
def budget_curves(
    board: Board, analyses: Mapping[str, DatasetAnalysis], points: int = 40
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The budgets (multiples of each table's mean configuration cost, a log grid from 1x or
    the first budget to the last cost budget) and per optimizer the 25th, 50th and 75th
    percentiles (rows) over its runs (tables x seeds) of the credited CNO (or Accuracy_C /
    optimum's) at each; a run without a feasible recommendation counts at the cap (CNO 16,
    Accuracy_C 0). Each table's budgets stop at the board's cap."""
    cost = sorted(b.amount for b in board.budgets if b.axis == "cost")
    x = np.geomspace(min(1.0, cost[0]), cost[-1], points)
    names = list(board.headline.mean_ranks.index)
    values: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for table in board.tables:
        a = analyses[table]
        for name in names:
            g = a.groups[name]
            for summary, run in zip(g.summaries, g.traces):
                price = Price.of(summary)
                limits = np.minimum(x * price.mean_cost, (board.cap or math.inf) * price.cost)
                last = (
                    np.searchsorted(run["cum_exploration_cost"], limits * (1 + 1e-12), side="right")
                    - 1
                )
                score = np.asarray(
                    quality_score(step_quality(run, a.metric), a.metric, a.optimum), dtype=float
                )
                at = np.where(last >= 0, score[np.maximum(last, 0)], SCORE_CAP[a.metric])
                values[name].append(score_quality(at, a.metric))
    return x, {
        n: np.array([[quantile(col, q) for col in np.array(v).T] for q in (0.25, 0.5, 0.75)])
        for n, v in values.items()
    }


def _per_price(board: Board) -> float | None:
    """On a board of one table of known size: the price per mean configuration cost."""
    if len(board.tables) != 1:
        return None
    sizes = board.tidy.loc[board.tidy["axis"] == "cost", ["amount", "share"]].dropna()
    return None if sizes.empty else float((sizes["share"] / sizes["amount"]).max())


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
            "cost": "budget (multiples of the table's mean configuration cost)",
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
            "(black: no feasible recommendation)",
        )
    )
    return files


def _picture(board: Board, analyses: Mapping[str, DatasetAnalysis], out_dir: Path) -> Path:
    slug = "cost" if board.metric == "cno" else "accuracy"
    x, curves = budget_curves(board, analyses)
    runs = "seeds" if len(board.tables) == 1 else "runs (tables x seeds)"
    return plots.plot_value_budget(
        out_dir / f"leaderboard_{slug}_against_budget.png",
        x,
        curves,
        board.metric,
        _per_price(board),
        f"Median {VALUE[board.metric]} and interquartile band over "
        f"{runs} against budget (capped at {board.cap:.0%} of the price)"
        if board.cap
        else f"Median {VALUE[board.metric]} and interquartile band over {runs} against budget",
    )


# -- the page ------------------------------------------------------------------------------------
def sections(boards: Mapping[str, Board], analyses: Mapping[str, DatasetAnalysis]) -> list[Section]:
    """The leaderboard's sections of ``report.html`` (``optfarm.farm.report.page.write_report``; the
    verdicts are its introduction), per board."""
    out = []
    for board in boards.values():
        what = BOARD_TITLES[board.metric]
        h = board.headline.budget.label
        out += [
            Section(
                f"{VALUE[board.metric]} against budget, {what}; the budgets in the "
                "tables' own terms",
                lambda _, b=board: budget_rows(b),
                figures=lambda _, d, b=board: [_picture(b, analyses, d)],
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
                f"Headroom, {what}: random search's median at each budget",
                lambda _, b=board: headroom_rows(b),
                empty="random search is not on this board",
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
