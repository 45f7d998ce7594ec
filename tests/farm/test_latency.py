"""`farm bench`: the latency harness's rows, its JSON output and the papers' values.

No timed assertions: the numbers themselves are a benchmark (`farm bench`), not a test.
"""

from __future__ import annotations

import json
import math

import pytest

from optfarm.farm.bench.latency import (
    DEFAULT_CASES,
    BenchCase,
    bench,
    format_rows,
    parse_cases,
    sweep_estimate,
)
from optfarm.farm.cli import main
from optfarm.farm.report.papers import PAPER_LATENCY, paper_latency


def test_random_on_synthetic_gives_one_well_formed_row_per_point():
    rows = bench([BenchCase("random", "synthetic")], [3, 10], repeats=3, seed=1)
    assert [r["at"] for r in rows] == [3, 10]
    for r in rows:
        assert r["status"] == "ok" and r["executor"] == "serial" and r["repeats"] == 3
        assert r["optimizer"] == "random" and r["dataset"] == "synthetic"
        assert 0 <= r["suggest_median_s"] <= r["suggest_p90_s"]
        assert 0 <= r["observe_median_s"] <= r["total_median_s"]
        assert r["consistent"], "deep copies of one state must suggest the same config"
        assert r["phase"] == "search" and r["note"] == ""
        assert r["paper_s"] is None and r["ratio"] is None


def test_timing_leaves_the_driven_run_as_the_run_loop_makes_it():
    from optfarm.farm.run.loop import run_one
    from optfarm.farm.run.spec import RunSpec

    # the suggestion timed after n observations is the (n+1)-th of the same seed's run
    rows = bench([BenchCase("random", "synthetic")], [1, 4, 9], repeats=2, seed=3)
    trace = run_one(RunSpec("synthetic", "random", seed=3, iterations=10)).trace
    ids = trace.column("config_id").to_pylist()
    assert [r["suggestion"][0] for r in rows] == [ids[1], ids[4], ids[9]]


def test_points_past_the_end_of_the_run_are_reported_not_timed():
    rows = bench([BenchCase("random", "synthetic")], [360, 361], repeats=1)
    assert rows[0]["status"] == "ok" and rows[0]["phase"] == "stop"
    assert rows[0]["suggestion"] is None and "stop phase" in rows[0]["note"]
    assert rows[1]["status"] == "skipped"
    assert "stopped by optimizer after 360 observations" in rows[1]["note"]


def test_unknown_optimizers_and_missing_datasets_are_skipped_with_a_note():
    rows = bench(
        [BenchCase("no-such-optimizer", "synthetic"), BenchCase("random", "lynceus-rnn")],
        [2],
        repeats=1,
    )
    assert [r["status"] for r in rows] == ["skipped", "skipped"]
    assert rows[0]["note"] == "optimizer not registered"
    assert "farm datasets fetch lynceus-rnn" in rows[1]["note"]


def test_json_output_parses_and_says_how_it_was_measured(capfd):
    assert (
        main(
            [
                "bench",
                "--optimizers",
                "random",
                "--datasets",
                "synthetic",
                "--at",
                "2,5",
                "--repeats",
                "2",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capfd.readouterr().out)
    assert [r["at"] for r in out["rows"]] == [2, 5]
    assert all(r["status"] == "ok" and r["suggest_median_s"] >= 0 for r in out["rows"])
    meta = out["meta"]
    assert meta["pinned"] and len(meta["machine"]["affinity"]) == 1
    assert set(meta["machine"]["threads"].values()) == {"1"}
    assert meta["repeats"] == 2 and meta["seed"] == 0


def test_table_output_and_bad_input(capfd):
    assert (
        main(
            [
                "bench",
                "--optimizers",
                "random",
                "--datasets",
                "synthetic",
                "--at",
                "2",
                "--repeats",
                "1",
            ]
        )
        == 0
    )
    out = capfd.readouterr().out
    assert "suggest_med" in out and "random" in out and "1 pinned core" in out
    assert main(["bench", "--optimizers", "random", "--datasets", "synthetic", "--at", "0"]) == 2
    assert "--at points must be positive" in capfd.readouterr().err
    assert main(["bench", "--optimizers", "random:seed", "--at", "2"]) == 2
    assert "not of the form key=value" in capfd.readouterr().err


@pytest.mark.parametrize(
    "optimizer, params, dataset, seconds, ref",
    [
        ("lynceus", {"la": 0, "timeout": "tg"}, "lynceus-rnn", 0.05, "Lynceus Tab. II LA=0"),
        ("lynceus", {"la": 2, "gamma": 0.9}, "lynceus-rnn", 0.99, "Lynceus Tab. II LA=2"),
        ("lynceus", {"la": 3}, "lynceus-cnn", 2.4, "Lynceus Tab. II LA=3"),
        ("eic-usd", {}, "lynceus-multilayer", 0.05, "Lynceus Tab. II LA=0 (EIc/USD)"),
        (
            "trimtuner",
            {"model": "dt", "filter": "cea", "beta": 0.1},
            "trimtuner-rnn",
            1.72 * 60,
            "TrimTuner Tab. IV RNN DT CEA 10%",
        ),
        (
            "trimtuner",
            {"model": "gp", "filter": "cea", "beta": 0.1},
            "trimtuner-rnn",
            16.85 * 60,
            "TrimTuner Tab. IV RNN GP CEA 10%",
        ),
        (
            "trimtuner",
            {"model": "gp", "filter": "none", "beta": 0.1},
            "trimtuner-rnn",
            125.76 * 60,
            "TrimTuner Tab. IV RNN GP no filter",
        ),
        (
            "trimtuner",
            {"model": "dt", "filter": "cea", "beta": 0.01},
            "trimtuner-rnn",
            1.07 * 60,
            "TrimTuner Tab. IV RNN DT CEA 1%",
        ),
        (
            "trimtuner",
            {"model": "dt", "filter": "cmaes", "beta": 0.1},
            "trimtuner-rnn",
            2.26 * 60,
            "TrimTuner Tab. IV RNN DT CMA-ES",
        ),
        (
            "trimtuner",
            {"model": "dt", "filter": "cea", "beta": 0.1},
            "trimtuner-cnn",
            1.36 * 60,
            "TrimTuner Tab. III TT-DT",
        ),
        (
            "trimtuner",
            {"model": "gp", "filter": "cea", "beta": 0.1},
            "trimtuner-cnn",
            18.65 * 60,
            "TrimTuner Tab. III TT-GP",
        ),
        ("fabolas", {}, "trimtuner-rnn", 13.96 * 60, "TrimTuner Tab. III FABOLAS"),
        ("eic", {"n_init": 4}, "trimtuner-rnn", 1.17 * 60, "TrimTuner Tab. III EIc"),
    ],
)
def test_paper_values_are_matched_to_the_right_rows(optimizer, params, dataset, seconds, ref):
    p = paper_latency(optimizer, params, dataset)
    assert p is not None and p.ref == ref
    assert p.seconds == pytest.approx(seconds)


@pytest.mark.parametrize(
    "optimizer, params, dataset",
    [
        ("lynceus", {"la": 2}, "scout-kmeans"),  # Table II is on the TF jobs only
        ("lynceus", {"la": 4}, "lynceus-rnn"),
        ("trimtuner", {"model": "dt", "filter": "cea", "beta": 0.05}, "trimtuner-rnn"),
        ("trimtuner", {"model": "dt", "filter": "cea", "beta": 0.05}, "trimtuner-cnn"),
        ("random", {}, "lynceus-rnn"),
    ],
)
def test_rows_the_papers_did_not_measure_get_no_paper_value(optimizer, params, dataset):
    assert paper_latency(optimizer, params, dataset) is None


def test_paper_table_holds_every_number_of_the_papers():
    minutes = sorted(round(p.seconds / 60, 2) for p in PAPER_LATENCY if p.seconds >= 60)
    assert minutes == sorted(
        [
            18.65,
            1.36,
            13.96,
            1.17,
            1.17,
            125.76,
            3.69,
            5.94,
            1.07,
            16.85,
            1.72,
            28.65,
            2.05,
            36.18,
            2.63,
            30.87,
            2.26,
            16.53,
            1.62,
        ]
    )
    assert sorted(p.seconds for p in PAPER_LATENCY if p.seconds < 60) == [
        0.05,
        0.05,
        0.36,
        0.99,
        2.4,
    ]


def test_ratio_is_paper_over_our_total():
    row = {
        "optimizer": "lynceus",
        "params": "la=2",
        "dataset": "lynceus-rnn",
        "at": 10,
        "executor": "serial",
        "suggest_median_s": 0.08,
        "suggest_p90_s": 0.1,
        "observe_median_s": 0.02,
        "total_median_s": 0.1,
        "paper_s": 0.99,
        "paper_ref": "Lynceus Tab. II LA=2",
        "ratio": 0.99 / 0.1,
    }
    (out,) = format_rows([row])
    assert out["ratio"] == "9.9x" and out["total_med"] == "100.0 ms"
    assert out["paper"] == "990.0 ms (Lynceus Tab. II LA=2)"


def test_case_parsing():
    assert parse_cases(None, None) == list(DEFAULT_CASES)
    assert parse_cases(None, "lynceus-rnn") == [
        c for c in DEFAULT_CASES if c.dataset == "lynceus-rnn"
    ]
    cases = parse_cases("lynceus:la=2,trimtuner:model=dt:beta=0.1", None)
    assert cases == [
        BenchCase("lynceus", "lynceus-rnn", {"la": "2"}),
        BenchCase("trimtuner", "trimtuner-rnn", {"model": "dt", "beta": "0.1"}),
    ]
    assert parse_cases("random", "synthetic,lynceus-cnn") == [
        BenchCase("random", "synthetic"),
        BenchCase("random", "lynceus-cnn"),
    ]
    with pytest.raises(ValueError, match="key=value"):
        parse_cases("lynceus:la", None)


def test_sweep_estimate_extrapolates_the_mean_run_time():
    (row,) = sweep_estimate([BenchCase("random", "synthetic")], runs=2, sweep_seeds=10)
    assert row["runs"] == 2 and row["evaluations_mean"] == 360
    assert row["run_mean_s"] <= row["run_max_s"]
    assert 0 < row["run_cpu_mean_s"]
    assert row["sweep_cpu_s"] == pytest.approx(10 * row["run_cpu_mean_s"])
    assert 0 < row["suggest_share"] < 1 and math.isfinite(row["sweep_cpu_s"])


def test_points_beyond_the_drive_time_limit_are_skipped_with_a_note():
    rows = bench([BenchCase("random", "synthetic")], [2, 50], repeats=1, max_drive_s=0.0)
    assert [r["status"] for r in rows] == ["ok", "skipped"]
    assert rows[1]["note"].startswith("stopped by --max-drive-s 0")


class _BackwardsExecutor:
    """Computes the items last to first (results in order): a second executor to compare."""

    def map(self, fn, items, context=None):
        return [fn(context, item) for item in reversed(list(items))][::-1]


def test_a_second_executor_gets_a_speedup_and_a_same_result_check():
    from optfarm.farm.bench.latency import bench_case

    rows = bench_case(
        BenchCase("random", "synthetic"),
        [4],
        repeats=2,
        executors={"serial": None, "backwards": _BackwardsExecutor()},
    )
    assert [r["executor"] for r in rows] == ["serial", "backwards"]
    assert "speedup" not in rows[0]
    assert rows[1]["speedup"] > 0 and rows[1]["same_as_serial"] is True
    assert rows[1]["suggestion"] == rows[0]["suggestion"]


def test_the_paper_value_lands_on_the_bench_row(shared_datasets):
    from optfarm.oracle.registry import import_datasets

    import_datasets("lynceus", shared_datasets / "lynceus")
    # "0" as typed on the command line: matched after the optimizer resolves it to LA = 0
    (row,) = bench([BenchCase("lynceus", "lynceus-rnn", {"la": "0"})], [13], repeats=1)
    assert row["status"] == "ok" and row["phase"] == "search"
    assert row["paper_s"] == 0.05 and row["paper_ref"] == "Lynceus Tab. II LA=0"
    assert row["ratio"] == pytest.approx(0.05 / row["total_median_s"])


def test_the_warm_up_runs_the_model_not_only_the_bootstrap():
    """The first point of Lynceus' run is in its bootstrap (no model, nothing compiled): the
    warm-up copy is made again at every point until the model runs, so numba compiles there,
    untimed, and not in the p90 of the first model-based point."""
    rows = bench([BenchCase("lynceus", "synthetic", {"la": 0})], [2, 3, 15], repeats=2)
    phases = [r["phase"] for r in rows]
    assert phases[:2] == ["init", "init"] and phases[2] == "search"
    assert all(r["warmup_s"] is not None for r in rows)  # warmed at each until the model ran
    more = bench([BenchCase("lynceus", "synthetic", {"la": 0})], [15, 16], repeats=2)
    assert more[0]["warmup_s"] is not None and more[1]["warmup_s"] is None
