"""MLflow tracking against a real ``mlflow server`` on 127.0.0.1 (temporary sqlite backend
and artifact folder, stopped by its process group id): seed runs nested in variant runs nested
in the sweep's run, parameters, per-step metrics and the trace artifact are there and
searchable; with the server down the sweep completes, warns once, and ``farm sync`` uploads the
same runs later, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from optfarm.farm.cli import main
from optfarm.farm.store.store import Store
from optfarm.farm.sweep.runner import run_sweep
from optfarm.farm.sweep.spec import expand, parse_spec


def _spec(name, seeds):
    return parse_spec(
        {
            "name": name,
            "datasets": ["synthetic"],
            "optimizers": [{"name": "random", "params": {"n_init": [1, 3]}}],
            "seeds": seeds,
            "limits": {"iterations": 12},
            "runtime": {"backend": "serial"},
        }
    )


def _nested(client, experiment):
    """(experiment, parent runs, seed runs) of ``experiment``."""
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("optfarm.kind") == "run"]
    return exp, parents, children


def _variants(client, exp):
    return client.search_runs([exp.experiment_id], "tags.`optfarm.kind` = 'variant'")


def test_sweep_is_logged_as_nested_runs_with_metrics_and_trace(server, tmp_path):
    from mlflow.tracking import MlflowClient

    spec = _spec("track-online", 2)
    report = run_sweep(
        spec, tmp_path / "out", tracking_uri=server.url, artifacts=True, progress=False
    )
    assert report.complete and not report.tracking_offline
    client = MlflowClient(server.url)
    exp, parents, children = _nested(client, "track-online")
    assert len(parents) == 1 and len(children) == 4
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    variants = _variants(client, exp)  # n_init 1 and 3, each holding its two seeds
    assert len(variants) == 2
    assert all(v.data.tags["mlflow.parentRunId"] == parent.info.run_id for v in variants)
    holder = {v.info.run_id: v.data.params["opt.n_init"] for v in variants}
    assert sorted(holder[c.data.tags["mlflow.parentRunId"]] for c in children) == [
        "1",
        "1",
        "3",
        "3",
    ]
    assert all(
        holder[c.data.tags["mlflow.parentRunId"]] == c.data.params["opt.n_init"] for c in children
    )
    store = Store(tmp_path / "out")
    keys = {r.run_key for r in expand(spec)}
    assert {c.data.tags["optfarm.run_key"] for c in children} == keys
    found = client.search_runs(
        [exp.experiment_id],
        "params.`opt.n_init` = '3' and params.optimizer = 'random' and metrics.n_evaluations = 12",
    )
    assert len(found) == 2 and {r.data.params["opt.n_init"] for r in found} == {"3"}
    for child in children:
        key = child.data.tags["optfarm.run_key"]
        trace = store.trace(key)
        assert child.info.status == "FINISHED"
        assert child.data.params["seed"] in ("0", "1")
        assert child.data.params["dataset"] == "synthetic"
        cost = client.get_metric_history(child.info.run_id, "exploration_cost")
        assert [m.step for m in sorted(cost, key=lambda m: m.step)] == list(range(12))
        assert [m.value for m in sorted(cost, key=lambda m: m.step)] == pytest.approx(
            trace.column("cum_exploration_cost").to_pylist()
        )
        cno = client.get_metric_history(child.info.run_id, "incumbent_cno")
        finite = [v for v in trace.column("incumbent_cno").to_pylist() if v != float("inf")]
        assert sorted(m.value for m in cno) == pytest.approx(sorted(finite))
        # the first step is the warm-up: logged apart as a summary metric, not as a step
        latency = client.get_metric_history(child.info.run_id, "recommendation_latency_s")
        assert sorted(m.step for m in latency) == list(range(1, 12))
        assert "latency_warmup_s" in child.data.metrics
        assert "exploration_cost_total" in child.data.metrics
        assert child.data.tags["optfarm.trace"] == str(store.trace_path(key).resolve())
        artifacts = [a.path for a in client.list_artifacts(child.info.run_id)]
        assert artifacts == [f"{key}.parquet"]
        local = client.download_artifacts(child.info.run_id, f"{key}.parquet", str(tmp_path))
        assert Path(local).read_bytes() == store.trace_path(key).read_bytes()
    # resuming the finished sweep logs nothing twice
    again = run_sweep(spec, tmp_path / "out", tracking_uri=server.url, progress=False)
    assert again.skipped == 4 and again.done == 0
    assert len(_nested(client, "track-online")[2]) == 4
    assert len(_variants(client, exp)) == 2


def test_server_down_sweep_completes_and_sync_uploads_later(server, tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    spec = _spec("track-offline", 3)
    server.stop()
    report = run_sweep(spec, tmp_path / "out", tracking_uri=server.url, progress=False)
    assert report.complete and report.done == 6 and report.tracking_offline
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "farm sync" in warnings[0]
    server.start()
    assert main(["sync", str(tmp_path / "out"), "--tracking-uri", server.url]) == 0
    assert "synced 6 runs" in capsys.readouterr().out
    client = MlflowClient(server.url)
    _, parents, children = _nested(client, "track-offline")
    assert len(parents) == 1 and len(children) == 6
    assert {c.data.tags["optfarm.run_key"] for c in children} == {r.run_key for r in expand(spec)}
    assert all(c.info.status == "FINISHED" for c in children)
    assert main(["sync", str(tmp_path / "out"), "--tracking-uri", server.url]) == 0
    assert "synced 0 runs" in capsys.readouterr().out
    assert len(_nested(client, "track-offline")[2]) == 6  # never logged twice
    exp = client.get_experiment_by_name("track-offline")
    assert sorted(v.info.status for v in _variants(client, exp)) == ["FINISHED", "FINISHED"]


def test_an_older_experiment_gets_the_seed_runs_view_the_printed_address_opens(tmp_path):
    from mlflow.tracking import MlflowClient

    from optfarm.farm.tracking.runs_view import SEED_RUNS_VIEW, VIEW_KEY, VIEW_TAG

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    older = client.create_experiment("track-view")  # as a version before the view made it
    report = run_sweep(_spec("track-view", 1), tmp_path / "out", tracking_uri=uri, progress=False)
    assert report.complete and not report.tracking_offline
    assert client.get_experiment(older).tags[VIEW_TAG] == SEED_RUNS_VIEW
    page, command = report.mlflow_page
    assert page.endswith(
        f"/#/experiments/{older}/runs?workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"
    )
    assert command.startswith("mlflow ui") and uri in command
