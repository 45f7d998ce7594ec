"""MLflow for a team: a sweep tracked to an ``mlflow server`` backed by a real PostgreSQL
cluster (its own, on 127.0.0.1, ``optfarm.farm.bench.tracking_server``) with a folder as its
artifact store, read back through ``MlflowClient``: the experiment opens on its runs, the variant
runs span their seeds and carry the statistics, the trace is an artifact, and a resume logs
nothing twice; runs written straight into the server's database (MLflow's database tracking
URI, the bulk path) read back through the server as those sent through it. Skips, saying why,
where PostgreSQL (or psycopg) is not installed."""

from __future__ import annotations

import math
import sys
import urllib.request

import pytest

from optfarm.farm.bench.tracking_server import PostgresMlflowServer, available
from optfarm.farm.report.tracked import STATISTICS
from optfarm.farm.store.store import Store
from optfarm.farm.sweep.runner import run_sweep
from optfarm.farm.sweep.spec import parse_spec


@pytest.fixture(scope="module")
def postgres_server(tmp_path_factory):
    why = available()
    if why:
        pytest.skip(why)
    with PostgresMlflowServer(workers=1) as server:
        yield server


def test_a_sweep_tracked_to_a_postgresql_backed_server(postgres_server, tmp_path):
    from mlflow.tracking import MlflowClient

    spec = parse_spec(
        {
            "name": "team",
            "datasets": ["synthetic"],
            "optimizers": [{"name": "random", "params": {"n_init": [1, 3]}}],
            "seeds": 3,
            "limits": {"iterations": 6},
            "runtime": {"backend": "serial"},
        }
    )
    out = tmp_path / "out"
    report = run_sweep(
        spec,
        out,
        tracking_uri=postgres_server.url,
        artifacts=True,
        progress=False,
        statistics=STATISTICS,
    )
    assert report.complete and not report.tracking_offline
    client = MlflowClient(postgres_server.url)
    exp = client.get_experiment_by_name("team")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    runs = client.search_runs([exp.experiment_id], max_results=100)
    kinds = {
        k: [r for r in runs if r.data.tags["optfarm.kind"] == k]
        for k in ("sweep", "variant", "run")
    }
    assert [len(kinds[k]) for k in ("sweep", "variant", "run")] == [1, 2, 6]
    assert all(r.info.status == "FINISHED" for r in runs)
    records = Store(out).scan().records
    for v in kinds["variant"]:
        seeds = [r for r in kinds["run"] if r.data.tags["mlflow.parentRunId"] == v.info.run_id]
        assert len(seeds) == 3
        assert v.info.start_time == min(r.info.start_time for r in seeds)
        assert v.info.end_time == max(r.info.end_time for r in seeds)
        assert v.data.metrics["runs_done"] == 3 and "exploration_cost_median" in v.data.metrics
    for r in kinds["run"]:
        key = r.data.tags["optfarm.run_key"]
        assert r.info.end_time == int(records[key]["finished_at"] * 1000)
        assert [a.path for a in client.list_artifacts(r.info.run_id)] == [f"{key}.parquet"]
    again = run_sweep(
        spec, out, tracking_uri=postgres_server.url, progress=False, statistics=STATISTICS
    )
    assert again.skipped == 6 and again.done == 0
    assert len(client.search_runs([exp.experiment_id], max_results=100)) == 9


def test_runs_written_into_the_servers_database_read_back_as_those_sent_through_it(
    postgres_server, tmp_path
):
    """MLflow's database tracking URI (``postgresql+psycopg://...``) takes the bulk path
    (``optfarm.farm.tracking.mlflow_bulk``): the same sweep synced into the server's database and
    through the server reads back the same through the server, exactly once."""
    from mlflow.tracking import MlflowClient

    from optfarm.farm.tracking.mlflow_bulk import bulk_store
    from optfarm.farm.tracking.tracking import sync
    from tests.farm.test_tracking_layout import (
        _read_back,
        assert_read_back_alike,
        stored_with_a_failure,
    )

    database = postgres_server.database_uri
    assert bulk_store(MlflowClient(database)) is not None  # the bulk path
    assert bulk_store(MlflowClient(postgres_server.url)) is None  # the client path
    out = tmp_path / "out"
    failed = stored_with_a_failure(out, "db")
    assert sync(out, database, experiment="into-db") == (5, 0)
    assert sync(out, postgres_server.url, experiment="through-server") == (5, 0)

    bulk = _read_back(postgres_server.url, "into-db")
    client = _read_back(postgres_server.url, "through-server")
    assert_read_back_alike(bulk, client, 1 + 2 + 5)
    assert bulk[("run", failed.run_key)]["status"] == "FAILED"

    (out / "mlflow_runs.jsonl").unlink()  # exactly once, found by tag in the database
    assert sync(out, database, experiment="into-db") == (0, 0)
    assert len(_read_back(postgres_server.url, "into-db")) == 8


def test_a_tracking_uri_with_a_password_is_refused_before_anything_is_kept(tmp_path, capsys):
    from optfarm.farm.cli import main

    code = main(
        [
            "sweep",
            "--datasets",
            "synthetic",
            "--optimizers",
            "random",
            "--serial",
            "--out",
            str(tmp_path / "out"),
            "--tracking-uri",
            "postgresql+psycopg://me:secret@127.0.0.1/mlflow",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "secret" not in err and "me:***@127.0.0.1" in err
    assert "PGPASSWORD" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def optfarm_app_server():
    """A PostgreSQL-backed ``mlflow server --app-name optfarm`` under MLflow's default front
    (uvicorn, where the app is wrapped in MLflow's FastAPI app)."""
    why = available()
    if why:
        pytest.skip(why)
    with PostgresMlflowServer(workers=1, threads=0, app="optfarm") as server:
        yield server


def test_runs_sent_through_optfarms_mlflow_app_read_back_as_through_a_stock_server(
    postgres_server, optfarm_app_server, tmp_path, monkeypatch
):
    """A server running optfarm's MLflow app takes a batch of runs in one request
    (``mlflow_bulk.remote_writer``) and writes them in one transaction: they read back as those
    logged run by run through a stock server; a request sent twice writes nothing twice."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request, http_request_safe

    from optfarm.farm.tracking.mlflow_bulk import ENDPOINT, remote_writer, runs_to_json
    from optfarm.farm.tracking.mlflow_mapping import NewRun
    from optfarm.farm.tracking.tracking import sync
    from tests.farm.test_tracking_layout import (
        _read_back,
        assert_read_back_alike,
        stored_with_a_failure,
    )

    app = optfarm_app_server.url
    with urllib.request.urlopen(app + "/") as page:  # MLflow's UI, served as ever
        assert page.status == 200 and b"<html" in page.read().lower()
    assert remote_writer(postgres_server.url) is None  # a stock server: the client path
    assert remote_writer(app) is not None  # optfarm's app: one request a batch
    out = tmp_path / "out"
    stored_with_a_failure(out, "app")
    sent = []  # the runs of each request to the app

    def counted(uri):
        write = remote_writer(uri)
        return write and (lambda exp, runs: (sent.append(len(runs)), write(exp, runs)))

    monkeypatch.setattr("optfarm.farm.tracking.mlflow_bulk.remote_writer", counted)
    assert sync(out, app) == (5, 0)
    assert sync(out, postgres_server.url) == (5, 0)
    assert sum(sent) == 2 + 5 and len(sent) <= 4  # variants and seed runs, a few requests

    assert_read_back_alike(
        _read_back(app, "app"), _read_back(postgres_server.url, "app"), 1 + 2 + 5
    )

    (out / "mlflow_runs.jsonl").unlink()  # exactly once, found by tag on the server
    assert sync(out, app) == (0, 0)
    assert len(_read_back(app, "app")) == 8

    # a request repeated (its answer lost) writes nothing twice; a NaN metric survives JSON
    exp = MlflowClient(app).get_experiment_by_name("app").experiment_id
    run = NewRun("nan", 1_000, 2_000, "FINISHED", metrics=[Metric("m", float("nan"), 1_000, 0)])
    creds = get_default_host_creds(app)
    body = {"experiment_id": exp, "runs": runs_to_json([run])}
    assert http_request_safe(creds, ENDPOINT, "POST", json=body).json() == {
        "created": 1,
        "existing": 0,
    }
    assert http_request_safe(creds, ENDPOINT, "POST", json=body).json() == {
        "created": 0,
        "existing": 1,
    }
    assert math.isnan(MlflowClient(app).get_run(run.run_id).data.metrics["m"])
    bad = http_request(
        creds, ENDPOINT, "POST", max_retries=0, json={"experiment_id": exp, "runs": [{"name": "x"}]}
    )
    assert bad.status_code == 400 and "malformed runs" in bad.text


def test_a_database_uri_without_its_driver_says_what_to_install(tmp_path, monkeypatch, capsys):
    from optfarm.farm.tracking.mlflow_connection import Connection

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as where the extra is not installed
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    connection = Connection("postgresql://me@127.0.0.1:1/mlflow", str(tmp_path), tmp_path, "x")
    assert not connection.open() and connection.offline
    err = capsys.readouterr().err
    assert "pip install 'optfarm[postgresql]'" in err and len(err.strip().splitlines()) == 1
