"""Budget-aware look-ahead over exploration paths (Lynceus Algorithm 2, OBOL, Nephele).

``ExplorePaths(state, x, l)``: the reward R of a path starting with x is EIc(x) and its cost C
the predicted mean cost of x; if l > 0, x's cost distribution is discretised by K
Gauss-Hermite nodes (c_i, w_i); each node gives a simulated state (x added with cost c_i,
budget - c_i, x no longer untested) on which the model is refitted, the next step x' is the
greedy argmax of EIc over the budget-feasible untested set, and the sub-path rooted at x'
adds ``w_i c`` to C (``gamma w_i c`` for OBOL) and ``gamma w_i r`` to R [Lynceus Alg. 2].
With an accuracy model (Nephele) each cost node is crossed with ``k_acc`` nodes on accuracy
(bivariate quadrature) [Mendes19 ch. 3]: the accuracy nodes set the simulated run's
feasibility (hence the simulated incumbent); the accuracy model itself is not refitted along
a path (with the default single node, the predicted mean, a refit would barely move it).

The recursion and every refit run inside one numba kernel per chunk of first-step candidates
(``models._kernels.explore_many`` and ``_explore``, beside the tree kernels they inline: numba
re-compiles a cached function only when its own file changes), given the step's context as two
typed tuples (``PathState``, ``PathRules``): ``explore_chunk(context, chunk)`` is the
module-level function the optimizer hands to its executor. The refits of a given depth share
one random key (common random numbers), so the rewards of different first steps differ only
through the simulated points, and a chunk's result does not depend on which other candidates
share its chunk.

References:
    [Lynceus] Casimiro et al. Lynceus, ICDCS 2020, Sec. V-A and V-C (Algorithms 1-2).
    [OBOL] Casimiro et al., seed 004 (path cost discounted too).
    [Mendes19] P. Mendes, MSc thesis, IST 2019, ch. 3 (Nephele).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .models._kernels import (
    BUDGET_CONFIDENCE,
    PathRules,
    PathState,
    explore_many,
    root_level,
)

__all__ = ["BUDGET_CONFIDENCE", "PathContext", "Switches", "explore_chunk", "level_predictions"]


class Switches(NamedTuple):
    """Where the model and the paths may follow the Lynceus authors' code instead of our
    defaults (the ablation of issue 20; ``optfarm.optimizers.lynceus.ABLATION_PARAMS`` documents
    each one with its source).

    best_split: Weka RandomTrees (best midpoint among K random features) instead of
        extra-trees; authors_sd: the code's sigma (ddof 1, 10 x mean when the trees agree);
    full_refit: every tree regrown on a simulated state instead of the simulated point's
        leaf; fixed_incumbent: the simulated incumbent stays the real one along a path;
    gh_scale: factor on the quadrature values (1/sqrt(pi) in the code);
        skip_nonpositive: quadrature nodes <= 0 are dropped (the code) instead of clamped.
    """

    best_split: bool = False
    authors_sd: bool = False
    full_refit: bool = False
    fixed_incumbent: bool = False
    gh_scale: float = 1.0
    skip_nonpositive: bool = False


@dataclass(frozen=True)
class PathContext:
    """Everything a worker needs to score exploration paths (shipped once per step).

    Training rows of the cost model are ``Xc[:nc], yc[:nc]``, of the accuracy model
    ``Xa[:na], ya[:na]`` (``na = 0``: no accuracy model; it is not refitted along paths). Candidates
    are the rows of ``F`` with their price per second; ``untested`` marks the ones that may be
    explored. Constraints: cost <= time_max x price, cost <= cost_max, accuracy >= acc_min (inf /
    -inf when absent). ``best`` is the incumbent's cost (inf: no feasible observation yet) and
    ``worst`` the largest cost in the training set (the incumbent rule of Lynceus).
    """

    Xc: np.ndarray
    yc: np.ndarray
    nc: int
    Xa: np.ndarray
    ya: np.ndarray
    na: int
    F: np.ndarray
    price: np.ndarray
    untested: np.ndarray
    budget: float
    time_max: float
    cost_max: float
    acc_min: float
    best: float
    worst: float
    gh_t: np.ndarray
    gh_w: np.ndarray
    gha_t: np.ndarray
    gha_w: np.ndarray
    la: int
    gamma: float
    discount_cost: bool
    key: int
    n_trees: int
    n_trees_acc: int
    max_features: int
    floor_rel: float
    switches: Switches = Switches()


def _kernel_args(ctx: PathContext) -> tuple[PathState, PathRules]:
    """The context as the kernels take it: private copies of the training arrays with room
    for the simulated points (``PathState``), and the rules of the step (``PathRules``)."""
    Xc = np.zeros((ctx.nc + ctx.la + 1, ctx.F.shape[1]))
    Xc[: ctx.nc] = ctx.Xc[: ctx.nc]
    yc = np.zeros(ctx.nc + ctx.la + 1)
    yc[: ctx.nc] = ctx.yc[: ctx.nc]
    state = PathState(
        Xc,
        yc,
        ctx.nc,
        np.ascontiguousarray(ctx.Xa, dtype=float),
        np.ascontiguousarray(ctx.ya, dtype=float),
        ctx.na,
        ctx.F,
        ctx.price,
        ctx.untested.copy(),
        ctx.budget,
        ctx.best,
        ctx.worst,
    )
    sw = ctx.switches
    rules = PathRules(
        ctx.la,
        ctx.gamma,
        ctx.discount_cost,
        ctx.time_max,
        ctx.cost_max,
        ctx.acc_min,
        ctx.gh_t,
        ctx.gh_w,
        ctx.gha_t,
        ctx.gha_w,
        np.uint64(ctx.key),
        ctx.n_trees,
        ctx.n_trees_acc,
        ctx.max_features,
        ctx.floor_rel,
        bool(sw.best_split),
        bool(sw.authors_sd),
        bool(sw.full_refit),
        bool(sw.fixed_incumbent),
        float(sw.gh_scale),
        bool(sw.skip_nonpositive),
    )
    return state, rules


def explore_chunk(ctx: PathContext, first) -> np.ndarray:
    """(len(first), 2) array of (R_x, C_x) = ExplorePaths(state, x, LA) for the candidate
    indices ``first`` (rows of ``ctx.F``). A pure function of (ctx, x) per row."""
    state, rules = _kernel_args(ctx)
    return explore_many(np.asarray(first, dtype=np.int64), state, rules)


def level_predictions(ctx: PathContext):
    """The current state's model at every candidate: (mu_c, sd_c, mu_a, sd_a, eic, argmax),
    with eic = -1 outside the budget filter. The same numbers the paths start from."""
    levels, arg = root_level(*_kernel_args(ctx), 1)
    return levels.mu_c[0], levels.sd_c[0], levels.mu_a, levels.sd_a, levels.eic[0], int(arg)
