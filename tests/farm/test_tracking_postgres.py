"""MLflow for a team: a sweep tracked to an ``mlflow server`` backed by a real PostgreSQL
cluster (its own, on 127.0.0.1, ``farm.bench.tracking_server``) with a folder as its artifact
store, read back through ``MlflowClient``: the experiment opens on its runs, the variant runs
span their seeds and carry the statistics, the trace is an artifact, and a resume logs
nothing twice; runs written straight into the server's database (MLflow's database tracking
URI, the bulk path) read back through the server as those sent through it. Skips, saying why,
where PostgreSQL (or psycopg) is not installed."""

from __future__ import annotations

import pytest

from farm.bench.tracking_server import PostgresMlflowServer, available
from farm.report.tracked import STATISTICS
from farm.sweep.runner import run_sweep
from farm.sweep.spec import parse_spec
from farm.sweep.store import Store


@pytest.fixture(scope="module")
def postgres_server(tmp_path_factory):
    why = available()
    if why:
        pytest.skip(why)
    with PostgresMlflowServer(workers=1) as server:
        yield server


def test_a_sweep_tracked_to_a_postgresql_backed_server(postgres_server, tmp_path):
    from mlflow.tracking import MlflowClient

    spec = parse_spec({"name": "team", "datasets": ["synthetic"],
                       "optimizers": [{"name": "random", "params": {"n_init": [1, 3]}}],
                       "seeds": 3, "limits": {"iterations": 6},
                       "runtime": {"backend": "serial"}})
    out = tmp_path / "out"
    report = run_sweep(spec, out, tracking_uri=postgres_server.url, artifacts=True,
                       progress=False, statistics=STATISTICS)
    assert report.complete and not report.tracking_offline
    client = MlflowClient(postgres_server.url)
    exp = client.get_experiment_by_name("team")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    runs = client.search_runs([exp.experiment_id], max_results=100)
    kinds = {k: [r for r in runs if r.data.tags["optfarm.kind"] == k]
             for k in ("sweep", "variant", "run")}
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
    again = run_sweep(spec, out, tracking_uri=postgres_server.url, progress=False,
                      statistics=STATISTICS)
    assert again.skipped == 6 and again.done == 0
    assert len(client.search_runs([exp.experiment_id], max_results=100)) == 9


def test_runs_written_into_the_servers_database_read_back_as_those_sent_through_it(
        postgres_server, tmp_path):
    """MLflow's database tracking URI (``postgresql+psycopg://...``) takes the bulk path
    (``farm.sweep.mlflow_bulk``): the same sweep synced into the server's database and through
    the server reads back the same through the server, exactly once."""
    from mlflow.tracking import MlflowClient

    from farm.run.spec import RunSpec
    from farm.sweep.mlflow_bulk import bulk_store
    from farm.sweep.tracking import sync
    from tests.farm.test_tracking_layout import _read_back, _spec

    database = postgres_server.database_uri
    assert bulk_store(MlflowClient(database)) is not None            # the bulk path
    assert bulk_store(MlflowClient(postgres_server.url)) is None     # the client path
    out = tmp_path / "out"
    assert run_sweep(_spec("db", 2), out, tracking=False, progress=False).complete
    failed = RunSpec("synthetic", "random", seed=7, params={"n_init": 3}, iterations=10)
    Store(out).write_failure(failed.resolved(), "RuntimeError: injected", attempts=2,
                             duration_s=0.25, where={"node_id": "n1"})
    assert sync(out, database, experiment="into-db") == (5, 0)
    assert sync(out, postgres_server.url, experiment="through-server") == (5, 0)

    bulk = _read_back(postgres_server.url, "into-db")
    client = _read_back(postgres_server.url, "through-server")
    assert set(bulk) == set(client) and len(bulk) == 1 + 2 + 5
    for key, run in client.items():
        other = bulk[key]
        if key[0] == "run":
            assert other == run, key
            continue
        for field in ("name", "status", "user", "stage", "params", "tags", "metrics"):
            assert other[field] == run[field], (key, field)
    assert bulk[("run", failed.run_key)]["status"] == "FAILED"

    (out / "mlflow_runs.jsonl").unlink()  # exactly once, found by tag in the database
    assert sync(out, database, experiment="into-db") == (0, 0)
    assert len(_read_back(postgres_server.url, "into-db")) == 8


def test_a_tracking_uri_with_a_password_is_refused_before_anything_is_kept(tmp_path, capsys):
    from farm.cli import main

    code = main(["sweep", "--datasets", "synthetic", "--optimizers", "random", "--serial",
                 "--out", str(tmp_path / "out"),
                 "--tracking-uri", "postgresql+psycopg://me:secret@127.0.0.1/mlflow"])
    err = capsys.readouterr().err
    assert code == 2 and "secret" not in err and "me:***@127.0.0.1" in err
    assert "PGPASSWORD" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
