"""The command line's edges a new user trips on (issue 28): every bad input exits 2 with one
line naming what is wrong, before anything runs or is written; units, labels and parameters
read as they were meant."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from optfarm.farm.cli import main
from optfarm.farm.cli.run import describe
from optfarm.farm.store.store import Store
from optfarm.oracle.dataset import DatasetError
from optfarm.oracle.formats.table import load as load_table

from ..oracle.corpus import TABLES

SWEEP = [
    "sweep",
    "--datasets",
    "synthetic",
    "--optimizers",
    "random",
    "--iterations",
    "3",
    "--serial",
    "--no-tracking",
    "--no-progress",
]


def one_line_error(capture, *words: str) -> str:
    """stderr (``capsys`` or ``capfd``) of a command that failed on bad input: one line
    holding ``words``."""
    err = capture.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("farm"), err
    for w in words:
        assert w in err, err
    return err


def imported(name: str, tmp_path: Path, description: str | None = None) -> str:
    """The corpus table ``name`` written as CSV + description and imported into the cache."""
    job = TABLES[name](seed=0)
    path = tmp_path / f"{job.name}.csv"
    job.frame.to_csv(path, index=False)
    path.with_name(job.name + ".optfarm.yaml").write_text(description or job.description)
    assert main(["datasets", "import", "csv", "--from", str(path)]) == 0
    return job.name


@pytest.mark.parametrize(
    "args, words",
    [
        (["--seeds", "0"], ["seeds", "positive"]),
        (["--max-runs", "0"], ["--max-runs must be at least 1"]),
        (["--max-in-flight", "-2"], ["--max-in-flight must be at least 1"]),
        (["--name", "n" * 10_000], ["at most 100 characters, got 10,000"]),
        (["--ray-start-wait", "-1"], ["--ray-start-wait must be a number of seconds >= 0"]),
        (["--ray-start-wait", "inf"], ["--ray-start-wait must be a number of seconds >= 0"]),
    ],
)
def test_bad_sweep_flags_exit_2_on_one_line_before_anything_is_written(
    args, words, tmp_path, capsys
):
    out = tmp_path / "out"
    assert main(SWEEP + args + ["--out", str(out)]) == 2
    one_line_error(capsys, *words)
    assert not out.exists()


@pytest.mark.parametrize("value", ["soon", "-5", "nan"])
def test_a_bad_ray_start_wait_in_the_environment_exits_2(value, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FARM_RAY_START_WAIT", value)
    out = tmp_path / "out"
    assert main(SWEEP + ["--out", str(out)]) == 2
    one_line_error(capsys, f"FARM_RAY_START_WAIT={value!r} is not a number of seconds >= 0")
    assert not out.exists()


def test_a_usage_error_is_one_line_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(SWEEP + ["--seeds", "1e7", "--out", str(tmp_path / "out")])
    assert e.value.code == 2
    one_line_error(capsys, "farm sweep: error: argument --seeds: invalid int value: '1e7'")


def test_out_naming_a_file_is_bad_input_for_sweep_and_report(tmp_path, capsys):
    file = tmp_path / "a-file"
    file.write_text("not a folder")
    assert main(SWEEP + ["--out", str(file)]) == 2
    one_line_error(capsys, str(file), "is a file")
    assert main(["report", str(tmp_path), "--out", str(file), "--no-tracking"]) == 2
    one_line_error(capsys, str(file), "is a file")
    assert file.read_text() == "not a folder"


@pytest.mark.parametrize(
    "args, words",
    [
        (["--objective", "min costt"], ["'costt'", "did you mean 'cost'?"]),
        (["--constraint", "tme<=300"], ["'tme'", "did you mean 'time'?"]),
        (["--objective", "max banana", "--optimizer", "random"], ["'banana'", "does not measure"]),
        (["--param", "lookahead=1"], ["'lookahead'", "did you mean 'la'?"]),
        (["--objective", "min time"], ["lynceus: the objective must be 'min cost'"]),
        (["--seed", str(2**63)], ["--seed must be in [0, 4294967295]"]),
    ],
)
def test_misspelt_metrics_objectives_and_parameters_exit_2_with_a_suggestion(args, words, capsys):
    assert main(["run", "--iterations", "2"] + args) == 2
    one_line_error(capsys, *words)


def test_a_bare_time_on_a_table_in_ms_needs_its_unit_and_a_vacuous_constraint_warns(
    tmp_path, capsys
):
    name = imported("spark-vms-1d", tmp_path)  # units: {time: ms}
    ms = round(TABLES[name](seed=0).constraints[0][2] * 1000)  # its T_max in ms
    capsys.readouterr()
    base = ["run", "--dataset", name, "--optimizer", "random", "--iterations", "3", "--json"]
    assert main(base + ["--constraint", f"time<={ms}"]) == 2
    one_line_error(capsys, f"'time<={ms}' needs its unit", f"'time<={ms} ms'")
    assert main(base + ["--constraint", f"time<={ms} ms"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["problem"]["constraints"] == [f"time<={ms / 1000:g}"]
    assert "warning" not in captured.err
    assert main(base + ["--constraint", f"time<={ms} s"]) == 0  # every configuration meets it
    err = capsys.readouterr().err
    assert f"warning: constraint time<={ms} s: 20 of 20 configurations meet it" in err
    assert "every configuration meets it" in err


def test_min_time_is_worded_as_time_not_cost(capsys):
    assert (
        main(
            [
                "run",
                "--optimizer",
                "random",
                "--objective",
                "min time",
                "--iterations",
                "40",
                "--quiet",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "minimise time (s) subject to" in out and "(USD) subject" not in out
    cno = next(line for line in out.splitlines() if line.startswith("CNO"))
    assert "true time is" in cno and "cost" not in cno


def test_a_parameter_given_at_its_default_is_shown_as_given(capsys):
    assert main(["run", "--param", "la=2", "--iterations", "2", "--quiet"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("optimizer"))
    assert "la=2 (its default)" in line and "(defaults)" not in line


def test_a_constraint_on_a_named_metric_is_observed_traced_and_summarised(tmp_path, capsys):
    name = imported("serverless-memory-1d", tmp_path)  # p99_ms <= limit ms
    capsys.readouterr()
    trace = tmp_path / "trace.parquet"
    assert (
        main(
            [
                "run",
                "--dataset",
                name,
                "--optimizer",
                "random",
                "--iterations",
                "20",
                "--json",
                "--trace",
                str(trace),
            ]
        )
        == 0
    )
    s = json.loads(capsys.readouterr().out)
    (check,) = s["recommendation"]["constraints"]
    assert check["metric"] == "p99_ms" and check["observed"] and check["true"] > 0
    import pyarrow.parquet as pq

    metrics = pq.read_table(trace).column("metrics").to_pylist()
    assert all(dict(m).get("p99_ms", 0) > 0 for m in metrics)
    # the summary of a recommendation that breaks it on average names the metric, no crash
    check.update(holds=False, true=check["true"] * 2)
    lines = "\n".join(describe(s, 1.0))
    assert f"p99_ms {check['true'] * 1:.4g} (BREAKS p99_ms <=" in lines
    assert "its mean p99_ms" in lines and "a noisy draw passed" in lines


@pytest.mark.parametrize("peer", ["optuna-tpe", "optuna-cmaes"])
def test_the_peers_run_under_a_constraint_on_a_named_metric(peer, tmp_path, capsys):
    pytest.importorskip("optuna", reason="the peers need optfarm[peers]")
    name = imported("serverless-memory-1d", tmp_path)  # p99_ms <= limit ms
    capsys.readouterr()
    assert main(["run", "--dataset", name, "--optimizer", peer, "--iterations", "8", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["n_evaluations"] >= 1 and s["problem"]["constraints"][0].startswith("p99_ms<=")


def test_a_description_giving_a_key_twice_is_refused_naming_it(tmp_path):
    job = TABLES["spark-vms-1d"](seed=0)
    path = tmp_path / f"{job.name}.csv"
    job.frame.to_csv(path, index=False)
    path.with_name(job.name + ".optfarm.yaml").write_text(job.description + "units: {time: s}\n")
    with pytest.raises(DatasetError, match=r"line 8 \(key 'units' is given twice\)"):
        load_table(path)


def test_the_cli_imports_a_dataset_from_optfarm_datasets_dir(shared_datasets, monkeypatch, capsys):
    assert main(["datasets", "show", "lynceus-rnn"]) == 2
    one_line_error(capsys, "not fetched yet", "fetch all --from DIR", "OPTFARM_DATASETS_DIR")
    monkeypatch.setenv("OPTFARM_DATASETS_DIR", str(shared_datasets))
    assert main(["datasets", "show", "lynceus-rnn", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_configs"] == 384


def _finished_sweep(tmp_path, capsys, *extra) -> Path:
    out = tmp_path / "sweep"
    assert main(SWEEP + ["--seeds", "2", "--out", str(out), *extra]) == 0
    capsys.readouterr()
    return out


def test_a_damaged_sweep_json_is_refused_with_a_remedy(tmp_path, capsys):
    out = _finished_sweep(tmp_path, capsys)
    sweep_id = Store(out).read_sweep()["sweep_id"]
    (out / "sweep.json").write_text('{"name": "inline", "datasets"')
    assert main(SWEEP + ["--seeds", "2", "--out", str(out)]) == 2
    one_line_error(capsys, "sweep.json", "restore it from a copy", "new --out folder")
    (out / "sweep.json").unlink()  # deleted: no silent new sweep id either
    assert main(SWEEP + ["--seeds", "2", "--out", str(out)]) == 2
    one_line_error(capsys, "sweep.json: missing, though the folder holds stored runs")
    assert not (out / "sweep.json").exists() and sweep_id


def test_a_rerun_without_tracking_uri_uses_the_one_the_sweep_started_with(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    base = [a for a in SWEEP if a != "--no-tracking"] + ["--json"]
    out = tmp_path / "sweep"
    assert main(base + ["--out", str(out), "--tracking-uri", uri]) == 0
    assert json.loads(capsys.readouterr().out)["tracking_uri"] == uri
    assert main(base + ["--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["tracking_uri"] == uri
    assert not (out / "mlflow.db").exists()


@pytest.mark.parametrize(
    "spec, words",
    [
        (
            "name: s\ndatasets: [synthetic]\noptimizers: [random]\n"
            "seeds: {start: 9223372036854775807, count: 2}\n",
            ["seeds.start", "4294967295"],
        ),
        (
            "name: s\ndatasets: [synthetic]\noptimizers: [random]\nseeds: [4294967296]\n",
            ["seeds", "at most 4294967295"],
        ),
        (
            "name: s\ndatasets: [synthetic]\noptimizers: [random]\n"
            "problem: {objective: max banana}\n",
            ["'banana'", "does not measure"],
        ),
    ],
)
def test_bad_specs_exit_2_before_ray_starts_or_anything_is_stored(spec, words, tmp_path, capfd):
    path = tmp_path / "spec.yaml"
    path.write_text(spec)
    out = tmp_path / "out"
    # a Ray sweep's driver runs in a watched child (optfarm.farm.runtime.driver): its stderr is ours
    assert main(["sweep", str(path), "--out", str(out), "--no-progress"]) == 2
    one_line_error(capfd, *words)
    assert not out.exists()


def test_a_binary_spec_file_is_named(tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    path.write_bytes(bytes(range(256)) * 4)
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    one_line_error(capsys, str(path), "not a text file")


def test_stats_json_is_strict_json(tmp_path, capsys):
    out = _finished_sweep(tmp_path, capsys)  # 3 random runs: CNO targets never reached
    assert main(["report", str(out), "--no-tracking"]) == 0

    def refuse(name):
        raise AssertionError(f"stats.json holds {name}")

    stats = json.loads((out / "report" / "stats.json").read_text(), parse_constant=refuse)
    values = [
        v for group in stats["synthetic"].values() for v in group.values() if isinstance(v, float)
    ]
    assert values and all(math.isfinite(v) for v in values)
    assert None in [v for group in stats["synthetic"].values() for v in group.values()]
