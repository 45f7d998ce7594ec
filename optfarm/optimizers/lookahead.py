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
(``lookahead_kernels.explore_many`` and ``_explore``, which inline the tree kernels), given the
step's context as one record (``PathContext``): ``explore_chunk(context, chunk)`` is the
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

import numpy as np

from .lookahead_kernels import (
    BUDGET_CONFIDENCE,
    PathContext,
    Switches,
    explore_many,
    root_level,
)

__all__ = ["BUDGET_CONFIDENCE", "PathContext", "Switches", "explore_chunk", "level_predictions"]


def _kernel_args(ctx: PathContext) -> PathContext:
    """The context as the kernels take it: private copies of the training arrays with room
    for the simulated points, of ``untested`` (marked along a path), the key as numba's
    unsigned 64-bit integer and the switches in their numba types."""
    Xc = np.zeros((ctx.nc + ctx.la + 1, ctx.F.shape[1]))
    Xc[: ctx.nc] = ctx.Xc[: ctx.nc]
    yc = np.zeros(ctx.nc + ctx.la + 1)
    yc[: ctx.nc] = ctx.yc[: ctx.nc]
    sw = ctx.switches
    return ctx._replace(
        Xc=Xc,
        yc=yc,
        Xa=np.ascontiguousarray(ctx.Xa, dtype=float),
        ya=np.ascontiguousarray(ctx.ya, dtype=float),
        untested=ctx.untested.copy(),
        key=np.uint64(ctx.key),
        switches=Switches(
            bool(sw.best_split),
            bool(sw.authors_sd),
            bool(sw.full_refit),
            bool(sw.fixed_incumbent),
            float(sw.gh_scale),
            bool(sw.skip_nonpositive),
        ),
    )


def explore_chunk(ctx: PathContext, first) -> np.ndarray:
    """(len(first), 2) array of (R_x, C_x) = ExplorePaths(state, x, LA) for the candidate
    indices ``first`` (rows of ``ctx.F``). A pure function of (ctx, x) per row."""
    return explore_many(np.asarray(first, dtype=np.int64), _kernel_args(ctx))


def level_predictions(ctx: PathContext):
    """The current state's model at every candidate: (mu_c, sd_c, mu_a, sd_a, eic, argmax),
    with eic = -1 outside the budget filter. The same numbers the paths start from."""
    levels, arg = root_level(_kernel_args(ctx), 1)
    return levels.mu_c[0], levels.sd_c[0], levels.mu_a, levels.sd_a, levels.eic[0], int(arg)
