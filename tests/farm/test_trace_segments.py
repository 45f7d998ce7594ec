"""Trace segments (``optfarm.farm.store.trace_segments``): a report reads a real sweep's traces from
the segments the sweep wrote and gets exactly what it gets from the runs' own trace files; a
damaged segment, or one listing an older trace of a run since redone, is passed over; and the
report's numbers, computed over all runs at once (``optfarm.farm.report.analysis``), are those of
the per-run definitions in ``optfarm.farm.run.metrics``."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from optfarm.farm.cli import main
from optfarm.farm.report.analysis import TRACE_COLUMNS, analyse
from optfarm.farm.run.metrics import (
    REACH_TARGETS,
    finite_json,
    first_reach,
    pick_quality,
    step_quality,
)
from optfarm.farm.store.store import Store
from optfarm.farm.sweep.results import load_sweep

SPEC = """\
name: segments
datasets: [synthetic]
optimizers:
  - random
  - name: lynceus
    params: {la: [0, 1]}
seeds: 4
limits: {iterations: 8}
tracking: {enabled: false}
"""


def _sweep(tmp_path, monkeypatch, runs_per_segment=5):
    """A real sweep of 12 runs, stored with a segment every ``runs_per_segment`` runs."""
    monkeypatch.setattr("optfarm.farm.store.store.SEGMENT_RUNS", runs_per_segment)
    spec, out = tmp_path / "spec.yaml", tmp_path / "out"
    spec.write_text(SPEC)
    assert main(["sweep", str(spec), "--out", str(out), "--serial", "--no-progress"]) == 0
    return out


def _per_run(out, tmp_path, columns=TRACE_COLUMNS):
    """What ``load_sweep`` reads without the segments (moved aside, then put back)."""
    aside = tmp_path / "segments-aside"
    shutil.move(out / "traces", aside)
    try:
        return load_sweep(out, columns=columns)
    finally:
        shutil.move(aside, out / "traces")


def _same(a, b) -> None:
    """The two tables hold the same columns and rows, in the same order (NaN equal to NaN)."""
    assert a.schema.remove_metadata() == b.schema.remove_metadata()
    for name in a.column_names:
        np.testing.assert_array_equal(
            a.column(name).to_numpy(zero_copy_only=False),
            b.column(name).to_numpy(zero_copy_only=False),
            name,
        )


def _from_segments(out) -> set[str]:
    """The runs a reader takes from the segments."""
    store = Store(out)
    records = store.verified().records
    return store.read_segments({k: r["trace_sha256"] for k, r in records.items()})[1]


def _stats(trace, summaries) -> str:
    return json.dumps(
        finite_json({n: a.stats for n, a in analyse(trace, summaries).items()}), sort_keys=True
    )


def test_segments_hold_every_run_and_give_the_per_run_tables_and_report(
    tmp_path, capsys, monkeypatch
):
    out = _sweep(tmp_path, monkeypatch)
    segments = sorted((out / "traces").iterdir())
    assert len(segments) == 3  # 12 runs: 5 + 5, then the rest when the sweep ended
    assert _from_segments(out) == Store(out).finished()
    for columns in (TRACE_COLUMNS, None):
        fast, summaries = load_sweep(out, columns=columns)
        slow, same = _per_run(out, tmp_path, columns)
        assert summaries == same and len(summaries) == 12
        assert fast.num_rows == sum(s["n_evaluations"] for s in summaries)
        _same(fast, slow)
    assert _stats(fast, summaries) == _stats(slow, same)
    # the whole report, byte for byte: from the segments, then from the runs' own files
    assert main(["report", str(out), "--no-tracking", "--out", str(tmp_path / "a")]) == 0
    shutil.move(out / "traces", tmp_path / "aside")
    assert main(["report", str(out), "--no-tracking", "--out", str(tmp_path / "b")]) == 0
    for name in ("stats.json", "report.html", "cno_synthetic.png", "reach_synthetic.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_damaged_segment_or_an_older_trace_of_a_redone_run_is_not_read(
    tmp_path, capsys, monkeypatch
):
    out = _sweep(tmp_path, monkeypatch)
    expected, _ = _per_run(out, tmp_path)
    first = sorted((out / "traces").iterdir())[0]
    data = bytearray(first.read_bytes())
    data[len(data) // 2] ^= 0x10  # its bytes no longer hash to its name
    first.write_bytes(bytes(data))
    intact = _from_segments(out)
    assert len(intact) in (12 - 5, 12 - 2)  # the damaged segment held 5 runs or 2
    _same(load_sweep(out, columns=TRACE_COLUMNS)[0], expected)
    # a run redone (its files deleted, the sweep run again): its new trace differs (timings),
    # the older segment still lists the old one
    store = Store(out)
    key = sorted(intact)[0]
    old_sha = store.record(key)["trace_sha256"]
    store.record_path(key).unlink()
    store.trace_path(key).unlink()
    assert (
        main(["sweep", str(tmp_path / "spec.yaml"), "--out", str(out), "--serial", "--no-progress"])
        == 0
    )
    assert Store(out).record(key)["trace_sha256"] != old_sha
    assert len(list((out / "traces").iterdir())) == 4  # the redone run's own segment
    assert key in _from_segments(out)
    assert Store(out).read_segments({key: old_sha})[1] == {key}  # the older trace is kept
    trace, summaries = load_sweep(out, columns=TRACE_COLUMNS)
    _same(trace, _per_run(out, tmp_path)[0])
    assert _stats(trace, summaries) == _stats(*_per_run(out, tmp_path))


def test_the_reports_numbers_are_the_per_run_definitions(tmp_path, monkeypatch):
    """Every run's cost and time to each target, its curve on the cost grid and Lynceus
    Fig. 4's p90 curve, as ``optfarm.farm.run.metrics`` defines them run by run."""
    out = _sweep(tmp_path, monkeypatch)
    a = analyse(*load_sweep(out, columns=TRACE_COLUMNS))["synthetic"]
    assert set(a.groups) == {"random", "lynceus[la=0]", "lynceus[la=1]"}
    for label, g in a.groups.items():
        for target, threshold in REACH_TARGETS["cno"].items():
            costs, own = [], []
            for run in g.traces:
                for quality, into in (
                    (step_quality(run, "cno"), costs),
                    (pick_quality(run, "cno"), own),
                ):
                    i = first_reach(quality, "cno", threshold, a.optimum)
                    into.append(math.inf if i is None else run["cum_exploration_cost"][i])
            assert a.reach[label][target].tolist() == costs
            assert a.stats[label][f"pick_reach_p90:{target}"] == pytest.approx(
                np.quantile(own, 0.9, method="inverted_cdf")
            )
        curves = []
        for run in g.traces:
            idx = np.searchsorted(run["cum_exploration_cost"], a.cost_grid, side="right") - 1
            quality = step_quality(run, "cno")
            curves.append(np.where(idx >= 0, quality[np.maximum(idx, 0)], math.inf))
        assert (
            a.curves[label]["p50"].tolist()
            == np.quantile(curves, 0.5, axis=0, method="inverted_cdf").tolist()
        )
        last = max(len(run["cum_exploration_cost"]) for run in g.traces)
        held = [
            np.r_[
                step_quality(run, "cno"),
                [step_quality(run, "cno")[-1]] * (last - len(run["cum_exploration_cost"])),
            ]
            for run in g.traces
        ]
        assert (
            a.curves[label]["fig4_cno"].tolist()
            == np.quantile(held, 0.9, axis=0, method="inverted_cdf").tolist()
        )
