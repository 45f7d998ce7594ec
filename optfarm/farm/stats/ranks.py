"""Comparing optimizers across tables: pure functions over a tidy table of scores, one row per
(table, optimizer, seed) with the column ``score`` (lower is better, 0 the optimum, ``inf``
censored: no feasible recommendation). ``optfarm.farm.board.leaderboard`` builds that table from a
sweep at each budget; nothing here knows about runs.

The methods are those of Demšar (2006, JMLR 7) and Benavoli, Corani & Mangili (2016, JMLR 17):

- ``table_scores``: one value per (table, optimizer), the median over seeds (an actual run's
  value, ``optfarm.farm.run.metrics.quantile``, so a majority of censored seeds is censored);
- ``table_ranks`` / ``average_ranks``: ranks within each table (1 the best), ties sharing the
  mean of their places, censored values tied together below every finite one;
- ``friedman``: Friedman's test that all optimizers have the same average rank
  (``scipy.stats.friedmanchisquare``, with its correction for ties);
- ``nemenyi_cd``: Nemenyi's critical difference of average ranks, q_alpha sqrt(k(k+1)/(6N))
  with q_alpha the studentized range's quantile over sqrt(2) (Demšar Sec. 3.2.2);
- ``wilcoxon_holm``: pairwise Wilcoxon signed-rank tests over tables, Holm's step-down
  correction over the pairs (Benavoli et al. 2016: a pair's verdict must not depend on which
  other optimizers are on the board, as the mean-ranks tests' does);
- ``cliques``: the groups of optimizers, adjacent in rank, that no pairwise test separates
  (the bars of a critical-difference diagram);
- ``places``: each optimizer's place, 1 + those separated from it and ranked ahead, so that
  the optimizers the data do not separate share a place;
- ``win_tie_loss``: per pair, wins, ties and losses over (table, seed) with the paired
  Wilcoxon test over the same pairs, Holm-corrected;
- ``rank_intervals``: bootstrap intervals of the average ranks over tables
  (``scipy.stats.bootstrap``).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy.stats import (
    bootstrap,
    friedmanchisquare,
    rankdata,
    studentized_range,
    wilcoxon,
)

from optfarm.farm.run.metrics import quantile
from optfarm.farm.stats.paired import holm_tarone, paired_differences

__all__ = [
    "average_ranks",
    "censored_share",
    "cliques",
    "friedman",
    "nemenyi_cd",
    "places",
    "rank_intervals",
    "table_ranks",
    "table_scores",
    "wilcoxon_holm",
    "win_tie_loss",
]


def table_scores(tidy: pd.DataFrame) -> pd.DataFrame:
    """Tables x optimizers: each optimizer's median score over its seeds on each table."""
    return tidy.pivot_table(
        index="table",
        columns="optimizer",
        values="score",
        aggfunc=lambda v: quantile(v.to_numpy(), 0.5),
    )


def table_ranks(scores: pd.DataFrame) -> pd.DataFrame:
    """Tables x optimizers: ranks within each table (1 the best, ties averaged; ``inf``, the
    censored, all tied below every finite score)."""
    return scores.apply(
        lambda row: pd.Series(rankdata(row.to_numpy(), method="average"), index=row.index), axis=1
    )


def average_ranks(scores: pd.DataFrame) -> pd.Series:
    """Each optimizer's mean rank over the tables, best first."""
    return table_ranks(scores).mean().sort_values()


def friedman(scores: pd.DataFrame) -> tuple[float, float]:
    """Friedman's chi-square statistic and p-value over the tables (blocks) for the optimizers
    (k >= 3 columns, N >= 2 rows), tie-corrected; ``inf`` scores rank last. Every table a
    complete tie: (0, 1)."""
    if (scores.nunique(axis=1) == 1).all():
        return 0.0, 1.0
    stat, p = friedmanchisquare(*(scores[c].to_numpy() for c in scores.columns))
    return float(stat), float(p)


def nemenyi_cd(k: int, n: int, alpha: float = 0.05) -> float:
    """Nemenyi's critical difference of average ranks for ``k`` optimizers over ``n`` tables."""
    q = studentized_range.ppf(1.0 - alpha, k, np.inf) / math.sqrt(2.0)
    return float(q * math.sqrt(k * (k + 1) / (6.0 * n)))


EXACT_WITH_TIES = 13  # scipy's bound for the exact test when there are ties or zeros


def _signed_rank_p(d: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value of paired differences, zeros dropped; 1 when
    every difference is 0. As ``scipy.stats.wilcoxon`` (method "auto") computes it, with its
    exact permutation test for up to ``EXACT_WITH_TIES`` differences with ties or zeros
    done by ``_exact_signed_rank_p`` (scipy's takes a second of CPU a pair)."""
    d = np.asarray(d, dtype=float)
    if not np.any(d):
        return 1.0
    nonzero = d[d != 0]
    ties = len(np.unique(np.abs(nonzero))) < len(nonzero)
    if len(d) <= EXACT_WITH_TIES and (ties or len(nonzero) < len(d)):
        return _exact_signed_rank_p(nonzero)
    return float(wilcoxon(d, zero_method="wilcox").pvalue)


def _exact_signed_rank_p(nonzero: np.ndarray) -> float:
    """The exact two-sided p-value of the signed-rank statistic (the sum of the mid-ranks of
    |d| over the positive differences) over all 2^n sign assignments of the nonzero
    differences (a zero's sign changes nothing): twice the smaller tail, at most 1."""
    ranks = rankdata(np.abs(nonzero))
    observed = ranks[nonzero > 0].sum()
    signs = (np.arange(2 ** len(ranks))[:, None] >> np.arange(len(ranks))) & 1
    null = signs @ ranks
    tol = 1e-9 * max(observed, 1.0)
    below, above = np.mean(null <= observed + tol), np.mean(null >= observed - tol)
    return float(min(1.0, 2.0 * min(below, above)))


def wilcoxon_holm(scores: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per pair of optimizers (a, b): the median of a's minus b's score over the
    tables, the two-sided Wilcoxon signed-rank p-value over the tables (a censored score's
    difference ranks above every finite one: ``optfarm.farm.stats.paired.paired_differences``),
    the Holm-adjusted p-value and whether it is <= ``alpha``."""
    rows = []
    for a, b in itertools.combinations(scores.columns, 2):
        d = paired_differences(scores[a].to_numpy(), scores[b].to_numpy())
        rows.append(
            {"a": a, "b": b, "median_difference": float(np.median(d)), "p": _signed_rank_p(d)}
        )
    return _holm(pd.DataFrame(rows, columns=["a", "b", "median_difference", "p"]), alpha)


def _holm(pairs: pd.DataFrame, alpha: float) -> pd.DataFrame:
    pairs = pairs.copy()
    pairs["p_holm"] = (
        holm_tarone(pairs["p"].to_numpy(), np.zeros(len(pairs)), alpha) if len(pairs) else []
    )
    pairs["significant"] = pairs["p_holm"] <= alpha
    return pairs


def cliques(mean_ranks: pd.Series, pairs: pd.DataFrame) -> list[list[str]]:
    """The maximal runs of optimizers, consecutive in ``mean_ranks`` order (best first), of
    which no two differ significantly in ``pairs`` (``wilcoxon_holm``): the thick bars of the
    critical-difference diagram. Runs of one optimizer are left out."""
    order = list(mean_ranks.index)
    differ = {frozenset((r.a, r.b)) for r in pairs.itertuples() if r.significant}
    runs: list[list[str]] = []
    for i in range(len(order)):
        j = i
        while j + 1 < len(order) and not any(
            frozenset((order[m], order[j + 1])) in differ for m in range(i, j + 1)
        ):
            j += 1
        run = order[i : j + 1]
        if len(run) > 1 and not any(set(run) <= set(r) for r in runs):
            runs.append(run)
    return runs


def places(mean_ranks: pd.Series, pairs: pd.DataFrame) -> pd.Series:
    """Each optimizer's place: 1 + the optimizers ``pairs`` (``wilcoxon_holm``) separate from
    it that have a lower mean rank, so that optimizers the data do not separate share a place
    (1, 1, 3) and, when no pair is separated, every one is first; in order of place, then
    mean rank. No place is claimed that the tests do not back."""
    differ = {frozenset((r.a, r.b)) for r in pairs.itertuples() if r.significant}
    place = {
        n: 1
        + sum(
            bool(mean_ranks[m] < mean_ranks[n]) and frozenset((m, n)) in differ
            for m in mean_ranks.index
        )
        for n in mean_ranks.index
    }
    order = sorted(mean_ranks.index, key=lambda n: (place[n], mean_ranks[n]))
    return pd.Series([place[n] for n in order], index=order, dtype=int)


def win_tie_loss(tidy: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per ordered pair of optimizers (a, b): over the (table, seed) pairs both ran,
    how often a's score is lower (win), equal (tie, censored = censored included) or higher
    (loss) than b's, the two-sided Wilcoxon signed-rank p-value over those pairs and its Holm
    adjustment over the unordered pairs."""
    wide = tidy.pivot_table(
        index=["table", "seed"], columns="optimizer", values="score", aggfunc="first"
    )
    rows = []
    for a, b in itertools.combinations(wide.columns, 2):
        both = wide[[a, b]].dropna()
        x, y = both[a].to_numpy(), both[b].to_numpy()
        with np.errstate(invalid="ignore"):
            win, tie = int(np.sum(x < y)), int(np.sum(x == y))
        rows.append(
            {
                "a": a,
                "b": b,
                "win": win,
                "tie": tie,
                "loss": len(x) - win - tie,
                "p": _signed_rank_p(paired_differences(x, y)),
            }
        )
    pairs = _holm(pd.DataFrame(rows, columns=["a", "b", "win", "tie", "loss", "p"]), alpha)
    mirrored = pairs.rename(columns={"a": "b", "b": "a", "win": "loss", "loss": "win"})
    return pd.concat([pairs, mirrored[pairs.columns]], ignore_index=True)


def rank_intervals(
    scores: pd.DataFrame, confidence: float = 0.9, n_resamples: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Per optimizer: its average rank and a percentile bootstrap interval of it over the
    tables (tables resampled with replacement; ranks within a table do not depend on the
    others). A constant column (or one table) gives the point as its interval."""
    ranks = table_ranks(scores)
    rows = []
    for name in ranks.columns:
        values = ranks[name].to_numpy(dtype=float)
        if len(values) > 1 and np.ptp(values) > 0:
            ci = bootstrap(
                (values,),
                np.mean,
                confidence_level=confidence,
                n_resamples=n_resamples,
                method="percentile",
                rng=np.random.default_rng(seed),
            ).confidence_interval
            lo, hi = float(ci.low), float(ci.high)
        else:
            lo = hi = float(values.mean())
        rows.append({"optimizer": name, "mean_rank": float(values.mean()), "low": lo, "high": hi})
    return pd.DataFrame(rows).sort_values("mean_rank", ignore_index=True)


def censored_share(tidy: pd.DataFrame) -> pd.Series:
    """Per optimizer, the share of its (table, seed) runs without a feasible recommendation."""
    return tidy.assign(censored=np.isinf(tidy["score"])).groupby("optimizer")["censored"].mean()
