"""MLflow tracking of sweeps (ARCHITECTURE.md, "Where each concept lives"): the ``Tracker``,
which logs a sweep's stored runs as they are stored, and the commands' entry points
(``sync``, ``close_open_runs``). Every MLflow call of optfarm is in this package, one piece
each:

- ``mlflow_connection``: the URI, the store and its repair, the experiment;
- ``sweep_run``, ``variant_runs``, ``seed_runs``: the three levels of a sweep's runs;
- ``logged_statistics``: the statistics the variant and sweep runs carry;
- ``run_cache``: the folder's cache of what is logged (``mlflow_runs.jsonl``);
- ``strays``: a second run of one key, deleted;
- ``mlflow_mapping`` (stored run -> MLflow run, pure functions), ``variants`` (the variant
  level's keys, names and parameters), ``mlflow_logger`` (the background thread),
  ``mlflow_bulk`` (an MLflow database, sqlite or PostgreSQL, written in batches).

Layout: one parent run per sweep, one nested run per variant (dataset x optimizer x
parameters x problem) and, nested in it, one run per run key (a seed).

Exactly once per run key and per variant, whatever happens: every run is tagged with the
sweep's id and its key, and *found* by these tags on the tracking server (``search_runs``)
before anything is created, so a moved or copied folder, a lost cache, a killed driver or a
second ``farm sync`` finds the runs already there. Whatever the server's speed, too: a create
is asked once, and looked up by its tags when its answer is lost before it is asked again
(``Connection.create_run``). Should a server carry out a create after that look-up, the
second run (a stray) is deleted when the invocation ends; a later invocation, or ``farm
sync`` (always), looks for strays whenever the cache cannot say the last end left none
(``optfarm.farm.tracking.strays``: an older version's, a killed driver's).

Every stop closes the sweep's runs: ``close(drain=True)`` (a signal, a lost Ray head, a Ray
that did not start) drops what is still queued (it is stored: the next run of the sweep or
``farm sync`` logs it), ends each open variant run KILLED (seeds missing) or FAILED, and the
parent FAILED. ``close_open_runs`` does the same from another process, e.g. when the driver
itself was ended. A later run of the sweep reopens what it adds to.

Cost: the logger thread writes the runs queued together: to the folder's own sqlite store (or
any ``sqlite:///`` or ``postgresql+psycopg://`` database URI, e.g. the database a team's
``mlflow server`` serves), each created complete in one transaction per batch
(``optfarm.farm.tracking.mlflow_bulk``); to a tracking server that runs optfarm's MLflow app
(``optfarm.farm.tracking.mlflow_server_app``) the same batch in one request, which the server
writes so; to any other tracking server through the client, several runs at a time
(``seed_runs``). The parent run is touched once when a sweep starts and once when it ends; a
resumed sweep that the cache says is logged does not open MLflow at all.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from optfarm.farm.store.store import Store
from optfarm.farm.tracking import strays, sweep_run
from optfarm.farm.tracking.logged_statistics import Statistics, log_statistics
from optfarm.farm.tracking.mlflow_connection import Connection, resolve_uri, runs_page
from optfarm.farm.tracking.mlflow_logger import Logger
from optfarm.farm.tracking.mlflow_mapping import RunContext, span_ms
from optfarm.farm.tracking.run_cache import CACHE, RunCache
from optfarm.farm.tracking.seed_runs import SeedRuns
from optfarm.farm.tracking.strays import key_of
from optfarm.farm.tracking.uris import hide_password
from optfarm.farm.tracking.variant_runs import VariantRuns

__all__ = ["CACHE", "Statistics", "Tracker", "close_open_runs", "resolve_uri", "sweep_uri", "sync"]


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
        self.statistics = statistics
        self.parent: str | None = None
        local = self.store.location.local_dir
        self._conn = Connection(
            self.uri, self.store.location.uri, local, self.experiment, description
        )
        self._cache = RunCache(local, self.uri, self.sweep_id)
        columns = statistics.columns if statistics is not None else None
        self._seeds = SeedRuns(
            self._conn, self.store, self._cache, self.sweep_id, artifacts, columns
        )
        self._variants = VariantRuns(self._conn)
        self._ctx: RunContext | None = None
        self._logger: Logger | None = None
        self._started_ms = 0  # when this invocation started
        self._params: dict[str, Any] = {}
        self._reconcile = False

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
        reconcile: bool = False,
    ) -> bool:
        """Learn what is logged of the runs ``specs`` (run key -> spec as stored; ``records``:
        the runs stored before). When the cache says every one is stored, logged and the sweep
        ended FINISHED, there is nothing to do; else start the logger, which first opens the
        store (seconds: the sweep's runs go on meanwhile), finds (by its sweep id tag) or
        creates the sweep's parent run and marks it RUNNING, and finds its variant and seed
        runs. With ``wait``, returns once that is done: False when offline. ``reconcile``:
        every run of the sweep is looked up on the server, its strays deleted
        (``optfarm.farm.tracking.strays``), whatever the cache says (done anyway when the
        cache cannot tell there are none)."""
        self._started_ms = int(time.time() * 1000)
        records = dict(records or {})  # a copy: the sweep adds records while the logger reads
        self._cache.read()
        self._reconcile = reconcile
        parent = None if reconcile else self._cache.finished_parent(specs, records)
        if parent is not None:
            self.parent = self._seeds.parent = parent
            self._seeds.runs = {k: ("", "FINISHED") for k in specs}
            return True
        self._params = params or {}
        self._logger = Logger(lambda: self._begin(specs, records), self._write)
        self._logger.start()
        if wait:
            self._logger.begun.wait()
        return not self.offline

    def _begin(self, specs: dict[str, dict], records: dict[str, dict]) -> None:
        if not self._conn.open():
            return
        try:
            self._ctx = RunContext.of(self.sweep_id, self.sweep_name, specs)
            self._seeds.spans = {k: span_ms(r) for k, r in records.items()}
            found = self._open_parent()
            self._seeds.runs = self._cache.runs_of(self.parent)
            if not found:
                return
            if self._reconcile or not self._cache.without_strays(self.parent):
                self._learn(records)
                return
            if any(
                self._seeds.runs.get(k, ("", ""))[1] not in ("FINISHED", "FAILED") for k in specs
            ):
                self._seeds.find()
            self._variants.find(self._ctx, records)
        except Exception as e:
            self._conn.warn("start sweep", e)

    def _learn(self, records: dict[str, dict]) -> None:
        """Learn every run of the sweep on the server, its strays deleted first."""
        kept = strays.reconcile(self._conn, self.sweep_id, self._known())
        self._seeds.learn([r for r in kept if key_of(r)[0] == "run"])
        self._variants.learn(self._ctx, records, [r for r in kept if key_of(r)[0] == "variant"])

    def _open_parent(self) -> bool:
        """Find the sweep's run and mark it RUNNING, or create it; whether it was found."""
        self.parent = self._seeds.parent = sweep_run.find(
            self._conn, self.sweep_id, self._cache.last_parent()
        )
        if self.parent is not None:
            self._conn.client.update_run(self.parent, status="RUNNING")
            return True
        first = min((s for s, _ in self._seeds.spans.values()), default=self._started_ms)
        self.parent = self._seeds.parent = sweep_run.create(
            self._conn,
            self.store,
            self.sweep_name,
            self.sweep_id,
            min(self._started_ms, first),
            self._params,
            self._seeds.artifacts,
        )
        return False

    def _known(self) -> dict[tuple[str, str], str]:
        """(kind, key) -> the id of the run this tracker logs to (``strays.key_of``)."""
        known = {("sweep", ""): self.parent}
        known.update({("variant", v): i for v, (i, _) in self._variants.runs.items()})
        known.update({("run", k): i for k, (i, _) in self._seeds.runs.items() if i})
        return known

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
        logs them). No run of the sweep is left RUNNING either way. When a create's answer
        was lost, the sweep's strays are deleted first (not on a stop: the next invocation
        does it)."""
        if self._logger is None:
            return
        self._logger.stop(drop=drain)
        self._logger = None
        if self.offline:
            return
        try:
            checked = not self._conn.late_creates
            if not checked and not drain:  # a create carried out late may have made a stray
                strays.reconcile(self._conn, self.sweep_id, self._known())
                checked = True
            self._seeds.end_orphans()
            self._variants.end_open(self._ctx, self._seeds.runs, self._seeds.spans)
            if records is not None and not drain:
                log_statistics(
                    self._conn,
                    self._ctx,
                    self.statistics,
                    self._variants,
                    self.parent,
                    records,
                    self._seeds.trace_of,
                )
                self._variants.news.clear()
                self._seeds.traces.clear()
            status = "FAILED" if failed or drain else "FINISHED"
            self._conn.client.set_terminated(self.parent, status)
            end = {"parent": self.parent, "closed": status}
            self._cache.append([{**end, "strays": 0} if checked else end])
        except Exception as e:
            self._conn.warn("end sweep", e)

    def log_sweep_artifacts(self, files: list[Path], artifact_path: str) -> bool:
        """Attach ``files`` (e.g. ``farm report``'s) to the sweep's parent run, under
        ``artifact_path``; False when the sweep has no parent run here or tracking fails."""
        parent = sweep_run.log_artifacts(self._conn, self.sweep_id, files, artifact_path)
        if parent is None:
            return False
        self.parent = parent
        return True

    # -- the runs --------------------------------------------------------------------------------
    def logged(self, record: dict) -> bool:
        """Whether the stored run is in MLflow in the state its record says (FINISHED for a
        done run, FAILED for a failed one), as far as ``start`` learnt."""
        return self._seeds.logged(record)

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
        """Log stored runs: their variant runs created or reopened first, then the seed runs,
        then the variants whose seeds are all logged are ended."""
        ctx, seeds, variants = self._ctx, self._seeds, self._variants
        touched = seeds.note_spans(ctx, items)
        variants.open(ctx, touched, seeds.spans, self.parent)
        runs = [
            seeds.new_run(ctx, record, trace, self._parent_of(record["run_key"]))
            for record, trace in items
        ]
        variants.news |= touched
        seeds.log(runs)
        variants.end_complete(ctx, touched, seeds.runs, seeds.spans)

    def _parent_of(self, key: str) -> str:
        """The run a seed run is nested in: its variant's, else the sweep's."""
        v = self._ctx.layout.variant_of.get(key)
        return self._variants.runs[v][0] if v is not None else self.parent


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
        return _upload(tracker, records, stored)


def _upload(tracker: Tracker, records: list[dict], stored: Mapping[str, dict]) -> tuple[int, int]:
    """``sync``'s upload of the stored runs ``records`` (``stored``: by run key)."""
    if not tracker.start(
        {k: r["spec"] for k, r in stored.items()},
        {"runs": len(records)},
        dict(stored),
        wait=True,
        reconcile=True,
    ):
        return 0, len(records)
    todo = [r for r in records if not tracker.logged(r)]
    for r in todo:
        tracker.submit(r)
    tracker.close(failed=any(r["status"] != "done" for r in records), records=dict(stored))
    missing = sum(1 for r in todo if not tracker.logged(r))
    return len(todo) - missing, missing
