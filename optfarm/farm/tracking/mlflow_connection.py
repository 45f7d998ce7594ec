"""The connection to an MLflow tracking store: the URI a sweep tracks to, opening the store
and the sweep's experiment, repairing the folder's own sqlite store, and the one warning that
says tracking is off and what to do.

The tracking URI is, in order: the one given (``--tracking-uri``, kept in ``sweep.json``),
``$MLFLOW_TRACKING_URI``, else ``sqlite:///<out>/mlflow.db``. A new sqlite store is created
under a temporary name and moved into place once MLflow has created its tables, so a driver
killed (or a disk filling) in the middle leaves no half-created store behind; one left by an
older version is moved aside and created again (the results store holds every run it held).
If the server is unreachable the connection warns once and goes offline: the results are in
the store and ``farm sync DIR`` replays them later.

Where a user compares the runs (``runs_page``): MLflow 3.17's UI no longer reads the
experiment's ``mlflow.experimentKind`` tag to choose what an experiment opens on. Its kind
follows the browser's *workflow type*, the "GenAI / Model training" switch of its sidebar: the
page's ``workflowType`` query parameter, else the browser's saved choice (local storage
``mlflow.workflowType``), else GenAI, whose overview (traces, judges, prompts) shows no runs.
So every address the farm prints opens the runs with ``?workflowType=machine_learning``
(``tests/farm/test_mlflow_ui.py`` loads it in a headless Chromium), and on the seed runs with
the board's numbers as columns, ``&viewStateShareKey=`` the view every sweep's experiment
carries (``optfarm.farm.tracking.runs_view``). The kind tag is still set, for the older 3.x
UIs that read it. The experiment's description (the UI's "About this experiment", the
``mlflow.note.content`` tag) is the sweep spec's ``description``.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from optfarm.farm.tracking.mlflow_mapping import NewRun
from optfarm.farm.tracking.runs_view import SEED_RUNS_VIEW, VIEW_KEY, VIEW_TAG
from optfarm.farm.tracking.uris import hide_password

__all__ = ["EXPERIMENT_KIND", "UI_COMMAND", "Connection", "resolve_uri", "runs_page", "sqlite_path"]

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

# MLflow 3's experiment kinds (the UI's ExperimentKind): "custom_model_development" is shown as
# "Machine learning" and opens on the runs; "genai_development" opens on traces
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
DESCRIPTION_TAG = "mlflow.note.content"
# MLflow's UI for a store the farm writes itself (a database): one worker (its default 4 did
# not come up in 5 minutes on 2 busy cores), on loopback (docs/guide/first-hour.md)
UI_COMMAND = "mlflow ui --workers 1 --host 127.0.0.1 --port 5000"
LOCAL_UI = "http://127.0.0.1:5000"
CREATE_ATTEMPTS = 3  # as MLflow's client with the farm's 2 retries
_CREATE_BACKOFF_S = 1.0  # then 2 s
_CREATE = "/api/2.0/mlflow/runs/create"
_MAX_ENTITIES = 1000  # MLflow's limits per log_batch call: 1000 entities, 100 params
_MAX_PARAMS = 100


def runs_page(uri: str, experiment_id: str) -> tuple[str, str | None]:
    """The address of the experiment's runs in MLflow's UI, and the command that serves it
    (None for a server, which serves its own UI): the UI opens there on the runs, not on
    its GenAI overview, and on its seed runs' view (the module docstring)."""
    server = uri.startswith(("http://", "https://"))
    base = uri.rstrip("/") if server else LOCAL_UI
    page = (
        f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
        f"&viewStateShareKey={VIEW_KEY}"
    )
    return page, None if server else f"{UI_COMMAND} --backend-store-uri {uri}"


def resolve_uri(out, uri: str | None = None) -> str:
    """``out``: the sweep's output (a path, a ``pyarrow.fs`` URI or a ``Location``): its
    sqlite store is in the location's local folder."""
    from optfarm.farm.store.location import Location

    return (
        uri
        or os.environ.get("MLFLOW_TRACKING_URI")
        or f"sqlite:///{Location.of(out).local_dir / 'mlflow.db'}"
    )


def sqlite_path(uri: str) -> Path | None:
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


class _AnswerLost(Exception):
    """A request that got no answer (its cause says why): it may have been carried out."""


def first_line(e: BaseException | str) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


class Connection:
    """An open tracking store and the sweep's experiment in it (``open``), or offline after
    one warning (``warn``). ``folder``: the sweep's output as the user names it (``farm sync
    FOLDER``); ``local_dir``: where its own sqlite store lives."""

    def __init__(
        self, uri: str, folder: str, local_dir: Path, experiment: str, description: str = ""
    ):
        self.uri, self.folder, self.experiment = uri, folder, experiment
        self.description = description
        self.local_dir = local_dir
        self.offline = False
        self.client = None
        # ``write_runs(runs)``: new runs written in one go (``optfarm.farm.tracking.mlflow_bulk``),
        # or None
        self.write_runs: Callable[[Sequence[NewRun]], None] | None = None
        self.experiment_id: str | None = None
        self.late_creates = 0  # creates whose answer was lost (``create_run``)

    def warn(self, what: str, e: BaseException | str) -> None:
        """Go offline; the first time, say so on stderr with the remedy (``farm sync``)."""
        if not self.offline:
            print(
                f"farm: warning: MLflow tracking at {hide_password(self.uri)} unavailable "
                f"({what}: {first_line(e)}); results are stored, upload them later with `farm "
                f"sync {self.folder}`",
                file=sys.stderr,
            )
        self.offline = True

    def open(self) -> bool:
        """Open the store and the experiment (once); False when offline."""
        if self.offline:
            return False
        if self.client is not None:
            return True
        if self.uri.startswith(("http://", "https://")):
            try:  # a server that is down refuses at once; a busy one may take seconds
                urllib.request.urlopen(self.uri.rstrip("/") + "/health", timeout=10).read()
            except OSError as e:
                self.warn("no answer", e)
                return False
        db = sqlite_path(self.uri)
        try:
            if db is not None:
                _sqlite_write_ahead_log()
                _create_sqlite_store(db)
            self._open()
        except Exception as e:  # any failure of the tracking backend
            own = db is not None and db.resolve().parent == self.local_dir.resolve()
            if not (own and "already exists" in str(e)):
                self._unusable(e)
                return False
            try:
                self._move_aside(db)
                _create_sqlite_store(db)
                self._open()
            except Exception as e2:
                self._unusable(e2)
                return False
        return True

    def _open(self) -> None:
        from mlflow.tracking import MlflowClient

        from optfarm.farm.tracking.mlflow_bulk import bulk_store, remote_writer, write_runs

        client = MlflowClient(tracking_uri=self.uri)
        exp = client.get_experiment_by_name(self.experiment)
        if exp is None:
            db = sqlite_path(self.uri)
            location = None if db is None else (db.parent / "mlartifacts").as_uri()
            tags = {EXPERIMENT_KIND[0]: EXPERIMENT_KIND[1], VIEW_TAG: SEED_RUNS_VIEW}
            if self.description:
                tags[DESCRIPTION_TAG] = self.description
            exp = client.get_experiment(
                client.create_experiment(self.experiment, location, tags=tags)
            )
        else:  # made by an older version: the kind and view set, a user's description kept
            if EXPERIMENT_KIND[0] not in exp.tags:
                client.set_experiment_tag(exp.experiment_id, *EXPERIMENT_KIND)
            if exp.tags.get(VIEW_TAG) != SEED_RUNS_VIEW:
                client.set_experiment_tag(exp.experiment_id, VIEW_TAG, SEED_RUNS_VIEW)
            if self.description and not exp.tags.get(DESCRIPTION_TAG):
                client.set_experiment_tag(exp.experiment_id, DESCRIPTION_TAG, self.description)
        self.experiment_id = exp.experiment_id
        self.client = client
        store = bulk_store(client)
        if store is not None:  # a database: sqlite, or a team's PostgreSQL
            self.write_runs = functools.partial(
                write_runs, store, exp.experiment_id, exp.artifact_location
            )
        elif self.uri.startswith(("http://", "https://")):  # a server with optfarm's app
            remote = remote_writer(self.uri)
            if remote is not None:
                self.write_runs = functools.partial(remote, exp.experiment_id)

    def _move_aside(self, db: Path) -> None:
        """The folder's own store, its tables created half-way by a version that created it in
        place (its creation interrupted): it holds nothing the results store does not."""
        aside = db.with_name(f"{db.name}.broken-{time.strftime('%Y%m%dT%H%M%S')}")
        _close_engine(self.uri)
        for suffix in ("", "-wal", "-shm"):  # the store and its write-ahead log
            if db.with_name(db.name + suffix).exists():
                os.replace(db.with_name(db.name + suffix), aside.with_name(aside.name + suffix))
        print(
            f"farm: warning: {db} was left half-created: its creation was interrupted (the "
            f"driver was stopped, e.g. with the Ray head, or the disk filled while MLflow "
            f"created its tables). It holds no run the results store lacks: moved aside to "
            f"{aside.name} (delete it), created again, and the sweep's runs are logged to it "
            f"again",
            file=sys.stderr,
        )

    def _unusable(self, e: BaseException) -> None:
        """One warning naming the store and what to do about it."""
        db = sqlite_path(self.uri)
        text = first_line(e)
        if db is None:
            if isinstance(e, ModuleNotFoundError) and e.name in ("psycopg", "psycopg2"):
                e = f"{text}: pip install 'optfarm[postgresql]'"
            self.warn("connect", e)
            return
        if "readonly" in text or "read-only" in text or "unable to open" in text:
            fix = f"make {db.parent} writable, or pass --tracking-uri"
        elif "full" in text:
            fix = f"free space on {db.parent}"
        elif "upgrade" in text or "migrat" in text:
            fix = f"run `mlflow db upgrade {self.uri}`"
        else:
            fix = f"move {db} aside to start it afresh"
        print(
            f"farm: warning: MLflow tracking store {db} cannot be opened ({text}); results "
            f"are stored: {fix}, then `farm sync {self.folder}`",
            file=sys.stderr,
        )
        self.offline = True

    def create_run(self, name: str, start_ms: int, tags: dict[str, str], identity: str) -> str:
        """Create a RUNNING run of the experiment (``tags`` at creation) and return its id,
        never twice: ``identity`` is a search that finds it (its sweep id and key).

        A database creates it in one transaction. A tracking server is asked once per
        attempt, without the HTTP client's own retries (MLflow's retry every request, so a
        create answered after the request timeout was made twice): when the answer is lost
        (a timeout, a dropped connection, a 5xx), the run is looked up by ``identity`` before
        it is asked for again, ``CREATE_ATTEMPTS`` times in all. Such a create is counted in
        ``late_creates``: a run it made after the look-up is a stray for
        ``optfarm.farm.tracking.strays`` to delete."""
        if not self.uri.startswith(("http://", "https://")):
            run = self.client.create_run(
                self.experiment_id, start_time=start_ms, run_name=name, tags=tags
            )
            return run.info.run_id
        for attempt in range(CREATE_ATTEMPTS):
            try:
                return self._create_once(name, start_ms, tags)
            except _AnswerLost as e:
                lost = e.__cause__
            self.late_creates += 1
            found = self.search(identity)
            if found:
                return min(found, key=lambda r: (r.info.start_time, r.info.run_id)).info.run_id
            time.sleep(_CREATE_BACKOFF_S * 2**attempt)
        raise lost

    def _create_once(self, name: str, start_ms: int, tags: dict[str, str]) -> str:
        """One ``runs/create`` request, not retried; ``_AnswerLost`` when no answer came."""
        from mlflow.utils.credentials import get_default_host_creds
        from mlflow.utils.mlflow_tags import MLFLOW_USER
        from mlflow.utils.rest_utils import http_request, verify_rest_response

        body = {
            "experiment_id": str(self.experiment_id),
            "user_id": tags.get(MLFLOW_USER, "unknown"),  # as MlflowClient.create_run
            "start_time": start_ms,
            "run_name": name,
            "tags": [{"key": k, "value": v} for k, v in tags.items()],
        }
        try:
            answer = http_request(
                get_default_host_creds(self.uri), _CREATE, "POST", max_retries=0, json=body
            )
        except Exception as e:  # the request may have reached the server
            raise _AnswerLost() from e
        return verify_rest_response(answer, _CREATE).json()["run"]["info"]["run_id"]

    def log_batch(self, run_id: str, params: list, metrics: list, tags: list) -> None:
        """As few ``log_batch`` calls as MLflow's limits allow (one for a run of ordinary
        size): parameters, tags and metrics together."""
        while params or metrics or tags:
            p, params = params[:_MAX_PARAMS], params[_MAX_PARAMS:]
            t, tags = tags[: _MAX_ENTITIES - len(p)], tags[_MAX_ENTITIES - len(p) :]
            room = _MAX_ENTITIES - len(p) - len(t)
            m, metrics = metrics[:room], metrics[room:]
            self.client.log_batch(run_id, metrics=m, params=p, tags=t)

    def search(self, filter_string: str) -> list:
        """Every run of the experiment that ``filter_string`` finds (all pages)."""
        runs, token = [], None
        while True:
            page = self.client.search_runs(
                [self.experiment_id], filter_string, max_results=50_000, page_token=token
            )
            runs += list(page)
            token = page.token
            if not token:
                return runs


def _create_sqlite_store(db: Path) -> None:
    """Create the sqlite store ``db`` if it does not exist: under a temporary name beside it,
    moved into place once MLflow has created and migrated its tables (all or nothing)."""
    if db.exists():
        return
    from mlflow.tracking import MlflowClient

    for stale in db.parent.glob(f".{db.name}.creating-*"):  # a creation that was stopped
        stale.unlink(missing_ok=True)
    tmp = db.with_name(f".{db.name}.creating-{os.getpid()}")
    uri = f"sqlite:///{tmp}"
    try:
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)  # creates the tables
        _close_engine(uri)  # the write-ahead log checkpointed into the file
        os.replace(tmp, db)
    finally:
        for suffix in ("", "-wal", "-shm"):
            tmp.with_name(tmp.name + suffix).unlink(missing_ok=True)


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
    from optfarm.farm.tracking.mlflow_private import cached_engines

    engine = cached_engines().pop(uri, None)
    if engine is not None:
        engine.dispose()
