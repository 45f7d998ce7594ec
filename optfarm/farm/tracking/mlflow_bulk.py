"""Many new MLflow runs written to an MLflow database (a sqlite file, or the PostgreSQL database
that a team's ``mlflow server`` serves) in one transaction.

Why: through MLflow's client, a run costs ``create_run`` + ``log_batch`` + ``set_terminated``:
36 SQL statements in 12 sessions and 6 commits (cProfile of the logger over 300 runs: 130 ms
wall per run, most of it in SQLAlchemy's ORM), which held a tracked sweep to 0.06x the runs/s
of an untracked one. Here a batch of runs -- each created with its tags, parameters, per-step
and summary metrics, latest-metric rows, terminal status and end time -- is a handful of
``executemany`` inserts into MLflow's own tables (those of its ORM models, through the store's
own session maker) committed once: about 1 ms of CPU per run. The same holds for a PostgreSQL
database named by MLflow's database tracking URI (``postgresql+psycopg://...``), and for a
tracking server that runs optfarm's MLflow app (``mlflow server --app-name optfarm``,
``optfarm.farm.tracking.mlflow_server_app``): the client sends a batch of runs in one request
(``remote_writer``, through MLflow's own ``http_request``: its credentials, TLS settings and
retries) and the server writes them here into its database. Through a stock server a run costs
3 REST calls and 27-36 ms of the server's CPU, which held a tracked sweep to 0.2-0.35x the
runs/s of the sqlite path on one 2-core machine. Other tracking servers keep the public client
path (``MlflowClient.log_batch``); ``tests/farm/test_tracking_layout.py`` shows the two paths
read back identically through ``MlflowClient`` (info, parameters, tags, metrics and their
histories), ``tests/farm/test_tracking_postgres.py`` the same through a PostgreSQL-backed
server, for runs written into its database and through its optfarm app.

Tied to MLflow 3.17.x (the release requirements/lock.txt pins): it writes the rows that
``SqlAlchemyStore.create_run``, ``log_batch`` (``_log_params``, ``_log_metrics``,
``_update_latest_metrics_if_necessary``, ``_set_tags``) and ``update_run_info`` of that version
write, and validates with the same functions. ``bulk_store`` refuses any other major.minor
version, and databases other than sqlite and PostgreSQL (not tried), so a dependency upgrade
falls back to the client path until this is checked again.
Only runs that do not exist yet are written here (the caller found them absent by tag).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from optfarm.farm.tracking.mlflow_mapping import NewRun

__all__ = [
    "DATABASES",
    "ENDPOINT",
    "MLFLOW_VERSION",
    "REQUEST_RUNS",
    "bulk_store",
    "remote_writer",
    "runs_from_json",
    "runs_to_json",
    "store_of",
    "write_runs",
]

MLFLOW_VERSION = "3.17."  # the MLflow release whose schema this module writes
DATABASES = ("sqlite", "postgresql")  # those it was tried on
ENDPOINT = "/api/2.0/optfarm/runs/create-many"  # optfarm's MLflow app (mlflow_server_app)
REQUEST_RUNS = 500  # runs per request to it (the logger's batch: ~0.5 MB of JSON)


def bulk_store(client):
    """The client's ``SqlAlchemyStore`` when this module can write it (``store_of``), else
    None (use the client)."""
    from optfarm.farm.tracking.mlflow_private import client_store

    return store_of(client_store(client))


def store_of(store):
    """``store`` when it is a ``SqlAlchemyStore`` of one of ``DATABASES`` and MLflow is the
    release this module is written for, else None."""
    import mlflow
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    if (
        not isinstance(store, SqlAlchemyStore)
        or store.db_type not in DATABASES
        or not mlflow.__version__.startswith(MLFLOW_VERSION)
    ):
        return None
    return store


def remote_writer(uri: str) -> Callable[[str, Sequence[NewRun]], None] | None:
    """For a tracking server at ``uri`` that runs optfarm's MLflow app on a database this module
    writes, with this MLflow release: ``write(experiment_id, runs)``, which sends the runs in
    one request; else None (a stock server, another store or release: use the client)."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    creds = get_default_host_creds(uri)  # as MLflow's client: MLFLOW_TRACKING_USERNAME, ...
    try:
        answer = http_request(creds, ENDPOINT, "GET", max_retries=0, timeout=10)
    except (MlflowException, OSError):
        return None
    if answer.status_code != 200:
        return None
    try:
        info = answer.json()
    except ValueError:
        return None
    if not (info.get("writable") and str(info.get("mlflow", "")).startswith(MLFLOW_VERSION)):
        return None

    def write(experiment_id: str, runs: Sequence[NewRun]) -> None:
        from mlflow.utils.rest_utils import http_request_safe

        for i in range(0, len(runs), REQUEST_RUNS):  # each request one transaction
            http_request_safe(
                creds,
                ENDPOINT,
                "POST",
                timeout=120,
                json={
                    "experiment_id": experiment_id,
                    "runs": runs_to_json(runs[i : i + REQUEST_RUNS]),
                },
            )

    return write


def runs_to_json(runs: Sequence[NewRun]) -> list[dict]:
    """``runs`` as JSON values (a metric's NaN or infinity as its ``repr``: JSON has none)."""

    def number(v: float):
        return v if math.isfinite(v) else repr(float(v))

    return [
        {
            "run_id": r.run_id,
            "key": r.key,
            "name": r.name,
            "status": r.status,
            "start_ms": r.start_ms,
            "end_ms": r.end_ms,
            "tags": [[t.key, t.value] for t in r.tags],
            "params": [[p.key, p.value] for p in r.params],
            "metrics": [[m.key, number(m.value), m.timestamp, m.step] for m in r.metrics],
        }
        for r in runs
    ]


def runs_from_json(items: list[dict]) -> list[NewRun]:
    """The runs ``runs_to_json`` made (KeyError, TypeError or ValueError when malformed)."""
    from mlflow.entities import Metric, Param, RunTag

    return [
        NewRun(
            name=str(i["name"]),
            start_ms=int(i["start_ms"]),
            end_ms=None if i["end_ms"] is None else int(i["end_ms"]),
            status=str(i["status"]),
            key=str(i["key"]),
            run_id=str(i["run_id"]),
            tags=[RunTag(str(k), str(v)) for k, v in i["tags"]],
            params=[Param(str(k), str(v)) for k, v in i["params"]],
            metrics=[Metric(str(k), float(v), int(t), int(step)) for k, v, t, step in i["metrics"]],
        )
        for i in items
    ]


def write_runs(store, experiment_id: str, artifact_location: str, runs: Sequence[NewRun]) -> None:
    """Create ``runs`` in the (active) experiment ``experiment_id`` whose artifact location is
    ``artifact_location``, in one transaction (all or none)."""
    from mlflow.entities import RunStatus
    from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME

    from optfarm.farm.tracking.mlflow_private import table_models, validated_batch

    if not runs:
        return
    models = table_models()
    SqlRun, SqlTag, SqlParam, SqlMetric, SqlLatestMetric = models.values()
    rows: dict = {model: [] for model in models.values()}
    for run in runs:
        metrics, params, tags = validated_batch(run.metrics, run.params, run.tags)
        tags = {t.key: t.value for t in tags}
        tags.setdefault(MLFLOW_RUN_NAME, run.name)
        RunStatus.from_string(run.status)  # a known status, or MLflow's error
        rows[SqlRun].append(_run_row(store, experiment_id, artifact_location, run, tags))
        rows[SqlTag] += [{"run_uuid": run.run_id, "key": k, "value": v} for k, v in tags.items()]
        rows[SqlParam] += [{"run_uuid": run.run_id, "key": p.key, "value": p.value} for p in params]
        metric_rows, latest = _metric_rows(store, run.run_id, metrics)
        rows[SqlMetric] += metric_rows
        rows[SqlLatestMetric] += latest
    with store.ManagedSessionMaker(read_only=False) as session:
        _insert(store, session.connection(), rows)


def _run_row(
    store, experiment_id: str, artifact_location: str, run: NewRun, tags: dict[str, str]
) -> dict:
    """The ``runs`` table's row of ``run``."""
    from mlflow.entities import SourceType
    from mlflow.entities.lifecycle_stage import LifecycleStage
    from mlflow.utils.mlflow_tags import MLFLOW_USER
    from mlflow.utils.uri import append_to_uri_path

    return {
        "run_uuid": run.run_id,
        "name": run.name,
        "artifact_uri": append_to_uri_path(
            artifact_location, run.run_id, store.ARTIFACTS_FOLDER_NAME
        ),
        "experiment_id": int(experiment_id),
        "source_type": SourceType.to_string(SourceType.UNKNOWN),
        "source_name": "",
        "entry_point_name": "",
        "user_id": tags.get(MLFLOW_USER, "unknown"),
        "status": run.status,
        "start_time": run.start_ms,
        "end_time": run.end_ms,
        "deleted_time": None,
        "source_version": "",
        "lifecycle_stage": LifecycleStage.ACTIVE,
    }


def _metric_rows(store, run_id: str, metrics) -> tuple[list[dict], list[dict]]:
    """The ``metrics`` table's rows of one run's (validated) metrics and the
    ``latest_metrics`` rows: for each key the largest (step, timestamp, value), as the store
    keeps it."""
    rows, latest = [], {}
    for m in dict.fromkeys(metrics):  # MLflow drops exact duplicates
        is_nan, value = store.sanitize_metric_value(m.value)
        row = {
            "run_uuid": run_id,
            "key": m.key,
            "value": value,
            "timestamp": m.timestamp,
            "step": m.step,
            "is_nan": is_nan,
        }
        rows.append(row)
        old = latest.get(m.key)
        if old is None or (m.step, m.timestamp, value) > (
            old["step"],
            old["timestamp"],
            old["value"],
        ):
            latest[m.key] = row
    return rows, list(latest.values())


def _insert(store, connection, rows: dict) -> None:
    """Insert ``rows`` (model -> row dicts) in their order: parents (runs) before the rows
    that refer to them."""
    for model, values in rows.items():
        if not values:
            continue
        if store.db_type != "sqlite":  # SQLAlchemy's multi-row INSERT ... VALUES
            connection.execute(model.__table__.insert(), values)
            continue
        columns = list(values[0])  # sqlite's own executemany: a third of SQLAlchemy's time
        names = ", ".join(f'"{c}"' for c in columns)
        connection.exec_driver_sql(
            f'INSERT INTO "{model.__tablename__}" ({names}) VALUES '
            f"({', '.join('?' * len(columns))})",
            [tuple(row[c] for c in columns) for row in values],
        )
