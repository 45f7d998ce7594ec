"""numba kernels of the tree ensemble (``trees``) and of the look-ahead (``lookahead``).

They live in one module because numba's on-disk cache of a function is invalidated only when
its own file changes, not when a function it calls (and inlines) in another file does.

References:
    [Geurts06] Geurts, Ernst, Wehenkel. Extremely randomized trees. Machine Learning 2006.
    [Lynceus] Casimiro et al. Lynceus, ICDCS 2020, Sec. V-A and V-C (Algorithms 1-2).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

BUDGET_CONFIDENCE = 0.99  # Gamma = {x : P(C(x) <= budget) >= 0.99} [Lynceus Alg. 1 l. 23]
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

# -- trees ---------------------------------------------------------------------------------
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@nb.njit(cache=True)
def _mix(z):
    """splitmix64 finaliser: a bijective 64-bit hash."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True)
def _uniform(state):
    """Next U[0, 1) draw of the splitmix64 stream held in ``state`` (a 1-element uint64)."""
    state[0] += _GOLDEN
    return (_mix(state[0]) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@nb.njit(cache=True)
def mix_key(key, value):
    """A child key: hash of (key, value); used to derive independent streams."""
    return _mix(np.uint64(key) ^ _mix(np.uint64(value) + _GOLDEN))


@nb.njit(cache=True)
def _best_threshold(X, y, rows, lo, hi, f, total, keys, order):
    """Weka RandomTree's split on feature ``f``: the midpoint between consecutive distinct
    values with the largest variance reduction; returns (score, threshold), score -inf
    when the node's values of ``f`` are constant."""
    cnt = hi - lo
    for k in range(cnt):
        keys[k] = X[rows[lo + k], f]
    idx = np.argsort(keys[:cnt])
    for k in range(cnt):
        order[k] = rows[lo + idx[k]]
    best, thr, sl = -math.inf, 0.0, 0.0
    for k in range(cnt - 1):
        sl += y[order[k]]
        a, b = X[order[k], f], X[order[k + 1], f]
        if b <= a:
            continue
        nl = k + 1
        score = sl * sl / nl + (total - sl) * (total - sl) / (cnt - nl)
        if score > best:
            best, thr = score, 0.5 * (a + b)
    return best, thr


@nb.njit(cache=True)
def _grow(
    X,
    y,
    rows,
    state,
    max_features,
    Q,
    cand,
    out,
    cleaf,
    rleaf,
    next_leaf,
    stack,
    best_split=False,
    min_var=0.0,
):
    """Grow one randomized tree on the training rows ``rows`` (bootstrap copies, permuted in
    place), routing the query rows ``cand`` of Q down the tree as it grows (no node is
    stored): each leaf gets a fresh id from ``next_leaf``, written to ``cleaf`` (queries) and
    ``rleaf`` (training rows), and its mean target is written to ``out`` for its queries.

    At each node, up to ``max_features`` randomly drawn features with a spread are tried;
    the split with the largest variance reduction wins. Extra-tree (``best_split`` False):
    one uniform threshold per feature between its min and max [Geurts06]. Weka RandomTree
    (``best_split`` True): the best midpoint of each feature, and a node whose target
    variance is below ``min_var`` is a leaf (Weka's minVarianceProp x the variance at the
    root) [Weka RandomTree]. A node with fewer than 2 rows, constant targets or constant
    features is a leaf.
    """
    n = rows.shape[0]
    d = X.shape[1]
    work_f = np.empty(d, np.int64)
    keys = np.empty(n if best_split else 0)
    order = np.empty(n if best_split else 0, np.int64)
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = 0, n, 0, cand.shape[0]
    top = 1
    while top > 0:
        top -= 1
        lo, hi, qlo, qhi = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        total = 0.0
        total2 = 0.0
        ymin = math.inf
        ymax = -math.inf
        for k in range(lo, hi):
            v = y[rows[k]]
            total += v
            total2 += v * v
            ymin = min(ymin, v)
            ymax = max(ymax, v)
        cnt = hi - lo
        best_f = -1
        best_t = 0.0
        splittable = cnt >= 2 and ymax - ymin > 1e-12 * (abs(ymax) + abs(ymin))
        if best_split and splittable:
            splittable = total2 / cnt - (total / cnt) ** 2 >= min_var
        if splittable:
            for j in range(d):
                work_f[j] = j
            best_score = -math.inf
            tried = 0
            remaining = d
            while remaining > 0 and tried < max_features:
                pick = int(_uniform(state) * remaining)
                f = work_f[pick]
                remaining -= 1
                work_f[pick] = work_f[remaining]
                xmin = math.inf
                xmax = -math.inf
                for k in range(lo, hi):
                    v = X[rows[k], f]
                    xmin = min(xmin, v)
                    xmax = max(xmax, v)
                if xmax <= xmin:
                    continue
                tried += 1
                if best_split:
                    score, t = _best_threshold(X, y, rows, lo, hi, f, total, keys, order)
                    if score > best_score:
                        best_score, best_f, best_t = score, f, t
                    continue
                t = xmin + _uniform(state) * (xmax - xmin)
                sl = 0.0
                nl = 0
                for k in range(lo, hi):
                    if X[rows[k], f] <= t:
                        sl += y[rows[k]]
                        nl += 1
                nr = cnt - nl
                if nl == 0 or nr == 0:
                    continue
                score = sl * sl / nl + (total - sl) * (total - sl) / nr
                if score > best_score:
                    best_score, best_f, best_t = score, f, t
        if best_f < 0:  # leaf
            leaf_id = next_leaf[0]
            next_leaf[0] += 1
            leaf = total / cnt
            for k in range(qlo, qhi):
                out[cand[k]] = leaf
                cleaf[cand[k]] = leaf_id
            for k in range(lo, hi):
                rleaf[rows[k]] = leaf_id
            continue
        i, j = lo, hi - 1
        while i <= j:  # partition the training rows: left part <= threshold
            if X[rows[i], best_f] <= best_t:
                i += 1
            else:
                tmp = rows[i]
                rows[i] = rows[j]
                rows[j] = tmp
                j -= 1
        a, b = qlo, qhi - 1
        while a <= b:  # the same for the queries
            if Q[cand[a], best_f] <= best_t:
                a += 1
            else:
                tmp = cand[a]
                cand[a] = cand[b]
                cand[b] = tmp
                b -= 1
        stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = lo, i, qlo, a
        stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2], stack[top + 1, 3] = i, hi, a, qhi
        top += 2


WEKA_MIN_VARIANCE_PROP = 1e-3  # a RandomTree node is a leaf below this x the root variance


@nb.njit(cache=True)
def _variance(y, n):
    m = 0.0
    for k in range(n):
        m += y[k]
    m /= max(n, 1)
    v = 0.0
    for k in range(n):
        v += (y[k] - m) ** 2
    return v / max(n, 1)


@nb.njit(cache=True)
def grow_forest(
    X, y, n, key, n_trees, max_features, Q, out, cleaf, rleaf, mult, next_leaf, best_split=False
):
    """Fit ``n_trees`` bootstrap randomized trees (extra-trees, or Weka RandomTrees with
    ``best_split``) on the first ``n`` rows of (X, y) with the randomness of ``key``; per
    tree t: ``out[t]`` predictions at the rows of Q, ``cleaf[t]``
    their leaf ids, ``rleaf[t]`` the leaf of each training row (-1 out of bag), ``mult[t]``
    the bootstrap multiplicity of each row, ``next_leaf[t]`` the next free leaf id."""
    rows = np.empty(n, np.int64)
    cand = np.arange(Q.shape[0])
    stack = np.empty((2 * n + 2, 4), np.int64)
    state = np.empty(1, np.uint64)
    counter = np.zeros(1, np.int64)
    min_var = WEKA_MIN_VARIANCE_PROP * _variance(y, n)
    for t in range(n_trees):
        state[0] = mix_key(key, t)
        for k in range(n):
            mult[t, k] = 0
            rleaf[t, k] = -1
        for k in range(n):
            r = int(_uniform(state) * n)
            rows[k] = r
            mult[t, r] += 1
        counter[0] = 0
        _grow(
            X,
            y,
            rows,
            state,
            max_features,
            Q,
            cand,
            out[t],
            cleaf[t],
            rleaf[t],
            counter,
            stack,
            best_split,
            min_var,
        )
        next_leaf[t] = counter[0]


@nb.njit(cache=True)
def _poisson1(u):
    """Inverse CDF of Poisson(1) at u: the bootstrap multiplicity of a new point."""
    k = 0
    p = math.exp(-1.0)
    cdf = p
    while u > cdf and k < 20:
        k += 1
        p /= k
        cdf += p
    return k


@nb.njit(cache=True)
def insert_point(
    X,
    y,
    r_new,
    q_new,
    key,
    n_trees,
    max_features,
    Q,
    out,
    cleaf,
    rleaf,
    mult,
    next_leaf,
    best_split=False,
):
    """Cheap refit with one (fantasised) training row ``r_new`` located at query row
    ``q_new``: in each tree the row enters the bootstrap with a Poisson(1) multiplicity; if
    it does, the leaf holding ``q_new`` is regrown on its rows plus the new one (the splits
    above it are kept) and its queries are re-routed. Updates the forest arrays in place.
    Rows ``0..r_new - 1`` must be the forest's current training rows."""
    m = Q.shape[0]
    size = 0
    for t in range(n_trees):
        size = max(size, mult[t, :r_new].sum())
    size += 21  # the new row's multiplicity is at most 20
    rows = np.empty(size, np.int64)
    cand = np.empty(m, np.int64)
    stack = np.empty((2 * size + 2, 4), np.int64)
    state = np.empty(1, np.uint64)
    counter = np.zeros(1, np.int64)
    min_var = WEKA_MIN_VARIANCE_PROP * _variance(y, r_new + 1)
    for t in range(n_trees):
        state[0] = mix_key(key, t)
        k_new = _poisson1(_uniform(state))
        mult[t, r_new] = k_new
        rleaf[t, r_new] = -1
        if k_new == 0:
            continue
        leaf = cleaf[t, q_new]
        nr = 0
        for r in range(r_new):
            if rleaf[t, r] == leaf:
                for _ in range(mult[t, r]):
                    rows[nr] = r
                    nr += 1
        for _ in range(k_new):
            rows[nr] = r_new
            nr += 1
        nq = 0
        for q in range(m):
            if cleaf[t, q] == leaf:
                cand[nq] = q
                nq += 1
        counter[0] = next_leaf[t]
        _grow(
            X,
            y,
            rows[:nr],
            state,
            max_features,
            Q,
            cand[:nq],
            out[t],
            cleaf[t],
            rleaf[t],
            counter,
            stack,
            best_split,
            min_var,
        )
        next_leaf[t] = counter[0]


@nb.njit(cache=True)
def forest_outputs(X, y, n, key, n_trees, max_features, Q, out, best_split=False):
    """Per-tree predictions (n_trees x len(Q)) at the rows of Q of the forest fitted on the
    first ``n`` rows of (X, y) with the randomness of ``key``."""
    m = Q.shape[0]
    grow_forest(
        X,
        y,
        n,
        key,
        n_trees,
        max_features,
        Q,
        out,
        np.empty((n_trees, m), np.int64),
        np.empty((n_trees, n), np.int64),
        np.empty((n_trees, n), np.int64),
        np.empty(n_trees, np.int64),
        best_split,
    )


WEKA_UNCERTAINTY = 10.0  # the authors' sigma when every tree agrees: 10 x the mean


@nb.njit(cache=True)
def gaussian_summary(outputs, floor, mean, std, authors_sd=False):
    """Mean and std over the trees (axis 0) of ``outputs``: ddof 0 and at least ``floor``;
    or, with ``authors_sd``, the rule of the Lynceus code (EnsembleClassifier): ddof 1,
    and 10 x |mean| when all trees agree (``floor`` only when the mean is 0 too)."""
    n_trees, m = outputs.shape
    # tree by tree over contiguous rows; each candidate's sums in the same (tree) order
    for q in range(m):
        mean[q] = 0.0
        std[q] = 0.0
    for t in range(n_trees):
        for q in range(m):
            mean[q] += outputs[t, q]
    for q in range(m):
        mean[q] /= n_trees
    for t in range(n_trees):
        for q in range(m):
            dv = outputs[t, q] - mean[q]
            std[q] += dv * dv
    for q in range(m):
        v = std[q]
        if not authors_sd:
            std[q] = max(math.sqrt(v / n_trees), floor)
        elif v > 0.0 and n_trees > 1:
            std[q] = math.sqrt(v / (n_trees - 1))
        else:
            std[q] = max(WEKA_UNCERTAINTY * abs(mean[q]), floor)


# -- look-ahead -----------------------------------------------------------------------------
@nb.njit(cache=True)
def _phi_cdf(z):
    return 0.5 * math.erfc(-z * _INV_SQRT2)


@nb.njit(cache=True)
def std_floor(y, n, rel):
    """The predictive std floor: ``rel`` x the spread of the first ``n`` targets (their std,
    else their mean magnitude, else 1)."""
    if n < 2:
        s = abs(y[0]) if n == 1 else 1.0
    else:
        m = 0.0
        for k in range(n):
            m += y[k]
        m /= n
        v = 0.0
        for k in range(n):
            v += (y[k] - m) ** 2
        s = math.sqrt(v / n)
        if s <= 0.0:
            s = abs(m)
    return rel * (s if s > 0.0 else 1.0)


class PathState(NamedTuple):
    """The real state every path of a step starts from (``optfarm.optimizers.lookahead.PathContext``
    says what each field holds); ``Xc``/``yc`` have room for ``la + 1`` simulated points,
    ``untested`` is marked and unmarked along a path."""

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
    best: float
    worst: float


class PathRules(NamedTuple):
    """What stays fixed along every path of a step: the window ``la``, the discount
    ``gamma`` (of the path cost too with ``discount_cost``), the constraints, the quadrature
    nodes and weights on cost (``gh_*``) and accuracy (``gha_*``), the forests' settings and
    randomness (``key``) and the ablation switches (``optfarm.optimizers.lookahead.Switches``)."""

    la: int
    gamma: float
    discount_cost: bool
    time_max: float
    cost_max: float
    acc_min: float
    gh_t: np.ndarray
    gh_w: np.ndarray
    gha_t: np.ndarray
    gha_w: np.ndarray
    key: np.uint64
    n_trees: int
    n_trees_acc: int
    max_features: int
    floor_rel: float
    best_split: bool
    authors_sd: bool
    full_refit: bool
    fixed_incumbent: bool
    gh_scale: float
    skip_nonpositive: bool


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
def _fit_root(state, rules, lv):
    """Fit the cost (and accuracy) ensembles of the real state in level 0 of ``lv``,
    predict every candidate."""
    key = mix_key(rules.key, 0)
    grow_forest(
        state.Xc,
        state.yc,
        state.nc,
        key,
        rules.n_trees,
        rules.max_features,
        state.F,
        lv.out[0],
        lv.cleaf[0],
        lv.rleaf[0],
        lv.mult[0],
        lv.next_leaf[0],
        rules.best_split,
    )
    gaussian_summary(
        lv.out[0],
        std_floor(state.yc, state.nc, rules.floor_rel),
        lv.mu_c[0],
        lv.sd_c[0],
        rules.authors_sd,
    )
    if state.na > 0:
        outs_a = np.empty((rules.n_trees_acc, state.F.shape[0]))
        forest_outputs(
            state.Xa,
            state.ya,
            state.na,
            mix_key(key, 99991),
            rules.n_trees_acc,
            rules.max_features,
            state.F,
            outs_a,
        )
        gaussian_summary(outs_a, std_floor(state.ya, state.na, rules.floor_rel), lv.mu_a, lv.sd_a)


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
            if ei >= 0.0 and (ei > top or (ei == top and h < arg)):
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
        if ei >= 0.0 and (ei > top or (ei == top and q < arg)):
            top, arg = ei, q
    return arg, top


@nb.njit(cache=True)
def _explore(x0, state, rules, lv, hints):
    """ExplorePaths(state, x0, la) -> (R, C) [Lynceus Alg. 2], as an explicit depth-first
    walk (numba cannot reload a cached self-recursive function).

    Level ``lev`` holds one state of the path: its forest, predictions and EIc (``lv``), the
    configuration explored from it, its running (R, C), budget and incumbent. Each quadrature
    node of that configuration's cost builds the simulated state in level
    ``lev + 1`` by a cheap refit; the next step is the greedy argmax of EIc there (NextStep,
    ``_next_step``, which scores the real state's best candidates ``hints`` first);
    a sub-path's (r, c) is folded into its parent as ``R += gamma w r``, ``C += w c``
    (``gamma w c`` when the path cost is discounted too, OBOL).

    ``rules`` hold the ablation switches too (``Switches``): the trees, the sigma rule, a full
    refit of every tree instead of regrowing the simulated point's leaf, a fixed simulated
    incumbent, the scale of the quadrature values and whether nodes <= 0 are skipped.
    """
    la, gamma, key, n_trees = rules.la, rules.gamma, rules.key, rules.n_trees
    mf, rel = rules.max_features, rules.floor_rel
    best_split, authors_sd = rules.best_split, rules.authors_sd
    gh_t, gh_w, gha_t, gha_w = rules.gh_t, rules.gh_w, rules.gha_t, rules.gha_w
    full_refit, fixed_incumbent = rules.full_refit, rules.fixed_incumbent
    gh_scale, skip_nonpositive = rules.gh_scale, rules.skip_nonpositive
    time_max, cost_max, acc_min = rules.time_max, rules.cost_max, rules.acc_min
    Xc, yc, nc, F = state.Xc, state.yc, state.nc, state.F
    price, untested = state.price, state.untested
    has_acc = state.na > 0
    f_out, f_cleaf, f_rleaf, f_mult, f_next = lv.out, lv.cleaf, lv.rleaf, lv.mult, lv.next_leaf
    mu_c, sd_c, mu_a, sd_a, eic = lv.mu_c, lv.sd_c, lv.mu_a, lv.sd_a, lv.eic
    R0 = eic[0, x0]
    C0 = mu_c[0, x0]
    if la == 0:
        return R0, C0
    n_cost = gh_t.shape[0]
    k_acc = gha_t.shape[0] if has_acc else 1
    c_scale = gamma if rules.discount_cost else 1.0
    lx = np.empty(la + 1, np.int64)
    li = np.zeros(la + 1, np.int64)
    lj = np.zeros(la + 1, np.int64)
    lR = np.empty(la + 1)
    lC = np.empty(la + 1)
    lw = np.empty(la + 1)
    lbest = np.empty(la + 1)
    lworst = np.empty(la + 1)
    lbudget = np.empty(la + 1)
    lc = np.empty(la + 1)
    lx[0], lR[0], lC[0] = x0, R0, C0
    lbest[0], lworst[0], lbudget[0] = state.best, state.worst, state.budget
    untested[x0] = False
    lev = 0
    while True:
        if li[lev] >= n_cost:  # every branch of this level done: fold it into its parent
            untested[lx[lev]] = True
            if lev == 0:
                return lR[0], lC[0]
            r, c = lR[lev], lC[lev]
            lev -= 1
            lC[lev] += c_scale * lw[lev] * c
            lR[lev] += gamma * lw[lev] * r
            lj[lev] += 1
            if lj[lev] >= k_acc:
                lj[lev] = 0
                li[lev] += 1
            continue
        x, i, j, nxt = lx[lev], li[lev], lj[lev], lev + 1
        if j == 0:  # S' = S + (x, c_i): refit and predict every candidate
            c_i = gh_scale * (mu_c[lev, x] + sd_c[lev, x] * gh_t[i])
            if skip_nonpositive and c_i <= 0.0:  # the authors' code drops such nodes
                li[lev] += 1
                continue
            c_i = max(c_i, 0.0)
            lc[lev] = c_i
            Xc[nc + lev] = F[x]
            yc[nc + lev] = c_i
            if full_refit:  # every tree regrown on S' with the root's randomness
                grow_forest(
                    Xc,
                    yc,
                    nc + lev + 1,
                    mix_key(key, 0),
                    n_trees,
                    mf,
                    F,
                    f_out[nxt],
                    f_cleaf[nxt],
                    f_rleaf[nxt],
                    f_mult[nxt],
                    f_next[nxt],
                    best_split,
                )
            else:  # cheap refit: regrow the leaf of the simulated point only
                f_out[nxt] = f_out[lev]
                f_cleaf[nxt] = f_cleaf[lev]
                f_rleaf[nxt] = f_rleaf[lev]
                f_mult[nxt] = f_mult[lev]
                f_next[nxt] = f_next[lev]
                insert_point(
                    Xc,
                    yc,
                    nc + lev,
                    x,
                    mix_key(key, nxt),
                    n_trees,
                    mf,
                    F,
                    f_out[nxt],
                    f_cleaf[nxt],
                    f_rleaf[nxt],
                    f_mult[nxt],
                    f_next[nxt],
                    best_split,
                )
            gaussian_summary(
                f_out[nxt], std_floor(yc, nc + lev + 1, rel), mu_c[nxt], sd_c[nxt], authors_sd
            )
        c_i = lc[lev]
        # accuracy node j: the simulated run's feasibility (hence the simulated incumbent)
        a_j = mu_a[x] + sd_a[x] * gha_t[j] if has_acc else 0.0
        w = gh_w[i] * (gha_w[j] if has_acc else 1.0)
        feasible = (
            c_i <= time_max * price[x] and c_i <= cost_max and (not has_acc or a_j >= acc_min)
        )
        best_i = min(lbest[lev], c_i) if feasible and not fixed_incumbent else lbest[lev]
        worst_i = max(lworst[lev], c_i)
        budget_i = lbudget[lev] - c_i
        x_next, eic_next = _next_step(
            mu_c[nxt],
            sd_c[nxt],
            mu_a,
            sd_a,
            has_acc,
            price,
            time_max,
            cost_max,
            acc_min,
            untested,
            budget_i,
            best_i,
            worst_i,
            hints,
        )
        if x_next >= 0 and nxt == la:  # the sub-path is the single step x_next
            lC[lev] += c_scale * w * mu_c[nxt, x_next]
            lR[lev] += gamma * w * eic_next
        elif x_next >= 0:  # descend: the sub-path rooted at x_next
            lw[lev] = w
            lx[nxt], li[nxt], lj[nxt] = x_next, 0, 0
            lR[nxt], lC[nxt] = eic_next, mu_c[nxt, x_next]
            lbest[nxt], lworst[nxt], lbudget[nxt] = best_i, worst_i, budget_i
            untested[x_next] = False
            lev = nxt
            continue
        lj[lev] += 1  # next node of this level (none when NextStep found nothing)
        if lj[lev] >= k_acc:
            lj[lev] = 0
            li[lev] += 1


@nb.njit(cache=True)
def root_level(state, rules, n_levels):
    """Level 0 (the real state) of ``n_levels``: the forests fitted, predictions and EIc;
    returns (``Levels``, the argmax of EIc: -1 when the budget filter leaves nothing)."""
    m = state.F.shape[0]
    cap = state.nc + n_levels
    n_trees = rules.n_trees
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
    _fit_root(state, rules, lv)
    arg = _score_level(
        lv.mu_c[0],
        lv.sd_c[0],
        lv.mu_a,
        lv.sd_a,
        state.na > 0,
        state.price,
        rules.time_max,
        rules.cost_max,
        rules.acc_min,
        state.untested,
        state.budget,
        state.best,
        state.worst,
        lv.eic[0],
    )
    return lv, arg


N_HINTS = 8  # the real state's best candidates, scored first at every simulated step


@nb.njit(cache=True)
def explore_many(first, state, rules):
    """(len(first), 2): (R, C) of the paths from each first step in ``first``
    (``_explore``), every one from the same fitted real state."""
    lv, _ = root_level(state, rules, rules.la + 1)
    hints = np.argsort(-lv.eic[0], kind="mergesort")[:N_HINTS]
    result = np.empty((len(first), 2))
    for k in range(len(first)):
        rk, ck = _explore(first[k], state, rules, lv, hints)
        result[k, 0], result[k, 1] = rk, ck
    return result
