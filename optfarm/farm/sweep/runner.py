"""Running a sweep: expand the spec, skip what the store says is finished, run the rest on Ray
(or in-process), store each outcome as it arrives, track it in MLflow, and summarise.

The store is the source of truth: an interrupted sweep started again runs only the runs
without an intact ``done`` record (failed and damaged ones included: a damaged record or trace
is quarantined and its run redone, one line each), and MLflow logging is exactly once per run
key, so nothing is run or logged twice. One driver per output folder (``Store.lock``). Each
record is read once and each run key computed once per invocation.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from optfarm.farm.run.metrics import final_quality, worse_quantile
from optfarm.farm.run.spec import RunSpec, problem_for
from optfarm.farm.store.store import DamagedFile, Store, StoreError, spec_to_dict
from optfarm.farm.sweep.spec import DEFAULT_MAX_RUNS, SweepSpec, expand_keyed, hide_password

if TYPE_CHECKING:
    from optfarm.farm.tracking.tracking import Statistics, Tracker

__all__ = ["SweepOptions", "SweepReport", "run_sweep", "summary_rows"]


@dataclass
class SweepReport:
    """What one invocation of a sweep did."""

    runs: list[RunSpec]
    keys: list[str] = field(default_factory=list)  # the runs' keys, in order
    skipped: int = 0  # already finished before this invocation
    done: int = 0
    failed: int = 0
    redone: int = 0  # damaged runs quarantined and run again
    failures: list[dict] = field(default_factory=list)
    records: dict[str, dict] = field(default_factory=dict)  # run_key -> record, all stored
    tracking_uri: str | None = None
    tracking_offline: bool = False
    mlflow_page: tuple[str, str | None] | None = None  # the runs' page in MLflow's UI, its command
    wall_s: float = 0.0

    @property
    def complete(self) -> bool:
        return self.failed == 0 and self.skipped + self.done == len(self.runs)


@dataclass(frozen=True)
class SweepOptions:
    """How one invocation runs a sweep, beyond its spec; a field left None keeps the spec's
    ``runtime`` or ``tracking`` value.

    ``source`` names the spec in messages; ``address`` the Ray cluster to join (else
    ``$RAY_ADDRESS``, else a local Ray); ``tracking_uri``, given, is kept in ``sweep.json``
    (else the one the sweep was started with); ``max_runs`` bounds the expansion; ``verify``
    hashes stored files even when unchanged (``optfarm.farm.store.store.VerifiedFiles``);
    ``on_submit(spec, where)`` is called as each run goes out (Ray); ``run=False`` runs
    nothing and records what is stored; ``statistics``: what the MLflow variant and sweep runs
    carry (``optfarm.farm.tracking.tracking``); ``ray_start_wait``: seconds a local Ray's start
    may take before the sweep runs in-process instead (default
    ``optfarm.farm.runtime.ray_setup.start_wait``)."""

    source: str = "spec"
    address: str | None = None
    backend: str | None = None
    max_in_flight: int | None = None
    tracking: bool | None = None
    tracking_uri: str | None = None
    artifacts: bool | None = None
    max_runs: int = DEFAULT_MAX_RUNS
    progress: bool = True
    verify: bool = False
    on_submit: Callable[[RunSpec, dict], None] | None = None
    run: bool = True
    statistics: Statistics | None = None
    ray_start_wait: float | None = None


def run_sweep(
    spec: SweepSpec, out: str | Path, options: SweepOptions | None = None, **overrides
) -> SweepReport:
    """Run (or resume) ``spec`` into the output folder ``out`` with ``options`` (default
    ``SweepOptions()``; its fields also taken as keywords, which override it: ``run_sweep(spec,
    out, progress=False)``).
    Ray is started (or joined) before anything is logged to MLflow, so a Ray that cannot start
    (``RayStartError``) leaves no MLflow run. ``run=False`` runs nothing and records what is
    stored (the index; MLflow: the stored runs logged, the sweep run FAILED), as after a
    driver lost with its head (``optfarm.farm.runtime.driver``).
    Stored files unchanged since they were written or verified are not hashed again unless
    ``verify`` (``optfarm.farm.store.store.VerifiedFiles`` says what that keeps).
    Raises FolderBusy when another driver holds ``out``, DamagedFile when its ``sweep.json``
    is damaged, StoreError when a file cannot be written (each naming the path; its
    ``during_runs`` set once runs were being stored)."""
    options = replace(options or SweepOptions(), **overrides)
    t0 = time.perf_counter()
    keyed = expand_keyed(spec, options.source, max_runs=options.max_runs)  # keys computed once
    runs = list(keyed.values())
    _check_problems(runs)
    store = Store(out)
    checkpoints = store.checkpoints()  # a bad $OPTFARM_CHECKPOINT_S before anything is written
    with store.lock():
        written = _write_spec(store, spec, options)
        report = SweepReport(runs, list(keyed))
        todo = _left_to_run(store, keyed, report, options.verify)
        if checkpoints is not None:
            checkpoints.drop_stored(k for k in report.records if _finished(report.records, k))
        backend = options.backend or spec.runtime.backend
        if options.run and todo and backend != "serial":
            backend = _start_ray(options, len(todo))
        tracker = _start_tracking(spec, out, options, written, keyed, report)
        try:
            _run_todo(
                todo if options.run else [],
                spec,
                store,
                checkpoints,
                tracker,
                report,
                backend,
                options.max_in_flight,
                options.on_submit,
                options.progress and options.run,
            )
        except StoreError as e:
            e.during_runs = True  # some runs may be stored: the message says they are kept
            raise
    report.wall_s = time.perf_counter() - t0
    return report


def _start_ray(options: SweepOptions, runs: int) -> str:
    """The backend the ``runs`` left go to: "ray" once Ray is joined or started here, "serial"
    when a local Ray did not start within its wait (``options.ray_start_wait``, default
    ``optfarm.farm.runtime.ray_setup.start_wait``), said in one line: the runs give the same
    results in this process."""
    from optfarm.farm.runtime.ray_runtime import init_ray
    from optfarm.farm.runtime.ray_setup import LocalRayDidNotStart

    try:
        init_ray(options.address, start_wait=options.ray_start_wait)
    except LocalRayDidNotStart as e:
        print(
            f"farm: {e}; running the {runs} runs in this process instead, one after the other, "
            "as --serial does (a longer wait: --ray-start-wait SECONDS)",
            file=sys.stderr,
            flush=True,
        )
        return "serial"
    return "ray"


def _check_problems(runs: list[RunSpec]) -> None:
    """A missing dataset, or a problem naming a metric it does not measure, is bad input,
    reported before anything runs."""
    from optfarm.oracle.registry import load

    datasets = {name: load(name) for name in sorted({r.dataset for r in runs})}
    for name, objective, constraints in {(r.dataset, r.objective, r.constraints) for r in runs}:
        problem_for(datasets[name], objective, constraints)


def _write_spec(store: Store, spec: SweepSpec, options: SweepOptions) -> dict:
    """The ``sweep.json`` written: the spec with this invocation's tracking URI and artifacts,
    and the sweep id (kept from a sweep started before)."""
    previous = store.read_sweep() or {}
    if not previous and store.holds_records():
        raise DamagedFile(
            store.show(store.root / "sweep.json"),
            "missing, though the "
            "folder holds stored runs (without it, a new sweep id would log "
            "them to MLflow again)",
        )
    sweep_id = previous.get("sweep_id") or uuid.uuid4().hex
    stored = spec.model_dump(mode="json")
    # the tracking URI given now, else the one the sweep was started with (docs/guide/sweeps.md)
    uri = options.tracking_uri or (previous.get("tracking") or {}).get("uri")
    if uri:
        stored["tracking"]["uri"] = uri
    if options.artifacts is not None:
        stored["tracking"]["artifacts"] = options.artifacts
    store.write_spec(stored, sweep_id)
    return {**stored, "sweep_id": sweep_id}


def _left_to_run(
    store: Store, keyed: dict[str, RunSpec], report: SweepReport, verify: bool
) -> list[RunSpec]:
    """The runs without an intact ``done`` record, in order; ``report`` given the intact
    records and the count of runs skipped."""
    report.records = _intact_records(store, report, verify)
    todo = [r for k, r in keyed.items() if not _finished(report.records, k)]
    report.skipped = len(report.runs) - len(todo)
    return todo


def _finished(records: dict[str, dict], key: str) -> bool:
    return key in records and records[key]["status"] == "done"


def _start_tracking(
    spec: SweepSpec,
    out: str | Path,
    options: SweepOptions,
    written: dict,
    keyed: dict[str, RunSpec],
    report: SweepReport,
) -> Tracker | None:
    """The sweep's MLflow tracker, started (None: tracking off); once MLflow answers, the
    runs stored while tracking was down are logged."""
    if not (spec.tracking.enabled if options.tracking is None else options.tracking):
        return None
    from optfarm.farm.tracking.tracking import Tracker

    tracker = Tracker(
        out,
        written["tracking"]["uri"],
        spec.tracking.experiment,
        spec.name,
        written["sweep_id"],
        written["tracking"]["artifacts"],
        options.statistics,
        spec.description,
    )
    report.tracking_uri = hide_password(tracker.uri)  # printed, in --json
    if tracker.start(
        {k: spec_to_dict(r) for k, r in keyed.items()},
        {"sweep": spec.name, "runs": len(keyed)},
        report.records,
    ):
        for key in keyed:  # catch up on runs stored while tracking was down
            if _finished(report.records, key):
                tracker.submit(report.records[key])
    return tracker


def _intact_records(store: Store, report: SweepReport, verify: bool) -> dict[str, dict]:
    """The store's intact records; each damaged run's files quarantined, one line each."""
    scan = store.scan(trust_unchanged=not verify)
    for damage in scan.damaged:
        folder = store.quarantine(damage)
        print(
            f"farm: {damage}; moved to {folder}, run {damage.run_key} is run again", file=sys.stderr
        )
    report.redone = len(scan.damaged)
    return scan.records


def _run_todo(
    todo, spec, store, checkpoints, tracker, report, backend, max_in_flight, on_submit, progress
) -> None:
    outcomes = _outcomes(todo, spec, backend, max_in_flight, on_submit, checkpoints)
    bar = _progress(len(report.runs), report.skipped, spec.name, progress)
    storing = None  # the run being stored: on disk, perhaps, before Ctrl-C lets it be counted
    try:
        for o in outcomes:
            storing = o.spec.run_key
            if o.error is None:
                record = store.write_result(
                    o.spec,
                    o.result,
                    attempts=o.attempts,
                    duration_s=o.duration_s,
                    cpu_s=o.cpu_s,
                    where=o.where,
                )
                report.done += 1
            else:
                record = store.write_failure(
                    o.spec, o.error, attempts=o.attempts, duration_s=o.duration_s, where=o.where
                )
                report.failed += 1
                report.failures.append(record)
            report.records[record["run_key"]] = record
            if tracker is not None:
                tracker.submit(record, None if o.result is None else o.result.trace)
            bar.update(1)
            if report.failed:
                bar.set_postfix(failed=report.failed)
    finally:
        outcomes.close()
        bar.close()
        # an error on its way out (disk full, Ctrl-C) is the one to report, not a second one
        quiet = contextlib.suppress(StoreError) if sys.exc_info()[1] else contextlib.nullcontext()
        with quiet:
            if storing is not None and storing not in report.records:
                if (record := store.record(storing)) is not None:
                    report.records[storing] = record
            store.flush_segment()
            store.refresh_index(report.records.values())
            store.save_verified()
        if tracker is not None:
            # interrupted or lost: what is not logged yet is stored, and `farm sync` logs it
            tracker.close(
                failed=not report.complete,
                drain=sys.exc_info()[1] is not None,
                records=report.records,
            )
            report.tracking_offline = tracker.offline
            report.mlflow_page = tracker.runs_page()


def _outcomes(todo, spec, backend, max_in_flight, on_submit, checkpoints):
    from optfarm.farm.runtime.serial import run_serially

    if backend == "serial" or not todo:  # nothing to run: no Ray
        return run_serially(todo, checkpoints)
    from optfarm.farm.runtime.ray_runtime import run_on_ray

    return run_on_ray(
        todo,
        max_in_flight=spec.runtime.max_in_flight if max_in_flight is None else max_in_flight,
        max_retries=spec.runtime.max_retries,
        executor=spec.runtime.executor,
        chunk_size=spec.runtime.chunk_size,
        on_submit=on_submit,
        checkpoints=checkpoints,
    )


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


def summary_rows(records: dict[str, dict], keys: Iterable[str]) -> list[dict]:
    """One row per (dataset, optimizer, parameters; those set away from the defaults shown) of
    the ``records`` (run_key -> record) of the runs ``keys``: runs done / failed, the final quality
    metric (CNO or Accuracy_C) p50 / p90 over seeds (worse side, ``optfarm.farm.run.metrics``: the
    numbers ``farm report`` shows), median exploration cost (in ``cost_unit``, the dataset's),
    evaluations and recommendation latency."""
    rows = []
    for (dataset, optimizer, params), recs in sorted(_by_variant(records, set(keys)).items()):
        done = [r["summary"] for r in recs if r["status"] == "done"]
        rows.append(
            {
                "dataset": dataset,
                "optimizer": optimizer,
                "params": _short(optimizer, params),
                "runs": len(done),
                "failed": len(recs) - len(done),
                "metric": done[0]["metric"] if done else None,
                **_done_medians(done),
            }
        )
    return rows


def _by_variant(records: dict[str, dict], keys: set[str]) -> dict[tuple, list[dict]]:
    """The records of the runs ``keys`` grouped by (dataset, optimizer, parameters JSON)."""
    groups: dict[tuple, list[dict]] = {}
    for rec in records.values():
        if rec["run_key"] not in keys:
            continue
        s = rec["spec"]
        group = (s["dataset"], s["optimizer"], json.dumps(s["params"], sort_keys=True))
        groups.setdefault(group, []).append(rec)
    return groups


_MEDIANS = ("final_p50", "final_p90", "cost_p50", "cost_unit", "evals_p50", "latency_p50_s")


def _done_medians(done: list[dict]) -> dict[str, Any]:
    """The ``_MEDIANS`` columns of ``summary_rows`` over the summaries ``done`` (all None
    when no run is done)."""
    if not done:
        return dict.fromkeys(_MEDIANS)
    metric = done[0]["metric"]
    final = np.array([final_quality(s) for s in done], dtype=float)
    return {
        "final_p50": worse_quantile(final, 0.5, metric),
        "final_p90": worse_quantile(final, 0.9, metric),
        "cost_p50": float(np.median([s["exploration_cost"] for s in done])),
        "cost_unit": done[0]["units"]["cost"],
        "evals_p50": float(np.median([s["n_evaluations"] for s in done])),
        "latency_p50_s": float(
            np.median([s["recommendation_latency_s"]["median"] or 0.0 for s in done])
        ),
    }


def _short(optimizer: str, params_json: str) -> str:
    """The parameters that differ from the optimizer's defaults, ``k=v,...`` (``-``: none)."""
    from optfarm.optimizers.registry import get

    defaults = {p.name: p.default for p in get(optimizer).params}
    params = json.loads(params_json)
    return ",".join(f"{k}={v}" for k, v in params.items() if defaults.get(k) != v) or "-"
