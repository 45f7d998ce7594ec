"""MLflow tracking of sweeps: every MLflow call of optfarm is in this module (and, for the
folder's own sqlite store, ``farm.sweep.mlflow_bulk``).

Layout (ARCHITECTURE.md; ``farm.sweep.variants``): one parent run per sweep, one
nested run per variant (dataset x optimizer x parameters x problem, the seed-aggregated
statistics of ``farm report`` as metrics) and, nested in it, one run per run key (a seed).
Seed runs carry the resolved run as parameters (the problem actually posed, every optimizer
parameter as ``opt.<name>``), per-step metrics (``incumbent_cno`` or ``incumbent_accuracy_c``,
``exploration_cost``, ``recommendation_latency_s``; step = evaluation index) and summary
metrics; their start and end times are the run's own (the store's record: finished at, less
its wall time). The parent's span covers every invocation of the sweep, and it carries the
sweep's counts and, for optimizer grids, the sensitivity ranking. Names are short and unique:
``lynceus la=2 g=0.9 · lynceus-cnn · s3``. The trace's path in the store is a tag
(``optfarm.trace``); the trace itself is uploaded as an artifact only when asked
(``--artifacts``). Runs end FINISHED, or FAILED with the error as a tag.

Exactly once per run key and per variant, whatever happens: the parent run is tagged with the
sweep's id (``optfarm.sweep_id``, kept in ``sweep.json``, so it moves with the folder), each
variant run with the sweep id and its variant key, each seed run with the sweep id and its run
key. They are *found* by these tags on the tracking server (``search_runs``) before anything is
created, so a moved or copied folder, a lost cache, a killed driver or a second ``farm sync``
finds the runs already there. A seed run left RUNNING by a killed driver (an orphan) is
completed when its run is stored, else marked FAILED when the sweep ends.
``mlflow_runs.jsonl`` in the output folder is an append-only cache of the runs logged (one line
per run): with it a resumed sweep whose runs are all logged asks the server nothing per run;
it is never the truth. Variant statistics are computed again when the sweep ends (and by
``farm sync``) for every variant that got a run logged.

Cost: a background thread fed by a queue logs the runs, so the sweep's driver never waits for
the tracking server. To the folder's own sqlite store (or any ``sqlite:///`` URI) it writes
the runs waiting in the queue together, each created complete in one transaction
(``farm.sweep.mlflow_bulk``); to a tracking server each run is one ``create_run``, one
``log_batch`` (parameters, metrics and tags together) and one status update. The parent run is
touched once when a sweep starts and once when it ends. Metric timestamps are the run's finish
time, so logging a run again (an orphan completed) adds nothing twice.

The tracking URI is, in order: the one given (``--tracking-uri``, kept in ``sweep.json``),
``$MLFLOW_TRACKING_URI``, else ``sqlite:///<out>/mlflow.db``. If the server is unreachable the
tracker warns once and goes quiet; the results are in the store and ``farm sync DIR`` replays
them later. The folder's own sqlite store left half-created (a disk full while MLflow created
its tables) is moved aside and created again: the results store holds everything it held.
"""

from __future__ import annotations

import json
import logging
import math
import os
import queue
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from farm.run.loop import PICK_COLUMNS, STATISTICS_COLUMNS
from farm.sweep import variants
from farm.sweep.location import Location
from farm.sweep.store import Store, fault_point

__all__ = ["Tracker", "resolve_uri", "sweep_uri", "sync"]

# an unreachable server should cost seconds, not MLflow's default minutes of retries
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # no traffic but to the store
# no "View run at" lines (and no get_run per status update) under the progress bar
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
# MLflow's own start-up lines (creating and migrating the sqlite store) are not the sweep's news
for _logger in ("mlflow.store.db.utils", "alembic"):
    logging.getLogger(_logger).setLevel(logging.WARNING)

CACHE = "mlflow_runs.jsonl"
_BATCH = 500           # seed runs written to a sqlite store in one transaction, at most
_LINGER_S = 1.0        # how long the logger waits for more runs to write together
_MAX_ENTITIES = 1000   # MLflow's limits per log_batch call: 1000 entities, 100 params
_MAX_PARAMS = 100
_STEP_COLUMNS = {"cum_exploration_cost": "exploration_cost",
                 "recommendation_latency_s": "recommendation_latency_s"}


def resolve_uri(out: str | Path, uri: str | None = None) -> str:
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or \
        f"sqlite:///{Location.of(out).local_dir / 'mlflow.db'}"


def sweep_uri(out: str | Path, uri: str | None = None) -> str:
    """The tracking URI of the sweep stored in ``out``: the one given, else the one its sweep
    was run with (kept in ``sweep.json``), else ``resolve_uri``'s default."""
    spec = Store(out).read_spec() or {}
    return resolve_uri(out, uri or (spec.get("tracking") or {}).get("uri"))


def _sqlite_path(uri: str) -> Path | None:
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


_WAL = False


def _sqlite_write_ahead_log() -> None:
    """Make the sqlite stores this process opens use a write-ahead log with ``synchronous =
    NORMAL``: a commit then costs no fsync (MLflow commits three times per run; the default
    rollback journal fsyncs each, 60% of the logging time measured). A SIGKILL loses nothing
    committed; a power cut may lose the last commits, which ``farm sync`` (or the next run of
    the sweep) logs again, finding what is there by tag."""
    global _WAL
    if _WAL:
        return
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "connect")
    def _pragmas(connection, _record):
        if isinstance(connection, sqlite3.Connection):
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

    _WAL = True


def _close_engine(uri: str) -> None:
    """Close the connections MLflow keeps to a sqlite store (one cached engine per URI), so
    that the next client opens the file found at the path then."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    engine = SqlAlchemyStore._engine_map.pop(uri, None)
    if engine is not None:
        engine.dispose()


def _first_line(e: BaseException | str) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


class Tracker:
    """Logs a sweep's stored runs to one tracking URI (see the module docstring): ``start``,
    then ``submit`` each record as it is stored, then ``close``."""

    def __init__(self, out: str | Path, uri: str | None = None, experiment: str | None = None,
                 sweep_name: str | None = None, sweep_id: str | None = None,
                 artifacts: bool = False):
        self.store = Store(out)
        self.uri = resolve_uri(out, uri)
        self.sweep_name = sweep_name or self.store.location.local_dir.name
        self.sweep_id = sweep_id or (self.store.read_sweep() or {}).get("sweep_id") or \
            self.sweep_name
        self.experiment = experiment or self.sweep_name
        self.artifacts = artifacts
        self.offline = False
        self.parent: str | None = None
        self._client = None
        self._bulk = None                             # the sqlite store, for mlflow_bulk
        self._experiment_id = None
        self._artifact_location = None
        self._runs: dict[str, tuple[str, str]] = {}   # run_key -> (run id, status) on the server
        self._orphans: set[str] = set()               # run keys whose run was found RUNNING
        self._layout = variants.layout({})
        self._variant_runs: dict[str, str] = {}       # variant key -> its run id
        self._to_aggregate: set[str] = set()          # variant keys with news to aggregate
        self._traces: dict[str, Any] = {}             # run key -> trace, for the aggregation
        self._variant_params: dict[str, dict] = {}  # variant key -> its parameters
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._started_ms = 0                          # when this invocation started

    # -- connection ----------------------------------------------------------------------------
    def _warn(self, what: str, e: BaseException | str) -> None:
        if not self.offline:
            print(f"farm: warning: MLflow tracking at {self.uri} unavailable ({what}: "
                  f"{_first_line(e)}); results are stored, upload them later with `farm sync "
                  f"{self.store.location.uri}`", file=sys.stderr)
        self.offline = True

    def _connect(self) -> bool:
        if self.offline:
            return False
        if self._client is not None:
            return True
        if self.uri.startswith(("http://", "https://")):
            try:
                urllib.request.urlopen(self.uri.rstrip("/") + "/health", timeout=3).read()
            except OSError as e:
                self._warn("no answer", e)
                return False
        try:
            self._open()
        except Exception as e:  # any failure of the tracking backend
            db = _sqlite_path(self.uri)
            own = db is not None and db.resolve().parent == self.store.location.local_dir
            if not (own and "already exists" in str(e)):
                self._store_unusable(e)
                return False
            # the folder's own store, its tables created half-way (a disk full: MLflow's
            # migrations stopped in the middle); it holds nothing the results store does not
            aside = db.with_name(f"{db.name}.broken-{time.strftime('%Y%m%dT%H%M%S')}")
            try:
                _close_engine(self.uri)
                for suffix in ("", "-wal", "-shm"):  # the store and its write-ahead log
                    if db.with_name(db.name + suffix).exists():
                        os.replace(db.with_name(db.name + suffix),
                                   aside.with_name(aside.name + suffix))
                print(f"farm: warning: {db} was created half-way (an earlier disk full?); "
                      f"moved aside to {aside.name}, creating it again", file=sys.stderr)
                self._open()
            except Exception as e2:
                self._store_unusable(e2)
                return False
        return True

    def _open(self) -> None:
        from mlflow.tracking import MlflowClient

        from farm.sweep.mlflow_bulk import bulk_store

        if _sqlite_path(self.uri) is not None:
            _sqlite_write_ahead_log()
        client = MlflowClient(tracking_uri=self.uri)
        exp = client.get_experiment_by_name(self.experiment)
        if exp is None:
            location = None
            db = _sqlite_path(self.uri)
            if db is not None:
                location = (db.parent / "mlartifacts").as_uri()
            exp = client.get_experiment(client.create_experiment(self.experiment, location))
        self._experiment_id, self._artifact_location = exp.experiment_id, exp.artifact_location
        self._client = client
        self._bulk = bulk_store(client)

    def _store_unusable(self, e: BaseException) -> None:
        """One warning naming the store and what to do about it."""
        db = _sqlite_path(self.uri)
        text = _first_line(e)
        if db is None:
            self._warn("connect", e)
            return
        if "readonly" in text or "read-only" in text or "unable to open" in text:
            fix = f"make {db.parent} writable, or pass --tracking-uri"
        elif "full" in text:
            fix = f"free space on {db.parent}"
        elif "upgrade" in text or "migrat" in text:
            fix = f"run `mlflow db upgrade {self.uri}`"
        else:
            fix = f"move {db} aside to start it afresh"
        print(f"farm: warning: MLflow tracking store {db} cannot be opened ({text}); results "
              f"are stored: {fix}, then `farm sync {self.store.location.uri}`", file=sys.stderr)
        self.offline = True

    # -- the sweep -------------------------------------------------------------------------------
    def start(self, specs: dict[str, dict], params: dict[str, Any] | None = None,
              records: dict[str, dict] | None = None, wait: bool = False) -> bool:
        """Start the background logger, which first (``_begin``) opens the store (creating a
        sqlite store takes seconds: the sweep's runs go on meanwhile), finds (by its sweep id
        tag) or creates the sweep's parent run and marks it RUNNING, finds or creates its
        variant runs, and learns which of the runs ``specs`` (run key -> spec as stored) are
        logged already (the cache, else one search of the sweep's nested runs). ``records``:
        the runs stored before (the parent's span starts no later than the first of them).
        With ``wait``, returns once that is done: False when offline."""
        self._layout = variants.layout(specs)
        self._started_ms = int(time.time() * 1000)
        # a copy: the sweep adds records while the logger reads these
        self._thread = threading.Thread(target=self._work, args=(specs, params,
                                                                 dict(records or {})),
                                        name="mlflow-logger", daemon=True)
        self._thread.start()
        if wait:
            self._started.wait()
        return not self.offline

    def _begin(self, specs: dict[str, dict], params: dict[str, Any] | None,
               records: dict[str, dict]) -> bool:
        if not self._connect():
            return False
        try:
            found = self._search(f"tags.`optfarm.sweep_id` = '{self.sweep_id}' and "
                                 "tags.`optfarm.kind` = 'sweep'")
            if found:
                self.parent = min(found, key=lambda r: r.info.start_time).info.run_id
                self._client.update_run(self.parent, status="RUNNING")
            else:
                first = min((_span_ms(r)[0] for r in records.values()), default=None)
                self.parent = self._create_parent(params or {}, first)
            self._runs = self._read_cache()
            if found and any(self._runs.get(k, ("", ""))[1] not in ("FINISHED", "FAILED")
                             for k in specs):
                self._runs.update(self._nested_runs())
            self._start_variants(bool(found), records)
        except Exception as e:
            self._warn("start sweep", e)
            return False
        return True

    def _create_parent(self, params: dict[str, Any], start_ms: int | None) -> str:
        from mlflow.entities import Param

        now = self._started_ms
        run = self._client.create_run(
            self._experiment_id, run_name=self.sweep_name,
            start_time=now if start_ms is None else min(now, start_ms),
            tags={"optfarm.sweep": self.sweep_name, "optfarm.sweep_id": self.sweep_id,
                  "optfarm.kind": "sweep", "optfarm.out": self.store.location.absolute()})
        self._client.log_batch(run.info.run_id,
                               params=[Param(k, str(v)) for k, v in sorted(params.items())])
        if self.artifacts and self.store.read_sweep() is not None:
            with self.store.local_copy(self.store.root / "sweep.json") as spec:
                self._client.log_artifact(run.info.run_id, str(spec))
        return run.info.run_id

    def _start_variants(self, searched: bool, records: dict[str, dict]) -> None:
        """Find the sweep's variant runs by tag, create the missing ones (RUNNING until their
        statistics are logged when the sweep ends)."""
        from mlflow.entities import Param, RunTag

        from farm.sweep.mlflow_bulk import NewRun, write_runs

        self._variant_runs = {}
        if searched:
            for r in self._search(f"tags.`optfarm.sweep_id` = '{self.sweep_id}' and "
                                  "tags.`optfarm.kind` = 'variant'"):
                key = r.data.tags["optfarm.variant_key"]
                if key not in self._variant_runs or r.info.status != "RUNNING":
                    self._variant_runs[key] = r.info.run_id
                if r.info.status == "RUNNING":
                    self._to_aggregate.add(key)  # left unfinished by an interrupted sweep
        first: dict[str, int] = {}
        for key, record in records.items():
            v = self._layout.variant_of.get(key)
            if v is not None:
                first[v] = min(first.get(v, _span_ms(record)[0]), _span_ms(record)[0])
        now = self._started_ms
        new = []
        for v, spec in self._layout.variants.items():
            if v in self._variant_runs:
                continue
            params = {**variants.run_params(spec, variants.resolved_problem(spec)),
                      "variant_key": v}
            tags = {"mlflow.parentRunId": self.parent, "optfarm.kind": "variant",
                    "optfarm.variant_key": v, "optfarm.sweep_id": self.sweep_id,
                    "optfarm.sweep": self.sweep_name}
            new.append(NewRun(self._layout.names[v], min(now, first.get(v, now)), None,
                              "RUNNING", [RunTag(k, x) for k, x in tags.items()],
                              [Param(k, x) for k, x in sorted(params.items())]))
            self._to_aggregate.add(v)
        if self._bulk is not None:
            write_runs(self._bulk, self._experiment_id, self._artifact_location, new)
            self._variant_runs.update({self._variant_key_of(r): r.run_id for r in new})
            return
        for r in new:
            run = self._client.create_run(self._experiment_id, start_time=r.start_ms,
                                          run_name=r.name,
                                          tags={t.key: t.value for t in r.tags})
            self._client.log_batch(run.info.run_id, params=r.params)
            self._variant_runs[self._variant_key_of(r)] = run.info.run_id

    @staticmethod
    def _variant_key_of(run) -> str:
        return next(t.value for t in run.tags if t.key == "optfarm.variant_key")

    def _search(self, filter_string: str) -> list:
        runs, token = [], None
        while True:
            page = self._client.search_runs([self._experiment_id], filter_string,
                                            max_results=50_000, page_token=token)
            runs += list(page)
            token = page.token
            if not token:
                return runs

    def _nested_runs(self) -> dict[str, tuple[str, str]]:
        """run_key -> (run id, status) of the sweep's seed runs on the server (a finished one
        preferred where, from older versions, a key has several)."""
        out: dict[str, tuple[str, str]] = {}
        for r in self._search(f"tags.`optfarm.sweep_id` = '{self.sweep_id}' and "
                              "tags.`optfarm.kind` = 'run'"):
            key, status = r.data.tags["optfarm.run_key"], r.info.status
            if key not in out or out[key][1] != "FINISHED":
                out[key] = (r.info.run_id, status)
            if status == "RUNNING":
                self._orphans.add(key)
        return out

    def _read_cache(self) -> dict[str, tuple[str, str]]:
        path = self.store.location.local_dir / CACHE
        out: dict[str, tuple[str, str]] = {}
        if not path.exists():
            return out
        bad = 0
        for line in path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
                if entry["parent"] == self.parent:
                    out[entry["key"]] = (entry["run"], entry["status"])
            except (ValueError, KeyError, TypeError):
                bad += 1
        if bad:
            print(f"farm: warning: {path}: {bad} damaged line(s) ignored (a cache: the tracking "
                  "server is searched instead)", file=sys.stderr)
        return out

    def _remember(self, logged: list[tuple[str, str, str]]) -> None:
        """Note (run key, run id, status) of runs logged, in memory and in the cache."""
        now = time.time()
        lines = []
        for key, run_id, status in logged:
            self._runs[key] = (run_id, status)
            lines.append(json.dumps({"parent": self.parent, "key": key, "run": run_id,
                                     "status": status, "logged_at": now}) + "\n")
        try:
            with open(self.store.location.local_dir / CACHE, "a") as f:
                f.write("".join(lines))
        except OSError:
            pass  # a cache: the server is searched when it is incomplete

    def close(self, failed: bool = False, drain: bool = False,
              records: dict[str, dict] | None = None) -> None:
        """Wait for the runs submitted (``drain``: drop those not logged yet, e.g. on Ctrl-C:
        they are stored, ``farm sync`` logs them), mark orphans no stored run completed
        FAILED, log the statistics of the variants that got runs (from ``records``: every
        stored run of the sweep) and of the sweep, and end the parent run (FAILED when the
        sweep is not complete)."""
        if self._thread is None:
            return
        if drain:
            self._drain()
        self._queue.put(None)
        self._thread.join()
        self._thread = None
        if self.offline:
            return
        try:
            for key in sorted(self._orphans):
                run_id, status = self._runs[key]
                if status == "RUNNING":
                    self._client.set_tag(run_id, "optfarm.error", "orphan: its driver stopped "
                                         "before the run was logged; the run is not stored")
                    self._client.set_terminated(run_id, "FAILED")
                    self._remember([(key, run_id, "FAILED")])
            if records is not None and not drain:
                self._log_statistics(records)
            self._client.set_terminated(self.parent, "FAILED" if failed else "FINISHED")
        except Exception as e:
            self._warn("end sweep", e)

    def _log_statistics(self, records: dict[str, dict]) -> None:
        """Each variant with news: its seed-aggregated statistics (step: the runs aggregated),
        status (FINISHED; FAILED when a run failed; KILLED when runs are missing) and end time
        (its last run's); the parent: the sweep's counts and sensitivity ranking."""
        import pyarrow as pa
        from mlflow.entities import Metric, RunTag

        now = int(time.time() * 1000)
        members: dict[str, list[str]] = {}
        for key, v in self._layout.variant_of.items():
            members.setdefault(v, []).append(key)
        done = [r for k, r in records.items() if r["status"] == "done"
                and k in self._layout.variant_of]
        for v in sorted(self._to_aggregate & set(members)):
            recs = [records[k] for k in members[v] if k in records]
            finished = [r for r in recs if r["status"] == "done"]
            metrics = {"runs_done": len(finished), "runs_failed": len(recs) - len(finished)}
            if finished:
                traces = pa.concat_tables([self._trace_of(r["run_key"]) for r in finished],
                                          promote_options="default")
                metrics.update(variants.aggregate([r["summary"] for r in finished], traces))
            status = ("KILLED" if len(recs) < len(members[v]) else
                      "FAILED" if len(finished) < len(recs) else "FINISHED")
            run_id = self._variant_runs[v]
            self._log_batch(run_id, [], [Metric(k, x, now, len(finished))
                                         for k, x in sorted(metrics.items())], [])
            end = max((_span_ms(r)[1] for r in recs), default=now)
            self._client.set_terminated(run_id, status, end_time=end)
        sweep = {"runs": len(self._layout.variant_of), "runs_done": len(done),
                 "runs_failed": sum(1 for k, r in records.items() if r["status"] != "done"
                                    and k in self._layout.variant_of),
                 "variants": len(members)}
        ranking, tags = variants.sensitivity_summary([r["summary"] for r in done])
        self._log_batch(self.parent, [], [Metric(k, float(x), now, 0) for k, x in
                                          sorted({**sweep, **ranking}.items())],
                        [RunTag(k, x) for k, x in tags.items()])
        self._to_aggregate.clear()
        self._traces.clear()

    def _trace_of(self, key: str):
        trace = self._traces.get(key)
        return self.store.trace(key) if trace is None else trace

    def _drain(self) -> None:
        """Drop the runs still queued for the logger (they stay in the store)."""
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                return

    def log_sweep_artifacts(self, files: list[Path], artifact_path: str) -> bool:
        """Attach ``files`` (e.g. ``farm report``'s) to the sweep's parent run, under
        ``artifact_path``; False when the sweep has no parent run here or tracking fails."""
        if not self._connect():
            return False
        try:
            found = self._search(f"tags.`optfarm.sweep_id` = '{self.sweep_id}' and "
                                 "tags.`optfarm.kind` = 'sweep'")
            if not found:
                return False
            parent = min(found, key=lambda r: r.info.start_time).info.run_id
            for f in files:
                self._client.log_artifact(parent, str(f), artifact_path)
        except Exception as e:
            self._warn("log artifacts", e)
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
        """Queue one stored run (a record of ``farm.sweep.store``, and its trace table if at
        hand; else it is read from the store) for the background logger."""
        if self._thread is not None and not self.offline and not self.logged(record):
            self._queue.put((record, trace))

    def _work(self, specs: dict[str, dict], params: dict[str, Any] | None,
              records: dict[str, dict]) -> None:
        self._begin(specs, params, records)
        self._started.set()
        while True:
            batch = [self._queue.get()]
            until = time.monotonic() + _LINGER_S  # a few runs more to write together
            while batch[-1] is not None and len(batch) < _BATCH:
                try:
                    batch.append(self._queue.get(timeout=max(0.0, until - time.monotonic())))
                except queue.Empty:
                    break
            # runs queued before ``_begin`` learnt what is logged may be logged already
            items = [item for item in batch if item is not None and not self.logged(item[0])]
            if items and not self.offline:
                try:
                    self._log_runs(items)
                except Exception as e:
                    self._warn(f"log run {items[0][0]['run_key']}", e)
            if batch[-1] is None:
                return

    def _log_runs(self, items: list[tuple[dict, Any]]) -> None:
        """Log stored runs: those new to a sqlite store together (``mlflow_bulk``), the others
        one by one through the client."""
        from farm.sweep.mlflow_bulk import write_runs

        new = []
        for record, trace in items:
            run = self._content(record, trace)
            if self._bulk is not None and record["run_key"] not in self._runs:
                new.append(run)
            else:
                self._log_one(run)
        if new:
            write_runs(self._bulk, self._experiment_id, self._artifact_location,
                       [run for run, _ in new])
            fault_point("after-mlflow-create")
            if self.artifacts:
                for run, key in new:
                    if run.status == "FINISHED":
                        self._log_trace(run.run_id, key)
            self._remember([(key, run.run_id, run.status) for run, key in new])

    def _content(self, record: dict, trace):
        """The MLflow run of a stored run (``mlflow_bulk.NewRun``) and its run key."""
        from mlflow.entities import Param, RunTag

        from farm.sweep.mlflow_bulk import NewRun

        key, spec = record["run_key"], record["spec"]
        start_ms, end_ms = _span_ms(record)
        v = self._layout.variant_of.get(key)
        tags = {"mlflow.parentRunId": self._variant_runs.get(v, self.parent),
                "optfarm.run_key": key, "optfarm.sweep_id": self.sweep_id,
                "optfarm.kind": "run", "optfarm.sweep": self.sweep_name,
                "optfarm.node_id": str(record["where"].get("node_id"))}
        if v is not None:
            tags["optfarm.variant_key"] = v
            self._to_aggregate.add(v)
        summary = None
        if record["status"] == "done":
            summary = record["summary"]
            trace = self.store.trace(key) if trace is None else trace
            self._traces[key] = trace.select([c for c in _AGGREGATED_COLUMNS
                                              if c in trace.column_names])
            metrics = _metrics(record, trace, end_ms)
            tags["optfarm.trace"] = self.store.location.absolute(self.store.trace_path(key))
        else:
            metrics = []
            tags["optfarm.error"] = str(record.get("error"))[:5000]
        shared = self._variant_params.get(v)  # the same for every seed of a variant
        if shared is None:
            shared = variants.run_params({k: x for k, x in spec.items() if k != "seed"},
                                         variants.resolved_problem(spec, summary))
            if v is not None:
                self._variant_params[v] = shared
        params = {**shared, "seed": str(spec["seed"]), "run_key": key}
        name = self._layout.names.get(key) or variants.layout({key: spec}).names[key]
        status = "FINISHED" if record["status"] == "done" else "FAILED"
        return NewRun(name, start_ms, end_ms, status, [RunTag(k, x) for k, x in tags.items()],
                      [Param(k, x) for k, x in sorted(params.items())], metrics), key

    def _log_one(self, content) -> None:
        """One run through the client: created (every tag at creation: one write fewer), or
        found (an orphan, a failed run redone) and completed."""
        run, key = content
        run_id = self._runs.get(key, (None, ""))[0]
        tags, params = run.tags, run.params
        if run_id is None:
            created = self._client.create_run(self._experiment_id, start_time=run.start_ms,
                                              run_name=run.name,
                                              tags={t.key: t.value for t in run.tags})
            run_id, tags = created.info.run_id, []
            self._runs[key] = (run_id, "RUNNING")
            fault_point("after-mlflow-create")
        else:  # parameters cannot change: log those it lacks (older versions logged others)
            have = self._client.get_run(run_id).data.params
            params = [p for p in params if p.key not in have]
        self._log_batch(run_id, params, run.metrics, tags)
        if self.artifacts and run.status == "FINISHED":
            self._log_trace(run_id, key)
        self._client.set_terminated(run_id, run.status, end_time=run.end_ms)
        self._remember([(key, run_id, run.status)])

    def _log_trace(self, run_id: str, key: str) -> None:
        with self.store.local_copy(self.store.trace_path(key)) as trace:
            self._client.log_artifact(run_id, str(trace))

    def _log_batch(self, run_id: str, params: list, metrics: list, tags: list) -> None:
        """As few ``log_batch`` calls as MLflow's limits allow (one for a run of ordinary
        size): parameters, tags and metrics together."""
        while params or metrics or tags:
            p, params = params[:_MAX_PARAMS], params[_MAX_PARAMS:]
            t, tags = tags[:_MAX_ENTITIES - len(p)], tags[_MAX_ENTITIES - len(p):]
            room = _MAX_ENTITIES - len(p) - len(t)
            m, metrics = metrics[:room], metrics[room:]
            self._client.log_batch(run_id, metrics=m, params=p, tags=t)


# the trace columns the report's aggregation reads (``farm.report.analysis.analyse``)
_AGGREGATED_COLUMNS = list(STATISTICS_COLUMNS + PICK_COLUMNS)


def _span_ms(record: dict) -> tuple[int, int]:
    """(start, end) of a stored run in ms since the epoch: the record's finish time, less the
    run's wall time."""
    end = record["finished_at"]
    duration = record.get("duration_s")
    if not isinstance(duration, (int, float)) or not math.isfinite(duration):
        duration = 0.0
    return int((end - duration) * 1000), int(end * 1000)


def _metrics(record: dict, trace, timestamp_ms: int) -> list:
    """Per-step metrics from the trace and the summary metrics of a done run."""
    from mlflow.entities import Metric

    summary = record["summary"]
    metric = summary["metric"]
    columns = {f"incumbent_{metric}": f"incumbent_{metric}", **_STEP_COLUMNS}
    out = []
    for column, name in columns.items():
        for step, value in enumerate(trace.column(column).to_pylist()):
            if value is not None and math.isfinite(value):
                out.append(Metric(name, float(value), timestamp_ms, step))
    out += [Metric(name, value, timestamp_ms, 0)
            for name, value in _summary_metrics(summary).items()]
    return out


def _summary_metrics(summary: dict) -> dict[str, float]:
    metric, rec = summary["metric"], summary["recommendation"]
    out = {"n_evaluations": float(summary["n_evaluations"]),
           "exploration_cost_total": float(summary["exploration_cost"]),
           "final_feasible": float(bool(rec and rec["feasible"]))}
    if rec is not None and math.isfinite(rec[metric]):
        out[f"final_{metric}"] = float(rec[metric])
    for label, cost in summary["exploration_cost_to_reach"].items():
        if cost is not None:
            out[f"cost_to_{variants.metric_name(label)}"] = float(cost)
    for stat, value in summary["recommendation_latency_s"].items():
        if value is not None:
            out[f"latency_{stat}_s"] = float(value)
    return out


def sync(out: str | Path, uri: str | None = None, experiment: str | None = None,
         artifacts: bool | None = None) -> tuple[int, int]:
    """Upload every stored run of the sweep in ``out`` not yet logged to ``uri`` (default: the
    one the sweep ran with). Holds the folder's lock; refuses a store with damaged files
    (``DamagedFile``). Returns (runs uploaded now, runs not uploaded because tracking failed)."""
    store = Store(out)
    with store.lock():
        sweep = store.read_sweep() or {}
        records = list(store.verified().records.values())
        tracking = sweep.get("tracking") or {}
        tracker = Tracker(out, sweep_uri(out, uri), experiment or tracking.get("experiment"),
                          sweep.get("name"), sweep.get("sweep_id"),
                          tracking.get("artifacts", False) if artifacts is None else artifacts)
        if not records:
            return 0, 0
        stored = {r["run_key"]: r for r in records}
        if not tracker.start({k: r["spec"] for k, r in stored.items()}, {"runs": len(records)},
                             stored, wait=True):
            return 0, len(records)
        todo = [r for r in records if not tracker.logged(r)]
        for r in todo:
            tracker.submit(r)
        tracker.close(failed=any(r["status"] != "done" for r in records), records=stored)
        missing = sum(1 for r in todo if not tracker.logged(r))
        return len(todo) - missing, missing
