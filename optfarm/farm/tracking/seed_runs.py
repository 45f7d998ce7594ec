"""A sweep's seed runs in MLflow: one per run key, nested in its variant's run (or in the
sweep's run, for a stored run the spec no longer expands to), tagged with the sweep id and its
run key, so that it is found again (``find``) rather than created twice.

Which runs are logged (``runs``: run key -> (run id, status)) is learnt from the folder's cache
(``optfarm.farm.tracking.run_cache``) or from the server. A seed run left RUNNING by a killed
driver (an orphan) is completed when its run is stored (``log``), else marked FAILED when the
sweep ends (``end_orphans``).

Logging: the runs new together in one batch where the store takes one (``Connection.write_runs``:
a database, or a server with optfarm's app), the others through the client, several at a time
(``CLIENT_THREADS``): one ``create_run``, one ``log_batch`` (parameters, metrics and tags
together) and one status update each.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from optfarm.farm.store.store import Store, fault_point
from optfarm.farm.tracking.mlflow_connection import Connection
from optfarm.farm.tracking.mlflow_mapping import NewRun, RunContext, seed_run, span_ms
from optfarm.farm.tracking.run_cache import RunCache

__all__ = ["CLIENT_THREADS", "SeedRuns", "seed_filter"]

CLIENT_THREADS = 8  # runs logged at once to a tracking server


def seed_filter(sweep_id: str) -> str:
    """The search that finds the sweep's seed runs."""
    return f"tags.`optfarm.sweep_id` = '{sweep_id}' and tags.`optfarm.kind` = 'run'"


class SeedRuns:
    """The seed runs of one sweep: what is logged, and logging stored runs (the module
    docstring). ``columns``: the trace columns the statistics read (None: no statistics), whose
    tables are kept in ``traces`` for them."""

    def __init__(
        self,
        conn: Connection,
        store: Store,
        cache: RunCache,
        sweep_id: str,
        artifacts: bool,
        columns: tuple[str, ...] | None,
    ):
        self.conn, self.store, self.cache = conn, store, cache
        self.sweep_id = sweep_id
        self.artifacts, self.columns = artifacts, columns
        self.parent: str | None = None  # the sweep's run, for the cache's lines
        self.runs: dict[str, tuple[str, str]] = {}  # run key -> (run id, status) on the server
        self.orphans: set[str] = set()  # run keys whose run was found RUNNING
        self.spans: dict[str, tuple[int, int]] = {}  # run key -> its stored run's span
        self.traces: dict[str, Any] = {}  # run key -> trace, for the statistics

    def logged(self, record: dict) -> bool:
        """Whether the stored run is in MLflow in the state its record says (FINISHED for a
        done run, FAILED for a failed one), as far as is known."""
        want = "FINISHED" if record["status"] == "done" else "FAILED"
        return self.runs.get(record["run_key"], ("", ""))[1] == want

    def find(self) -> None:
        """Learn the sweep's seed runs on the server (``learn``)."""
        self.learn(self.conn.search(seed_filter(self.sweep_id)))

    def learn(self, found: list) -> None:
        """Learn the seed runs ``found`` on the server (a finished one preferred where a key
        has several); those RUNNING are orphans."""
        for r in found:
            key, status = r.data.tags["optfarm.run_key"], r.info.status
            if key not in self.runs or self.runs[key][1] != "FINISHED":
                self.runs[key] = (r.info.run_id, status)
            if status == "RUNNING":
                self.orphans.add(key)

    def note_spans(self, ctx: RunContext, items: list[tuple[dict, Any]]) -> set[str]:
        """Keep each stored run's span; the variants the runs belong to."""
        touched = set()
        for record, _ in items:
            self.spans[record["run_key"]] = span_ms(record)
            v = ctx.layout.variant_of.get(record["run_key"])
            if v is not None:
                touched.add(v)
        return touched

    def new_run(self, ctx: RunContext, record: dict, trace, parent_id: str) -> NewRun:
        """The MLflow run of one stored run (its trace read from the store when done and not
        at hand, and kept for the statistics), nested in ``parent_id``."""
        key = record["run_key"]
        done = record["status"] == "done"
        if done and trace is None:
            trace = self.store.trace(key)
        if done and self.columns is not None:
            self.traces[key] = trace.select([c for c in self.columns if c in trace.column_names])
        path = self.store.location.absolute(self.store.trace_path(key)) if done else None
        return seed_run(ctx, record, trace, parent_id, path)

    def trace_of(self, key: str):
        """The statistics' columns of a done run's trace (kept, else read from the store)."""
        trace = self.traces.get(key)
        if trace is None:
            trace = self.store.trace(key)
        return trace.select([c for c in self.columns if c in trace.column_names])

    def log(self, runs: list[NewRun]) -> None:
        """Log ``runs``: those new together where the store takes a batch, the others (and
        every run elsewhere) through the client, several at a time."""
        batch = self.conn.write_runs is not None
        new = [run for run in runs if batch and run.key not in self.runs]
        rest = [run for run in runs if not batch or run.key in self.runs]
        if new:
            self._write_new(new)
        if len(rest) > 1:
            with ThreadPoolExecutor(min(CLIENT_THREADS, len(rest))) as pool:
                self.remember(list(pool.map(self._log_one, rest)))
        elif rest:
            self.remember([self._log_one(rest[0])])

    def _write_new(self, new: list[NewRun]) -> None:
        """Create the runs ``new`` in one batch, then attach the finished ones' traces."""
        self.conn.write_runs(new)
        fault_point("after-mlflow-create")
        if self.artifacts:
            for run in new:
                if run.status == "FINISHED":
                    self._log_trace(run.run_id, run.key)
        self.remember([(run.key, run.run_id, run.status) for run in new])

    def _log_one(self, run: NewRun) -> tuple[str, str, str]:
        """One run through the client: created (every tag at creation: one write fewer), or
        found (an orphan, a failed run redone) and completed; (run key, run id, status)."""
        client = self.conn.client
        run_id = self.runs.get(run.key, (None, ""))[0]
        tags, params = run.tags, run.params
        if run_id is None:
            run_id = self.conn.create_run(
                run.name,
                run.start_ms,
                {t.key: t.value for t in run.tags},
                seed_filter(self.sweep_id) + f" and tags.`optfarm.run_key` = '{run.key}'",
            )
            tags = []
            fault_point("after-mlflow-create")
        else:  # parameters cannot change: log those it lacks (older versions logged others)
            have = client.get_run(run_id).data.params
            params = [p for p in params if p.key not in have]
        self.conn.log_batch(run_id, params, run.metrics, tags)
        if self.artifacts and run.status == "FINISHED":
            self._log_trace(run_id, run.key)
        client.set_terminated(run_id, run.status, end_time=run.end_ms)
        return run.key, run_id, run.status

    def _log_trace(self, run_id: str, key: str) -> None:
        with self.store.local_copy(self.store.trace_path(key)) as trace:
            self.conn.client.log_artifact(run_id, str(trace))

    def end_orphans(self) -> None:
        """Mark FAILED the orphans no stored run completed."""
        for key in sorted(self.orphans):
            run_id, status = self.runs[key]
            if status == "RUNNING":
                self.conn.client.set_tag(
                    run_id,
                    "optfarm.error",
                    "orphan: its driver stopped before the run was logged; the run is not stored",
                )
                self.conn.client.set_terminated(run_id, "FAILED")
                self.remember([(key, run_id, "FAILED")])

    def remember(self, logged: list[tuple[str, str, str]]) -> None:
        """Note (run key, run id, status) of runs logged, here and in the cache."""
        for key, run_id, status in logged:
            self.runs[key] = (run_id, status)
        self.cache.append(
            [
                {"parent": self.parent, "key": key, "run": run_id, "status": status}
                for key, run_id, status in logged
            ]
        )
