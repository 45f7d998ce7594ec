"""The oracle: replays a dataset's measurements to optimizers and keeps the ground truth.

Modelled on a tabular blackbox: the index (config_id, fidelity) -> rows is built once into
dense arrays; ``run`` is a lookup. The true values the metrics read (``true_value``, the
feasible optimum) are per-configuration means over repeated measurements; the metrics
themselves (CNO, Accuracy_C) are ``optfarm.farm.run.metrics``'.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import pyarrow.compute as pc

from .contract import METRICS, Observation
from .dataset import Dataset
from .problem import Problem

__all__ = ["SPREAD_WARNING", "Oracle"]

SPREAD_WARNING = 10.0  # repeated rows of one configuration this many times apart: a warning


class Oracle:
    """Lookup-table oracle over one dataset (immutable, cheap to share).

    Args:
        dataset: the measurements.
        problem: objective and constraints for the ground truth (default: the dataset's).
        aggregate: ``"sample"`` draws one of the repeated measurements with the run's
            generator; ``"mean"`` returns their mean.
    """

    def __init__(
        self,
        dataset: Dataset,
        problem: Problem | None = None,
        aggregate: Literal["sample", "mean"] = "sample",
    ):
        if aggregate not in ("sample", "mean"):
            raise ValueError(f"aggregate {aggregate!r} is not 'sample' or 'mean'")
        self.dataset = dataset
        self.problem = problem or dataset.meta.problem
        self.aggregate = aggregate
        self.space = dataset.space()
        self._build_index()

    # -- index ---------------------------------------------------------------------------
    def _build_index(self) -> None:
        t = self.dataset.table
        names = self.space.names
        ids = {
            key: i for i, key in enumerate(zip(*(self.space.configs[n].tolist() for n in names)))
        }
        cols = [t.column(n).to_pylist() for n in names]
        row_cid = np.array([ids.get(key, -1) for key in zip(*cols)], dtype=np.int64)
        fids = self.space.fidelities
        row_fi = np.searchsorted(fids, t.column("fidelity").to_numpy())
        keep = row_cid >= 0  # configurations measured only at s < 1 are not in the space
        order = np.lexsort((row_fi, row_cid))
        order = order[keep[order]]
        shape = (self.space.n_configs, len(fids))
        flat = row_cid[order] * len(fids) + row_fi[order]
        count = np.bincount(flat, minlength=shape[0] * shape[1])
        start = np.concatenate([[0], np.cumsum(count)[:-1]])
        self._order, self._start, self._count = order, start.reshape(shape), count.reshape(shape)

        def col(name):
            if name not in t.column_names:
                return np.full(t.num_rows, np.nan)
            return t.column(name).to_numpy(zero_copy_only=False).astype(float)

        self._time, self._cost = col("time")[order], col("cost")[order]
        self._acc, self._price = col("accuracy")[order], col("price_per_s")[order]
        self.named_metrics = self.dataset.meta.named_metrics
        self._named = {m: col(m)[order] for m in self.named_metrics}
        self._timed_out = t.column("timed_out").to_numpy(zero_copy_only=False)[order]
        self._curves = None
        if "acc_curve" in t.column_names:
            curves = t.column("acc_curve").to_pylist()
            self._curves = [np.asarray(curves[i] or (), dtype=float) for i in order]
        self.true_time = self._mean(self._time)
        self.true_cost = self._mean(self._cost)
        self.true_accuracy = self._mean(self._acc)
        self._truth = {
            **dict(zip(METRICS, (self.true_time, self.true_cost, self.true_accuracy))),
            **{m: self._mean(v) for m, v in self._named.items()},
        }
        for a in (*self._truth.values(), self._count):
            a.setflags(write=False)

    def _mean(self, values: np.ndarray) -> np.ndarray:
        sums = np.add.reduceat(values, self._start.ravel().clip(max=len(values) - 1))
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(
                self._count.ravel() > 0, sums / np.maximum(self._count.ravel(), 1), np.nan
            )
        return mean.reshape(self._count.shape)

    def _fidelity_index(self, fidelity: float) -> int:
        fids = self.space.fidelities
        i = int(np.argmin(np.abs(np.asarray(fids) - fidelity)))
        if not math.isclose(fids[i], fidelity, rel_tol=1e-9):
            raise KeyError(
                f"{self.dataset.name}: fidelity {fidelity!r} is not measured (levels: {list(fids)})"
            )
        return i

    # -- running ---------------------------------------------------------------------------
    def run(
        self,
        config_id: int,
        fidelity: float = 1.0,
        rng: np.random.Generator | None = None,
        time_cap: float | None = None,
    ) -> Observation:
        """Run ``config_id`` at dataset size ``fidelity``.

        With repeated measurements one is drawn with ``rng`` (``aggregate="sample"``; without
        ``rng`` the mean is used). With ``time_cap`` a run longer than the cap is stopped
        there: it costs ``time_cap x price`` and reveals only the accuracy measured by then.
        """
        if not 0 <= config_id < self.space.n_configs:
            raise KeyError(
                f"{self.dataset.name}: config_id {config_id} is outside "
                f"0..{self.space.n_configs - 1}"
            )
        fi = self._fidelity_index(fidelity)
        start, count = self._start[config_id, fi], self._count[config_id, fi]
        if count == 0:
            raise KeyError(
                f"{self.dataset.name}: configuration {config_id} "
                f"({self.space.config(config_id)}) was not measured at s={fidelity}"
            )
        if self.aggregate == "sample" and rng is not None:
            row = start + (int(rng.integers(count)) if count > 1 else 0)
            time, cost, acc = self._time[row], self._cost[row], self._acc[row]
            timed_out, curve = bool(self._timed_out[row]), self._curve(row)
            named = {m: float(v[row]) for m, v in self._named.items()}
        else:
            sl = slice(start, start + count)
            time, cost = self._time[sl].mean(), self._cost[sl].mean()
            acc = self._acc[sl].mean() if count else math.nan
            timed_out, curve = bool(self._timed_out[sl].mean() >= 0.5), self._curve(start)
            named = {m: float(v[sl].mean()) for m, v in self._named.items()}
        if time_cap is not None and time > time_cap:
            return self._stopped(start, float(time_cap), curve)
        return Observation(
            float(time),
            float(cost),
            float(acc),
            timed_out,
            named,
            () if curve is None else tuple(curve.tolist()),
        )

    def _curve(self, row: int) -> np.ndarray | None:
        return None if self._curves is None else self._curves[row]

    def _stopped(self, row: int, cap: float, curve: np.ndarray | None) -> Observation:
        interval = self.dataset.meta.curve_interval_s
        known = ()
        if curve is not None and interval:
            known = tuple(curve[: int(cap // interval)].tolist())
        acc = known[-1] if known else math.nan
        return Observation(cap, cap * float(self._price[row]), acc, True, accuracy_curve=known)

    # -- ground truth (for metrics only) -----------------------------------------------------
    def true_value(self, config_id: int, fidelity: float = 1.0, metric: str | None = None):
        """Mean measured ``metric`` (default: the objective's) of a configuration."""
        return float(
            self._true(metric or self.problem.objective.metric)[
                config_id, self._fidelity_index(fidelity)
            ]
        )

    def _true(self, metric: str) -> np.ndarray:
        """(n_configs, n_fidelities) per-configuration means of ``metric``."""
        if metric not in self._truth:
            raise KeyError(
                f"{self.dataset.name}: metric {metric!r} is not measured "
                f"(measured: {', '.join(self.dataset.meta.measured)})"
            )
        return self._truth[metric]

    def feasible_mask(self, fidelity: float = 1.0) -> np.ndarray:
        """(n_configs,) true feasibility under the problem's constraints at ``fidelity``."""
        fi = self._fidelity_index(fidelity)
        mask = self._count[:, fi] > 0
        for c in self.problem.constraints:
            with np.errstate(invalid="ignore"):
                mask &= c.holds(self._true(c.metric)[:, fi])
        return mask

    def constraint_report(self) -> list[str]:
        """One line per constraint: how many configurations (at s = 1, true means) meet it,
        then the feasible count under all of them. A constraint met by every or by no
        configuration starts with ``warning:`` (a threshold in the wrong unit looks so)."""
        fi = self._fidelity_index(1.0)
        n = int((self._count[:, fi] > 0).sum())
        lines = []
        for c in self.problem.constraints:
            with np.errstate(invalid="ignore"):
                k = int(c.holds(self._true(c.metric)[:, fi]).sum())
            alarm = "warning: " if k in (0, n) else ""
            what = ("every" if k == n else "no") + " configuration meets it" if alarm else ""
            lines.append(
                f"{alarm}constraint {c.shown(self.dataset.meta.cost_unit)}: {k} of {n} "
                "configurations meet it"
                + (f" ({what}: is the threshold in the file's units?)" if alarm else "")
            )
        lines.append(f"feasible: {int(self.feasible_mask().sum())} of {n} configurations")
        return lines

    def spread_report(self, ratio: float = SPREAD_WARNING) -> list[str]:
        """One ``warning:`` line when the repeated rows of some configuration (at one
        fidelity) differ ``ratio``-fold or more in time, naming the widest and how many do
        (a unit mixed up, or one run that hung, looks so); none otherwise."""
        several = (self._count > 1).ravel()
        if not several.any():
            return []
        starts = self._start.ravel().clip(max=len(self._time) - 1)
        low = np.minimum.reduceat(self._time, starts)[several]
        high = np.maximum.reduceat(self._time, starts)[several]
        with np.errstate(divide="ignore", invalid="ignore"):
            spread = high / low
        wide = np.flatnonzero(spread >= ratio)
        if not len(wide):
            return []
        worst = wide[np.argmax(spread[wide])]
        cid, fi = divmod(int(np.flatnonzero(several)[worst]), len(self.space.fidelities))
        config = ", ".join(f"{k}={v}" for k, v in self.space.config(cid).items())
        at = "" if len(self.space.fidelities) == 1 else f" at s={self.space.fidelities[fi]:g}"
        return [
            f"warning: {len(wide)} configuration(s) have repeated rows whose times differ "
            f"{ratio:g}x or more; the widest, {config}{at}: {_seconds(low[worst])} to "
            f"{_seconds(high[worst])} ({spread[worst]:.3g}x); a run draws one of them"
        ]

    def optimum(self, fidelity: float = 1.0) -> int | None:
        """config_id of the best truly feasible configuration at ``fidelity`` (None if none)."""
        mask = self.feasible_mask(fidelity)
        if not mask.any():
            return None
        fi = self._fidelity_index(fidelity)
        obj = self.problem.objective
        values = self._true(obj.metric)[:, fi]
        values = np.where(mask, values if obj.direction == "min" else -values, np.inf)
        return int(np.argmin(values))

    def is_feasible(self, config_id: int | None, fidelity: float = 1.0) -> bool:
        return config_id is not None and bool(self.feasible_mask(fidelity)[config_id])

    def summary(self) -> dict[str, Any]:
        """The facts ``farm datasets show`` prints about the dataset and its ground truth
        (JSON-ready)."""
        dataset, space, best = self.dataset, self.space, self.optimum()
        meta = dataset.meta
        return {
            "name": dataset.name,
            "title": meta.title,
            "source": meta.source,
            "licence": meta.licence,
            "citation": meta.citation,
            "n_rows": dataset.table.num_rows,
            "n_configs": space.n_configs,
            "dimensions": [d.to_dict() for d in meta.dimensions],
            "fidelities": list(space.fidelities),
            "fidelity_name": meta.fidelity_name,
            "measured": list(meta.measured),
            "price_model": meta.price_model,
            "cost_unit": meta.cost_unit,
            "objective": str(meta.problem.objective),
            "constraints": [str(c) for c in meta.problem.constraints],
            "n_feasible": int(self.feasible_mask().sum()),
            "n_timed_out_rows": int(pc.sum(dataset.table.column("timed_out")).as_py() or 0),
            "optimum": None
            if best is None
            else {
                "config_id": best,
                "config": space.config(best),
                meta.problem.objective.metric: float(self.true_value(best)),
            },
            "notes": meta.notes,
        }


def _seconds(x: float) -> str:
    """A time in seconds as a reader takes it in: ``1,600 s``, ``2.5 s``."""
    return f"{x:,.0f} s" if x >= 100 else f"{x:.3g} s"
