"""The process ``farm bench`` measures in: a fresh interpreter with one BLAS/numba thread per
process (``optfarm.farm.bench.latency.ONE_THREAD_ENV``), pinned to one CPU unless the Ray executor
is used, that runs ``optfarm.farm.bench.latency`` with the options ``farm bench`` parsed (their
defaults are the command line's, ``optfarm.farm.cli.bench``) and prints its table or JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from optfarm.farm.bench.latency import (
    COLUMNS,
    LYNCEUS_TF_SWEEP,
    ONE_THREAD_ENV,
    bench,
    format_rows,
    json_default,
    machine_info,
    parse_cases,
    sweep_estimate,
)
from optfarm.optimizers.base import ParameterError
from optfarm.optimizers.registry import get
from optfarm.oracle.dataset import DatasetError

from .console import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, print_table

__all__ = ["run_isolated"]

_CHILD_FLAG = "OPTFARM_BENCH_CHILD"


def run_isolated(options: Mapping[str, Any]) -> int:
    """Run the benchmark in a fresh interpreter with one BLAS/numba thread per process, pinned
    to one CPU unless the Ray executor is used; its output is this command's output.
    ``options``: every option of ``farm bench`` (``vars`` of its parsed arguments)."""
    env = {**os.environ, **ONE_THREAD_ENV, _CHILD_FLAG: "1"}
    cmd = [sys.executable, "-m", "optfarm.farm.cli.bench_process", json.dumps(dict(options))]
    code = subprocess.run(cmd, env=env).returncode
    if code < 0:
        print(f"farm: failed: the benchmark process was killed by signal {-code}", file=sys.stderr)
        return EXIT_FAILED
    return code


def _pin_one_cpu() -> int:
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def _measure_scale(options: Mapping[str, Any]) -> int:
    """``--lynceus-scale``: Lynceus' step against table size
    (``optfarm.farm.bench.lynceus_scale``)."""
    from optfarm.farm.bench.lynceus_scale import plot_scale, scale_rows

    _pin_one_cpu()
    sizes = [int(n) for n in str(options["lynceus_scale"]).split(",") if n.strip()]
    baseline = []
    if options["baseline"]:
        with open(options["baseline"]) as f:
            baseline = json.load(f)["rows"]
    before = machine_info()
    rows = scale_rows(
        sizes, int(options["seed"]), int(options["sample"]), float(options["max_step_s"])
    )
    if options["figure"]:
        plot_scale(rows, options["figure"], baseline)
    if _printed_json_or_header(
        before,
        rows,
        bool(options["json"]),
        ("1 pinned core", f"Lynceus LA = 2 at its first model-guided step, seed {options['seed']}"),
    ):
        return EXIT_OK
    print_table(
        [
            {
                **r,
                "root_s": f"{r['root_s']:.3f}",
                "path_ms": f"{r['path_ms']:.2f}",
                "all_paths_s": f"{r['all_paths_s']:.3g} ({r['all_paths']})",
                "step_s": f"{r['step_s']:.3g} ({r['step']})",
            }
            for r in rows
        ],
        (
            "configs",
            "observed",
            "gamma",
            "root_s",
            "path_ms",
            "all_paths_s",
            "first_steps",
            "step_s",
        ),
    )
    for b in baseline:
        now = next((r for r in rows if r["configs"] == b["configs"]), None)
        if now is not None:
            print(
                f"{b['configs']} configurations: every first step {b['all_paths_s']:.3g} -> "
                f"{now['all_paths_s']:.3g} s ({b['all_paths_s'] / now['all_paths_s']:.1f}x), "
                f"default step {b['step_s']:.3g} -> {now['step_s']:.3g} s "
                f"({b['step_s'] / now['step_s']:.1f}x)"
            )
    if options["figure"]:
        print(f"figure: {options['figure']}")
    return EXIT_OK


def _printed_json_or_header(before: dict, rows: list, as_json: bool, what: tuple) -> bool:
    """A scale benchmark's machine (before) and load (after): under ``--json`` printed with the
    rows as one object (True), else as the header line of the table, with ``what`` (how it
    ran, what it ran) around the load (False)."""
    after = list(os.getloadavg())
    if as_json:
        meta = {"machine": before, "loadavg_after": after}
        print(json.dumps({"meta": meta, "rows": rows}, default=json_default))
        return True
    print(
        f"{before['cpu']}: {what[0]}, load average {before['loadavg'][0]:.2f} -> "
        f"{after[0]:.2f}; {what[1]}; CPU seconds"
    )
    return False


def _measure_every_scale(options: Mapping[str, Any]) -> int:
    """``--scale``: every optimizer's CPU per step and max RSS against table size
    (``optfarm.farm.bench.scale``), each (optimizer, size) in a process of its own."""
    from optfarm.farm.bench.scale import COLUMNS, scale_rows

    names = [n.strip() for n in str(options["optimizers"] or "").split(",") if n.strip()]
    try:
        sizes = [int(n) for n in str(options["scale"]).split(",") if n.strip()]
        for name in names:
            get(name)
        before = machine_info()
        rows = scale_rows(
            names or None,
            sizes,
            int(options["evaluations"]),
            int(options["seed"]),
            float(options["memory_cap"]),
            _progress(bool(options["json"])),
        )
    except (ValueError, ParameterError) as e:
        print(f"farm: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if _printed_json_or_header(
        before,
        rows,
        bool(options["json"]),
        (
            "each run in its own process, 1 pinned core, 1 BLAS/numba thread",
            f"{options['evaluations']} evaluations per run, seed {options['seed']}",
        ),
    ):
        return EXIT_OK
    print_table([_scale_cells(r) for r in rows], COLUMNS)
    return EXIT_OK


def _scale_cells(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row of ``--scale`` as printed: seconds to 3 digits, megabytes whole."""
    cells = dict(row)
    for key in ("cpu_per_eval_s", "search_suggest_s"):
        if cells.get(key) is not None:
            cells[key] = f"{cells[key]:.3g}"
    cells["max_rss_mb"] = f"{cells['max_rss_mb']:.0f}"
    return cells


def _measure(options: Mapping[str, Any]) -> int:
    if options["scale"]:
        return _measure_every_scale(options)
    if options["lynceus_scale"]:
        return _measure_scale(options)
    executor = options["executor"]
    if executor == "serial":
        _pin_one_cpu()
    runs = options["runs"]
    as_json = bool(options["json"])
    before = machine_info()
    try:
        rows = _measured_rows(options, _progress(as_json))
    except (ValueError, ParameterError, DatasetError) as e:
        print(f"farm: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    meta = _meta(options, before)
    if as_json:
        print(json.dumps({"meta": meta, "rows": rows}, default=json_default))
    else:
        _print_report(meta, rows, bool(runs))
    if rows and all(r.get("status") == "skipped" for r in rows):
        print(
            f"farm: error: nothing was measured, every case was skipped (first: "
            f"{rows[0]['optimizer']} on {rows[0]['dataset']}: {rows[0]['note']})",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    return EXIT_OK


def _progress(as_json: bool):
    """The callback that prints each case's progress on stderr (silent with --json)."""

    def progress(row):
        if not as_json:
            print(
                f"  {row['optimizer']} {row.get('params') or ''} on {row['dataset']}"
                f"{' at ' + str(row['at']) if 'at' in row else ''}: "
                f"{row.get('status', 'done')}",
                file=sys.stderr,
                flush=True,
            )

    return progress


def _measured_rows(options: Mapping[str, Any], progress) -> list[dict[str, Any]]:
    """The rows of ``--runs`` (whole runs and the sweep's CPU estimate), else of the
    suggest() latency at the ``--at`` points."""
    runs = options["runs"]
    if runs:
        cases = (
            parse_cases(options["optimizers"], options["datasets"])
            if options["optimizers"]
            else list(LYNCEUS_TF_SWEEP)
        )
        return sweep_estimate(cases, int(runs), int(options["sweep_seeds"]), progress)
    cases = parse_cases(options["optimizers"], options["datasets"])
    points = [int(p) for p in str(options["at"]).split(",") if p.strip()]
    return bench(
        cases,
        points,
        int(options["repeats"]),
        int(options["seed"]),
        options["executor"],
        int(options["workers"]),
        float(options["max_drive_s"]),
        progress=progress,
    )


def _meta(options: Mapping[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """What the measurement ran on: the machine (``before`` it, its load after), the
    executor and, for latency points, the seed and repeats."""
    executor = options["executor"]
    meta = {
        "machine": before,
        "loadavg_after": list(os.getloadavg()),
        "pinned": executor == "serial",
        "executor": executor,
        "workers": int(options["workers"]),
    }
    if not options["runs"]:
        meta.update(seed=int(options["seed"]), repeats=int(options["repeats"]))
    return meta


def _print_report(meta: Mapping[str, Any], rows: list[dict[str, Any]], runs: bool) -> None:
    m = meta["machine"]
    where = "1 pinned core" if meta["pinned"] else f"unpinned, Ray with {meta['workers']} CPUs"
    print(
        f"{m['cpu']}: {where}, 1 BLAS/numba thread per process, load average "
        f"{m['loadavg'][0]:.2f} -> {meta['loadavg_after'][0]:.2f}"
    )
    if runs:
        print_table(
            [
                {
                    **r,
                    "run_mean": f"{r['run_mean_s']:.3g} s",
                    "run_max": f"{r['run_max_s']:.3g} s",
                    "run_cpu": f"{r['run_cpu_mean_s']:.3g} s",
                    "suggest_share": f"{100 * r['suggest_share']:.0f}%",
                    "sweep_cpu": f"{r['sweep_cpu_s'] / 3600:.3g} h",
                }
                for r in rows
            ],
            (
                "optimizer",
                "params",
                "dataset",
                "runs",
                "evaluations_mean",
                "run_mean",
                "run_max",
                "run_cpu",
                "suggest_share",
                "sweep_seeds",
                "sweep_cpu",
            ),
        )
        total = sum(r["sweep_cpu_s"] for r in rows)
        print(
            f"\nsweep estimate: {total / 3600:.3g} CPU hours: {total / 3600:.3g} h on 1 "
            f"worker, {total / 7200:.3g} h on 2 workers (mean CPU time of a run x seeds, "
            "summed over cases; farm overhead not included)"
        )
        return
    print(
        f"{meta['repeats']} timed copies per point, seed {meta['seed']}; total = observe "
        "(refit on the newest observation) + suggest; ratio = paper / total\n"
    )
    print_table(format_rows(rows), COLUMNS)


if __name__ == "__main__":
    if os.environ.get(_CHILD_FLAG) != "1":
        sys.exit("optfarm.farm.cli.bench_process is run by `farm bench`")
    sys.exit(_measure(json.loads(sys.argv[1])))
