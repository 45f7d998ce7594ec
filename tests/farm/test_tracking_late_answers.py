"""One MLflow run per key whatever the tracking server's speed (issue 44): a real ``mlflow
server`` on 127.0.0.1 behind a real proxy (``optfarm.farm.bench.late_answers``) that holds one
``runs/create`` answer past the client's request timeout. MLflow's client retried the create,
so the run was made twice (7 seed runs for 6 keys, one RUNNING; a second sweep run RUNNING);
now the run is looked up before a create is asked again. Strays an older version made are
deleted by a resume, and by ``farm sync``, with one line."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from optfarm.farm.bench.late_answers import LateAnswers
from optfarm.farm.cli import main

CREATE = "/api/2.0/mlflow/runs/create"
TIMEOUT_S, HELD_S = 8, 12  # the client's request timeout here, and the answer held longer


def _sweep(out, uri, name) -> int:
    argv = "sweep --datasets synthetic --optimizers random --seeds 6 --iterations 5 --serial"
    return main(
        [*argv.split(), "--no-progress", "--name", name, "--tracking-uri", uri, "--out", str(out)]
    )


def _runs(client, experiment: str) -> dict[str, list]:
    """kind -> the experiment's runs of that kind (deleted ones left out, as MLflow does)."""
    exp = client.get_experiment_by_name(experiment)
    out: dict[str, list] = {"sweep": [], "variant": [], "run": []}
    for r in client.search_runs([exp.experiment_id], max_results=1000):
        out[r.data.tags["optfarm.kind"]].append(r)
    return out


def _one_per_key(runs: dict[str, list]) -> None:
    """6 seed runs for 6 keys, one variant run, one sweep run, all FINISHED."""
    keys = Counter(r.data.tags["optfarm.run_key"] for r in runs["run"])
    assert len(keys) == 6 and set(keys.values()) == {1}, keys
    assert len(runs["variant"]) == 1 and len(runs["sweep"]) == 1
    statuses = [r.info.status for kind in runs.values() for r in kind]
    assert set(statuses) == {"FINISHED"}, statuses


@pytest.mark.parametrize("held", [1, 2, 3], ids=["sweep-run", "variant-run", "seed-run"])
def test_a_create_answered_after_the_timeout_makes_one_run(
    server, tmp_path, monkeypatch, capsys, held
):
    """The sweep's own create (the first), its variant's (the second) or a seed run's (the
    third) answered after the request timeout: the sweep ends with one run per key, nothing
    RUNNING, and a resume and ``farm sync`` add nothing."""
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", str(TIMEOUT_S))
    proxy = LateAnswers(server.port, CREATE, hold_nth=held, hold_s=HELD_S)
    uri = f"http://127.0.0.1:{proxy.start()}"
    name, out = f"late-{held}", tmp_path / "out"
    try:
        assert _sweep(out, uri, name) == 0
        assert proxy.held == 1
        client = MlflowClient(server.url)
        _one_per_key(_runs(client, name))
        assert "warning" not in capsys.readouterr().err  # tracking never went offline
        assert _sweep(out, uri, name) == 0
        assert "6 already done" in capsys.readouterr().out
        assert main(["sync", str(out)]) == 0
        assert "synced 0 runs" in capsys.readouterr().out
        _one_per_key(_runs(client, name))
    finally:
        proxy.stop()


def _stray(client, run) -> str:
    """A second run of ``run``'s key, RUNNING, as an older version's retried create left it."""
    tags = {k: v for k, v in run.data.tags.items() if k != "mlflow.runName"}
    return client.create_run(
        run.info.experiment_id, run.info.start_time, tags, run.info.run_name
    ).info.run_id


def test_strays_are_deleted_by_a_resume_and_by_sync_in_one_line(server, tmp_path, capsys):
    """A sweep holding a stray seed run (RUNNING) and a stray sweep run, its cache written by
    a version that could not tell there were none: the resume deletes both and says so once;
    a stray made after a clean end is left to ``farm sync``, which deletes it."""
    from mlflow.tracking import MlflowClient

    out, client = tmp_path / "out", MlflowClient(server.url)
    assert _sweep(out, server.url, "strays") == 0
    runs = _runs(client, "strays")
    doubled = {_stray(client, runs["run"][0]), _stray(client, runs["sweep"][0])}
    cache = out / "mlflow_runs.jsonl"
    lines = [json.loads(line) for line in cache.read_text().splitlines()]
    cache.write_text(  # as an older version ended the sweep: no word on strays
        "".join(json.dumps({k: v for k, v in e.items() if k != "strays"}) + "\n" for e in lines)
    )
    capsys.readouterr()
    assert _sweep(out, server.url, "strays") == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "stray" in line]
    assert err == [
        f"farm: MLflow at {server.url}: 2 stray run(s) of the sweep deleted (a create "
        "carried out twice); one run per key is kept"
    ]
    _one_per_key(_runs(client, "strays"))
    assert {client.get_run(i).info.lifecycle_stage for i in doubled} == {"deleted"}

    _stray(client, _runs(client, "strays")["run"][1])
    assert _sweep(out, server.url, "strays") == 0  # a clean end: the server is not asked
    assert len(_runs(client, "strays")["run"]) == 7
    capsys.readouterr()
    assert main(["sync", str(out)]) == 0
    assert "1 stray run(s) of the sweep deleted" in capsys.readouterr().err
    _one_per_key(_runs(client, "strays"))
