"""The leaderboard: which optimizer for my job, across every table of a sweep (``farm
leaderboard``; ARCHITECTURE.md, "Layers": a report room module over the analyses of
``optfarm.farm.report.analysis``).

Each run is read at equal budgets on every table, stated in the table's own terms: in
multiples of its budget unit, its mean configuration cost (``mean_config_cost`` of the run
summary, the unit of Lynceus' pooled jobs, Sec. VI-C) times its size factor (1 up to 384
configurations, log2(N / 192) beyond: ``optfarm.farm.sweep.board_spec``), and as a share of
its price (every configuration run once, ``optfarm.farm.run.metrics.exhaustive_cost``);
evaluation budgets grow by the same factor and are also stated as a share of its
configurations. Every budget is capped at the board's ``cap`` share of the price
(``optfarm.farm.sweep.board_spec``); a budget at or above the price buys the whole table, is
labelled "exhaustive" and is left out of the headline. At a budget the run is credited with the
quality of its recommendation after the last step it had paid for within the budget
(``optfarm.farm.run.metrics.step_quality``: the farm's recommendation rule, the same for every
optimizer); a run that stopped earlier keeps its last recommendation, a run with no
recommendation yet, or none truly feasible, is censored. Evaluation budgets are read on the
same runs, which stop at the last cost budget: "n evaluations or the cost cap, whichever came
first".

The score is the distance from the optimum, 0 the optimum and lower better
(``optfarm.farm.run.metrics.quality_score``): log2(CNO) capped at 16 (doublings of the optimum's
cost; ``inf`` without a feasible recommendation) on cost-minimisation tables, 1 -
Accuracy_C / the optimum's on accuracy-maximisation ones (``inf`` without a
recommendation). The headline is the **anytime score**: the area under each run's score
against log budget, from the first cost budget to the last one below the price, over the
area of the cap (``optfarm.farm.run.metrics.shortfall_area``): 0 the optimum from the first budget
on, 1 nothing feasible all along. Tables of the two metrics form boards of their own. The
statistics are those of ``optfarm.farm.stats.ranks`` over the per-table medians over seeds; on a
board of one table its seeds are the blocks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from optfarm.farm.report.analysis import DatasetAnalysis
from optfarm.farm.run.metrics import (
    SCORE_CAP,
    quality_score,
    quantile,
    shortfall_area,
    step_quality,
)
from optfarm.farm.stats import ranks
from optfarm.farm.stats.power import blocks_needed
from optfarm.farm.sweep.board_spec import (
    DEFAULT_COST_BUDGETS,
    DEFAULT_EVALUATIONS,
    PRICE_SHARE_CAP,
    budget_unit,
    table_budget,
    table_evaluations,
)

__all__ = [
    "ALPHA",
    "ANYTIME",
    "BASELINE",
    "BOARD_TITLES",
    "DEFAULT_BUDGETS",
    "INTRO",
    "Board",
    "Budget",
    "Price",
    "anytime_window",
    "best_by_family",
    "budget_name",
    "budget_rows",
    "budget_share",
    "build_boards",
    "cost_labels",
    "failure_rows",
    "family",
    "finite",
    "family_rows",
    "headroom_rows",
    "heat_values",
    "last_budget",
    "needed_text",
    "overall_text",
    "pair_rows",
    "percent",
    "seed_ranges",
    "shown_value",
    "standings_rows",
    "statistics_rows",
    "tidy_scores",
]

# the tables' families: dataset name prefix -> family (anything else: the user's own tables)
FAMILIES = (
    ("lynceus-", "Lynceus TF"),
    ("cherrypick-", "CherryPick"),
    ("scout-", "Scout"),
    ("guindani-", "Guindani"),
    ("synthetic", "synthetic"),
    ("trimtuner-", "TrimTuner"),
    ("cloud-grid-", "large grids"),  # generated, 10^4-10^5 configurations (issue 41)
)
OWN_TABLES = "your tables"
BASELINE = "random"  # the optimizer kept when another makes its very choices; the headroom's
INTRO = (
    "Every optimizer on every table of the sweep at equal budgets, in each table's own "
    "terms: multiples of its budget unit (its mean configuration cost, times log2 of its "
    "size / 192 beyond 384 configurations) and shares of its price (every "
    "configuration run once), never above the board's cap; a budget at or above the "
    "price is marked exhaustive and left out of the headline. At a budget a run is "
    "credited with the configuration the farm credits after the last step it paid for "
    "(the same rule for every optimizer); without a truly feasible one it is censored and "
    "ranks last. Score: log2 CNO capped at 16 (0: the optimum) or 1 - Accuracy_C / the "
    "optimum's. Headline: the anytime score, the area under each run's score against log "
    "budget over the cost budgets below the price (0: the optimum from the first budget "
    "on, 1: nothing feasible all along). A table's value is the median over seeds "
    "(on a board of one table, the seeds are the blocks); ranks within each block (ties "
    "share their places), averaged. Friedman's test (tie-corrected) says whether the "
    "ranks differ; pairwise Wilcoxon signed-rank tests over the blocks, Holm-corrected at "
    "alpha 0.05, say which pairs the data separate, and for those they do not, how many "
    "blocks would detect the observed difference with 80% power (Benavoli et al. 2016); "
    "Nemenyi's critical difference is drawn for scale. A place is 1 + the optimizers the "
    "tests separate from it and rank ahead of it: those the data do not separate share a "
    "place. The decision names what the tests separate from random search and rank ahead "
    "of it, or says that nothing here beats random search. Intervals: 90% percentile "
    "bootstrap over blocks."
)
BOARD_TITLES = {
    "cno": "cost-minimisation tables (score log2 CNO)",
    "accuracy_c": "accuracy-maximisation tables (score 1 - Accuracy_C / optimum)",
}
POWER = 0.8
ALPHA = 0.05  # the level of the pairwise tests (Wilcoxon-Holm), and of the power's blocks


def family(dataset: str) -> str:
    """The family a table belongs to (by its name), or ``OWN_TABLES``."""
    return next((name for prefix, name in FAMILIES if dataset.startswith(prefix)), OWN_TABLES)


@dataclass(frozen=True)
class Budget:
    """A budget: ``amount`` multiples of the table's budget unit (``axis`` "cost"),
    evaluations times its size factor (``axis`` "evaluations"), or the anytime score over the
    cost budgets (``ANYTIME``); ``also``, the larger amounts that buy the same on every table
    of the board (the cap binds: "5x = 10x")."""

    axis: str
    amount: float
    also: tuple[float, ...] = ()

    @property
    def label(self) -> str:
        if self.axis == "anytime":
            return "anytime"
        unit = "x" if self.axis == "cost" else ""
        amounts = " = ".join(f"{a:g}{unit}" for a in (self.amount, *self.also))
        return amounts if self.axis == "cost" else f"{amounts} evals"


ANYTIME = Budget("anytime", 0.0)
DEFAULT_BUDGETS = (
    *(Budget("cost", k) for k in DEFAULT_COST_BUDGETS),
    *(Budget("evaluations", n) for n in DEFAULT_EVALUATIONS),
)


@dataclass(frozen=True)
class Price:
    """A table's price in its own terms: the mean configuration cost, what running every
    configuration once costs, and how many configurations there are (inf / None in
    summaries stored before the price was kept)."""

    mean_cost: float
    cost: float
    configurations: int | None

    @classmethod
    def of(cls, summary: Mapping) -> Price:
        table = summary.get("table") or {}
        return cls(
            float(summary["mean_config_cost"]),
            float(table.get("exhaustive_cost", math.inf)),
            table.get("configurations"),
        )

    @property
    def unit(self) -> float:
        """The table's budget unit: its mean configuration cost x its size factor."""
        return budget_unit(self.mean_cost, self.configurations)

    def limit(self, budget: Budget, cap: float | None) -> float:
        """The budget on this table, grown by its size factor
        (``optfarm.farm.sweep.board_spec``): its cost (capped at ``cap`` x the price) or its
        evaluations (capped at ``cap`` x the configurations, at least 1)."""
        if budget.axis == "cost":
            return table_budget(budget.amount, self.mean_cost, self.cost, cap, self.configurations)
        return table_evaluations(int(budget.amount), self.configurations, cap)

    def share(self, budget: Budget, cap: float | None) -> float:
        """The budget's share of the price (cost) or of the configurations (evaluations);
        NaN when the price is unknown."""
        whole = self.cost if budget.axis == "cost" else self.configurations
        return self.limit(budget, cap) / whole if whole and math.isfinite(whole) else math.nan


def _score(quality: np.ndarray, metric: str, optimum: float) -> np.ndarray:
    """Per-step scores (``quality_score``), ``inf`` where censored."""
    score = np.asarray(quality_score(quality, metric, optimum), dtype=float)
    censored = ~np.isfinite(quality) if metric == "cno" else quality <= 0
    return np.where(censored, math.inf, score)


def _at(run: Mapping[str, np.ndarray], score: np.ndarray, budget: Budget, limit: float) -> float:
    """The run's score at a budget of ``limit`` (cost or evaluations; censored before its
    first step)."""
    if budget.axis == "cost":
        last = (
            int(np.searchsorted(run["cum_exploration_cost"], limit * (1 + 1e-12), side="right")) - 1
        )
    else:
        last = min(int(limit), len(score)) - 1
    return math.inf if last < 0 else float(score[last])


def _anytime(
    run: Mapping[str, np.ndarray], score: np.ndarray, window: tuple[float, float], metric: str
) -> float:
    """The anytime score over the cost ``window`` (the module's docstring)."""
    capped = np.minimum(score, SCORE_CAP[metric])
    return shortfall_area(
        capped, run["cum_exploration_cost"], window[0], window[1] / window[0], SCORE_CAP[metric]
    )


def anytime_window(
    price: Price, budgets: Sequence[Budget], cap: float | None
) -> tuple[float, float] | None:
    """The costs the anytime score spans on a table: its first cost budget to its last one
    below the price (all of them when none is below); None without cost budgets."""
    limits = sorted(price.limit(b, cap) for b in budgets if b.axis == "cost")
    below = [c for c in limits if c < price.cost] or limits
    return (below[0], below[-1]) if below else None


def tidy_scores(
    analyses: Mapping[str, DatasetAnalysis],
    budgets: Sequence[Budget] = DEFAULT_BUDGETS,
    cap: float | None = PRICE_SHARE_CAP,
) -> pd.DataFrame:
    """One row per (table, optimizer variant, seed, budget): ``metric table family optimizer
    seed budget axis amount limit share exhaustive score`` (``limit``: the budget on that
    table, in its currency or evaluations); the anytime score as budget ``ANYTIME`` when
    there are cost budgets."""
    rows = []
    for table, a in analyses.items():
        for label, g in a.groups.items():
            for seed, summary, run in zip(g.seeds, g.summaries, g.traces):
                price = Price.of(summary)
                score = _score(step_quality(run, a.metric), a.metric, a.optimum)
                base = {
                    "metric": a.metric,
                    "table": table,
                    "family": family(a.dataset),
                    "optimizer": label,
                    "seed": seed,
                }
                for b in budgets:
                    limit = price.limit(b, cap)
                    rows.append(
                        {
                            **base,
                            "budget": b.label,
                            "axis": b.axis,
                            "amount": b.amount,
                            "limit": limit,
                            "share": price.share(b, cap),
                            "exhaustive": b.axis == "cost" and limit >= price.cost,
                            "score": _at(run, score, b, limit),
                        }
                    )
                window = anytime_window(price, budgets, cap)
                if window is not None:
                    rows.append(
                        {
                            **base,
                            "budget": ANYTIME.label,
                            "axis": ANYTIME.axis,
                            "amount": ANYTIME.amount,
                            "limit": math.nan,
                            "share": math.nan,
                            "exhaustive": False,
                            "score": _anytime(run, score, window, a.metric),
                        }
                    )
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
    """The statistics of one board at one budget (``optfarm.farm.stats.ranks``)."""

    budget: Budget
    scores: pd.DataFrame  # blocks x optimizers, median over seeds
    table_ranks: pd.DataFrame
    mean_ranks: pd.Series  # best first
    friedman: tuple[float, float] | None  # None for fewer than 3 optimizers or 2 blocks
    cd: float  # Nemenyi's critical difference
    pairs: pd.DataFrame  # Wilcoxon-Holm over blocks, with the blocks needed
    cliques: list[list[str]]
    intervals: pd.DataFrame  # bootstrap over blocks

    def separated(self) -> set[frozenset]:
        """The pairs Wilcoxon-Holm separates."""
        return {frozenset((r.a, r.b)) for r in self.pairs.itertuples() if r.significant}

    def places(self) -> pd.Series:
        """Each optimizer's place, those the data do not separate sharing one
        (``optfarm.farm.stats.ranks.places``), in order of place, then mean rank."""
        return ranks.places(self.mean_ranks, self.pairs)

    def ahead(self) -> list[str]:
        """The optimizers in the first place (none of them separated from any other
        optimizer ranked ahead of it)."""
        places = self.places()
        return list(places.index[places == 1])

    def beat(self, baseline: str = "") -> list[str]:
        """The optimizers the data separate from ``baseline`` (``BASELINE``) that rank ahead
        of it, by mean rank; none when it is not on the board."""
        baseline = baseline or BASELINE
        mean, differ = self.mean_ranks, self.separated()
        if baseline not in mean.index:
            return []
        return [
            n for n in mean.index if mean[n] < mean[baseline] and frozenset((n, baseline)) in differ
        ]


@dataclass
class Board:
    """One metric's board: its tables, optimizers and statistics at every budget."""

    metric: str
    tidy: pd.DataFrame
    budgets: list[Budget]
    at: dict[str, AtBudget]
    win_tie_loss: pd.DataFrame  # over (table, seed) at the headline
    cap: float | None = PRICE_SHARE_CAP
    left_out: list[str] = field(default_factory=list)  # optimizers and tables, why
    same_as: list[str] = field(default_factory=list)  # optimizers shown once, why

    @property
    def headline(self) -> AtBudget:
        """The anytime score (else the last budget)."""
        return self.at.get(ANYTIME.label) or self.at[self.budgets[-1].label]

    @property
    def tables(self) -> list[str]:
        return list(dict.fromkeys(self.tidy["table"]))

    @property
    def blocks(self) -> str:
        """What the statistics' blocks are: "tables", or "seeds" on a board of one table."""
        return "seeds" if len(self.tables) == 1 else "tables"

    def families(self) -> dict[str, list[str]]:
        """family -> the blocks of its tables (``_blocks``: the tables, or one table's seeds)."""
        fam = self.tidy.drop_duplicates("table").set_index("table")["family"]
        out: dict[str, list[str]] = {}
        for block in self.headline.scores.index:
            out.setdefault(fam[block.split(SEED_BLOCK)[0]], []).append(block)
        return out


def build_boards(
    analyses: Mapping[str, DatasetAnalysis],
    budgets: Sequence[Budget] = DEFAULT_BUDGETS,
    cap: float | None = PRICE_SHARE_CAP,
    alpha: float = ALPHA,
    confidence: float = 0.9,
) -> dict[str, Board]:
    """A board per quality metric in the sweep: the optimizers and seeds complete on its
    tables (``_complete``), one that made another's very choices on every table shown once,
    budgets that buy the same on every table merged (``_merge_repeats``)."""
    tidy = tidy_scores(analyses, budgets, cap)
    boards = {}
    for metric, part in tidy.groupby("metric", sort=False):
        part, left_out = _complete(part)
        part, same_as = _shown_once(part, analyses)
        part, merged = _merge_repeats(part, budgets)
        labels = [b.label for b in merged]
        if ANYTIME.label in set(part["budget"]):
            labels.insert(0, ANYTIME.label)
        at = {
            label: _at_budget(
                _budget(label, merged), part[part["budget"] == label], alpha, confidence
            )
            for label in labels
        }
        board = Board(metric, part, merged, at, pd.DataFrame(), cap, left_out, same_as)
        board.win_tie_loss = ranks.win_tie_loss(
            part[part["budget"] == board.headline.budget.label], alpha
        )
        boards[metric] = board
    return boards


def _budget(label: str, budgets: Sequence[Budget]) -> Budget:
    return ANYTIME if label == ANYTIME.label else next(b for b in budgets if b.label == label)


def _merge_repeats(
    tidy: pd.DataFrame, budgets: Sequence[Budget]
) -> tuple[pd.DataFrame, list[Budget]]:
    """Budgets of one axis that buy the same on every table of the board (the cap binds:
    "10 evals" on a table of 12 configurations is "20 evals") as one budget, labelled with
    every amount ("10 = 20 evals"): their rows would repeat each other."""
    limits = tidy.drop_duplicates(["budget", "table"]).set_index(["budget", "table"])["limit"]
    first: dict[tuple, int] = {}
    merged: list[Budget] = []
    for b in budgets:
        key = (b.axis, tuple(np.round(limits.loc[b.label].sort_index().to_numpy(), 9)))
        if key in first:
            kept = merged[first[key]]
            merged[first[key]] = Budget(kept.axis, kept.amount, (*kept.also, b.amount))
        else:
            first[key] = len(merged)
            merged.append(b)
    relabel = {Budget(b.axis, b.amount).label: b.label for b in merged}
    part = tidy[tidy["budget"].isin([*relabel, ANYTIME.label])]
    return part.assign(budget=part["budget"].replace(relabel)), merged


def _complete(tidy: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The complete part of a board (Friedman's blocks must be), for a sweep still running,
    stopped, or with an optimizer run on some tables only: the blocks (one table's seeds, or
    the tables) x optimizers where every cell is complete (``_cells``), found by
    ``_most_seeds`` on one table, by ``_fewest_dropped`` on several; what went, as notes
    naming it."""
    one_table = tidy["table"].nunique() == 1
    cells = _cells(tidy, one_table)
    have = _most_seeds(cells) if one_table else _fewest_dropped(cells)
    keep = tidy["optimizer"].isin(have.columns)
    keep &= tidy["seed" if one_table else "table"].isin(have.index)
    return tidy[keep], _left_out_notes(tidy, cells, have, one_table)


def _most_seeds(cells: pd.DataFrame) -> pd.DataFrame:
    """On one table, the optimizers with the most seeds and the seeds they all have that
    hold the most runs (optimizers x seeds), at least two optimizers where there are, more
    optimizers on a tie: a board stopped after its first seed ranks every optimizer on that
    seed, one stopped later leaves out by name those that have fewer."""
    counts = cells.sum().sort_values(ascending=False, kind="stable")
    best: tuple | None = None
    for m in range(len(counts), 0, -1):
        names = list(counts.index[:m])
        common = cells.index[cells[names].all(axis=1)]
        score = (m >= min(2, len(counts)), m * len(common))
        if best is None or score > best[0]:
            best = (score, names, common)
    return cells.loc[best[2], best[1]]


def _fewest_dropped(cells: pd.DataFrame) -> pd.DataFrame:
    """On several tables: the table or optimizer with the largest share of incomplete
    cells goes, the table on a tie (the board is about the optimizers), until none is
    incomplete; two optimizers and one table are always kept."""
    have = cells.copy()
    while not have.to_numpy().all():
        by_block = 1.0 - have.mean(axis=1)
        by_optimizer = 1.0 - have.mean(axis=0)
        drop_block = by_block.max() >= by_optimizer.max() or have.shape[1] <= 2
        if drop_block and have.shape[0] > 1:
            have = have.drop(index=by_block.idxmax())
        else:
            have = have.drop(columns=by_optimizer.idxmax())
    return have


def _cells(tidy: pd.DataFrame, one_table: bool) -> pd.DataFrame:
    """Blocks x optimizers, whether the cell is complete: on a board of one table, its seeds
    (blocks) x optimizers, whether the optimizer ran that seed; on a board of tables,
    whether the optimizer ran every seed any optimizer ran on that table."""
    runs = tidy.drop_duplicates(["table", "optimizer", "seed"])
    if one_table:
        return pd.crosstab(runs["seed"], runs["optimizer"]) > 0
    seeds = runs.groupby(["table", "optimizer"])["seed"].nunique().unstack(fill_value=0)
    return seeds.eq(runs.groupby("table")["seed"].nunique(), axis=0)


def _left_out_notes(
    tidy: pd.DataFrame, cells: pd.DataFrame, have: pd.DataFrame, one_table: bool
) -> list[str]:
    """What ``_complete`` left out, by name: each optimizer (with the seeds it has), the
    tables (with the optimizers missing there), or one table's seeds."""
    runs = tidy.drop_duplicates(["table", "optimizer", "seed"])
    count = runs.groupby(["table", "optimizer"])["seed"].nunique()
    seeds = runs.groupby("table")["seed"].nunique()
    notes = [
        _optimizer_note(name, count.xs(name, level="optimizer"), seeds, cells, one_table)
        for name in cells.columns
        if name not in have.columns
    ]
    dropped = [b for b in cells.index if b not in have.index]
    if one_table and dropped:
        notes.append(
            f"{seeds.index[0]} seeds {seed_ranges(dropped)}: not run by every optimizer on it"
        )
    notes += [_table_note(t, cells, count, seeds) for t in ([] if one_table else dropped)]
    return sorted(notes)


def _table_note(table: str, cells: pd.DataFrame, count: pd.Series, seeds: pd.Series) -> str:
    """Why a table is left off: "scout-x: no runs of C on it; only some seeds of A (1 of 3)"."""
    missing = [n for n in cells.columns if not cells.loc[table, n]]
    none = [n for n in missing if (table, n) not in count.index]
    some = [f"{n} ({count[table, n]} of {seeds[table]})" for n in missing if n not in none]
    parts = [f"no runs of {', '.join(none)} on it"] if none else []
    parts += [f"only some seeds of {', '.join(some)}"] if some else []
    return f"{table}: " + "; ".join(parts)


def _optimizer_note(
    name: str, ran: pd.Series, seeds: pd.Series, cells: pd.DataFrame, one_table: bool
) -> str:
    """Why an optimizer is left off: its seeds on the one table ("B: 1 of 20 seeds, fewer
    than the others"), or the tables it did not run on (every seed of)."""
    if one_table:
        return f"{name}: {ran.iloc[0]} of {seeds.iloc[0]} seeds, fewer than the others"
    every = len(ran) == len(cells.index)
    return f"{name}: not {'every seed ' if every else ''}run on every table"


def seed_ranges(seeds: Sequence[int]) -> str:
    """Seeds as ranges: "0-4, 7, 9-19"."""
    out: list[str] = []
    values = sorted(int(s) for s in seeds)
    start = prev = values[0]
    for s in [*values[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if s is not None:
            start = prev = s
    return ", ".join(out)


def _choices(group, metric: str) -> tuple | None:
    """A group's runs as, by seed, their sequences of (configuration, fidelity, credited
    quality) (None for traces stored without them)."""
    if not group.traces or "config_id" not in group.traces[0]:
        return None
    return tuple(
        (
            seed,
            tuple(
                zip(
                    run["config_id"].tolist(),
                    run["fidelity"].tolist(),
                    step_quality(run, metric).tolist(),
                )
            ),
        )
        for seed, run in zip(group.seeds, group.traces)
    )


def _shown_once(
    tidy: pd.DataFrame, analyses: Mapping[str, DatasetAnalysis]
) -> tuple[pd.DataFrame, list[str]]:
    """An optimizer that made the same choices as another in every run (same seeds, same
    configurations at the same fidelities in the same order, credited the same) on every table of
    the board is shown once, as ``BASELINE`` if it is one of them, else as the first by name
    (Nephele on tables of one data size is random search); a note says so. Where it does so on some
    tables only, a note names them."""
    names = sorted(set(tidy["optimizer"]), key=lambda n: (n != BASELINE, n))
    tables = list(dict.fromkeys(tidy["table"]))
    same: dict[str, dict[str, list[str]]] = {}  # copy -> original -> tables
    for table in tables:
        groups, metric = analyses[table].groups, analyses[table].metric
        seen: dict[tuple, str] = {}
        for name in names:
            key = _choices(groups[name], metric)
            if key is None:
                continue
            if key in seen:
                same.setdefault(name, {}).setdefault(seen[key], []).append(table)
            else:
                seen[key] = name
    notes, drop = [], []
    for copy, by_original in sorted(same.items()):
        for original, where in by_original.items():
            if len(where) == len(tables):
                drop.append(copy)
                notes.append(
                    f"{copy}: the same configurations as {original} in every run "
                    f"(shown once, as {original})"
                )
            else:
                notes.append(
                    f"{copy}: the same configurations as {original} on "
                    + _some_tables(where, tables)
                )
    return tidy[~tidy["optimizer"].isin(drop)], notes


def _some_tables(where: Sequence[str], tables: Sequence[str]) -> str:
    """Tables named, or when they are most of the board, the others ("17 of 18 tables, all
    but synthetic")."""
    if len(where) * 2 <= len(tables):
        return ", ".join(where)
    others = [t for t in tables if t not in where]
    return f"{len(where)} of {len(tables)} tables, all but {', '.join(others)}"


def _at_budget(budget: Budget, tidy: pd.DataFrame, alpha: float, confidence: float) -> AtBudget:
    scores = ranks.table_scores(_blocks(tidy))
    k, n = scores.shape[1], scores.shape[0]
    mean = ranks.average_ranks(scores)
    pairs = _with_power(ranks.wilcoxon_holm(scores, alpha), scores, alpha)
    return AtBudget(
        budget,
        scores,
        ranks.table_ranks(scores),
        mean,
        ranks.friedman(scores) if k >= 3 and n >= 2 else None,
        ranks.nemenyi_cd(k, n, alpha) if k >= 2 else math.nan,
        pairs,
        ranks.cliques(mean, pairs),
        ranks.rank_intervals(scores, confidence),
    )


def _with_power(pairs: pd.DataFrame, scores: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Each pair's mean difference and its spread over the blocks where both have a
    feasible recommendation, and the blocks that would detect that difference with
    ``POWER`` at ``alpha`` / the number of pairs (Holm's first step:
    ``optfarm.farm.stats.power.blocks_needed``); NaN with fewer than two such blocks."""
    rows = []
    level = alpha / max(len(pairs), 1)
    for r in pairs.itertuples():
        a, b = scores[r.a].to_numpy(dtype=float), scores[r.b].to_numpy(dtype=float)
        both = np.isfinite(a) & np.isfinite(b)
        if both.sum() < 2:
            rows.append((math.nan, math.nan, None))
            continue
        d = a[both] - b[both]
        effect, spread = float(d.mean()), float(d.std(ddof=1))
        rows.append((effect, spread, blocks_needed(effect, spread, level, POWER)))
    effect, spread, needed = zip(*rows) if rows else ((), (), ())
    return pairs.assign(effect=list(effect), spread=list(spread), needed=list(needed))


# -- what the board says, as rows ----------------------------------------------------------------
def percent(share: float) -> str:
    """A share as a percentage to two significant digits ("25%", "4.3%", "0.34%"), so that
    a budget on a large table never reads "0% of the price"."""
    value = 100.0 * share
    if value == 0 or value >= 99.5:
        return f"{value:.0f}%"
    return f"{value:.2g}%" if value >= 0.01 else "< 0.01%"


def _share_text(shares: pd.Series, whole: str) -> str:
    """A budget's share of the ``whole`` (price or configurations) over the board's tables:
    "4.3% of the price" or "2.1-11% of the price"; "the price unknown" for runs stored
    before the price was kept."""
    shares = shares.dropna()
    if shares.empty:
        return f"the {whole} unknown"
    lo, hi = percent(shares.min()), percent(shares.max())
    return (lo if lo == hi else f"{lo[:-1]}-{hi}") + f" of the {whole}"


def budget_rows(board: Board) -> list[dict]:
    """Per budget, in the tables' own terms: its share of each table's price (cost) or
    configurations (evaluations), and on how many tables it buys the whole table."""
    rows = []
    for b in board.budgets:
        part = board.tidy[board.tidy["budget"] == b.label].drop_duplicates("table")
        exhaustive = int(part["exhaustive"].sum())
        share = _share_text(part["share"], _price_word(b))
        rows.append(
            {
                "budget": b.label,
                "in": "budget units" if b.axis == "cost" else "evaluations x size factor",
                "share of the table": share + (" (the cap: they buy the same)" if b.also else ""),
                "exhaustive": f"yes, on {exhaustive} of {len(part)} tables" if exhaustive else "-",
            }
        )
    return rows


def _price_word(b: Budget) -> str:
    return "price" if b.axis == "cost" else "configurations"


def budget_share(board: Board, label: str, short: bool = False) -> str:
    """A budget's share of each table's price or configurations, "11% of the price" ("11%"
    when ``short``), ", exhaustive" after it when it buys the whole table somewhere."""
    b = board.at[label].budget
    part = board.tidy[board.tidy["budget"] == label].drop_duplicates("table")
    share = _share_text(part["share"], _price_word(b))
    return (share.split(" of the ")[0] if short else share) + (
        ", exhaustive" if part["exhaustive"].any() else ""
    )


def budget_name(board: Board, label: str, short: bool = False) -> str:
    """A budget as a reader should read it: "5x (11% of the price)" ("5x (11%)" when
    ``short``), "anytime"; "exhaustive" when it buys the whole table somewhere."""
    if board.at[label].budget.axis == "anytime":
        return label
    return f"{label} ({budget_share(board, label, short)})"


def cost_labels(board: Board) -> list[str]:
    """The cost budgets below the price on every table (the ones a decision is about)."""
    tidy = board.tidy
    return [
        b.label
        for b in board.budgets
        if b.axis == "cost" and not tidy.loc[tidy["budget"] == b.label, "exhaustive"].any()
    ]


def finite(value) -> float | None:
    """A number for a table cell, None ("-") for NaN: no "nan" reaches a reader."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def standings_rows(board: Board) -> list[dict]:
    """The leaderboard by the headline (the anytime score): per optimizer its place (the
    optimizers the data do not separate share one), average rank with the bootstrap
    interval, the median anytime score, its average rank at each budget, censored share at
    the last cost budget, and the families it leads."""
    h = board.headline
    last = [b for b in board.budgets if b.axis == "cost"] or board.budgets
    censored = ranks.censored_share(board.tidy[board.tidy["budget"] == last[-1].label])
    leads = {}
    for fam, best in best_by_family(board).items():
        for name in best[0]:
            leads.setdefault(name, []).append(fam)
    iv = h.intervals.set_index("optimizer")
    rows = []
    for name, place in h.places().items():
        row = {
            "place": int(place),
            "optimizer": name,
            f"mean rank ({h.budget.label})": h.mean_ranks[name],
            f"90% interval (bootstrap over {board.blocks})": (
                f"{iv.loc[name, 'low']:.2f}-{iv.loc[name, 'high']:.2f}"
            ),
            f"median {h.budget.label} score": quantile(h.scores[name].to_numpy(), 0.5),
        }
        for label, at in board.at.items():
            if label != h.budget.label:
                row[f"rank at {label}"] = at.mean_ranks[name]
        row[f"no feasible recommendation at {last[-1].label} (runs)"] = percent(censored[name])
        row["lowest mean rank in"] = ", ".join(leads.get(name, [])) or "-"
        rows.append(row)
    return rows


def statistics_rows(board: Board) -> list[dict]:
    """Per budget (the headline first): its share of the price, the blocks, optimizers,
    Friedman's chi2 and p, Nemenyi's CD, the pairs Wilcoxon-Holm separates, the optimizers
    in the first place (ties named together) and those the data separate from random
    search and put ahead of it."""
    rows = []
    for label, at in board.at.items():
        stat, p = at.friedman if at.friedman else (None, None)
        rows.append(
            {
                "budget": budget_name(board, label),
                board.blocks: at.scores.shape[0],
                "optimizers": at.scores.shape[1],
                "Friedman chi2": stat,
                "p": p,
                "Nemenyi CD": finite(at.cd),
                "pairs separated (Wilcoxon-Holm)": (
                    f"{int(at.pairs['significant'].sum())} of {len(at.pairs)}"
                ),
                "first place (not separated)": ", ".join(at.ahead()),
                "separated from random search, ahead of it": (
                    ", ".join(at.beat()) or "none"
                    if BASELINE in at.mean_ranks.index
                    else "random search is not on the board"
                ),
            }
        )
    return rows


def needed_text(needed, blocks: str) -> str:
    """``optfarm.farm.stats.power.blocks_needed`` in words."""
    return (
        "no difference seen"
        if needed is None or (isinstance(needed, float) and math.isnan(needed))
        else f"{int(needed)} {blocks}"
    )


def pair_rows(board: Board) -> list[dict]:
    """Each pair once (a before b in rank order) at the headline: win/tie/loss over (table,
    seed), the pairwise tests, whether the data separate them, and if not, how many blocks
    would detect the observed mean difference with 80% power."""
    h = board.headline
    order = {name: i for i, name in enumerate(h.mean_ranks.index)}
    over_blocks = {frozenset((r.a, r.b)): r for r in h.pairs.itertuples()}
    rows = []
    for r in board.win_tie_loss.itertuples():
        if order[r.a] > order[r.b]:
            continue
        t = over_blocks[frozenset((r.a, r.b))]
        sign = 1.0 if t.a == r.a else -1.0
        rows.append(
            {
                "optimizer": r.a,
                "against": r.b,
                "win": r.win,
                "tie": r.tie,
                "loss": r.loss,
                "p (table x seed)": r.p,
                "Holm": r.p_holm,
                f"p (over {board.blocks})": t.p,
                "Holm ": t.p_holm,
                "mean difference": finite(sign * t.effect),
                "spread (sd)": finite(t.spread),
                "separated": "yes" if t.significant else "no",
                f"{board.blocks} needed (80% power)": "-"
                if t.significant
                else needed_text(t.needed, board.blocks),
            }
        )
    return sorted(rows, key=lambda r: (order[r["optimizer"]], order[r["against"]]))


def overall_text(board: Board) -> str:
    """Per board, in one line: Friedman's verdict at the headline, the pairs separated, and
    the blocks that would separate the first two not yet separated."""
    h = board.headline
    n_sep, n = int(h.pairs["significant"].sum()), len(h.pairs)
    text = (
        f"{n_sep} of {n} pairs separated by Wilcoxon-Holm over {h.scores.shape[0]} "
        f"{board.blocks} ({h.budget.label})"
    )
    if h.friedman:
        text = f"Friedman p = {h.friedman[1]:.3g}; " + text
    order = list(h.mean_ranks.index)
    for r in sorted(h.pairs.itertuples(), key=lambda r: order.index(r.a) + order.index(r.b)):
        if not r.significant:
            return text + f"; {r.a} vs {r.b} not separated: " + _power_words(r, board.blocks)
    return text


def _power_words(pair, blocks: str) -> str:
    """What it would take to separate a pair the data do not: the blocks that would detect
    its mean difference with 80% power, or why that cannot be said."""
    if pair.needed is not None and not (isinstance(pair.needed, float) and math.isnan(pair.needed)):
        return (
            f"{needed_text(pair.needed, blocks)} would detect their mean difference of "
            f"{abs(pair.effect):.3g} (spread {pair.spread:.3g}) with 80% power"
        )
    if isinstance(pair.effect, float) and math.isnan(pair.effect):
        return f"fewer than two {blocks} where both have a feasible recommendation"
    return "their mean difference is nil"


def _nothing_feasible(scores: np.ndarray) -> str:
    """How many of a set of runs' scores are censored: "1 of 10 nothing feasible"."""
    return f"{int(np.isinf(scores).sum())} of {len(scores)} nothing feasible"


def headroom_rows(board: Board) -> list[dict]:
    """Per table, how far random search is from the optimum at each cost budget: its median
    CNO (or Accuracy_C / optimum's) over its seeds, the budget's share of the price, and how
    many of its runs have nothing feasible there ("1.17 (10%; 1 of 10 nothing feasible)")."""
    if BASELINE not in set(board.tidy["optimizer"]):
        return []
    mine = board.tidy[(board.tidy["optimizer"] == BASELINE) & (board.tidy["axis"] == "cost")]
    rows = []
    for table, part in mine.groupby("table", sort=False):
        row = {"table": table}
        for label, at_b in part.groupby("budget", sort=False):
            scores = at_b["score"].to_numpy()
            score = quantile(scores, 0.5)
            share = at_b["share"].iloc[0]
            text = (
                "none feasible"
                if not math.isfinite(score)
                else ">= 16"
                if board.metric == "cno" and score >= SCORE_CAP["cno"]
                else f"{shown_value(score, board.metric):.3g}"
            )
            where = f"{percent(share)}; " if math.isfinite(share) else ""
            row[label] = f"{text} ({where}{_nothing_feasible(scores)})"
        rows.append(row)
    return rows


def shown_value(score: float, metric: str) -> float:
    """A score as a reader reads it: CNO (2^score) or Accuracy_C / optimum's (1 - score);
    inf where censored, NaN where missing."""
    if math.isnan(score):
        return math.nan
    if math.isinf(score):
        return math.inf
    return 2.0**score if metric == "cno" else 1.0 - score


def best_by_family(board: Board, budget: str | None = None) -> dict[str, tuple[list[str], float]]:
    """family -> (the optimizers with the lowest mean rank over its tables, that rank)."""
    at = board.at[budget] if budget else board.headline
    out = {}
    for fam, tables in board.families().items():
        mean = at.table_ranks.loc[tables].mean()
        out[fam] = (sorted(mean.index[np.isclose(mean, mean.min())]), float(mean.min()))
    return out


def family_rows(board: Board) -> list[dict]:
    """Per family: its tables, the optimizers with the lowest mean rank at the first budget
    and at the headline (ties named together)."""
    first = board.budgets[0].label
    early, late = best_by_family(board, first), best_by_family(board)
    fam = board.tidy.drop_duplicates("table").groupby("family", sort=False)["table"].count()
    return [
        {
            "family": f,
            "tables": int(fam[f]),
            f"lowest mean rank at {board.headline.budget.label}": ", ".join(late[f][0]),
            "its mean rank": late[f][1],
            f"lowest mean rank at {first}": ", ".join(early[f][0]),
            "mean rank ": early[f][1],
        }
        for f in board.families()
    ]


def failure_rows(board: Board) -> list[dict]:
    """Where each optimizer fails by the headline: its worst family (mean rank), the tables
    where it ranks last alone, and the tables where most of its runs have no feasible
    recommendation at the last budget below the price."""
    h = board.headline
    tidy = board.tidy[board.tidy["budget"] == last_budget(board).budget.label]
    censored = (
        tidy.assign(c=np.isinf(tidy["score"]))
        .groupby(["optimizer", "table"])["c"]
        .agg(["sum", "count"])
    )
    families = board.families()
    rows = []
    for name in h.mean_ranks.index:
        by_family = {
            fam: h.table_ranks.loc[tables, name].mean() for fam, tables in families.items()
        }
        worst = max(by_family, key=by_family.get)
        mine = censored.loc[name]
        no_pick = [
            f"{t} ({int(c['sum'])}/{int(c['count'])})"
            for t, c in mine.iterrows()
            if c["sum"] * 2 > c["count"]
        ]
        alone_last = [
            t for t in h.table_ranks.index if h.table_ranks.loc[t, name] == h.table_ranks.shape[1]
        ]
        rows.append(
            {
                "optimizer": name,
                "worst family": worst,
                "its mean rank there": by_family[worst],
                "no feasible recommendation (most seeds)": ", ".join(no_pick) or "-",
                "last alone on": ", ".join(alone_last) or "-",
            }
        )
    return rows


def last_budget(board: Board) -> AtBudget:
    """The last cost budget below the price on every table (else the first cost budget,
    else the last budget): where the heat map and the failures are read."""
    cost = [b for b in board.budgets if b.axis == "cost"]
    fits = [
        b for b in cost if not board.tidy.loc[board.tidy["budget"] == b.label, "exhaustive"].any()
    ]
    return board.at[(fits or cost[:1] or board.budgets)[-1].label]


def heat_values(board: Board) -> pd.DataFrame:
    """Tables x optimizers at the last budget below the price, as shown: median CNO
    (2^score) or Accuracy_C / optimum (1 - score); inf where censored (nothing feasible),
    NaN where no run is (missing)."""
    s = last_budget(board).scores
    return s.apply(lambda col: [shown_value(v, board.metric) for v in col])
