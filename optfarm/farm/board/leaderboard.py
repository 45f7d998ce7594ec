"""The leaderboard: which optimizer for my job, across every table of a sweep (``farm
leaderboard``; ARCHITECTURE.md, "Layers": a report room module over the analyses of
``optfarm.farm.report.analysis``).

Each run is read at equal budgets on every table, stated in the table's own terms: in
multiples of its mean configuration cost (``mean_config_cost`` of the run summary, the unit
of Lynceus' pooled jobs, Sec. VI-C) and as a share of its price (every configuration run
once, ``optfarm.farm.run.metrics.exhaustive_cost``); evaluation budgets also as a share of its
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
    CNO_CAP,
    SCORE_CAP,
    quality_score,
    quantile,
    score_quality,
    shortfall_area,
    step_quality,
)
from optfarm.farm.stats import ranks
from optfarm.farm.stats.power import blocks_needed
from optfarm.farm.sweep.board_spec import (
    DEFAULT_COST_BUDGETS,
    DEFAULT_EVALUATIONS,
    PRICE_SHARE_CAP,
    table_budget,
)

__all__ = [
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
    "build_boards",
    "failure_rows",
    "family",
    "family_rows",
    "headroom_rows",
    "heat_values",
    "last_budget",
    "needed_text",
    "overall_text",
    "pair_rows",
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
)
OWN_TABLES = "your tables"
BASELINE = "random"  # the optimizer kept when another makes its very choices; the headroom's
INTRO = (
    "Every optimizer on every table of the sweep at equal budgets, in each table's own "
    "terms: multiples of its mean configuration cost and shares of its price (every "
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
    "Nemenyi's critical difference is drawn for scale. Intervals: 90% percentile "
    "bootstrap over blocks."
)
BOARD_TITLES = {
    "cno": "cost-minimisation tables (score log2 CNO)",
    "accuracy_c": "accuracy-maximisation tables (score 1 - Accuracy_C / optimum)",
}
POWER = 0.8


def family(dataset: str) -> str:
    """The family a table belongs to (by its name), or ``OWN_TABLES``."""
    return next((name for prefix, name in FAMILIES if dataset.startswith(prefix)), OWN_TABLES)


@dataclass(frozen=True)
class Budget:
    """A budget: ``amount`` multiples of the table's mean configuration cost (``axis``
    "cost"), evaluations (``axis`` "evaluations"), or the anytime score over the cost
    budgets (``ANYTIME``)."""

    axis: str
    amount: float

    @property
    def label(self) -> str:
        if self.axis == "anytime":
            return "anytime"
        return f"{self.amount:g}x" if self.axis == "cost" else f"{self.amount:g} evals"


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

    def limit(self, budget: Budget, cap: float | None) -> float:
        """The budget on this table: its cost (capped at ``cap`` x the price) or its
        evaluations (capped at ``cap`` x the configurations, at least 1)."""
        if budget.axis == "cost":
            return table_budget(budget.amount, self.mean_cost, self.cost, cap)
        if cap is None or self.configurations is None:
            return budget.amount
        return min(budget.amount, max(1, math.floor(cap * self.configurations)))

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
    seed budget axis amount share exhaustive score``; the anytime score as budget
    ``ANYTIME`` when there are cost budgets."""
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

    def places(self) -> pd.Series:
        """Each optimizer's place by mean rank, ties sharing the best of their places
        (1, 1, 3)."""
        values = self.mean_ranks.round(9)
        return values.rank(method="min").astype(int)

    def ahead(self) -> list[str]:
        """The optimizers sharing the lowest mean rank."""
        places = self.places()
        return list(places.index[places == 1])


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
    alpha: float = 0.05,
    confidence: float = 0.9,
) -> dict[str, Board]:
    """A board per quality metric in the sweep (the optimizers that ran on each of its
    tables; one that made another's very choices on every table shown once)."""
    tidy = tidy_scores(analyses, budgets, cap)
    boards = {}
    for metric, part in tidy.groupby("metric", sort=False):
        part, left_out = _complete(part)
        part, same_as = _shown_once(part, analyses)
        labels = [b.label for b in budgets]
        if ANYTIME.label in set(part["budget"]):
            labels.insert(0, ANYTIME.label)
        at = {
            label: _at_budget(
                _budget(label, budgets), part[part["budget"] == label], alpha, confidence
            )
            for label in labels
        }
        board = Board(metric, part, list(budgets), at, pd.DataFrame(), cap, left_out, same_as)
        board.win_tie_loss = ranks.win_tie_loss(
            part[part["budget"] == board.headline.budget.label], alpha
        )
        boards[metric] = board
    return boards


def _budget(label: str, budgets: Sequence[Budget]) -> Budget:
    return ANYTIME if label == ANYTIME.label else next(b for b in budgets if b.label == label)


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
            missing = sorted(ran.columns[~ran.loc[table]])
            notes.append(f"{table}: no runs of {', '.join(missing)} on it")
            ran = ran.drop(index=table)
        else:
            name = by_optimizer.idxmax()
            notes.append(f"{name}: not run on every table")
            ran = ran.drop(columns=name)
    return (
        tidy[tidy["table"].isin(ran.index) & tidy["optimizer"].isin(ran.columns)],
        sorted(notes),
    )


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
def _share_text(shares: pd.Series) -> str:
    """A budget's share of the price over the board's tables: "4%" or "2-11%"."""
    shares = shares.dropna()
    if shares.empty:
        return "price unknown"
    lo, hi = shares.min(), shares.max()
    return f"{lo:.0%}" if f"{lo:.0%}" == f"{hi:.0%}" else f"{lo:.0%}-{hi:.0%}"


def budget_rows(board: Board) -> list[dict]:
    """Per budget, in the tables' own terms: its share of each table's price (cost) or
    configurations (evaluations), and on how many tables it buys the whole table."""
    rows = []
    for b in board.budgets:
        part = board.tidy[board.tidy["budget"] == b.label].drop_duplicates("table")
        exhaustive = int(part["exhaustive"].sum())
        rows.append(
            {
                "budget": b.label,
                "in": "mean configuration costs" if b.axis == "cost" else "evaluations",
                "share of the table": f"{_share_text(part['share'])} of the " + _price_word(b),
                "exhaustive": f"yes, on {exhaustive} of {len(part)} tables" if exhaustive else "-",
            }
        )
    return rows


def _price_word(b: Budget) -> str:
    return "price" if b.axis == "cost" else "configurations"


def budget_name(board: Board, label: str) -> str:
    """A budget as a reader should read it: "5x (11% of the price)", "anytime"; "exhaustive"
    when it buys the whole table somewhere."""
    b = board.at[label].budget
    if b.axis == "anytime":
        return label
    part = board.tidy[board.tidy["budget"] == label].drop_duplicates("table")
    text = f"{label} ({_share_text(part['share'])} of the {_price_word(b)})"
    return text + (", exhaustive" if part["exhaustive"].any() else "")


def standings_rows(board: Board) -> list[dict]:
    """The leaderboard by the headline (the anytime score): per optimizer its place (ties
    share one), average rank with the bootstrap interval, the median anytime score, its
    average rank at each budget, censored share at the last cost budget, and the families
    it leads."""
    h = board.headline
    last = [b for b in board.budgets if b.axis == "cost"] or board.budgets
    censored = ranks.censored_share(board.tidy[board.tidy["budget"] == last[-1].label])
    leads = {}
    for fam, best in best_by_family(board).items():
        for name in best[0]:
            leads.setdefault(name, []).append(fam)
    iv = h.intervals.set_index("optimizer")
    places = h.places()
    rows = []
    for name, rank in h.mean_ranks.items():
        row = {
            "place": int(places[name]),
            "optimizer": name,
            f"mean rank ({h.budget.label})": rank,
            f"90% interval (bootstrap over {board.blocks})": (
                f"{iv.loc[name, 'low']:.2f}-{iv.loc[name, 'high']:.2f}"
            ),
            f"median {h.budget.label} score": quantile(h.scores[name].to_numpy(), 0.5),
        }
        for label, at in board.at.items():
            if label != h.budget.label:
                row[f"rank at {label}"] = at.mean_ranks[name]
        row[f"no feasible recommendation at {last[-1].label} (runs)"] = f"{censored[name]:.0%}"
        row["lowest mean rank in"] = ", ".join(leads.get(name, [])) or "-"
        rows.append(row)
    return rows


def _separated_from_rest(at: AtBudget) -> bool:
    """Whether every optimizer sharing the lowest mean rank is separated from every other."""
    ahead = set(at.ahead())
    differ = {frozenset((r.a, r.b)) for r in at.pairs.itertuples() if r.significant}
    return all(
        frozenset((a, b)) in differ for a in ahead for b in at.mean_ranks.index if b not in ahead
    )


def statistics_rows(board: Board) -> list[dict]:
    """Per budget (the headline first): its share of the price, the blocks, optimizers,
    Friedman's chi2 and p, Nemenyi's CD, the pairs Wilcoxon-Holm separates, who is ahead
    (ties named together) and whether the data separate them from the rest."""
    rows = []
    for label, at in board.at.items():
        stat, p = at.friedman if at.friedman else (math.nan, math.nan)
        rows.append(
            {
                "budget": budget_name(board, label),
                board.blocks: at.scores.shape[0],
                "optimizers": at.scores.shape[1],
                "Friedman chi2": stat,
                "p": p,
                "Nemenyi CD": at.cd,
                "pairs separated (Wilcoxon-Holm)": (
                    f"{int(at.pairs['significant'].sum())} of {len(at.pairs)}"
                ),
                "ahead (lowest mean rank)": ", ".join(at.ahead()),
                "separated from the rest": "yes" if _separated_from_rest(at) else "no",
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
                "mean difference": sign * t.effect,
                "spread (sd)": t.spread,
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
            text += (
                f"; {r.a} vs {r.b} not separated: "
                + needed_text(r.needed, board.blocks)
                + " would detect their mean "
                f"difference of {abs(r.effect):.3g} (spread {r.spread:.3g}) with 80% power"
            )
            break
    return text


def headroom_rows(board: Board) -> list[dict]:
    """Per table, how far random search is from the optimum at each cost budget: its median
    CNO (or Accuracy_C / optimum's) over its seeds, with the budget's share of the price."""
    if BASELINE not in set(board.tidy["optimizer"]):
        return []
    mine = board.tidy[(board.tidy["optimizer"] == BASELINE) & (board.tidy["axis"] == "cost")]
    rows = []
    for table, part in mine.groupby("table", sort=False):
        row = {"table": table}
        for label, at_b in part.groupby("budget", sort=False):
            score = quantile(at_b["score"].to_numpy(), 0.5)
            share = at_b["share"].iloc[0]
            text = (
                "none feasible"
                if not math.isfinite(score)
                else f">= {CNO_CAP:g}"
                if board.metric == "cno" and score >= SCORE_CAP["cno"]
                else f"{_shown(score, board.metric):.3g}"
            )
            row[label] = text + (f" ({share:.0%} of price)" if math.isfinite(share) else "")
        rows.append(row)
    return rows


def _shown(score: float, metric: str) -> float:
    """A score as a reader reads it: CNO (2^score) or Accuracy_C / optimum's (1 - score);
    inf where censored."""
    if not math.isfinite(score):
        return math.inf
    return score_quality(score, metric)


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
    (2^score) or Accuracy_C / optimum (1 - score); NaN where censored."""
    s = last_budget(board).scores.replace(math.inf, np.nan)
    return score_quality(s, board.metric)
