"""MLflow for a team: a sweep tracked to an ``mlflow server`` backed by a real PostgreSQL
cluster (its own, on 127.0.0.1, ``farm.bench.tracking_server``) with a folder as its artifact
store, read back through ``MlflowClient``: the experiment opens on its runs, the variant runs
span their seeds and carry the statistics, the trace is an artifact, and a resume logs
nothing twice. Skips, saying why, where PostgreSQL (or psycopg) is not installed."""

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
