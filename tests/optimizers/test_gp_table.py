"""``GaussianProcess.predict_rows``: the arithmetic of ``predict`` up to LARGE_N observations;
beyond, variances kept over the table and brought up to date by the observations appended
(``models/gp_table.py``), equal to ``predict``'s to rounding, computed afresh when the samples
are re-sampled or the table changes, and the same after a pickle round trip (a resumed run)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import optfarm.optimizers.models.gp as gp_module
from optfarm.optimizers.models.gp import GaussianProcess
from optfarm.optimizers.models.gp_table import variance_drop


def _table(m=600, d=3, seed=0):
    rng = np.random.default_rng(seed)
    T = rng.random((m, d))
    y = np.sin(4 * T[:, 0]) + T[:, 1] ** 2 + 0.1 * T[:, 2] + 0.02 * rng.normal(size=m)
    return T, y, rng.permutation(m)


@pytest.fixture
def counted(monkeypatch):
    """LARGE_N lowered to 20 (4 kept samples), and a count of the variances computed afresh
    (``GaussianProcess._variance``: the triangular solve with the table)."""
    monkeypatch.setattr(gp_module, "LARGE_N", 20)
    monkeypatch.setattr(gp_module, "LARGE_N_SAMPLES", 4)
    calls = []
    afresh = GaussianProcess._variance

    def counting(self, i, Xq, Ks):
        calls.append(len(Xq))
        return afresh(self, i, Xq, Ks)

    monkeypatch.setattr(GaussianProcess, "_variance", counting)
    return calls


def _untested(order, n, m):
    return np.setdiff1d(np.arange(m), order[:n])


def test_up_to_large_n_predict_rows_is_predict_to_the_last_bit(counted):
    T, y, order = _table()
    gp = GaussianProcess(hyper="mcmc", burn_in=10, chain_length=10, seed=1)
    for n in (8, 20):  # every walker a sample, sampled anew at every fit
        gp.fit(T[order[:n]], y[order[:n]])
        rows = _untested(order, n, len(T))
        for got, want in zip(gp.predict_rows(T, rows), gp.predict(T[rows])):
            np.testing.assert_array_equal(got, want)
    assert gp._table is None


def test_kept_variances_are_brought_up_to_date_by_the_observations_appended(counted):
    T, y, order = _table()
    gp = GaussianProcess(hyper="mcmc", burn_in=10, chain_length=10, seed=1)
    gp.fit(T[order[:21]], y[order[:21]])  # beyond LARGE_N: 4 samples, kept until n >= 26.25
    gp.predict_rows(T, _untested(order, 21, len(T)))
    assert counted == [len(T)] * 4  # afresh, every row of the table, once per sample
    for n in (22, 23, 26):  # one, one, then three observations appended
        gp.fit(T[order[:n]], y[order[:n]])
        rows = _untested(order, n, len(T))
        mean, std = gp.predict_rows(T, rows)
        want_mean, want_std = gp.predict(T[rows])
        np.testing.assert_allclose(mean, want_mean, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(std, want_std, rtol=1e-8, atol=1e-10)
        assert len(gp._table.observed) == n
    assert len(counted) == 4 + 3 * 4  # predict's own solves only: none of predict_rows'
    gp.fit(T[order[:27]], y[order[:27]])  # 27 >= 1.25 x 21: sampled anew
    counted.clear()
    rows = _untested(order, 27, len(T))
    np.testing.assert_allclose(gp.predict_rows(T, rows)[1], gp.predict(T[rows])[1], rtol=1e-8)
    assert counted == [len(T)] * 4 + [len(rows)] * 4  # afresh under the new samples


def test_another_table_or_other_first_observations_are_computed_afresh(counted):
    T, y, order = _table()
    gp = GaussianProcess(hyper="mcmc", burn_in=10, chain_length=10, seed=1)
    gp.fit(T[order[:22]], y[order[:22]])
    gp.predict_rows(T, np.arange(5))
    other = T[::-1].copy()
    counted.clear()
    gp.predict_rows(other, np.arange(5))
    assert counted == [len(T)] * 4
    swapped = order[:23].copy()
    swapped[[0, 1]] = swapped[[1, 0]]  # the same points, another order: not an append
    gp.fit(T[swapped], y[swapped])
    counted.clear()
    mean, std = gp.predict_rows(other, np.arange(5))
    assert counted == [len(T)] * 4
    np.testing.assert_allclose(std, gp.predict(other[:5])[1], rtol=1e-8)


def test_a_pickled_model_predicts_what_the_original_does_at_the_next_fit(counted):
    T, y, order = _table()
    gp = GaussianProcess(hyper="mcmc", burn_in=10, chain_length=10, seed=1)
    gp.fit(T[order[:22]], y[order[:22]])
    gp.predict_rows(T, _untested(order, 22, len(T)))
    copy = pickle.loads(pickle.dumps(gp))  # a checkpoint
    rows = _untested(order, 23, len(T))
    for model in (gp, copy):
        model.fit(T[order[:23]], y[order[:23]])
    for got, want in zip(copy.predict_rows(T, rows), gp.predict_rows(T, rows)):
        np.testing.assert_array_equal(got, want)


def test_variance_drop_is_the_variance_the_new_observations_explain():
    """k(x, x) - |L^-1 k(X, x)|^2 with all n observations equals the same with the first n0,
    less ``variance_drop``: the partitioned inverse, against two full solves."""
    rng = np.random.default_rng(3)
    A = rng.random((12, 2))
    K = np.exp(-((A[:, None] - A[None]) ** 2).sum(-1) / 0.1) + 1e-3 * np.eye(12)
    Q = rng.random((12, 40))  # stands for k(X, Xq)
    L = np.linalg.cholesky(K)
    explained = (np.linalg.solve(L, Q) ** 2).sum(0)
    explained_first = (np.linalg.solve(L[:9, :9], Q[:9]) ** 2).sum(0)
    np.testing.assert_allclose(variance_drop(L, 9, Q), explained - explained_first, rtol=1e-9)
    np.testing.assert_array_equal(variance_drop(L, 12, Q), np.zeros(40))
