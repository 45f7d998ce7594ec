"""optfarm.farm.stats.ranks on a 3-optimizer x 4-table example computed by hand: ranks with ties and
censored runs, Friedman's statistic, Nemenyi's critical difference, the pairwise tests, the
win/tie/loss counts and the bootstrap intervals."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from optfarm.farm.stats.ranks import (
    average_ranks,
    censored_share,
    cliques,
    friedman,
    nemenyi_cd,
    rank_intervals,
    table_ranks,
    table_scores,
    wilcoxon_holm,
    win_tie_loss,
)

INF = math.inf

# table -> optimizer -> per-seed scores (0 the optimum, inf: no feasible recommendation)
EXAMPLE = {
    "t1": {"A": [0.0], "B": [1.0], "C": [2.0]},
    "t2": {"A": [0.0], "B": [0.0], "C": [1.0]},  # A and B tie
    "t3": {"A": [1.0], "B": [INF], "C": [0.5]},  # B censored: last
    "t4": {"A": [0.5], "B": [INF], "C": [INF]},  # B and C censored: tied last
}


def tidy(example):
    return pd.DataFrame(
        [
            {"table": t, "optimizer": o, "seed": s, "score": v}
            for t, by in example.items()
            for o, values in by.items()
            for s, v in enumerate(values)
        ]
    )


def test_ranks_put_censored_last_and_share_ties():
    ranks = table_ranks(table_scores(tidy(EXAMPLE)))
    assert ranks.loc["t1"].tolist() == [1, 2, 3]
    assert ranks.loc["t2"].tolist() == [1.5, 1.5, 3]
    assert ranks.loc["t3"].tolist() == [2, 3, 1]
    assert ranks.loc["t4"].tolist() == [1, 2.5, 2.5]
    # rank sums 5.5, 9, 9.5 over N = 4 tables
    assert average_ranks(table_scores(tidy(EXAMPLE))).to_dict() == {
        "A": 1.375,
        "B": 2.25,
        "C": 2.375,
    }


def test_friedman_statistic_by_hand_with_the_tie_correction():
    # 12 / (N k (k+1)) * sum R_j^2 - 3 N (k+1) = 0.25 * (5.5^2 + 9^2 + 9.5^2) - 48 = 2.375;
    # ties: one pair in t2 and one in t4, C = 1 - (6 + 6) / (N k (k^2 - 1)) = 1 - 12/96;
    # chi2 = 2.375 / 0.875 = 19/7; with k - 1 = 2 degrees of freedom p = exp(-chi2 / 2)
    stat, p = friedman(table_scores(tidy(EXAMPLE)))
    assert stat == pytest.approx(19 / 7)
    assert p == pytest.approx(math.exp(-19 / 14))


def test_nemenyi_critical_difference_matches_demsar_table():
    # Demšar (2006) Table 5(a): q_0.05 = 2.343 for k = 3; CD = 2.343 sqrt(3 * 4 / (6 * 4))
    assert nemenyi_cd(3, 4) == pytest.approx(2.343 * math.sqrt(0.5), abs=1e-3)
    assert nemenyi_cd(10, 30) == pytest.approx(3.164 * math.sqrt(10 * 11 / 180), abs=1e-3)


def test_the_median_over_seeds_is_censored_when_most_seeds_are():
    example = {t: {o: v * 3 for o, v in by.items()} for t, by in EXAMPLE.items()}
    example["t1"]["C"] = [INF, INF, 0.0]  # censored on 2 of 3 seeds: the table's value is inf
    example["t1"]["B"] = [INF, 1.0, 1.0]
    scores = table_scores(tidy(example))
    assert scores.loc["t1"].tolist() == [0.0, 1.0, INF]
    assert table_ranks(scores).loc["t1"].tolist() == [1, 2, 3]
    assert censored_share(tidy(example))["C"] == pytest.approx((2 + 0 + 0 + 3) / 12)  # t1, t4


def test_pairwise_wilcoxon_holm_cannot_separate_four_tables():
    pairs = wilcoxon_holm(table_scores(tidy(EXAMPLE)))
    # A - B over the tables: -1, 0, -big, -big (censored beyond every finite difference);
    # 3 non-zero differences all negative: exact two-sided p = 2 / 2^3
    ab = pairs[(pairs.a == "A") & (pairs.b == "B")].iloc[0]
    assert ab.p == pytest.approx(0.25)
    assert not pairs.significant.any()
    assert cliques(average_ranks(table_scores(tidy(EXAMPLE))), pairs) == [["A", "B", "C"]]


def test_cliques_split_where_a_pair_differs():
    ranks = pd.Series({"A": 1.2, "B": 1.9, "C": 2.9})
    pairs = pd.DataFrame(
        {"a": ["A", "A", "B"], "b": ["B", "C", "C"], "significant": [False, True, False]}
    )
    assert cliques(ranks, pairs) == [["A", "B"], ["B", "C"]]


def test_win_tie_loss_over_tables_and_seeds():
    wtl = win_tie_loss(tidy(EXAMPLE)).set_index(["a", "b"])
    assert wtl.loc[("A", "B"), ["win", "tie", "loss"]].tolist() == [3, 1, 0]
    assert wtl.loc[("B", "A"), ["win", "tie", "loss"]].tolist() == [0, 1, 3]
    assert wtl.loc[("A", "C"), ["win", "tie", "loss"]].tolist() == [3, 0, 1]
    assert wtl.loc[("B", "C"), ["win", "tie", "loss"]].tolist() == [2, 1, 1]  # inf = inf: tie
    assert wtl.loc[("A", "B"), "p"] == wtl.loc[("B", "A"), "p"]


def test_bootstrap_intervals_hold_the_mean_rank():
    iv = rank_intervals(table_scores(tidy(EXAMPLE)), n_resamples=500).set_index("optimizer")
    assert iv.loc["A", "mean_rank"] == 1.375
    for _, row in iv.iterrows():
        assert row.low <= row.mean_rank <= row.high
        assert 1 <= row.low and row.high <= 3
    # A's ranks (1, 1.5, 2, 1) bound any resampled mean
    assert iv.loc["A", "low"] >= 1.0 and iv.loc["A", "high"] <= 2.0
    assert np.isfinite(iv[["low", "high"]].to_numpy()).all()


def test_friedman_of_complete_ties_is_no_evidence():
    tied = {t: {"A": [1.0], "B": [1.0], "C": [1.0]} for t in ("t1", "t2")}
    assert friedman(table_scores(tidy(tied))) == (0.0, 1.0)


def test_the_signed_rank_p_with_ties_or_zeros_is_scipys_exact_permutation_test():
    # scipy's own exact test over all 2^n sign assignments (a second of CPU a pair on a
    # board of 15 optimizers: 105 pairs per budget) against the enumeration here
    import warnings

    from scipy.stats import wilcoxon

    from optfarm.farm.stats.ranks import _signed_rank_p

    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(60):
        d = rng.integers(-2, 3, rng.integers(3, 9)).astype(float)
        if not np.any(d):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = float(wilcoxon(d, zero_method="wilcox").pvalue)
        assert _signed_rank_p(d) == pytest.approx(expected, rel=1e-12), d
        checked += 1
    assert checked > 40
    # 8 equal differences: the smallest p over 8 seeds, 2 / 2^8
    assert _signed_rank_p(np.full(8, 0.5)) == pytest.approx(2 / 256)


def test_places_are_claimed_only_where_the_tests_separate():
    from optfarm.farm.stats.ranks import places

    mean = pd.Series({"A": 1.2, "B": 1.9, "C": 2.9, "D": 3.5})
    pairs = pd.DataFrame(
        {
            "a": ["A", "A", "A", "B", "B", "C"],
            "b": ["B", "C", "D", "C", "D", "D"],
            "significant": [False, True, True, False, True, False],
        }
    )
    # C: only A is separated from it and ahead (2nd place); D: A and B (3rd)
    assert places(mean, pairs).to_dict() == {"A": 1, "B": 1, "C": 2, "D": 3}
    assert places(mean, pairs.assign(significant=False)).to_dict() == dict.fromkeys("ABCD", 1)
