"""What a sweep looks like in MLflow, read back through ``MlflowClient`` from a real ``mlflow
server`` on 127.0.0.1 (and from the folder-style sqlite store the bulk path writes): sweep ->
variant -> seed runs; seed runs' start and end times are the stored run's; parameters are the
resolved problem and every resolved optimizer parameter; names are short and unique; variant
runs carry the report's seed-aggregated statistics; the parent's span covers every invocation;
and runs written by the bulk path (``optfarm.farm.tracking.mlflow_bulk``) read back exactly as runs
written through the client."""

from __future__ import annotations

import json
import math

import pytest

from optfarm.farm.report.analysis import analyse
from optfarm.farm.report.sensitivity import sensitivity
from optfarm.farm.report.tracked import STATISTICS
from optfarm.farm.run.spec import RunSpec
from optfarm.farm.store.store import Store
from optfarm.farm.sweep.results import load_sweep
from optfarm.farm.sweep.runner import run_sweep
from optfarm.farm.sweep.spec import parse_spec
from optfarm.farm.tracking.tracking import sync
from optfarm.farm.tracking.variants import metric_name


def _spec(name, seeds):
    return parse_spec(
        {
            "name": name,
            "datasets": ["synthetic"],
            "optimizers": [{"name": "random", "params": {"n_init": [1, 3]}}],
            "seeds": seeds,
            "limits": {"iterations": 10},
            "runtime": {"backend": "serial"},
        }
    )


def _runs(client, experiment):
    """kind ("sweep", "variant", "run") -> that kind's runs."""
    exp = client.get_experiment_by_name(experiment)
    out = {"sweep": [], "variant": [], "run": []}
    for r in client.search_runs([exp.experiment_id], max_results=1000):
        out[r.data.tags["optfarm.kind"]].append(r)
    return out


def test_runs_tell_the_truth_and_variants_carry_the_reports_statistics(server, tmp_path):
    from mlflow.tracking import MlflowClient

    from optfarm.optimizers.registry import get
    from optfarm.oracle.registry import load

    out = tmp_path / "out"
    assert run_sweep(
        _spec("truth", 1), out, tracking_uri=server.url, progress=False, statistics=STATISTICS
    ).complete
    client = MlflowClient(server.url)
    (first,) = _runs(client, "truth")["sweep"]
    # resumed with two more seeds: the same parent, its start kept
    again = run_sweep(
        _spec("truth", 3), out, tracking_uri=server.url, progress=False, statistics=STATISTICS
    )
    assert again.skipped == 2 and again.done == 4
    runs = _runs(client, "truth")
    (parent,) = runs["sweep"]
    assert parent.info.run_id == first.info.run_id
    assert parent.info.start_time == first.info.start_time
    assert len(runs["variant"]) == 2 and len(runs["run"]) == 6

    # seed runs: their own times, from the store's records
    records = Store(out).scan().records
    for r in runs["run"]:
        rec = records[r.data.tags["optfarm.run_key"]]
        assert r.info.end_time == int(rec["finished_at"] * 1000)
        assert r.info.start_time == int((rec["finished_at"] - rec["duration_s"]) * 1000)
        assert r.info.end_time - r.info.start_time == pytest.approx(1000 * rec["duration_s"], abs=2)
    starts = [r.info.start_time for r in runs["run"]]
    ends = [r.info.end_time for r in runs["run"]]
    assert parent.info.start_time <= min(starts) and parent.info.end_time >= max(ends)

    # parameters: those that tell the runs apart (and the seed); the resolved run as a tag:
    # the problem actually posed and every resolved optimizer parameter
    problem = load("synthetic").meta.problem
    for r in runs["run"] + runs["variant"]:
        p = r.data.params
        assert set(p) == {"dataset", "optimizer", "opt.n_init"} | (
            {"seed"} if r in runs["run"] else set()
        )
        full = json.loads(r.data.tags["optfarm.params"])
        assert {k: v for k, v in full.items() if k in p} == p
        assert full["objective"] == str(problem.objective) == "min cost"
        assert full["constraints"] == ", ".join(str(c) for c in problem.constraints)
        assert full["constraints"] == "accuracy>=0.85, time<=5330"
        assert full["budget"] == "inf" and full["iterations"] == "10"
        resolved = get("random").resolve_params({"n_init": int(p["opt.n_init"])})
        assert {k: v for k, v in full.items() if k.startswith("opt.")} == {
            f"opt.{k}": str(v) for k, v in resolved.items()
        }
        assert "None" not in full.values()

    # names: short and unique
    names = [r.info.run_name for kind in runs.values() for r in kind]
    assert len(set(names)) == len(names) == 9
    assert {r.info.run_name for r in runs["variant"]} == {
        "random ni=1 · synthetic",
        "random ni=3 · synthetic",
    }
    assert {r.info.run_name for r in runs["run"]} == {  # the seed first: MLflow cuts names
        f"s{s} · random ni={n} · synthetic" for n in (1, 3) for s in range(3)
    }

    # variants: the seed runs nested in them, the report's statistics over their seeds
    trace, summaries = load_sweep(out)
    (analysis,) = analyse(trace, summaries).values()
    for v in runs["variant"]:
        n_init = v.data.params["opt.n_init"]
        seeds = [r for r in runs["run"] if r.data.tags["mlflow.parentRunId"] == v.info.run_id]
        assert sorted(r.data.params["opt.n_init"] for r in seeds) == [n_init] * 3
        assert v.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert v.info.status == "FINISHED"
        # a variant spans its own seeds (seeds 0 of the first invocation, 1-2 of the second)
        assert v.info.start_time == min(r.info.start_time for r in seeds)
        assert v.info.end_time == max(r.info.end_time for r in seeds)
        stats = analysis.stats[f"random[n_init={n_init}]"]
        finite = {
            metric_name(k.replace(":", "_")): x
            for k, x in stats.items()
            if isinstance(x, (int, float)) and math.isfinite(x)
        }
        assert {
            "runs",
            "nex_median",
            "exploration_cost_median",
            "latency_median_s",
            "reach_frac_cno_le_1.1",
        } <= set(finite)
        assert finite == pytest.approx({k: v.data.metrics[k] for k in finite})
        assert v.data.metrics["runs_done"] == 3 and v.data.metrics["runs_failed"] == 0
        history = client.get_metric_history(v.info.run_id, "runs_done")
        assert sorted(m.step for m in history) == [1, 3]  # aggregated at each invocation's end

    # the parent: the sweep's counts and its sensitivity ranking (one factor here)
    assert parent.data.metrics["runs_done"] == 6 and parent.data.metrics["variants"] == 2
    share = sensitivity(summaries, "quality_auc").importance["random.n_init"]
    assert parent.data.metrics["importance.random.random.n_init"] == pytest.approx(share)
    assert parent.data.tags["optfarm.sensitivity.random"] == f"random.n_init ({share:.0%})"


def _read_back(uri: str, experiment: str) -> dict:
    """Every run of ``experiment`` as MLflow's reader sees it, keyed by what it stands for
    (kind and run or variant key); run ids replaced by those keys."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    runs = {r.info.run_id: r for r in client.search_runs([exp.experiment_id])}

    def ident(r):
        tags = r.data.tags
        return tags["optfarm.kind"], tags.get("optfarm.run_key") or tags.get("optfarm.variant_key")

    out = {}
    for run_id, r in runs.items():
        tags = dict(r.data.tags)
        parent = tags.pop("mlflow.parentRunId", None)
        tags["parent"] = ident(runs[parent]) if parent else None
        history = {
            k: sorted((m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, k))
            for k in r.data.metrics
        }
        out[ident(r)] = {
            "name": r.info.run_name,
            "status": r.info.status,
            "user": r.info.user_id,
            "start": r.info.start_time,
            "end": r.info.end_time,
            "stage": r.info.lifecycle_stage,
            "params": r.data.params,
            "tags": tags,
            "metrics": r.data.metrics,
            "history": history,
            "artifacts_of_the_run": r.info.artifact_uri.endswith(f"/{run_id}/artifacts"),
        }
    return out


def stored_with_a_failure(out, name: str) -> RunSpec:
    """A sweep ``name`` of 2 seeds x 2 variants stored in ``out`` without tracking, and one run
    stored as failed beside it (returned): 5 seed runs to log."""
    assert run_sweep(_spec(name, 2), out, tracking=False, progress=False).complete
    failed = RunSpec("synthetic", "random", seed=7, params={"n_init": 3}, iterations=10)
    Store(out).write_failure(
        failed.resolved(),
        "RuntimeError: injected",
        attempts=2,
        duration_s=0.25,
        where={"node_id": "n1"},
    )
    return failed


def assert_read_back_alike(bulk: dict, client: dict, runs: int) -> None:
    """Runs written in bulk (``_read_back``) are those written through the client."""
    assert set(bulk) == set(client) and len(bulk) == runs
    for key, run in client.items():
        other = bulk[key]
        assert other["artifacts_of_the_run"] and run["artifacts_of_the_run"]
        if key[0] == "run":
            assert other == run, key
            continue
        # variant and sweep runs are created and ended at each sync's own time, and their
        # statistics stamped with it: all else is the same
        for field in ("name", "status", "user", "stage", "params", "tags", "metrics"):
            assert other[field] == run[field], (key, field)
        assert other["start"] == run["start"]
        if key[0] == "variant":
            assert other["end"] == run["end"]
        assert {k: [(s, v) for s, _, v in h] for k, h in other["history"].items()} == {
            k: [(s, v) for s, _, v in h] for k, h in run["history"].items()
        }


def test_bulk_path_reads_back_exactly_as_the_client_path(server, tmp_path):
    from mlflow.tracking import MlflowClient

    from optfarm.farm.tracking.mlflow_bulk import bulk_store

    out = tmp_path / "out"
    failed = stored_with_a_failure(out, "bulk")
    local = f"sqlite:///{tmp_path / 'bulk' / 'mlflow.db'}"
    (tmp_path / "bulk").mkdir()
    assert bulk_store(MlflowClient(local)) is not None  # the bulk path
    assert bulk_store(MlflowClient(server.url)) is None  # the client path
    assert sync(out, local) == (5, 0)
    assert sync(out, server.url) == (5, 0)

    bulk, client = _read_back(local, "bulk"), _read_back(server.url, "bulk")
    assert_read_back_alike(bulk, client, 1 + 2 + 5)
    failed_run = bulk[("run", failed.run_key)]
    assert failed_run["status"] == "FAILED"
    assert failed_run["tags"]["optfarm.error"] == "RuntimeError: injected"
    assert failed_run["end"] - failed_run["start"] == 250
    assert ("variant", failed_run["tags"]["optfarm.variant_key"]) in bulk
    assert bulk[failed_run["tags"]["parent"]]["status"] == "FAILED"

    # the same searches find the same runs
    for uri in (local, server.url):
        c = MlflowClient(uri)
        exp = c.get_experiment_by_name("bulk")
        found = c.search_runs(
            [exp.experiment_id],
            "params.`opt.n_init` = '3' and "
            "metrics.n_evaluations = 10 and attributes.status = 'FINISHED'",
        )
        assert len(found) == 2

    # exactly once: synced again, and again without the folder's cache, nothing is added
    assert sync(out, local) == (0, 0)
    (out / "mlflow_runs.jsonl").unlink()
    assert sync(out, local) == (0, 0)
    assert len(_read_back(local, "bulk")) == 8


def test_every_stop_ends_the_sweeps_runs_and_a_logged_sweep_resumes_without_mlflow(
    server, tmp_path
):
    """A stop (``close(drain=True)``: Ctrl-C, SIGTERM, a lost Ray head) and a driver that died
    (``close_open_runs`` from another process) leave no run RUNNING; the experiment opens on
    the runs (its kind); a finished, logged sweep resumes without importing MLflow."""
    import subprocess
    import sys
    import time

    from mlflow.tracking import MlflowClient

    from optfarm.farm.tracking.tracking import Tracker, close_open_runs

    out = tmp_path / "out"
    spec = _spec("stops", 2)  # two variants of two seeds
    assert run_sweep(spec, out, tracking=False, progress=False).complete
    records = Store(out).scan().records
    specs = {k: r["spec"] for k, r in records.items()}
    client = MlflowClient(server.url)

    def running():
        exp = client.get_experiment_by_name("stops")
        return client.search_runs([exp.experiment_id], "attributes.status = 'RUNNING'")

    def log_one(key):
        tracker = Tracker(out, server.url, "stops", "stops")
        assert tracker.start(specs, {}, {}, wait=True)
        tracker.submit(records[key])
        deadline = time.monotonic() + 120
        while not tracker.logged(records[key]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tracker.logged(records[key])
        return tracker

    # seed 0 of each variant
    first, second = sorted(
        (k for k in records if records[k]["spec"]["seed"] == 0),
        key=lambda k: records[k]["spec"]["params"]["n_init"],
    )
    log_one(first).close(failed=True, drain=True, records={first: records[first]})
    assert running() == []
    runs = _runs(client, "stops")
    assert [r.info.status for r in runs["sweep"]] == ["FAILED"]
    (variant,) = runs["variant"]  # one seed of two logged: its variant KILLED
    assert variant.info.status == "KILLED"
    assert (variant.info.start_time, variant.info.end_time) == (
        runs["run"][0].info.start_time,
        runs["run"][0].info.end_time,
    )

    log_one(second)  # the driver dies here: its runs are ended from outside
    assert len(running()) == 2  # the sweep's run and the second variant's
    assert close_open_runs(out, server.url) == 2 and running() == []
    assert sorted(v.info.status for v in _runs(client, "stops")["variant"]) == ["KILLED"] * 2

    # MLflow 3's UI opens a "custom_model_development" experiment on its runs
    exp = client.get_experiment_by_name("stops")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"

    assert run_sweep(
        spec, out, tracking_uri=server.url, progress=False, statistics=STATISTICS
    ).complete
    assert running() == []
    runs = _runs(client, "stops")
    assert len(runs["run"]) == 4 and len(runs["variant"]) == 2
    for v in runs["variant"]:
        seeds = [r for r in runs["run"] if r.data.tags["mlflow.parentRunId"] == v.info.run_id]
        assert v.info.status == "FINISHED" and len(seeds) == 2
        assert v.info.start_time == min(r.info.start_time for r in seeds)
        assert v.info.end_time == max(r.info.end_time for r in seeds)
        assert v.data.metrics["runs_done"] == 2 and "final_p50" in v.data.metrics

    code = (
        "import sys; from optfarm.farm.sweep.runner import run_sweep; "
        "from optfarm.farm.sweep.spec import parse_spec; "
        "r = run_sweep(parse_spec({'name': 'stops', 'datasets': ['synthetic'], "
        "'optimizers': [{'name': 'random', 'params': {'n_init': [1, 3]}}], 'seeds': 2, "
        "'limits': {'iterations': 10}, 'runtime': {'backend': 'serial'}}), sys.argv[1], "
        "tracking_uri=sys.argv[2], progress=False); "
        "print(r.skipped, r.tracking_offline, 'mlflow' in sys.modules)"
    )
    resumed = subprocess.run(
        [sys.executable, "-c", code, str(out), server.url],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert resumed.stdout.split() == ["4", "False", "False"], resumed.stderr[-2000:]
