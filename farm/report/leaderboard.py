"""The leaderboard: which optimizer for my job, across every table of a sweep (``farm
leaderboard``; ARCHITECTURE.md, "Layers": a report room module over the analyses of
``farm.report.analysis``).

Each run is read at equal budgets on every table: in multiples of the table's mean
configuration cost (``mean_config_cost`` of the run summary, the unit of Lynceus' pooled jobs,
Sec. VI-C) and in evaluations. At a budget the run is credited with the quality of its
recommendation after the last step it had paid for within the budget
(``farm.run.metrics.step_quality``: the farm's recommendation rule, the same for every
optimizer); a run that stopped earlier keeps its last recommendation, a run with no
recommendation yet, or none truly feasible, is censored. Evaluation budgets are read on the
same runs, which stop at the last cost budget: "n evaluations or the cost cap, whichever came
first".

The score is the distance from the optimum, 0 the optimum and lower better: log2(CNO)
(doublings of the optimum's cost; ``inf`` without a feasible recommendation) on
cost-minimisation tables, 1 - Accuracy_C / the optimum's on accuracy-maximisation ones
(``inf`` without a recommendation). Tables of the two metrics form boards of their own. The
statistics are those of ``farm.report.ranks`` over the per-table medians over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from farm.report import board_plots, ranks
from farm.report.analysis import DatasetAnalysis
from farm.report.sections import Section
from farm.run.metrics import step_quality

__all__ = [
    "BOARD_TITLES",
    "DEFAULT_BUDGETS",
    "INTRO",
    "Board",
    "Budget",
    "best_by_family",
    "board_figures",
    "build_boards",
    "failure_rows",
    "family",
    "family_rows",
    "heat_values",
    "pair_rows",
    "sections",
    "standings_rows",
    "statistics_rows",
    "tidy_scores",
]

# the tables' families: dataset name prefix -> family (anything else: the user's own tables)
FAMILIES = (("lynceus-", "Lynceus TF"), ("cherrypick-", "CherryPick"), ("scout-", "Scout"),
            ("guindani-", "Guindani"), ("synthetic", "synthetic"), ("trimtuner-", "TrimTuner"))
OWN_TABLES = "your tables"
INTRO = ("Every optimizer on every table of the sweep at equal budgets: in multiples of each "
         "table's mean configuration cost (the runs' exploration budget is the last) and in "
         "evaluations (within that cost cap). At a budget a run is credited with the "
         "configuration the farm credits after the last step it paid for (the same rule for "
         "every optimizer); without a truly feasible one it is censored and ranks last. "
         "Score: log2 CNO (0: the optimum) or 1 - Accuracy_C / the optimum's; a table's value "
         "is the median over seeds; ranks within each table (ties share their places), "
         "averaged over tables. Friedman's test (tie-corrected) says whether the ranks differ; "
         "the bars of the critical-difference diagram join the optimizers that pairwise "
         "Wilcoxon signed-rank tests over the tables, Holm-corrected at alpha 0.05, do not "
         "separate (Benavoli et al. 2016); Nemenyi's critical difference is drawn for scale. "
         "Intervals: 90% percentile bootstrap over tables.")
BOARD_TITLES = {"cno": "cost-minimisation tables (score log2 CNO)",
                "accuracy_c": "accuracy-maximisation tables (score 1 - Accuracy_C / optimum)"}


def family(dataset: str) -> str:
    """The family a table belongs to (by its name), or ``OWN_TABLES``."""
    return next((name for prefix, name in FAMILIES if dataset.startswith(prefix)), OWN_TABLES)


@dataclass(frozen=True)
class Budget:
    """A budget: ``amount`` multiples of the table's mean configuration cost (``axis``
    "cost") or evaluations (``axis`` "evaluations")."""

    axis: str
    amount: float

    @property
    def label(self) -> str:
        return f"{self.amount:g}x" if self.axis == "cost" else f"{self.amount:g} evals"


DEFAULT_BUDGETS = (*(Budget("cost", k) for k in (5, 10, 25, 50)),
                   *(Budget("evaluations", n) for n in (5, 10, 20, 40)))


def _score(quality: float, metric: str, optimum: float) -> float:
    if metric == "cno":
        return math.log2(quality) if math.isfinite(quality) else math.inf
    return math.inf if quality <= 0 else float(np.clip(1.0 - quality / optimum, 0.0, 1.0))


def _at(run: Mapping[str, np.ndarray], summary: Mapping, budget: Budget, metric: str,
        optimum: float) -> float:
    """The run's score at ``budget`` (censored before its first step)."""
    quality = step_quality(run, metric)
    if budget.axis == "cost":
        limit = budget.amount * summary["mean_config_cost"]
        last = int(np.searchsorted(run["cum_exploration_cost"], limit * (1 + 1e-12),
                                   side="right")) - 1
    else:
        last = min(int(budget.amount), len(quality)) - 1
    return math.inf if last < 0 else _score(float(quality[last]), metric, optimum)


def tidy_scores(analyses: Mapping[str, DatasetAnalysis],
                budgets: Sequence[Budget] = DEFAULT_BUDGETS) -> pd.DataFrame:
    """One row per (table, optimizer variant, seed, budget): ``metric table family optimizer
    seed budget axis amount score``."""
    rows = []
    for table, a in analyses.items():
        for label, g in a.groups.items():
            for seed, summary, run in zip(g.seeds, g.summaries, g.traces):
                for b in budgets:
                    rows.append({"metric": a.metric, "table": table, "family": family(a.dataset),
                                 "optimizer": label, "seed": seed, "budget": b.label,
                                 "axis": b.axis, "amount": b.amount,
                                 "score": _at(run, summary, b, a.metric, a.optimum)})
    return pd.DataFrame(rows)


SEED_BLOCK = " / seed "


def _blocks(tidy: pd.DataFrame) -> pd.DataFrame:
    """The blocks the statistics rank within: the tables; on a board of one table (a user's
    own job), its seeds, so that the same statistics answer for it."""
    if tidy["table"].nunique() != 1:
        return tidy
    return tidy.assign(table=tidy["table"] + SEED_BLOCK + tidy["seed"].astype(str))


@dataclass
class AtBudget:
    """The statistics of one board at one budget (``farm.report.ranks``)."""

    budget: Budget
    scores: pd.DataFrame          # tables x optimizers, median over seeds
    table_ranks: pd.DataFrame
    mean_ranks: pd.Series         # best first
    friedman: tuple[float, float] | None   # None for fewer than 3 optimizers or 2 tables
    cd: float                     # Nemenyi's critical difference
    pairs: pd.DataFrame           # Wilcoxon-Holm over tables
    cliques: list[list[str]]
    intervals: pd.DataFrame       # bootstrap over tables


@dataclass
class Board:
    """One metric's board: its tables, optimizers and statistics at every budget."""

    metric: str
    tidy: pd.DataFrame
    budgets: list[Budget]
    at: dict[str, AtBudget]
    win_tie_loss: pd.DataFrame    # over (table, seed) at the headline budget
    left_out: list[str] = field(default_factory=list)   # optimizers and tables, why

    @property
    def headline(self) -> AtBudget:
        """The last cost budget (else the last budget): what the runs were given."""
        cost = [b for b in self.budgets if b.axis == "cost"]
        return self.at[(cost or self.budgets)[-1].label]

    @property
    def tables(self) -> list[str]:
        return list(dict.fromkeys(self.tidy["table"]))

    def families(self) -> dict[str, list[str]]:
        """family -> the blocks of its tables (``_blocks``: the tables, or one table's seeds)."""
        fam = self.tidy.drop_duplicates("table").set_index("table")["family"]
        out: dict[str, list[str]] = {}
        for block in self.headline.scores.index:
            out.setdefault(fam[block.split(SEED_BLOCK)[0]], []).append(block)
        return out


def build_boards(analyses: Mapping[str, DatasetAnalysis],
                 budgets: Sequence[Budget] = DEFAULT_BUDGETS, alpha: float = 0.05,
                 confidence: float = 0.9) -> dict[str, Board]:
    """A board per quality metric in the sweep (the optimizers that ran on each of its
    tables)."""
    tidy = tidy_scores(analyses, budgets)
    boards = {}
    for metric, part in tidy.groupby("metric", sort=False):
        part, left_out = _complete(part)
        at = {b.label: _at_budget(b, part[part["budget"] == b.label], alpha, confidence)
              for b in budgets}
        headline = [b for b in budgets if b.axis == "cost"] or list(budgets)
        wtl = ranks.win_tie_loss(part[part["budget"] == headline[-1].label], alpha)
        boards[metric] = Board(metric, part, list(budgets), at, wtl, left_out)
    return boards


def _complete(tidy: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The complete part of a board (Friedman's blocks must be), for a sweep still running or
    an optimizer run on some tables only: the table or optimizer with the largest share of
    missing (table, optimizer) cells goes, the table on a tie (the board is about the
    optimizers), until none is missing; what went, as notes."""
    ran = pd.crosstab(tidy["table"], tidy["optimizer"]) > 0
    notes = []
    while not ran.to_numpy().all():
        by_table = 1.0 - ran.mean(axis=1)
        by_optimizer = 1.0 - ran.mean(axis=0)
        if by_table.max() >= by_optimizer.max():
            table = by_table.idxmax()
            notes.append(f"{table}: not every optimizer's runs are there")
            ran = ran.drop(index=table)
        else:
            name = by_optimizer.idxmax()
            notes.append(f"{name}: not run on every table")
            ran = ran.drop(columns=name)
    return (tidy[tidy["table"].isin(ran.index) & tidy["optimizer"].isin(ran.columns)],
            sorted(notes))


def _at_budget(budget: Budget, tidy: pd.DataFrame, alpha: float,
               confidence: float) -> AtBudget:
    scores = ranks.table_scores(_blocks(tidy))
    k, n = scores.shape[1], scores.shape[0]
    mean = ranks.average_ranks(scores)
    pairs = ranks.wilcoxon_holm(scores, alpha)
    return AtBudget(budget, scores, ranks.table_ranks(scores), mean,
                    ranks.friedman(scores) if k >= 3 and n >= 2 else None,
                    ranks.nemenyi_cd(k, n, alpha) if k >= 2 else math.nan, pairs,
                    ranks.cliques(mean, pairs),
                    ranks.rank_intervals(scores, confidence))


# -- what the board says, as rows ----------------------------------------------------------------
def standings_rows(board: Board) -> list[dict]:
    """The leaderboard at the headline budget: per optimizer its average rank with the
    bootstrap interval, its place in the anytime budgets, censored share, and the families
    it leads."""
    h = board.headline
    censored = ranks.censored_share(board.tidy[board.tidy["budget"] == h.budget.label])
    leads = {}
    for fam, best in best_by_family(board).items():
        for name in best[0]:
            leads.setdefault(name, []).append(fam)
    iv = h.intervals.set_index("optimizer")
    rows = []
    for place, (name, rank) in enumerate(h.mean_ranks.items(), 1):
        row = {"place": place, "optimizer": name, f"mean rank at {h.budget.label}": rank,
               "90% interval (bootstrap over tables)": f"{iv.loc[name, 'low']:.2f}-"
                                                       f"{iv.loc[name, 'high']:.2f}"}
        for label, at in board.at.items():
            if label != h.budget.label:
                row[f"rank at {label}"] = at.mean_ranks[name]
        row["no feasible recommendation (runs)"] = f"{censored[name]:.0%}"
        row["best in"] = ", ".join(leads.get(name, [])) or "-"
        rows.append(row)
    return rows


def statistics_rows(board: Board) -> list[dict]:
    """Per budget: tables, optimizers, Friedman's chi2 and p, Nemenyi's CD, the number of
    pairs Wilcoxon-Holm separates, and the leader."""
    rows = []
    for label, at in board.at.items():
        stat, p = at.friedman if at.friedman else (math.nan, math.nan)
        rows.append({"budget": label, "tables": at.scores.shape[0],
                     "optimizers": at.scores.shape[1], "Friedman chi2": stat, "p": p,
                     "Nemenyi CD": at.cd,
                     "pairs separated (Wilcoxon-Holm)": int(at.pairs["significant"].sum()),
                     "best": at.mean_ranks.index[0]})
    return rows


def pair_rows(board: Board) -> list[dict]:
    """Win/tie/loss over (table, seed) and the pairwise tests at the headline budget, for
    each pair once (a before b in rank order)."""
    h = board.headline
    order = {name: i for i, name in enumerate(h.mean_ranks.index)}
    over_tables = {frozenset((r.a, r.b)): r for r in h.pairs.itertuples()}
    rows = []
    for r in board.win_tie_loss.itertuples():
        if order[r.a] > order[r.b]:
            continue
        t = over_tables[frozenset((r.a, r.b))]
        rows.append({"optimizer": r.a, "against": r.b, "win": r.win, "tie": r.tie,
                     "loss": r.loss, "p (table x seed)": r.p, "Holm": r.p_holm,
                     "p (over tables)": t.p, "Holm ": t.p_holm,
                     "differ": "yes" if t.significant else "-"})
    return sorted(rows, key=lambda r: (order[r["optimizer"]], order[r["against"]]))


def best_by_family(board: Board, budget: str | None = None) -> dict[str, tuple[list[str], float]]:
    """family -> (the optimizers with the lowest mean rank over its tables, that rank)."""
    at = board.at[budget] if budget else board.headline
    out = {}
    for fam, tables in board.families().items():
        mean = at.table_ranks.loc[tables].mean()
        out[fam] = (sorted(mean.index[np.isclose(mean, mean.min())]), float(mean.min()))
    return out


def family_rows(board: Board) -> list[dict]:
    """Per family: its tables, the best optimizer at the first and at the headline budget."""
    first = board.budgets[0].label
    early, late = best_by_family(board, first), best_by_family(board)
    return [{"family": fam, "tables": len(tables),
             f"best at {board.headline.budget.label}": ", ".join(late[fam][0]),
             "its mean rank": late[fam][1],
             f"best at {first}": ", ".join(early[fam][0]), "mean rank ": early[fam][1]}
            for fam, tables in board.families().items()]


def failure_rows(board: Board) -> list[dict]:
    """Where each optimizer fails at the headline budget: its worst family (mean rank), the
    tables where most of its runs have no feasible recommendation, the tables where it
    ranks last alone."""
    h = board.headline
    tidy = board.tidy[board.tidy["budget"] == h.budget.label]
    censored = (tidy.assign(c=np.isinf(tidy["score"]))
                .groupby(["optimizer", "table"])["c"].agg(["sum", "count"]))
    families = board.families()
    rows = []
    for name in h.mean_ranks.index:
        by_family = {fam: h.table_ranks.loc[tables, name].mean()
                     for fam, tables in families.items()}
        worst = max(by_family, key=by_family.get)
        mine = censored.loc[name]
        no_pick = [f"{t} ({int(c['sum'])}/{int(c['count'])})" for t, c in mine.iterrows()
                   if c["sum"] * 2 > c["count"]]
        alone_last = [t for t in h.table_ranks.index
                      if h.table_ranks.loc[t, name] == h.table_ranks.shape[1]]
        rows.append({"optimizer": name, "worst family": worst,
                     "its mean rank there": by_family[worst],
                     "no feasible recommendation (most seeds)": ", ".join(no_pick) or "-",
                     "last alone on": ", ".join(alone_last) or "-"})
    return rows


def heat_values(board: Board) -> pd.DataFrame:
    """Tables x optimizers at the headline budget, as shown: median CNO (2^score) or
    Accuracy_C / optimum (1 - score); NaN where censored."""
    s = board.headline.scores.replace(math.inf, np.nan)
    return 2.0 ** s if board.metric == "cno" else 1.0 - s


# -- the report page -----------------------------------------------------------------------------
def sections(boards: Mapping[str, Board]) -> list[Section]:
    """The leaderboard's sections of ``report.html`` (``farm.report.page.write_report``), per
    board: the standings with the CD diagram, the rank-vs-budget curves and the heat map; the
    statistics per budget; best per family; where each optimizer fails; the pairs."""
    out = []
    for metric, board in boards.items():
        what = BOARD_TITLES[metric]
        h = board.headline.budget.label
        out += [
            Section(f"Leaderboard, {what}, at {h}",
                    lambda _, b=board: standings_rows(b),
                    figures=lambda _, d, b=board: board_figures(b, d)),
            Section(f"Statistics per budget, {what} (Friedman, Nemenyi, Wilcoxon-Holm)",
                    lambda _, b=board: statistics_rows(b)),
            Section(f"Best optimizer per table family, {what}",
                    lambda _, b=board: family_rows(b)),
            Section(f"Where each optimizer fails, {what}, at {h}",
                    lambda _, b=board: failure_rows(b)),
            Section(f"Pairs at {h}, {what}: win/tie/loss over tables x seeds, Wilcoxon "
                    "signed-rank with Holm's correction", lambda _, b=board: pair_rows(b))]
        if board.left_out:
            out.append(Section(f"Left out of the board ({what})",
                               lambda _, b=board: [dict(zip(("left out", "why"),
                                                            n.split(": ", 1)))
                                                   for n in b.left_out]))
    return out


def board_figures(board: Board, out_dir: Path) -> list[Path]:
    """The CD diagram, rank-vs-budget curves and heat map of one board as PNG files."""
    h = board.headline
    slug = "cost" if board.metric == "cno" else "accuracy"
    n_tables, n_seeds = len(board.tables), board.tidy["seed"].nunique()
    files = [board_plots.plot_cd(
        out_dir / f"leaderboard_cd_{slug}.png", h.mean_ranks, h.cliques, h.cd,
        f"Average rank at {h.budget.label} over {n_tables} tables ({n_seeds} seeds each); "
        f"bars: not separated by Wilcoxon-Holm (alpha 0.05)")]
    curves: dict[str, dict[str, pd.Series]] = {}
    for label, at in board.at.items():
        axis = ("budget (multiples of the table's mean configuration cost)"
                if at.budget.axis == "cost" else "budget (evaluations, within the cost cap)")
        curves.setdefault(axis, {})[label] = at.mean_ranks
    files.append(board_plots.plot_rank_budget(out_dir / f"leaderboard_rank_budget_{slug}.png",
                                              curves, "Average rank against budget"))
    values = heat_values(board)[list(h.mean_ranks.index)]
    files.append(board_plots.plot_heatmap(
        out_dir / f"leaderboard_heatmap_{slug}.png", values, board.metric,
        f"Median over seeds at {h.budget.label} (black: no feasible recommendation)"))
    return files
