"""optfarm.farm.report.sensitivity: the functional ANOVA over a sweep's grid on made-up summaries
with known effects."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from optfarm.farm.report.sensitivity import factors_of, sensitivity


def summaries(effect, seeds=8, noise=0.01):
    """lynceus runs over la x gamma x timeout whose quality_auc is effect(la, gamma, timeout)
    plus seed noise."""
    rng = np.random.default_rng(0)
    out = []
    for la, gamma, timeout, seed in itertools.product(
        (0, 1, 2), (0.5, 0.9), ("none", "tg"), range(seeds)
    ):
        out.append(
            {
                "run_key": f"{la}{gamma}{timeout}{seed}",
                "dataset": "d",
                "optimizer": "lynceus",
                "seed": seed,
                "metric": "cno",
                "params": {"la": la, "gamma": gamma, "timeout": timeout, "k": 3},
                "quality_auc": effect(la, gamma, timeout) + noise * rng.normal(),
                "recommendation": {"cno": 1.0, "feasible": True},
                "exploration_cost_to_reach": {"cno<=1.1": 1.0, "cno<=2": 1.0},
            }
        )
    return out


def test_the_grid_is_the_parameters_that_vary():
    f = factors_of(summaries(lambda la, g, t: 0.0))
    assert f == {
        "lynceus.gamma": [0.5, 0.9],
        "lynceus.la": [0, 1, 2],
        "lynceus.timeout": ["none", "tg"],
    }


def test_an_additive_effect_is_ranked_with_its_exact_share():
    # la: levels 0, 0.3, 0.6 (variance 0.06); timeout: 0, 0.1 (variance 0.0025); gamma none
    s = sensitivity(summaries(lambda la, g, t: 0.3 * la + (0.1 if t == "tg" else 0.0), noise=0.0))
    assert s.ranking[0] == "lynceus.la" and s.ranking[1] == "lynceus.timeout"
    assert s.importance["lynceus.la"] == pytest.approx(0.06 / 0.0625)
    assert s.importance["lynceus.timeout"] == pytest.approx(0.0025 / 0.0625)
    assert s.importance["lynceus.gamma"] == pytest.approx(0.0, abs=1e-12)
    assert s.importance["lynceus.la x lynceus.timeout"] == pytest.approx(0.0, abs=1e-12)
    assert s.top_stability == 1.0 and s.seeds_needed == 2
    # no seed noise, no interaction: the main effects hold all the variance
    assert s.noise == 0.0 and s.higher_order == pytest.approx(0.0, abs=1e-12)
    medians = [row["median"] for row in s.main_effects["lynceus.la"]]
    assert medians == pytest.approx([0.05, 0.35, 0.65])
    assert [row["mean"] for row in s.main_effects["lynceus.la"]] == pytest.approx(
        [0.05, 0.35, 0.65]
    )


def test_a_main_effect_mean_moves_where_its_median_does_not():
    """Most runs at the optimum, a few far off at one level: the median stays, the mean (the
    statistic the shares split) moves."""
    runs = summaries(lambda la, g, t: 0.0, seeds=10, noise=0.0)
    for r in runs:
        if r["params"]["la"] == 2 and r["seed"] < 2:
            r["quality_auc"] = 1.0
    s = sensitivity(runs)
    la2 = s.main_effects["lynceus.la"][2]
    assert la2["median"] == 0.0 and la2["mean"] == pytest.approx(0.2)
    assert s.ranking[0] == "lynceus.la"


def test_a_pure_interaction_has_no_main_effect():
    s = sensitivity(
        summaries(lambda la, g, t: 0.2 if (g == 0.9) == (t == "tg") else 0.0, noise=0.0)
    )
    assert s.importance["lynceus.gamma x lynceus.timeout"] == pytest.approx(1.0)
    assert s.importance["lynceus.gamma"] == pytest.approx(0.0, abs=1e-12)


def test_a_grid_with_a_missing_cell_is_not_analysed():
    runs = [
        r
        for r in summaries(lambda la, g, t: 0.0)
        if not (r["params"]["la"] == 2 and r["params"]["timeout"] == "tg")
    ]
    assert sensitivity(runs) is None


def with_seed_offsets(runs, scale):
    """Each seed shifts every cell by the same amount (a seed is the same bootstrap sample
    everywhere): common random numbers."""
    offset = np.random.default_rng(1).normal(size=100) * scale
    return [{**r, "quality_auc": r["quality_auc"] + offset[r["seed"]]} for r in runs]


def test_pure_seed_noise_is_recognised_as_noise():
    """Without any effect the shares still rank something; the noise share says that seed
    noise alone explains the differences between cells (about 1), also when each seed moves
    every cell alike (which cancels in the differences between cells)."""
    s = sensitivity(summaries(lambda la, g, t: 0.5, seeds=8, noise=0.05))
    assert 0.5 < s.noise < 2.0
    assert sum(s.importance.values()) + s.higher_order == pytest.approx(1.0)
    shifted = sensitivity(
        with_seed_offsets(summaries(lambda la, g, t: 0.5, seeds=8, noise=0.05), scale=1.0)
    )
    assert shifted.noise == pytest.approx(s.noise)
    # a real effect well above the noise: a small noise share
    real = sensitivity(
        with_seed_offsets(summaries(lambda la, g, t: 0.3 * la, seeds=8, noise=0.05), scale=1.0)
    )
    assert real.noise < 0.05 and real.ranking[0] == "lynceus.la"


def test_a_three_way_interaction_is_the_rest():
    # a product of signs (la 0 / 1 / 2: +1 / -1 / 0; gamma and timeout: -1 / +1) whose main
    # effects and two-way margins all average to zero
    sign = {0: 1, 1: -1, 2: 0}

    def effect(la, g, t):
        return 0.1 * sign[la] * (1 if g == 0.9 else -1) * (1 if t == "tg" else -1)

    s = sensitivity(summaries(effect, noise=0.0))
    assert s.higher_order == pytest.approx(1.0)
    assert max(s.importance.values()) == pytest.approx(0.0, abs=1e-12)


def test_datasets_alone_are_no_grid():
    """One optimizer variant on two datasets: the dataset would hold all the variance by
    definition; there is no parameter to rank (found on a Lynceus vs EIc/USD sweep)."""
    runs = [
        {**r, "dataset": f"d{r['seed'] % 2}", "seed": r["seed"] // 2, "params": {"la": 2}}
        for r in summaries(lambda la, g, t: 0.0, seeds=4)
        if r["params"]["la"] == 2 and r["params"]["gamma"] == 0.9 and r["params"]["timeout"] == "tg"
    ]
    assert factors_of(runs) == {"dataset": ["d0", "d1"]}
    assert sensitivity(runs) is None
