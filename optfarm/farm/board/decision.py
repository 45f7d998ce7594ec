"""The board's decision: the paragraph ``farm leaderboard``'s page and terminal open with, in
at most about ``WORDS`` words, and the per-budget lines that follow it.

Per cost budget below the price (``optfarm.farm.board.leaderboard.cost_labels``), either

- the optimizers to use: those the data separate from random search and rank ahead of it
  (Wilcoxon-Holm over the blocks, ``AtBudget.beat``), the first by mean rank named, with the
  others the data do not separate from it listed as tied ("use X (or any of X, Y)"), its
  median against random search's and the Holm-adjusted p of the pair; or
- that nothing here beats random search, and how close random search already is: its median
  distance from the optimum over the blocks (half the seeds on a board of one table, half
  the tables otherwise) and how many of its runs have nothing feasible.

Random search (``BASELINE``) is always named. The lines after it (``budget_lines``) give each
budget's places, shown only where the data separate groups (``AtBudget.places``), and how
many blocks would tell the leader from random search apart with 80% power
(``optfarm.farm.stats.power``).
"""

from __future__ import annotations

import math

import numpy as np

from optfarm.farm.board.leaderboard import (
    ALPHA,
    BASELINE,
    AtBudget,
    Board,
    budget_name,
    budget_share,
    cost_labels,
    percent,
    shown_value,
)
from optfarm.farm.report.analysis import ordinal
from optfarm.farm.run.metrics import quantile

__all__ = ["WORDS", "budget_lines", "decision", "decision_rows", "detail_rows"]

WORDS = 80
NAMED = 4  # tied optimizers named in the decision; more are counted (the lines below name them)
RANDOM = "random search"
VALUE = {"cno": "CNO", "accuracy_c": "Accuracy_C / optimum's"}


def _count(n: int, blocks: str) -> str:
    """The blocks counted: "1 seed", "20 seeds", "18 tables"."""
    return f"{n} {blocks if n != 1 else blocks[:-1]}"


def _name(name: str) -> str:
    return RANDOM if name == BASELINE else name


def _value(at: AtBudget, name: str, metric: str) -> str:
    """An optimizer's median over the blocks, as read: CNO or Accuracy_C / optimum's, or
    "none feasible"; the anytime score itself."""
    score = quantile(at.scores[name].to_numpy(), 0.5)
    if at.budget.axis == "anytime":
        return f"{score:.3f}"
    value = shown_value(score, metric)
    return "none feasible" if math.isinf(value) else f"{value:.2f}"


def _pair(at: AtBudget, a: str, b: str):
    return next(r for r in at.pairs.itertuples() if {r.a, r.b} == {a, b})


def _use(board: Board, at: AtBudget, compact: bool) -> str | None:
    """ "use X (or any of X, Y): separated from random search, median CNO a vs b, p = ..."
    (None: nothing here beats random search)."""
    winners = at.beat()
    if not winners:
        return None
    first, differ = winners[0], at.separated()
    tied = [w for w in winners if w == first or frozenset((first, w)) not in differ]
    also = (
        ""
        if len(tied) == 1
        else f" (or any of the {len(tied)} tied with it)"
        if compact or len(tied) > NAMED
        else f" (or any of {', '.join(tied)})"
    )
    return (
        f"use {first}{also}: separated from {RANDOM}, median {VALUE[board.metric]} "
        f"{_value(at, first, board.metric)} vs {_value(at, BASELINE, board.metric)}, "
        f"p = {_pair(at, first, BASELINE).p_holm:.2g}"
    )


def _closeness(board: Board, label: str) -> tuple[str | None, str]:
    """How close random search is at a budget in half the blocks: "within 17% of the
    optimum", "at the optimum", "at 3.4 times the optimum's cost" (None: nothing feasible in
    half of them or more); and "k of n", its runs with nothing feasible."""
    at = board.at[label]
    score = quantile(at.scores[BASELINE].to_numpy(), 0.5)
    runs = board.tidy[(board.tidy["budget"] == label) & (board.tidy["optimizer"] == BASELINE)]
    scores = runs["score"].to_numpy()
    count = f"{int(np.isinf(scores).sum())} of {len(scores)}"
    if math.isinf(score):
        return None, count
    if score == 0:
        return "at the optimum", count
    value = shown_value(score, board.metric)
    if board.metric == "cno" and value >= 2:
        return f"at {value:.2g} times the optimum's cost", count
    gap = value - 1.0 if board.metric == "cno" else 1.0 - value
    return f"within {percent(gap)} of the optimum", count


def _nothing(board: Board, label: str, first: bool, compact: bool) -> str:
    """ "nothing here beats random search at B: it is within z% of the optimum in half the
    seeds (k of n with nothing feasible)" ("it has nothing feasible in k of n seeds"), or
    after a first one, "nor at B: within z% (k of n)"."""
    close, count = _closeness(board, label)
    name = budget_name(board, label, short=not first or compact)
    runs = board.blocks if board.blocks == "seeds" else "runs"
    if not first:
        return f"nor at {name}: " + (
            f"{close} ({count})" if close else f"nothing feasible in {count}"
        )
    if close is None:
        return f"nothing here beats {RANDOM} at {name}: it has nothing feasible in {count} {runs}"
    half = "in half the seeds" if board.blocks == "seeds" else "on half the tables"
    return (
        f"nothing here beats {RANDOM} at {name}: it is {close} {half} "
        f"({count}{'' if runs == 'seeds' else ' runs'} with nothing feasible)"
    )


def _without_baseline(board: Board) -> str:
    """The decision of a board without random search: who the data put first."""
    h = board.headline
    first = h.ahead()
    who = (
        f"all {len(first)} optimizers share the first place"
        if len(first) == len(h.mean_ranks) and len(first) > 1
        else f"the data put {', '.join(first)} first"
    )
    return f"{RANDOM} is not on this board, so nothing is measured against it; {who}"


def _clauses(board: Board, compact: bool) -> list[str]:
    """One clause per cost budget below the price (``cost_labels``)."""
    if BASELINE not in board.headline.mean_ranks.index:
        return [_without_baseline(board)]
    labels = cost_labels(board) or [b.label for b in board.budgets if b.axis == "cost"]
    clauses, after_nothing = [], False
    for label in labels:
        use = _use(board, board.at[label], compact)
        if use is None:
            clauses.append(_nothing(board, label, not after_nothing, compact))
        else:
            name = budget_name(board, label, short=compact)
            clauses.append(f"at {name} {use}")
        after_nothing = use is None
    return clauses


def decision(board: Board) -> str:
    """The board's decision in at most about ``WORDS`` words (the module's docstring);
    the lists of tied optimizers counted instead of named when naming them runs longer. On
    fewer blocks than the signed-rank test needs to separate anything, it says so."""
    seeds = int(board.tidy["seed"].nunique())
    on = (
        f"On {board.tables[0]} ({seeds} seed{'s' * (seeds != 1)})"
        if len(board.tables) == 1
        else f"On {len(board.tables)} tables ({seeds} seeds each)"
    )
    blocks, smallest = board.headline.scores.shape[0], math.ceil(math.log2(2 / ALPHA))
    few = (
        f" {_count(blocks, board.blocks)} cannot separate any two optimizers (the signed-rank "
        f"test needs {smallest})."
        if blocks < smallest
        else ""
    )
    for compact in (False, True):
        clauses = _clauses(board, compact)
        text = f"{on}, " + "; ".join(clauses) + "." + few
        if len(text.split()) <= WORDS:
            break
    return text


def _places_text(at: AtBudget) -> str:
    """The places where the data separate groups ("1st: A, B; 3rd: C"), or that every
    optimizer shares the first place."""
    places = at.places()
    if (places == 1).all():
        return f"all {len(places)} share the first place (no pair is separated)"
    groups: dict[int, list[str]] = {}
    for name, place in places.items():
        groups.setdefault(int(place), []).append(_name(name))
    return "; ".join(f"{ordinal(p)}: {', '.join(names)}" for p, names in groups.items())


def _leader_against_random(board: Board, at: AtBudget) -> str:
    """Whether the data tell the first optimizer (by mean rank, random search aside) from
    random search, and if not, how many blocks would ("-" without random search)."""
    if BASELINE not in at.mean_ranks.index or len(at.mean_ranks) < 2:
        return "-"
    leader = next(n for n in at.mean_ranks.index if n != BASELINE)
    pair = _pair(at, leader, BASELINE)
    blocks = _count(at.scores.shape[0], board.blocks)
    over = f"Holm p = {pair.p_holm:.2g} over {blocks}"
    smallest = math.ceil(math.log2(2 / ALPHA))
    if pair.significant:
        return f"the data separate {leader} from {RANDOM} ({over})"
    if at.scores.shape[0] < smallest:
        more = f"{blocks} cannot separate any pair: the signed-rank test needs {smallest}"
    elif pair.needed is not None and not (
        isinstance(pair.needed, float) and math.isnan(pair.needed)
    ):
        more = f"about {int(pair.needed)} {board.blocks} would tell them apart"
    elif isinstance(pair.effect, float) and math.isnan(pair.effect):
        more = f"fewer than two {board.blocks} where both have something feasible"
    else:
        more = "their mean difference is nil"
    return f"{leader} vs {RANDOM}: not separated ({over}; {more})"


def _medians(board: Board, at: AtBudget) -> str:
    """Random search's median beside the other nearest the optimum ("random search 3.40,
    nearest the optimum optuna-tpe 2.90")."""
    medians = {n: _value(at, n, board.metric) for n in at.mean_ranks.index}
    nearest = min(
        (n for n in medians if n != BASELINE),
        key=lambda n: quantile(at.scores[n].to_numpy(), 0.5),
        default=None,
    )
    shown = [f"{RANDOM} {medians[BASELINE]}"] if BASELINE in medians else []
    if nearest and math.isinf(quantile(at.scores[nearest].to_numpy(), 0.5)):
        shown += ["every other none feasible"]
    elif nearest:
        shown += [f"nearest the optimum {nearest} {medians[nearest]}"]
    return ", ".join(shown)


def detail_rows(board: Board) -> list[dict]:
    """One row per budget (cost, evaluations, then the anytime score): its share of the
    price, the places (``_places_text``), random search's median beside the other nearest
    the optimum (``_medians``), and the first optimizer against random search."""
    rows = []
    for label, at in sorted(board.at.items(), key=lambda item: item[1].budget.axis == "anytime"):
        anytime = at.budget.axis == "anytime"
        rows.append(
            {
                "budget": "anytime score" if anytime else label,
                "share of the table": "-" if anytime else budget_share(board, label),
                "places": _places_text(at),
                f"median {VALUE[board.metric]} (anytime: the score)": _medians(board, at),
                f"the first against {RANDOM}": _leader_against_random(board, at),
            }
        )
    return rows


def budget_lines(board: Board) -> list[str]:
    """``detail_rows`` as lines, for the terminal: "2x (5% of the price): 1st: A, B; ...;
    median CNO: random search 2.00, nearest the optimum A 1.00; the data separate A from random
    search (...)."."""
    lines = []
    for row in detail_rows(board):
        budget, share, places, medians, first = row.values()
        anytime = share == "-"
        where = "By the anytime score" if anytime else f"{budget} ({share})"
        value = "anytime score" if anytime else VALUE[board.metric]
        tail = "" if first == "-" else f"; {first}"
        lines.append(f"{where}: {places}; median {value}: {medians}{tail}.")
    return lines


def decision_rows(board: Board) -> list[dict]:
    """The decision per cost budget as ``leaderboard.json`` holds it: the optimizers to use
    (empty: nothing beats random search) and random search's median and nothing-feasible
    runs."""
    rows = []
    if BASELINE not in board.headline.mean_ranks.index:
        return rows
    for label in cost_labels(board) or [b.label for b in board.budgets if b.axis == "cost"]:
        at = board.at[label]
        winners = at.beat()
        close, count = _closeness(board, label)
        close = close or "nothing feasible in half the blocks or more"
        tied = [
            w
            for w in winners
            if w == winners[0] or frozenset((winners[0], w)) not in at.separated()
        ]
        rows.append(
            {
                "budget": budget_name(board, label),
                "use": tied,
                "random search": f"{close} ({count} with nothing feasible)",
            }
        )
    return rows
