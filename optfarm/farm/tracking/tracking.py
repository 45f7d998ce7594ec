"""MLflow tracking of sweeps (ARCHITECTURE.md, "Where each concept lives"): every MLflow call of
optfarm is in this module and its helpers, one job each: ``mlflow_connection`` (the URI, the
store and its repair, the experiment), ``mlflow_mapping`` (stored run -> MLflow run, pure
functions), ``mlflow_logger`` (the background thread), ``mlflow_bulk`` (an MLflow database,
sqlite or PostgreSQL, written in batches) and ``variants`` (the variant level, names, parameters).

Layout: one parent run per sweep, one nested run per variant (dataset x optimizer x
parameters x problem) and, nested in it, one run per run key (a seed). A variant run spans its
own seeds: created when its first seed run is logged, starting at the earliest start of its
seeds stored then, ended when its last seed is logged (FINISHED, or FAILED when a seed failed)
at that seed's end. Its seed-aggregated statistics, and the parent's counts and sensitivity
ranking, are those the layer above computes (``Statistics``, handed down by ``run_sweep``'s
caller; none without it), logged when the sweep ends for the variants that got news. The
parent's span covers every invocation that logged something.

Exactly once per run key and per variant, whatever happens: the parent run is tagged with the
sweep's id (``optfarm.sweep_id``, kept in ``sweep.json``, so it moves with the folder), each
variant run with the sweep id and its variant key, each seed run with the sweep id and its run
key. They are *found* by these tags on the tracking server (``search_runs``) before anything is
created, so a moved or copied folder, a lost cache, a killed driver or a second ``farm sync``
finds the runs already there. A seed run left RUNNING by a killed driver (an orphan) is
completed when its run is stored, else marked FAILED when the sweep ends.

Every stop closes the sweep's runs: ``close(drain=True)`` (a signal, a lost Ray head, a Ray
that did not start) drops what is still queued (it is stored; the next run of the sweep or
``farm sync`` logs it), ends each open variant run KILLED (seeds missing) or FAILED, and the
parent FAILED. ``close_open_runs`` does the same from another process, e.g. when the driver
itself was ended. A later run of the sweep reopens what it adds to.

``mlflow_runs.jsonl`` in the output folder is an append-only cache of the runs logged and of
each end of the sweep: a resumed sweep whose runs are all logged, and whose last invocation
ended FINISHED, does not open MLflow at all (a finished 20,000-run sweep resumes in the time
it takes without tracking); with runs to log it asks the server nothing per run it finds
there. It is never the truth: a moved folder, another URI or a damaged line sends the tracker
to the server.

Cost: the logger thread writes the runs queued together: to the folder's own sqlite store (or
any ``sqlite:///`` or ``postgresql+psycopg://`` database URI, e.g. the database a team's
``mlflow server`` serves), each created complete in one transaction per batch
(``optfarm.farm.tracking.mlflow_bulk``); to a tracking server that runs optfarm's MLflow app
(``optfarm.farm.tracking.mlflow_server_app``) the same batch in one request, which the server writes
so; to any other tracking server each run is one ``create_run``, one ``log_batch`` (parameters,
metrics and tags together) and one status update, several runs at a time
(``_CLIENT_THREADS``). The parent run is touched once when a sweep starts and once when
it ends.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optfarm.farm.store.store import Store, fault_point
from optfarm.farm.tracking.mlflow_connection import Connection, resolve_uri, runs_page
from optfarm.farm.tracking.mlflow_logger import Logger
from optfarm.farm.tracking.mlflow_mapping import (
    NewRun,
    RunContext,
    seed_run,
    span_ms,
    variant_run,
    variant_span,
    variant_status,
)
from optfarm.farm.tracking.uris import hide_password

__all__ = ["CACHE", "Statistics", "Tracker", "close_open_runs", "resolve_uri", "sweep_uri", "sync"]

CACHE = "mlflow_runs.jsonl"
_MAX_ENTITIES = 1000  # MLflow's limits per log_batch call: 1000 entities, 100 params
_MAX_PARAMS = 100
_CLIENT_THREADS = 8  # runs logged at once to a tracking server


@dataclass(frozen=True)
class Statistics:
    """The seed-aggregated numbers of the variant and sweep runs, computed by the layer above
    (the report's, ``optfarm.farm.report.tracked.STATISTICS``) and handed down: ``variant(summaries,
    traces)`` -> the metrics of one variant's finished runs (``traces``: their trace tables'
    ``columns``, concatenated); ``sweep(summaries)`` -> (metrics, tags) of the parent run."""

    columns: tuple[str, ...]
    variant: Callable[[list[dict], Any], dict[str, float]]
    sweep: Callable[[list[dict]], tuple[dict[str, float], dict[str, str]]]


def sweep_uri(out: str | Path, uri: str | None = None) -> str:
    """The tracking URI of the sweep stored in ``out``: the one given, else the one its sweep
    was run with (kept in ``sweep.json``), else ``resolve_uri``'s default."""
    spec = Store(out).read_spec() or {}
    return resolve_uri(out, uri or (spec.get("tracking") or {}).get("uri"))


class Tracker:
    """Logs a sweep's stored runs to one tracking URI (see the module docstring): ``start``,
    then ``submit`` each record as it is stored, then ``close``."""

    def __init__(
        self,
        out: str | Path,
        uri: str | None = None,
        experiment: str | None = None,
        sweep_name: str | None = None,
        sweep_id: str | None = None,
        artifacts: bool = False,
        statistics: Statistics | None = None,
        description: str = "",
    ):
        self.store = Store(out)
        self.uri = resolve_uri(out, uri)
        self.sweep_name = sweep_name or self.store.location.local_dir.name
        self.sweep_id = (
            sweep_id or (self.store.read_sweep() or {}).get("sweep_id") or self.sweep_name
        )
        self.experiment = experiment or self.sweep_name
        self.artifacts = artifacts
        self.statistics = statistics
        self.parent: str | None = None
        self._conn = Connection(
            self.uri,
            self.store.location.uri,
            self.store.location.local_dir,
            self.experiment,
            description,
        )
        self._cache: list[dict] = []
        self._runs: dict[str, tuple[str, str]] = {}  # run key -> (run id, status) on the server
        self._orphans: set[str] = set()  # run keys whose run was found RUNNING
        self._ctx: RunContext | None = None
        self._variant_runs: dict[str, tuple[str, str]] = {}  # variant key -> (run id, status)
        self._spans: dict[str, tuple[int, int]] = {}  # run key -> its stored run's span
        self._news: set[str] = set()  # variants whose statistics are due
        self._traces: dict[str, Any] = {}  # run key -> trace, for the statistics
        self._logger: Logger | None = None
        self._started_ms = 0  # when this invocation started

    @property
    def offline(self) -> bool:
        return self._conn.offline

    def runs_page(self) -> tuple[str, str | None] | None:
        """Where the sweep's runs open in MLflow's UI and what serves it (``runs_page``), once
        the experiment is open."""
        if self._conn.experiment_id is None:
            return None
        return runs_page(hide_password(self.uri), self._conn.experiment_id)

    # -- the sweep -------------------------------------------------------------------------------
    def start(
        self,
        specs: dict[str, dict],
        params: dict[str, Any] | None = None,
        records: dict[str, dict] | None = None,
        wait: bool = False,
    ) -> bool:
        """Learn what is logged of the runs ``specs`` (run key -> spec as stored; ``records``:
        the runs stored before). When the cache says every one is stored, logged and the sweep
        ended FINISHED, there is nothing to do; else start the logger, which first opens the
        store (seconds: the sweep's runs go on meanwhile), finds (by its sweep id tag) or
        creates the sweep's parent run and marks it RUNNING, and finds its variant and seed
        runs. With ``wait``, returns once that is done: False when offline."""
        self._started_ms = int(time.time() * 1000)
        records = dict(records or {})  # a copy: the sweep adds records while the logger reads
        self._cache = self._read_cache()
        if self._finished_and_logged(specs, records):
            return True
        self._logger = Logger(lambda: self._begin(specs, params or {}, records), self._write)
        self._logger.start()
        if wait:
            self._logger.begun.wait()
        return not self.offline

    def _finished_and_logged(self, specs: Mapping[str, dict], records: Mapping[str, dict]) -> bool:
        uri = hide_password(self.uri)  # as the cache keeps it
        ends = [
            e
            for e in self._cache
            if "closed" in e and e.get("uri") == uri and e.get("sweep") == self.sweep_id
        ]
        if not ends or ends[-1]["closed"] != "FINISHED":
            return False
        parent = ends[-1]["parent"]  # run ids are unique: its runs' lines are its own
        logged = {
            e["key"]: e["status"] for e in self._cache if "key" in e and e["parent"] == parent
        }
        if all(
            records.get(k, {}).get("status") == "done" and logged.get(k) == "FINISHED"
            for k in specs
        ):
            self.parent = parent
            self._runs = {k: ("", "FINISHED") for k in specs}
            return True
        return False

    def _begin(
        self, specs: dict[str, dict], params: dict[str, Any], records: dict[str, dict]
    ) -> None:
        if not self._conn.open():
            return
        c = self._conn
        try:
            self._ctx = RunContext.of(self.sweep_id, self.sweep_name, specs)
            self._spans = {k: span_ms(r) for k, r in records.items()}
            found = c.search(
                f"tags.`optfarm.sweep_id` = '{self.sweep_id}' and tags.`optfarm.kind` = 'sweep'"
            )
            if found:
                self.parent = min(found, key=lambda r: r.info.start_time).info.run_id
                c.client.update_run(self.parent, status="RUNNING")
            else:
                first = min((s for s, _ in self._spans.values()), default=None)
                self.parent = self._create_parent(params, first)
            self._runs = {
                e["key"]: (e["run"], e["status"])
                for e in self._cache
                if e.get("parent") == self.parent and "key" in e
            }
            if found and any(
                self._runs.get(k, ("", ""))[1] not in ("FINISHED", "FAILED") for k in specs
            ):
                self._runs.update(self._nested_runs())
            if found:
                self._find_variants(records)
        except Exception as e:
            c.warn("start sweep", e)

    def _create_parent(self, params: dict[str, Any], start_ms: int | None) -> str:
        from mlflow.entities import Param

        client, now = self._conn.client, self._started_ms
        run = client.create_run(
            self._conn.experiment_id,
            run_name=self.sweep_name,
            start_time=now if start_ms is None else min(now, start_ms),
            tags={
                "optfarm.sweep": self.sweep_name,
                "optfarm.sweep_id": self.sweep_id,
                "optfarm.kind": "sweep",
                "optfarm.out": self.store.location.absolute(),
            },
        )
        client.log_batch(
            run.info.run_id, params=[Param(k, str(v)) for k, v in sorted(params.items())]
        )
        if self.artifacts and self.store.read_sweep() is not None:
            with self.store.local_copy(self.store.root / "sweep.json") as spec:
                client.log_artifact(run.info.run_id, str(spec))
        return run.info.run_id

    def _find_variants(self, records: Mapping[str, dict]) -> None:
        """The sweep's variant runs by tag; those left RUNNING (an interrupted sweep) or
        whose statistics miss finished seeds are due for statistics."""
        done: dict[str, int] = {}
        for key, v in self._ctx.layout.variant_of.items():
            if records.get(key, {}).get("status") == "done":
                done[v] = done.get(v, 0) + 1
        for r in self._conn.search(
            f"tags.`optfarm.sweep_id` = '{self.sweep_id}' and tags.`optfarm.kind` = 'variant'"
        ):
            v, status = r.data.tags["optfarm.variant_key"], r.info.status
            if v not in self._variant_runs or status != "RUNNING":
                self._variant_runs[v] = (r.info.run_id, status)
            if status == "RUNNING" or r.data.metrics.get("runs_done", 0) != done.get(v, 0):
                self._news.add(v)

    def _nested_runs(self) -> dict[str, tuple[str, str]]:
        """run_key -> (run id, status) of the sweep's seed runs on the server (a finished one
        preferred where, from older versions, a key has several)."""
        out: dict[str, tuple[str, str]] = {}
        for r in self._conn.search(
            f"tags.`optfarm.sweep_id` = '{self.sweep_id}' and tags.`optfarm.kind` = 'run'"
        ):
            key, status = r.data.tags["optfarm.run_key"], r.info.status
            if key not in out or out[key][1] != "FINISHED":
                out[key] = (r.info.run_id, status)
            if status == "RUNNING":
                self._orphans.add(key)
        return out

    def close(
        self, failed: bool = False, drain: bool = False, records: dict[str, dict] | None = None
    ) -> None:
        """End this invocation's tracking; ``records``: every stored run of the sweep.

        Normally (``drain`` False): wait for the runs submitted, mark orphans no stored run
        completed FAILED, end the variants still open, log the statistics of the variants that
        got news and of the sweep, and end the parent run (FAILED when ``failed``: the sweep is
        not complete). On a stop (``drain``: Ctrl-C, SIGTERM, SIGHUP, a lost Ray head, a Ray
        that did not start): drop the runs not logged yet (they are stored: the next run of
        the sweep or ``farm sync`` logs them), end every open variant run KILLED (seeds
        missing) or FAILED and the parent FAILED, without statistics (the next invocation
        logs them). No run of the sweep is left RUNNING either way."""
        if self._logger is None:
            return
        self._logger.stop(drop=drain)
        self._logger = None
        if self.offline:
            return
        c = self._conn
        try:
            for key in sorted(self._orphans):
                run_id, status = self._runs[key]
                if status == "RUNNING":
                    c.client.set_tag(
                        run_id,
                        "optfarm.error",
                        "orphan: its driver stopped "
                        "before the run was logged; the run is not stored",
                    )
                    c.client.set_terminated(run_id, "FAILED")
                    self._remember([(key, run_id, "FAILED")])
            self._end_variants()
            if records is not None and not drain:
                self._log_statistics(records)
            status = "FAILED" if failed or drain else "FINISHED"
            c.client.set_terminated(self.parent, status)
            self._append_cache([{"parent": self.parent, "closed": status}])
        except Exception as e:
            c.warn("end sweep", e)

    def _end_variants(self) -> None:
        """End each variant run still open: at its last seed's end (now if none is stored),
        KILLED while seeds are missing, FAILED when one failed."""
        members = self._members()
        for v, (run_id, status) in sorted(self._variant_runs.items()):
            if status != "RUNNING":
                continue
            keys = members.get(v, [])
            logged = [self._runs[k][1] for k in keys if k in self._runs]
            span = variant_span(self._spans, keys)
            end = span[1] if span else int(time.time() * 1000)
            status = variant_status(len(keys), logged)
            self._conn.client.set_terminated(run_id, status, end_time=end)
            self._variant_runs[v] = (run_id, status)

    def _log_statistics(self, records: dict[str, dict]) -> None:
        """Each variant with news: its seed counts and statistics (step: the runs aggregated);
        the parent: the sweep's counts, and the sensitivity ranking."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        members = self._members()
        for v in sorted(self._news & set(members) & set(self._variant_runs)):
            metrics, n_done = self._variant_statistics(
                [records[k] for k in members[v] if k in records]
            )
            self._log_batch(
                self._variant_runs[v][0],
                [],
                [Metric(k, float(x), now, n_done) for k, x in sorted(metrics.items())],
                [],
            )
        self._log_sweep_statistics(records, len(members), now)
        self._news.clear()
        self._traces.clear()

    def _variant_statistics(self, recs: list[dict]) -> tuple[dict[str, float], int]:
        """(metrics, number of done runs) of one variant's stored runs ``recs``: its seed
        counts, and the statistics over its done seeds when there are some."""
        import pyarrow as pa

        stats = self.statistics
        finished = [r for r in recs if r["status"] == "done"]
        metrics = {"runs_done": len(finished), "runs_failed": len(recs) - len(finished)}
        if finished and stats is not None:
            traces = pa.concat_tables(
                [self._trace_of(r["run_key"]) for r in finished], promote_options="default"
            )
            metrics.update(stats.variant([r["summary"] for r in finished], traces))
        return metrics, len(finished)

    def _log_sweep_statistics(self, records: dict[str, dict], n_variants: int, now: int) -> None:
        """The parent run's metrics (the sweep's run and variant counts, the sensitivity
        ranking) and tags."""
        from mlflow.entities import Metric, RunTag

        stats, variant_of = self.statistics, self._ctx.layout.variant_of
        done = [r for k, r in records.items() if k in variant_of and r["status"] == "done"]
        sweep = {
            "runs": len(variant_of),
            "runs_done": len(done),
            "runs_failed": sum(
                1 for k, r in records.items() if r["status"] != "done" and k in variant_of
            ),
            "variants": n_variants,
        }
        ranking, tags = stats.sweep([r["summary"] for r in done]) if stats else ({}, {})
        self._log_batch(
            self.parent,
            [],
            [Metric(k, float(x), now, 0) for k, x in sorted({**sweep, **ranking}.items())],
            [RunTag(k, x) for k, x in tags.items()],
        )

    def _members(self) -> dict[str, list[str]]:
        members: dict[str, list[str]] = {}
        for key, v in self._ctx.layout.variant_of.items():
            members.setdefault(v, []).append(key)
        return members

    def _trace_of(self, key: str):
        trace = self._traces.get(key)
        if trace is None:
            trace = self.store.trace(key)
        return trace.select([c for c in self.statistics.columns if c in trace.column_names])

    def log_sweep_artifacts(self, files: list[Path], artifact_path: str) -> bool:
        """Attach ``files`` (e.g. ``farm report``'s) to the sweep's parent run, under
        ``artifact_path``; False when the sweep has no parent run here or tracking fails."""
        if not self._conn.open():
            return False
        try:
            found = self._conn.search(
                f"tags.`optfarm.sweep_id` = '{self.sweep_id}' and tags.`optfarm.kind` = 'sweep'"
            )
            if not found:
                return False
            parent = min(found, key=lambda r: r.info.start_time).info.run_id
            for f in files:
                self._conn.client.log_artifact(parent, str(f), artifact_path)
        except Exception as e:
            self._conn.warn("log artifacts", e)
            return False
        self.parent = parent
        return True

    # -- the runs --------------------------------------------------------------------------------
    def logged(self, record: dict) -> bool:
        """Whether the stored run is in MLflow in the state its record says (FINISHED for a
        done run, FAILED for a failed one), as far as ``start`` learnt."""
        want = "FINISHED" if record["status"] == "done" else "FAILED"
        return self._runs.get(record["run_key"], ("", ""))[1] == want

    def submit(self, record: dict, trace=None) -> None:
        """Queue one stored run (a record of ``optfarm.farm.store.store``, and its trace table if at
        hand; else it is read from the store) for the background logger."""
        if self._logger is not None and not self.offline and not self.logged(record):
            self._logger.put((record, trace))

    def _write(self, items: list[tuple[dict, Any]]) -> None:
        # runs queued before ``_begin`` learnt what is logged may be logged already
        items = [item for item in items if not self.logged(item[0])]
        if not items or self.offline:
            return
        try:
            self._log_runs(items)
        except Exception as e:
            self._conn.warn(f"log run {items[0][0]['run_key']}", e)

    def _log_runs(self, items: list[tuple[dict, Any]]) -> None:
        """Log stored runs: their variant runs created or reopened first; those new together
        where the store takes a batch (``Connection.write_runs``: a database, or a server with
        optfarm's app), the others through the client, several at a time; then the variants
        whose seeds are all logged are ended."""
        touched = self._note_spans(items)
        self._open_variants(touched)
        runs = [self._seed_run(record, trace) for record, trace in items]
        self._news |= touched
        writes = self._conn.write_runs is not None
        new = [run for run in runs if writes and run.key not in self._runs]
        rest = [run for run in runs if not writes or run.key in self._runs]
        if new:
            self._write_new(new)
        if len(rest) > 1:
            with ThreadPoolExecutor(min(_CLIENT_THREADS, len(rest))) as pool:
                self._remember(list(pool.map(self._log_one, rest)))
        elif rest:
            self._remember([self._log_one(rest[0])])
        self._end_complete_variants(touched)

    def _note_spans(self, items: list[tuple[dict, Any]]) -> set[str]:
        """Keep each stored run's span; the variants the runs belong to."""
        touched = set()
        for record, _ in items:
            self._spans[record["run_key"]] = span_ms(record)
            v = self._ctx.layout.variant_of.get(record["run_key"])
            if v is not None:
                touched.add(v)
        return touched

    def _seed_run(self, record: dict, trace) -> NewRun:
        """The MLflow run of one stored run (its trace read from the store when done and not
        at hand, and kept for the statistics), under its variant's run or the parent."""
        key = record["run_key"]
        done = record["status"] == "done"
        if done and trace is None:
            trace = self.store.trace(key)
        if done and self.statistics is not None:
            self._traces[key] = trace.select(
                [col for col in self.statistics.columns if col in trace.column_names]
            )
        v = self._ctx.layout.variant_of.get(key)
        parent = self._variant_runs[v][0] if v is not None else self.parent
        path = self.store.location.absolute(self.store.trace_path(key)) if done else None
        return seed_run(self._ctx, record, trace, parent, path)

    def _write_new(self, new: list[NewRun]) -> None:
        """Create the runs ``new`` in one batch, then attach the finished ones' traces."""
        self._conn.write_runs(new)
        fault_point("after-mlflow-create")
        if self.artifacts:
            for run in new:
                if run.status == "FINISHED":
                    self._log_trace(run.run_id, run.key)
        self._remember([(run.key, run.run_id, run.status) for run in new])

    def _open_variants(self, touched: set[str]) -> None:
        """Create the variant runs of ``touched`` that do not exist (RUNNING, starting at the
        earliest start of their seeds stored so far); reopen those ended before that now get
        a seed run (the sweep was extended, or a failed seed is run again)."""
        c, members = self._conn, self._members()
        new = []
        for v in sorted(touched):
            if v in self._variant_runs:
                run_id, status = self._variant_runs[v]
                if status != "RUNNING":
                    c.client.update_run(run_id, status="RUNNING")
                    self._variant_runs[v] = (run_id, "RUNNING")
                continue
            start = variant_span(self._spans, members[v])[0]
            new.append(variant_run(self._ctx, v, self.parent, start))
        if c.write_runs is not None:
            c.write_runs(new)
            self._variant_runs.update({r.key: (r.run_id, "RUNNING") for r in new})
            return
        for r in new:
            run = c.client.create_run(
                c.experiment_id,
                start_time=r.start_ms,
                run_name=r.name,
                tags={t.key: t.value for t in r.tags},
            )
            c.client.log_batch(run.info.run_id, params=r.params)
            self._variant_runs[r.key] = (run.info.run_id, "RUNNING")

    def _end_complete_variants(self, touched: set[str]) -> None:
        """End the variant runs of ``touched`` whose seeds are all logged, at the last one's
        end: FINISHED, or FAILED when one failed."""
        members = self._members()
        for v in sorted(touched):
            keys = members[v]
            logged = [self._runs[k][1] for k in keys if k in self._runs]
            if len(logged) < len(keys) or "RUNNING" in logged:
                continue
            run_id = self._variant_runs[v][0]
            status = variant_status(len(keys), logged)
            self._conn.client.set_terminated(
                run_id, status, end_time=variant_span(self._spans, keys)[1]
            )
            self._variant_runs[v] = (run_id, status)

    def _log_one(self, run) -> tuple[str, str, str]:
        """One run through the client: created (every tag at creation: one write fewer), or
        found (an orphan, a failed run redone) and completed; (run key, run id, status)."""
        client = self._conn.client
        run_id = self._runs.get(run.key, (None, ""))[0]
        tags, params = run.tags, run.params
        if run_id is None:
            created = client.create_run(
                self._conn.experiment_id,
                start_time=run.start_ms,
                run_name=run.name,
                tags={t.key: t.value for t in run.tags},
            )
            run_id, tags = created.info.run_id, []
            fault_point("after-mlflow-create")
        else:  # parameters cannot change: log those it lacks (older versions logged others)
            have = client.get_run(run_id).data.params
            params = [p for p in params if p.key not in have]
        self._log_batch(run_id, params, run.metrics, tags)
        if self.artifacts and run.status == "FINISHED":
            self._log_trace(run_id, run.key)
        client.set_terminated(run_id, run.status, end_time=run.end_ms)
        return run.key, run_id, run.status

    def _log_trace(self, run_id: str, key: str) -> None:
        with self.store.local_copy(self.store.trace_path(key)) as trace:
            self._conn.client.log_artifact(run_id, str(trace))

    def _log_batch(self, run_id: str, params: list, metrics: list, tags: list) -> None:
        """As few ``log_batch`` calls as MLflow's limits allow (one for a run of ordinary
        size): parameters, tags and metrics together."""
        while params or metrics or tags:
            p, params = params[:_MAX_PARAMS], params[_MAX_PARAMS:]
            t, tags = tags[: _MAX_ENTITIES - len(p)], tags[_MAX_ENTITIES - len(p) :]
            room = _MAX_ENTITIES - len(p) - len(t)
            m, metrics = metrics[:room], metrics[room:]
            self._conn.client.log_batch(run_id, metrics=m, params=p, tags=t)

    # -- the cache -------------------------------------------------------------------------------
    def _read_cache(self) -> list[dict]:
        path = self.store.location.local_dir / CACHE
        if not path.exists():
            return []
        out, bad = [], 0
        for line in path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
                if "key" in entry:
                    (entry["parent"], entry["run"], entry["status"])  # the fields it must have
                elif "closed" not in entry:
                    raise KeyError("closed")
                out.append(entry)
            except (ValueError, KeyError, TypeError):
                bad += 1
        if bad:
            print(
                f"farm: warning: {path}: {bad} damaged line(s) ignored (a cache: the tracking "
                "server is searched instead)",
                file=sys.stderr,
            )
        return out

    def _remember(self, logged: list[tuple[str, str, str]]) -> None:
        """Note (run key, run id, status) of runs logged, in memory and in the cache."""
        for key, run_id, status in logged:
            self._runs[key] = (run_id, status)
        self._append_cache(
            [
                {"parent": self.parent, "key": key, "run": run_id, "status": status}
                for key, run_id, status in logged
            ]
        )

    def _append_cache(self, entries: list[dict]) -> None:
        now = time.time()
        lines = "".join(
            json.dumps(
                {"uri": hide_password(self.uri), "sweep": self.sweep_id, **e, "logged_at": now}
            )
            + "\n"
            for e in entries
        )
        try:
            with open(self.store.location.local_dir / CACHE, "a") as f:
                f.write(lines)
        except OSError:
            pass  # a cache: the server is searched when it is incomplete


def close_open_runs(out: str | Path, uri: str | None = None) -> int:
    """End the runs of the sweep stored in ``out`` left RUNNING at ``uri`` (default: the one
    it ran with) by a driver that could not (killed with the Ray head, or by SIGKILL): seed
    runs FAILED, variant runs KILLED, the parent FAILED. For a process that outlives the
    driver (e.g. the command line's parent); the number of runs ended."""
    store = Store(out)
    sweep = store.read_sweep() or {}
    tracking = (store.read_spec() or {}).get("tracking") or {}
    name = sweep.get("name") or store.location.local_dir.name
    conn = Connection(
        sweep_uri(out, uri),
        store.location.uri,
        store.location.local_dir,
        tracking.get("experiment") or name,
    )
    if not sweep.get("sweep_id") or not conn.open():
        return 0
    ended = 0
    try:
        for r in conn.search(
            f"tags.`optfarm.sweep_id` = '{sweep['sweep_id']}' and attributes.status = 'RUNNING'"
        ):
            kind = r.data.tags.get("optfarm.kind")
            conn.client.set_terminated(r.info.run_id, "KILLED" if kind == "variant" else "FAILED")
            ended += 1
    except Exception as e:
        conn.warn("end the sweep's runs", e)
    return ended


def sync(
    out: str | Path,
    uri: str | None = None,
    experiment: str | None = None,
    artifacts: bool | None = None,
    statistics: Statistics | None = None,
) -> tuple[int, int]:
    """Upload every stored run of the sweep in ``out`` not yet logged to ``uri`` (default: the
    one the sweep ran with), with the variant and sweep ``statistics``. Holds the folder's
    lock; refuses a store with damaged files (``DamagedFile``). Returns (runs uploaded now,
    runs not uploaded because tracking failed)."""
    store = Store(out)
    with store.lock():
        sweep = store.read_sweep() or {}
        records = list(store.verified().records.values())
        tracking = sweep.get("tracking") or {}
        tracker = Tracker(
            out,
            sweep_uri(out, uri),
            experiment or tracking.get("experiment"),
            sweep.get("name"),
            sweep.get("sweep_id"),
            tracking.get("artifacts", False) if artifacts is None else artifacts,
            statistics,
        )
        if not records:
            return 0, 0
        stored = {r["run_key"]: r for r in records}
        if not tracker.start(
            {k: r["spec"] for k, r in stored.items()}, {"runs": len(records)}, stored, wait=True
        ):
            return 0, len(records)
        todo = [r for r in records if not tracker.logged(r)]
        for r in todo:
            tracker.submit(r)
        tracker.close(failed=any(r["status"] != "done" for r in records), records=stored)
        missing = sum(1 for r in todo if not tracker.logged(r))
        return len(todo) - missing, missing
