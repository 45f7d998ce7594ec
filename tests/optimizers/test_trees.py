"""The bagging ensemble of extra-trees and its cheap fantasy refit."""

from __future__ import annotations

import numpy as np
import pytest

from optfarm.optimizers.models.tree_kernels import (
    gaussian_summary,
    grow_forest,
    insert_point,
    mix_key,
)
from optfarm.optimizers.models.trees import TreeEnsemble, default_max_features


def _data(n=30, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    return X, 3 * X[:, 0] + X[:, 1] ** 2


def test_deterministic_given_seed_and_seed_matters():
    X, y = _data()
    Q = np.random.default_rng(1).random((50, 4))
    a = TreeEnsemble(seed=7).fit(X, y).predict(Q)
    b = TreeEnsemble(seed=7).fit(X, y).predict(Q)
    c = TreeEnsemble(seed=8).fit(X, y).predict(Q)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_gaussian_prediction_is_mean_and_std_of_trees():
    X, y = _data()
    model = TreeEnsemble(n_trees=10, seed=3).fit(X, y)
    out = model.tree_outputs(X)
    mean, std = model.predict(X)
    assert out.shape == (10, len(X))
    np.testing.assert_allclose(mean, out.mean(axis=0))
    np.testing.assert_allclose(std, np.maximum(out.std(axis=0), model.floor_))


def test_learns_the_function():
    X, y = _data(n=200)
    Q = np.random.default_rng(5).random((300, 4))
    mean, std = TreeEnsemble(n_trees=10, seed=1).fit(X, y).predict(Q)
    truth = 3 * Q[:, 0] + Q[:, 1] ** 2
    assert np.corrcoef(mean, truth)[0, 1] > 0.95
    assert np.mean(np.abs(mean - truth)) < 0.3
    assert (std > 0).all()


def test_std_floor_when_trees_agree():
    X = np.random.default_rng(0).random((5, 3))
    mean, std = TreeEnsemble(std_floor=1e-3).fit(X, np.full(5, 2.0)).predict(X)
    np.testing.assert_allclose(mean, 2.0)
    np.testing.assert_allclose(std, 2e-3)  # constant targets: floor relative to |mean|


def test_with_points_is_a_refitted_copy():
    X, y = _data()
    model = TreeEnsemble(seed=2).fit(X, y)
    x_new = np.array([[0.5, 0.5, 0.5, 0.5]])
    before = model.predict(x_new)[0][0]
    fantasy = model.with_points(x_new, [100.0])
    assert fantasy.predict(x_new)[0][0] > before + 10
    assert model.predict(x_new)[0][0] == before  # the original is unchanged
    assert len(fantasy.y_) == len(y) + 1


def test_bad_input_messages():
    with pytest.raises(RuntimeError, match="before fit"):
        TreeEnsemble().predict(np.zeros((1, 2)))
    model = TreeEnsemble().fit(np.zeros((3, 2)), np.ones(3))
    with pytest.raises(ValueError, match="expected 2 features"):
        model.predict(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="finite"):
        TreeEnsemble().fit(np.zeros((2, 2)), np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="n_trees"):
        TreeEnsemble(n_trees=0)


def test_default_max_features_is_weka_random_tree_rule():
    assert default_max_features(10) == 4
    assert default_max_features(1) == 1
    assert default_max_features(10, 2) == 2


def _forest(X, y, Q, n_trees=10, key=11):
    m, n = len(Q), len(y)
    arrays = (
        np.empty((n_trees, m)),
        np.empty((n_trees, m), np.int64),
        np.empty((n_trees, n + 1), np.int64),
        np.zeros((n_trees, n + 1), np.int64),
        np.empty(n_trees, np.int64),
    )
    grow_forest(X, y, n, np.uint64(key), n_trees, 2, Q, *arrays)
    return arrays


def test_insert_point_regrows_only_the_leaf_of_the_new_point():
    rng = np.random.default_rng(4)
    Q = rng.random((60, 3))  # the candidates
    rows = rng.choice(60, 12, replace=False)  # 12 of them are tested
    X = np.zeros((13, 3))
    X[:12] = Q[rows]
    y = np.zeros(13)
    y[:12] = Q[rows, 0] * 5
    out, cleaf, rleaf, mult, nxt = _forest(X, y, Q)
    before_out, before_leaf = out.copy(), cleaf.copy()
    x = int(np.setdiff1d(np.arange(60), rows)[0])
    X[12], y[12] = Q[x], 42.0
    insert_point(
        X, y, 12, x, np.uint64(mix_key(np.uint64(5), 1)), 10, 2, Q, out, cleaf, rleaf, mult, nxt
    )
    for t in range(10):
        same_leaf = before_leaf[t] == before_leaf[t, x]
        np.testing.assert_array_equal(out[t, ~same_leaf], before_out[t, ~same_leaf])
        if mult[t, 12] > 0:  # the point joined this tree's bootstrap: its own leaf predicts it
            assert out[t, x] == 42.0
            assert rleaf[t, 12] == cleaf[t, x]
        else:
            np.testing.assert_array_equal(out[t], before_out[t])
    assert (mult[:, 12] > 0).any()
    mean, std = np.empty(60), np.empty(60)
    gaussian_summary(out, 1e-6, mean, std)
    assert mean[x] > before_out[:, x].mean()


def _step_forest(y, Q, best_split, n_trees=10, key=3):
    X = (np.arange(len(y)) / len(y))[:, None]
    m, n = len(Q), len(y)
    arrays = (
        np.empty((n_trees, m)),
        np.empty((n_trees, m), np.int64),
        np.empty((n_trees, n), np.int64),
        np.zeros((n_trees, n), np.int64),
        np.empty(n_trees, np.int64),
    )
    grow_forest(X, y, n, np.uint64(key), n_trees, 1, Q, *arrays, best_split)
    return arrays


def test_random_trees_split_at_the_best_midpoint():
    """Weka RandomTree: on a step at x = 0.5 the split is the midpoint of the two in-bag
    values around it, so queries at 0.42 and 0.48 fall on both sides when 0.4 and 0.5 are
    in the bag."""
    y = (np.arange(10) >= 5).astype(float)
    out, _, _, mult, _ = _step_forest(y, np.array([[0.42], [0.48]]), best_split=True)
    both = (mult[:, 4] > 0) & (mult[:, 5] > 0)
    assert both.any()
    np.testing.assert_array_equal(out[both], np.tile([0.0, 1.0], (both.sum(), 1)))


def test_random_tree_node_below_the_variance_floor_is_a_leaf():
    """Two groups with a 1e-4 jitter: a RandomTree stops after the split between them (the
    groups' variance is below 1e-3 x the root's), an extra-tree goes on splitting the jitter."""
    y = (np.arange(10) >= 5) + 1e-4 * np.array([0, 1, 0, 1, 0, 1, 0, 1, 0, 1])
    Q = (np.arange(10) / 10)[:, None]
    *_, mult, leaves = _step_forest(y, Q, best_split=True)
    both = (mult[:, :5].sum(axis=1) > 0) & (mult[:, 5:].sum(axis=1) > 0)
    assert (leaves[both] == 2).all()
    *_, leaves_extra = _step_forest(y, Q, best_split=False)
    assert leaves_extra.max() > 2


def test_authors_sigma_rule():
    """EnsembleClassifier: sample std (ddof 1), and 10 x the mean where all trees agree;
    our default: ddof 0 with a floor."""
    out = np.array([[2.0, 2.0], [2.0, 4.0]])
    mean, std = np.empty(2), np.empty(2)
    gaussian_summary(out, 1e-3, mean, std, True)
    np.testing.assert_allclose(std, [20.0, np.sqrt(2.0)])
    gaussian_summary(out, 1e-3, mean, std)
    np.testing.assert_allclose(std, [1e-3, 1.0])
    np.testing.assert_allclose(mean, [2.0, 3.0])
