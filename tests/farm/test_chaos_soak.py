"""The chaos soak on a small size (issue 44): ``farm bench-chaos`` with one fault of every
kind on a sweep of 300 runs, against its own real ``mlflow server``, S3 server, proxy and local
Ray; it ends with every run stored once, one FINISHED MLflow run per key, nothing RUNNING and
nothing doubled (its tables at larger sizes: docs/results/chaos-soak.md). The servers are
stopped and no process of the soak is left. Bad input is one line, exit 2, and starts nothing."""

from __future__ import annotations

import json
import os

import pytest

from optfarm.farm.bench.chaos import KINDS
from optfarm.farm.bench.chaos_services import processes, unavailable


@pytest.mark.slow
def test_a_small_soak_loses_doubles_and_leaves_running_nothing(tmp_path, capsys):
    from optfarm.farm.cli import main

    why = unavailable()
    if why:
        pytest.skip(why)
    before = set(processes(os.getpid()))
    out = tmp_path / "soak"
    code = main(["bench-chaos", "--runs", "300", "--faults", "1", "--out", str(out), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["ok"], result
    assert result["faults"] == dict.fromkeys(KINDS, 1)
    assert result["records_done"] == result["keys"] == result["seed_runs"] == 300
    assert result["running"] == result["keys_doubled"] == 0
    assert len(result["attempts"]) >= 2  # the driver's kill ended one
    assert set(processes(os.getpid())) - before == set()  # servers, sweeps, their Ray: gone


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--runs", "1"], "--runs must be at least 2"),
        (["--faults", "-1"], "--faults at least 0"),
        ([], "exists; give a new folder"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_started(argv, words, tmp_path, capsys):
    from optfarm.farm.cli import main

    from .test_cli_edges import one_line_error

    out = tmp_path / ("soak" if argv else "")
    assert main(["bench-chaos", "--out", str(out), *argv]) == 2
    one_line_error(capsys, words)
    assert list(tmp_path.iterdir()) == []
