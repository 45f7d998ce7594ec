"""numba kernels of the look-ahead (Lynceus Algorithm 2, OBOL, Nephele;
``optfarm.optimizers.lookahead``): EIc over the candidates, NextStep's argmax with bounds that
rule candidates out, and ExplorePaths as an explicit depth-first walk whose simulated states
refit the tree ensembles (``optfarm.optimizers.models.tree_kernels``, which numba inlines).

One record, ``PathContext``, is everything a path is scored from (the real state and the
step's rules); the kernels take it as numba takes a named tuple. numba's cache of a function
is stamped with its own file only, so the look-ahead's cached kernels are stamped with the
tree kernels' file too (``optfarm.optimizers.numba_private.stamp_with``): a change of either
file compiles them again.

References:
    [Lynceus] Casimiro et al. Lynceus, ICDCS 2020, Sec. V-A and V-C (Algorithms 1-2).
    [OBOL] Casimiro et al., seed 004 (path cost discounted too).
    [Mendes19] P. Mendes, MSc thesis, IST 2019, ch. 3 (Nephele).
"""

from __future__ import annotations

import math
import sys
from typing import NamedTuple

import numba as nb
import numpy as np

from .models import tree_kernels
from .models.tree_kernels import (
    forest_outputs,
    gaussian_summary,
    grow_forest,
    insert_point,
    mix_key,
    std_floor,
)
from .numba_private import kernels_of, stamp_with

__all__ = [
    "BUDGET_CONFIDENCE",
    "N_HINTS",
    "Levels",
    "PathContext",
    "Switches",
    "explore_many",
    "root_level",
]

BUDGET_CONFIDENCE = 0.99  # Gamma = {x : P(C(x) <= budget) >= 0.99} [Lynceus Alg. 1 l. 23]
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


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


class PathContext(NamedTuple):
    """Everything a worker needs to score exploration paths (shipped once per step).

    The real state: training rows of the cost model are ``Xc[:nc], yc[:nc]``, of the accuracy
    model ``Xa[:na], ya[:na]`` (``na = 0``: no accuracy model; it is not refitted along
    paths). Candidates are the rows of ``F`` with their price per second; ``untested`` marks
    the ones that may be explored. ``budget`` is what exploring may still spend. Constraints:
    cost <= time_max x price, cost <= cost_max, accuracy >= acc_min (inf / -inf when absent).
    ``best`` is the incumbent's cost (inf: no feasible observation yet) and ``worst`` the
    largest cost in the training set (the incumbent rule of Lynceus).

    The step's rules: the quadrature nodes and weights on cost (``gh_*``) and accuracy
    (``gha_*``), the window ``la``, the discount ``gamma`` (of the path cost too with
    ``discount_cost``), the forests' randomness (``key``) and settings, the std floor and the
    ablation ``switches``. The kernels read a copy with room in ``Xc``/``yc`` for ``la + 1``
    simulated points, ``untested`` marked and unmarked along a path
    (``optfarm.optimizers.lookahead``).
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


@nb.njit(cache=True)
def _phi_cdf(z):
    return 0.5 * math.erfc(-z * _INV_SQRT2)


class Levels(NamedTuple):
    """One entry per level of a path (0: the real state): the cost forest (per-tree outputs
    at the candidates, their leaves, each training row's leaf and bootstrap multiplicity, the
    next free leaf id: ``grow_forest``) and its predictions; the EIc at every candidate of the
    real state only (``eic[0]``: a simulated state needs only its argmax, ``_next_step``); the
    accuracy model's predictions (one set: it is not refitted along a path)."""

    out: np.ndarray
    cleaf: np.ndarray
    rleaf: np.ndarray
    mult: np.ndarray
    next_leaf: np.ndarray
    mu_c: np.ndarray
    sd_c: np.ndarray
    eic: np.ndarray
    mu_a: np.ndarray
    sd_a: np.ndarray


@nb.njit(cache=True)
def _fit_root(ctx, lv):
    """Fit the cost (and accuracy) ensembles of the real state in level 0 of ``lv``,
    predict every candidate."""
    key = mix_key(ctx.key, 0)
    grow_forest(
        ctx.Xc,
        ctx.yc,
        ctx.nc,
        key,
        ctx.n_trees,
        ctx.max_features,
        ctx.F,
        lv.out[0],
        lv.cleaf[0],
        lv.rleaf[0],
        lv.mult[0],
        lv.next_leaf[0],
        ctx.switches.best_split,
    )
    gaussian_summary(
        lv.out[0],
        std_floor(ctx.yc, ctx.nc, ctx.floor_rel),
        lv.mu_c[0],
        lv.sd_c[0],
        ctx.switches.authors_sd,
    )
    if ctx.na > 0:
        outs_a = np.empty((ctx.n_trees_acc, ctx.F.shape[0]))
        forest_outputs(
            ctx.Xa,
            ctx.ya,
            ctx.na,
            mix_key(key, 99991),
            ctx.n_trees_acc,
            ctx.max_features,
            ctx.F,
            outs_a,
        )
        gaussian_summary(outs_a, std_floor(ctx.ya, ctx.na, ctx.floor_rel), lv.mu_a, lv.sd_a)


@nb.njit(cache=True)
def _reference(sd_c, untested, best, worst):
    """y*: the incumbent's cost, or with no feasible observation the worst cost + 3 x the
    largest sigma over the untested candidates [Lynceus Sec. IV-A]."""
    if best < math.inf:
        return best
    smax = 0.0
    for q in range(sd_c.shape[0]):
        if untested[q] and sd_c[q] > smax:
            smax = sd_c[q]
    return worst + 3.0 * smax


@nb.njit(cache=True)
def _eic_at(q, mu_c, sd_c, mu_a, sd_a, has_acc, price, time_max, cost_max, acc_min, budget, ystar):
    """EIc of candidate ``q``, -1 outside the budget filter Gamma [Lynceus Sec. IV-A]."""
    mu, sd = mu_c[q], sd_c[q]
    if budget < math.inf and _phi_cdf((budget - mu) / sd) < BUDGET_CONFIDENCE:
        return -1.0
    z = (ystar - mu) / sd
    ei = (ystar - mu) * _phi_cdf(z) + sd * _INV_SQRT_2PI * math.exp(-0.5 * z * z)
    ei = max(ei, 0.0)
    if time_max < math.inf:
        ei *= _phi_cdf((time_max * price[q] - mu) / sd)
    if cost_max < math.inf:
        ei *= _phi_cdf((cost_max - mu) / sd)
    if has_acc:
        ei *= _phi_cdf((mu_a[q] - acc_min) / sd_a[q])
    return ei


@nb.njit(cache=True)
def _score_level(
    mu_c,
    sd_c,
    mu_a,
    sd_a,
    has_acc,
    price,
    time_max,
    cost_max,
    acc_min,
    untested,
    budget,
    best,
    worst,
    eic,
):
    """EIc of every untested candidate inside the budget filter Gamma (-1 outside); returns
    the argmax (-1 when Gamma is empty) [Lynceus Sec. IV-A, Alg. 1 l. 23]."""
    ystar = _reference(sd_c, untested, best, worst)
    arg = -1
    top = -1.0
    for q in range(mu_c.shape[0]):
        eic[q] = -1.0
        if not untested[q]:
            continue
        ei = _eic_at(
            q, mu_c, sd_c, mu_a, sd_a, has_acc, price, time_max, cost_max, acc_min, budget, ystar
        )
        eic[q] = ei
        if ei > top:
            top, arg = ei, q
    return arg


@nb.njit(cache=True, inline="always")
def _cantelli(b):
    """Cantelli's bound of 1 - Phi(b): 1 / (1 + b^2) for b > 0, else 1."""
    return 1.0 / (1.0 + b * b) if b > 0.0 else 1.0


@nb.njit(cache=True, inline="always")
def _tail(b):
    """min(Cantelli's bound, the Mills-ratio phi(b) / b) of 1 - Phi(b) (1 for b <= 0)."""
    if not b > 0.0:
        return 1.0
    return min(1.0 / (1.0 + b * b), _INV_SQRT_2PI * math.exp(-0.5 * b * b) / b)


@nb.njit(cache=True, inline="always")
def _eic_bound(mu, sd, ystar, b_time, b_cost, b_acc, top):
    """An upper bound of the EIc of a candidate predicted N(mu, sd) (``_eic_at``) whose
    feasibility factors are Phi(-b) for the given b (-1: no such constraint), as a product
    of bounds of its factors: EI <= y* - mu + sigma phi(0) when mu <= y*, else
    sigma phi(0) g(a), a = (mu - y*) / sigma, and Phi(-b) <= g(b) (1 for b <= 0), with
    g(a) = 1 / (1 + a^2) (the Mills-ratio bound 1 - Phi(a) >= a phi(a) / (1 + a^2) for EI,
    Cantelli's inequality for the factors); when that does not fall below ``top``, the
    same with the exponential: exp(-a^2 / 2) / (1 + a^2) for EI, min(g, phi(b) / b) for the
    factors (``_tail``). Widened by 1e-9 of sigma phi(0) for rounding; inf when sigma is not
    positive."""
    if not sd > 0.0:
        return math.inf
    a = (mu - ystar) / sd
    pf = _cantelli(b_time) * _cantelli(b_cost) * _cantelli(b_acc)
    if a <= 0.0:
        return (ystar - mu + sd * _INV_SQRT_2PI * (1.0 + 1e-9)) * pf
    ub = sd * _INV_SQRT_2PI * (1.0 / (1.0 + a * a) + 1e-9) * pf
    if ub < top:
        return ub
    return (
        sd
        * _INV_SQRT_2PI
        * (math.exp(-0.5 * a * a) / (1.0 + a * a) + 1e-9)
        * _tail(b_time)
        * _tail(b_cost)
        * _tail(b_acc)
    )


@nb.njit(cache=True, inline="always")
def _better(ei, q, top, arg):
    """Whether candidate ``q`` with EIc ``ei`` beats the step so far (``top``, ``arg``): a
    larger EIc, or an equal one at a smaller index; never from outside Gamma (``ei`` -1)."""
    return ei >= 0.0 and (ei > top or (ei == top and q < arg))


@nb.njit(cache=True)
def _next_step(
    mu_c,
    sd_c,
    mu_a,
    sd_a,
    has_acc,
    price,
    time_max,
    cost_max,
    acc_min,
    untested,
    budget,
    best,
    worst,
    hints,
):
    """NextStep [Lynceus Alg. 2 l. 21-25]: (argmax of EIc over Gamma, its EIc), (-1, -1)
    when Gamma is empty; the same candidate as ``_score_level`` (the first index among
    equal maxima) without computing every EIc: the ``hints`` (the real state's best
    candidates) are scored first, then a candidate is scored only when its bound does
    not rule it out (``_eic_bound``)."""
    ystar = _reference(sd_c, untested, best, worst)
    arg = -1
    top = -1.0
    for h in hints:
        if untested[h]:
            ei = _eic_at(
                h,
                mu_c,
                sd_c,
                mu_a,
                sd_a,
                has_acc,
                price,
                time_max,
                cost_max,
                acc_min,
                budget,
                ystar,
            )
            if _better(ei, h, top, arg):
                top, arg = ei, h
    for q in range(mu_c.shape[0]):
        if not untested[q]:
            continue
        mu, sd = mu_c[q], sd_c[q]
        b_time = (mu - time_max * price[q]) / sd if time_max < math.inf else -1.0
        b_cost = (mu - cost_max) / sd if cost_max < math.inf else -1.0
        b_acc = (acc_min - mu_a[q]) / sd_a[q] if has_acc else -1.0
        if _eic_bound(mu, sd, ystar, b_time, b_cost, b_acc, top) < top:
            continue
        ei = _eic_at(
            q, mu_c, sd_c, mu_a, sd_a, has_acc, price, time_max, cost_max, acc_min, budget, ystar
        )
        if _better(ei, q, top, arg):
            top, arg = ei, q
    return arg, top


@nb.njit(cache=True, inline="always")
def _accuracy_node(has_acc, mu, sd, t, w):
    """Accuracy quadrature node (``t``, ``w``) of a configuration predicted N(mu, sd): the
    simulated accuracy and the node's weight; (0, 1) with no accuracy model."""
    if has_acc:
        return mu + sd * t, w
    return 0.0, 1.0


@nb.njit(cache=True, inline="always")
def _simulated_incumbent(best, c, a, time_limit, cost_max, acc_min, has_acc, fixed):
    """The incumbent's cost after a simulated run of cost ``c`` and accuracy ``a``: the
    smaller of ``best`` and ``c`` when the run is feasible (``best`` with ``fixed``)."""
    feasible = c <= time_limit and c <= cost_max and (not has_acc or a >= acc_min)
    return min(best, c) if feasible and not fixed else best


@nb.njit(cache=True)
def _path_levels(la):
    """A path's levels 0..la: the configuration explored, the next quadrature node (cost
    node x accuracy nodes + accuracy node), the running (R, C), the weight of the node being
    walked, the incumbent, the worst cost, the budget and the simulated cost."""
    n = la + 1
    return (
        np.empty(n, np.int64),
        np.zeros(n, np.int64),
        np.empty(n),
        np.empty(n),
        np.empty(n),
        np.empty(n),
        np.empty(n),
        np.empty(n),
        np.empty(n),
    )


@nb.njit(cache=True)
def _simulate(ctx, lv, lev, x, c):
    """S' = S + (x, c) in level ``lev + 1`` of ``lv``: the cost forest refitted (the
    simulated point's leaf regrown, or with ``switches.full_refit`` every tree regrown
    with the root's randomness) and every candidate predicted [Lynceus Alg. 2]."""
    sw, n, nxt = ctx.switches, ctx.nc + lev, lev + 1
    ctx.Xc[n] = ctx.F[x]
    ctx.yc[n] = c
    if sw.full_refit:
        grow_forest(
            ctx.Xc,
            ctx.yc,
            n + 1,
            mix_key(ctx.key, 0),
            ctx.n_trees,
            ctx.max_features,
            ctx.F,
            lv.out[nxt],
            lv.cleaf[nxt],
            lv.rleaf[nxt],
            lv.mult[nxt],
            lv.next_leaf[nxt],
            sw.best_split,
        )
    else:  # cheap refit: regrow the leaf of the simulated point only
        lv.out[nxt] = lv.out[lev]
        lv.cleaf[nxt] = lv.cleaf[lev]
        lv.rleaf[nxt] = lv.rleaf[lev]
        lv.mult[nxt] = lv.mult[lev]
        lv.next_leaf[nxt] = lv.next_leaf[lev]
        insert_point(
            ctx.Xc,
            ctx.yc,
            n,
            x,
            mix_key(ctx.key, nxt),
            ctx.n_trees,
            ctx.max_features,
            ctx.F,
            lv.out[nxt],
            lv.cleaf[nxt],
            lv.rleaf[nxt],
            lv.mult[nxt],
            lv.next_leaf[nxt],
            sw.best_split,
        )
    floor = std_floor(ctx.yc, n + 1, ctx.floor_rel)
    gaussian_summary(lv.out[nxt], floor, lv.mu_c[nxt], lv.sd_c[nxt], sw.authors_sd)


@nb.njit(cache=True)
def _simulated_next_step(ctx, lv, lev, budget, best, worst, hints):
    """NextStep (``_next_step``) in the simulated state of level ``lev`` of ``lv``, with its
    budget, incumbent and worst cost."""
    return _next_step(
        lv.mu_c[lev],
        lv.sd_c[lev],
        lv.mu_a,
        lv.sd_a,
        ctx.na > 0,
        ctx.price,
        ctx.time_max,
        ctx.cost_max,
        ctx.acc_min,
        ctx.untested,
        budget,
        best,
        worst,
        hints,
    )


@nb.njit(cache=True)
def _explore(x0, ctx, lv, hints):
    """ExplorePaths(state, x0, la) -> (R, C) [Lynceus Alg. 2] as an explicit depth-first walk
    (numba cannot reload a cached self-recursive function). Level ``lev`` holds one state of
    the path (``_path_levels``; its forest and predictions in ``lv``). Each cost quadrature
    node builds the simulated state in level ``lev + 1`` (``_simulate``), each accuracy node
    decides its feasibility, and the next step is the greedy argmax of EIc there
    (``_simulated_next_step``). A sub-path's (r, c) is folded into its parent as
    ``R += gamma w r``, ``C += w c`` (``gamma w c`` when the path cost is discounted too,
    OBOL). ``ctx.switches``: the ablation switches (``Switches``)."""
    la, gamma, sw, has_acc = ctx.la, ctx.gamma, ctx.switches, ctx.na > 0
    mu_c, sd_c, mu_a, sd_a, untested = lv.mu_c, lv.sd_c, lv.mu_a, lv.sd_a, ctx.untested
    if la == 0:
        return lv.eic[0, x0], mu_c[0, x0]
    k_acc = ctx.gha_t.shape[0] if has_acc else 1
    n_nodes = ctx.gh_t.shape[0] * k_acc  # node k: cost node k // k_acc, accuracy k % k_acc
    c_scale = gamma if ctx.discount_cost else 1.0
    lx, lk, lR, lC, lw, lbest, lworst, lbudget, lc = _path_levels(la)
    lx[0], lR[0], lC[0] = x0, lv.eic[0, x0], mu_c[0, x0]
    lbest[0], lworst[0], lbudget[0] = ctx.best, ctx.worst, ctx.budget
    untested[x0] = False
    lev = 0
    while True:
        if lk[lev] >= n_nodes:  # every branch of this level done: fold it into its parent
            untested[lx[lev]] = True
            if lev == 0:
                return lR[0], lC[0]
            lev -= 1
            lC[lev] += c_scale * lw[lev] * lC[lev + 1]
            lR[lev] += gamma * lw[lev] * lR[lev + 1]
            lk[lev] += 1
            continue
        x, i, j, nxt = lx[lev], lk[lev] // k_acc, lk[lev] % k_acc, lev + 1
        if j == 0:  # S' = S + (x, c_i)
            c_i = sw.gh_scale * (mu_c[lev, x] + sd_c[lev, x] * ctx.gh_t[i])
            if sw.skip_nonpositive and c_i <= 0.0:  # the authors' code drops such nodes
                lk[lev] += k_acc
                continue
            lc[lev] = max(c_i, 0.0)
            _simulate(ctx, lv, lev, x, lc[lev])
        c_i = lc[lev]
        a_j, w_j = _accuracy_node(has_acc, mu_a[x], sd_a[x], ctx.gha_t[j], ctx.gha_w[j])
        w = ctx.gh_w[i] * w_j
        time_limit = ctx.time_max * ctx.price[x]
        best_i = _simulated_incumbent(
            lbest[lev], c_i, a_j, time_limit, ctx.cost_max, ctx.acc_min, has_acc, sw.fixed_incumbent
        )
        worst_i, budget_i = max(lworst[lev], c_i), lbudget[lev] - c_i
        x_next, eic_next = _simulated_next_step(ctx, lv, nxt, budget_i, best_i, worst_i, hints)
        if x_next >= 0 and nxt == la:  # the sub-path is the single step x_next
            lC[lev] += c_scale * w * mu_c[nxt, x_next]
            lR[lev] += gamma * w * eic_next
        elif x_next >= 0:  # descend: the sub-path rooted at x_next
            lw[lev] = w
            lx[nxt], lk[nxt], lR[nxt], lC[nxt] = x_next, 0, eic_next, mu_c[nxt, x_next]
            lbest[nxt], lworst[nxt], lbudget[nxt] = best_i, worst_i, budget_i
            untested[x_next] = False
            lev = nxt
            continue
        lk[lev] += 1  # next node of this level (none when NextStep found nothing)


@nb.njit(cache=True)
def root_level(ctx, n_levels):
    """Level 0 (the real state) of ``n_levels``: the forests fitted, predictions and EIc;
    returns (``Levels``, the argmax of EIc: -1 when the budget filter leaves nothing)."""
    m = ctx.F.shape[0]
    cap = ctx.nc + n_levels
    n_trees = ctx.n_trees
    lv = Levels(
        np.empty((n_levels, n_trees, m)),
        np.empty((n_levels, n_trees, m), np.int64),
        np.empty((n_levels, n_trees, cap), np.int64),
        np.zeros((n_levels, n_trees, cap), np.int64),
        np.empty((n_levels, n_trees), np.int64),
        np.empty((n_levels, m)),
        np.empty((n_levels, m)),
        np.empty((1, m)),
        np.zeros(m),
        np.ones(m),
    )
    _fit_root(ctx, lv)
    arg = _score_level(
        lv.mu_c[0],
        lv.sd_c[0],
        lv.mu_a,
        lv.sd_a,
        ctx.na > 0,
        ctx.price,
        ctx.time_max,
        ctx.cost_max,
        ctx.acc_min,
        ctx.untested,
        ctx.budget,
        ctx.best,
        ctx.worst,
        lv.eic[0],
    )
    return lv, arg


N_HINTS = 8  # the real state's best candidates, scored first at every simulated step


@nb.njit(cache=True)
def explore_many(first, ctx):
    """(len(first), 2): (R, C) of the paths from each first step in ``first``
    (``_explore``), every one from the same fitted real state."""
    lv, _ = root_level(ctx, ctx.la + 1)
    hints = np.argsort(-lv.eic[0], kind="mergesort")[:N_HINTS]
    result = np.empty((len(first), 2))
    for k in range(len(first)):
        rk, ck = _explore(first[k], ctx, lv, hints)
        result[k, 0], result[k, 1] = rk, ck
    return result


# every kernel above inlines tree kernels: stamped with their file too (numba stamps its own)
stamp_with(kernels_of(sys.modules[__name__]), tree_kernels.__file__)
