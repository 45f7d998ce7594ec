"""numba kernels of the tree ensembles (``trees``; the look-ahead's paths refit them too,
``optfarm.optimizers.lookahead_kernels``): randomized trees grown on bootstrap rows with
queries routed as they grow, a cheap refit that regrows one leaf, the ensemble's mean and std.

References:
    [Geurts06] Geurts, Ernst, Wehenkel. Extremely randomized trees. Machine Learning 2006.
    [Weka RandomTree] Weka's RandomTree (the Lynceus authors' EnsembleClassifier's trees).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

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


@nb.njit(cache=True, inline="always")
def _splittable(cnt, total, total2, ymin, ymax, best_split, min_var):
    """Whether a node of ``cnt`` rows may split, from its targets' sum, sum of squares, min
    and max: 2 rows or more with targets not constant, and with ``best_split`` a variance
    of ``min_var`` or more [Weka RandomTree]."""
    if cnt < 2 or not ymax - ymin > 1e-12 * (abs(ymax) + abs(ymin)):
        return False
    return not best_split or total2 / cnt - (total / cnt) ** 2 >= min_var


@nb.njit(cache=True, inline="always")
def _split_score(sl, nl, total, cnt):
    """The variance reduction of a split of a node of ``cnt`` rows (targets summing to
    ``total``) whose left part holds ``nl`` rows summing to ``sl``; -inf when a side is
    empty."""
    nr = cnt - nl
    if nl == 0 or nr == 0:
        return -math.inf
    return sl * sl / nl + (total - sl) * (total - sl) / nr


@nb.njit(cache=True, inline="always")
def _partition(M, idx, lo, hi, f, t):
    """Reorder ``idx[lo:hi]`` so that the rows of ``M`` with ``M[:, f] <= t`` come first;
    where the right part starts."""
    i, j = lo, hi - 1
    while i <= j:
        if M[idx[i], f] <= t:
            i += 1
        else:
            idx[i], idx[j] = idx[j], idx[i]
            j -= 1
    return i


@nb.njit(cache=True)
def _grow(
    X, y, rows, state, max_features, Q, cand, out, cleaf, rleaf, counter, stack, best_split, min_var
):
    """Grow one randomized tree on the training rows ``rows`` (bootstrap copies, permuted in
    place), routing the query rows ``cand`` of Q down it (no node is stored): each leaf takes
    a fresh id from ``counter`` into ``cleaf`` (queries) and ``rleaf`` (rows), and its mean
    target into ``out`` (queries). A node that may split (``_splittable``) takes the best of up
    to ``max_features`` drawn features with a spread, each at one uniform threshold
    [Geurts06] or, with ``best_split``, at its best midpoint [Weka RandomTree]."""
    n, d = rows.shape[0], X.shape[1]
    work_f, keys, order = np.empty(d, np.int64), np.empty(n), np.empty(n, np.int64)
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = 0, n, 0, cand.shape[0]
    top = 1
    while top > 0:
        top -= 1
        lo, hi, qlo, qhi = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        cnt, total, total2, ymin, ymax = hi - lo, 0.0, 0.0, math.inf, -math.inf
        for k in range(lo, hi):
            v = y[rows[k]]
            total, total2, ymin, ymax = total + v, total2 + v * v, min(ymin, v), max(ymax, v)
        best_score, best_f, best_t, tried, remaining = -math.inf, -1, 0.0, 0, d
        if not _splittable(cnt, total, total2, ymin, ymax, best_split, min_var):
            remaining = 0  # a leaf: no feature is tried
        else:
            for j in range(d):
                work_f[j] = j
        while min(remaining, max_features - tried) > 0:
            pick = int(_uniform(state) * remaining)
            f = work_f[pick]
            remaining -= 1
            work_f[pick] = work_f[remaining]
            xmin, xmax = math.inf, -math.inf
            for k in range(lo, hi):
                xmin, xmax = min(xmin, X[rows[k], f]), max(xmax, X[rows[k], f])
            if xmax <= xmin:
                continue
            tried += 1
            if best_split:
                score, t = _best_threshold(X, y, rows, lo, hi, f, total, keys, order)
            else:
                t, sl, nl = xmin + _uniform(state) * (xmax - xmin), 0.0, 0
                for k in range(lo, hi):
                    if X[rows[k], f] <= t:
                        sl, nl = sl + y[rows[k]], nl + 1
                score = _split_score(sl, nl, total, cnt)
            if score > best_score:
                best_score, best_f, best_t = score, f, t
        if best_f < 0:  # leaf
            leaf_id = counter[0]
            counter[0] += 1
            for k in range(qlo, qhi):
                out[cand[k]], cleaf[cand[k]] = total / cnt, leaf_id
            for k in range(lo, hi):
                rleaf[rows[k]] = leaf_id
            continue
        i = _partition(X, rows, lo, hi, best_f, best_t)  # training rows: left part <= t
        a = _partition(Q, cand, qlo, qhi, best_f, best_t)  # the same for the queries
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


@nb.njit(cache=True, inline="always")
def _leaf_members(cleaf, rleaf, mult, q_new, r_new, k_new, rows, cand):
    """The training rows (each as often as its bootstrap multiplicity, then the new row
    ``k_new`` times) and the queries of the leaf holding query ``q_new``, written to ``rows``
    and ``cand``; their counts."""
    leaf = cleaf[q_new]
    nr = 0
    for r in range(r_new):
        if rleaf[r] == leaf:
            for _ in range(mult[r]):
                rows[nr] = r
                nr += 1
    for _ in range(k_new):
        rows[nr] = r_new
        nr += 1
    nq = 0
    for q in range(cleaf.shape[0]):
        if cleaf[q] == leaf:
            cand[nq] = q
            nq += 1
    return nr, nq


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
    size = 0
    for t in range(n_trees):
        size = max(size, mult[t, :r_new].sum())
    size += 21  # the new row's multiplicity is at most 20
    rows = np.empty(size, np.int64)
    cand = np.empty(Q.shape[0], np.int64)
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
        nr, nq = _leaf_members(cleaf[t], rleaf[t], mult[t], q_new, r_new, k_new, rows, cand)
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
        std[q] = _std_rule(std[q], mean[q], n_trees, floor, authors_sd)


@nb.njit(cache=True, inline="always")
def _std_rule(v, mean, n_trees, floor, authors_sd):
    """The std from the sum ``v`` of squared deviations over the trees (``gaussian_summary``)."""
    if not authors_sd:
        return max(math.sqrt(v / n_trees), floor)
    if v > 0.0 and n_trees > 1:
        return math.sqrt(v / (n_trees - 1))
    return max(WEKA_UNCERTAINTY * abs(mean), floor)


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
