"""Running a sweep: expand the spec, skip what the store says is finished, run the rest on Ray
(or in-process), store each outcome as it arrives, track it in MLflow, and summarise.

The store is the source of truth: an interrupted sweep started again runs only the runs
without a ``done`` record (failed ones included), and MLflow logging is idempotent per run
key, so nothing is run or logged twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from farm.run.metrics import final_quality, worse_quantile
from farm.run.spec import RunSpec
from farm.sweep.spec import SweepSpec, expand
from farm.sweep.store import Store

__all__ = ["SUMMARY_COLUMNS", "SweepReport", "run_sweep", "summary_rows"]


@dataclass
class SweepReport:
    """What one invocation of a sweep did."""

    runs: list[RunSpec]
    skipped: int = 0                     # already finished before this invocation
    done: int = 0
    failed: int = 0
    failures: list[dict] = field(default_factory=list)
    tracking_uri: str | None = None
    tracking_offline: bool = False
    wall_s: float = 0.0

    @property
    def complete(self) -> bool:
        return self.failed == 0 and self.skipped + self.done == len(self.runs)


def run_sweep(spec: SweepSpec, out: str | Path, *, source: str = "spec",
              address: str | None = None, backend: str | None = None,
              max_in_flight: int | None = None, tracking: bool | None = None,
              tracking_uri: str | None = None, progress: bool = True,
              on_submit: Callable[[RunSpec, dict], None] | None = None) -> SweepReport:
    """Run (or resume) ``spec`` into the output folder ``out``; arguments override the spec's
    ``runtime`` and ``tracking`` sections."""
    from oracle.registry import load

    t0 = time.perf_counter()
    runs = expand(spec, source)
    for name in sorted({r.dataset for r in runs}):
        load(name)  # a missing dataset is bad input, reported before anything runs
    store = Store(out)
    store.write_spec(spec.model_dump(mode="json"))
    finished = store.finished()
    todo = [r for r in runs if r.run_key not in finished]
    report = SweepReport(runs, skipped=len(runs) - len(todo))

    tracker = None
    if spec.tracking.enabled if tracking is None else tracking:
        from farm.sweep.tracking import Tracker

        tracker = Tracker(out, tracking_uri or spec.tracking.uri, spec.tracking.experiment,
                          spec.name)
        report.tracking_uri = tracker.uri
        tracker.start_sweep({"sweep": spec.name, "runs": len(runs)})
        keys = {r.run_key for r in runs}  # catch up on runs stored while tracking was down
        for record in store.records():
            if record["run_key"] in keys and record["run_key"] in finished:
                tracker.log_record(record)

    outcomes = _outcomes(todo, spec, backend, address, max_in_flight, on_submit)
    bar = _progress(len(runs), report.skipped, spec.name, progress)
    try:
        for o in outcomes:
            if o.error is None:
                record = store.write_result(o.spec, o.result, attempts=o.attempts,
                                            duration_s=o.duration_s, cpu_s=o.cpu_s,
                                            where=o.where)
                report.done += 1
            else:
                record = store.write_failure(o.spec, o.error, attempts=o.attempts,
                                             duration_s=o.duration_s, where=o.where)
                report.failed += 1
                report.failures.append(record)
            if tracker is not None:
                tracker.log_record(record)
            bar.update(1)
            if report.failed:
                bar.set_postfix(failed=report.failed)
    finally:
        outcomes.close()
        bar.close()
        store.write_index()
        if tracker is not None:
            tracker.end_sweep(failed=not report.complete)
            report.tracking_offline = tracker.offline
        report.wall_s = time.perf_counter() - t0
    return report


def _outcomes(todo, spec, backend, address, max_in_flight, on_submit):
    backend = backend or spec.runtime.backend
    if backend == "serial":
        from farm.sweep.serial import run_serially

        return run_serially(todo)
    from farm.sweep.ray_runtime import init_ray, run_on_ray

    if todo:
        init_ray(address)
    return run_on_ray(todo, max_in_flight=spec.runtime.max_in_flight if max_in_flight is None
                      else max_in_flight, max_retries=spec.runtime.max_retries,
                      executor=spec.runtime.executor, chunk_size=spec.runtime.chunk_size,
                      on_submit=on_submit)


class _NoBar:
    def update(self, n):
        pass

    def set_postfix(self, **kw):
        pass

    def close(self):
        pass


def _progress(total: int, initial: int, name: str, enabled: bool):
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc=name, unit="run", dynamic_ncols=True)


SUMMARY_COLUMNS = ["dataset", "optimizer", "params", "runs", "failed", "metric",
                   "final_p50", "final_p90", "cost_p50", "evals_p50", "latency_p50_s"]


def summary_rows(store: Store, runs: list[RunSpec]) -> list[dict]:
    """One row per (dataset, optimizer, parameters; those set away from the defaults shown):
    runs done / failed, the final quality metric (CNO or Accuracy_C) p50 / p90 over seeds
    (worse side, ``farm.run.metrics``: the numbers ``farm report`` shows), median exploration
    cost, evaluations and recommendation latency."""
    keys = {r.run_key for r in runs}
    groups: dict[tuple, list[dict]] = {}
    for rec in store.records():
        if rec["run_key"] not in keys:
            continue
        s = rec["spec"]
        group = (s["dataset"], s["optimizer"], json.dumps(s["params"], sort_keys=True))
        groups.setdefault(group, []).append(rec)
    rows = []
    for (dataset, optimizer, params), recs in sorted(groups.items()):
        done = [r["summary"] for r in recs if r["status"] == "done"]
        metric = done[0]["metric"] if done else None
        final = np.array([final_quality(s) for s in done], dtype=float)
        rows.append({
            "dataset": dataset, "optimizer": optimizer, "params": _short(optimizer, params),
            "runs": len(done), "failed": len(recs) - len(done), "metric": metric,
            "final_p50": worse_quantile(final, 0.5, metric) if done else None,
            "final_p90": worse_quantile(final, 0.9, metric) if done else None,
            "cost_p50": float(np.median([s["exploration_cost"] for s in done])) if done else None,
            "evals_p50": float(np.median([s["n_evaluations"] for s in done])) if done else None,
            "latency_p50_s": float(np.median([s["recommendation_latency_s"]["median"] or 0.0
                                              for s in done])) if done else None,
        })
    return rows


def _short(optimizer: str, params_json: str) -> str:
    """The parameters that differ from the optimizer's defaults, ``k=v,...`` (``-``: none)."""
    from optimizers.registry import get

    defaults = {p.name: p.default for p in get(optimizer).params}
    params = json.loads(params_json)
    return ",".join(f"{k}={v}" for k, v in params.items() if defaults.get(k) != v) or "-"
