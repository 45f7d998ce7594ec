"""The ask/tell API as a user tuning a real job drives it: a space built from a grid and a
price list, no dataset, observations told by hand."""

from __future__ import annotations

import math

import pytest

from optfarm.optimizers import make_optimizer
from optfarm.oracle import Constraint, Dimension, Objective, Observation, Problem, SearchSpace

PRICES = {"m5.large": 0.096, "m5.xlarge": 0.192}


def _space():
    return SearchSpace.product(
        [
            Dimension("vm", "categorical", tuple(PRICES)),
            Dimension("workers", "ordinal", (2, 4, 8), log=True),
        ],
        price_per_s=lambda c: c["workers"] * PRICES[c["vm"]] / 3600,
    )


def test_product_space_enumerates_every_combination():
    space = _space()
    assert space.n_configs == 6
    assert {tuple(space.config(i).values()) for i in range(6)} == {
        (vm, w) for vm in PRICES for w in (2, 4, 8)
    }
    i = space.index({"vm": "m5.xlarge", "workers": 8})
    assert space.price_per_s[i] == pytest.approx(8 * 0.192 / 3600)
    assert space.features.shape == (6, 3)  # one-hot vm (2) + scaled workers (1)
    with pytest.raises(KeyError, match="not in the search space"):
        space.index({"vm": "m5.large", "workers": 3})


def test_ask_tell_loop_on_a_hand_made_job():
    space = _space()
    problem = Problem(Objective("cost", "min"), (Constraint("time", "<=", 600),))
    opt = make_optimizer("random", space, problem, seed=0)
    seen = []
    while (s := opt.suggest()) is not None:
        cfg = space.config(s.config_id)
        t = 2400 / cfg["workers"] * (1 if cfg["vm"] == "m5.xlarge" else 1.8)  # "the job"
        opt.observe(s, Observation(time=t, cost=t * space.price_per_s[s.config_id]))
        seen.append(s.config_id)
    assert sorted(seen) == list(range(6))
    best = space.config(opt.recommend().config_id)
    assert best == {"vm": "m5.large", "workers": 8}  # 540 s for $0.115: the cheapest under 600 s


def test_observations_must_be_finite():
    space = _space()
    opt = make_optimizer("random", space, Problem(), seed=0)
    s = opt.suggest()
    with pytest.raises(ValueError, match="time = nan"):
        opt.observe(s, Observation(time=math.nan, cost=1.0))
