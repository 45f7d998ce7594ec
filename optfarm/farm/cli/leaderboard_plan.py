"""``farm leaderboard SPEC --plan``: the board's runs and price, printed before (instead of)
running it (``optfarm.farm.board.plan`` says how the price is measured and modelled)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .console import EXIT_BAD_INPUT, EXIT_OK, print_json, print_table

__all__ = ["print_plan"]


def _cluster_cpus(cpus: int | None) -> tuple[int, str]:
    """--cpus, else the CPUs of the Ray cluster $RAY_ADDRESS names (from inside a Ray job:
    its GCS), else this machine's (a local Ray's); ValueError when that cluster cannot be
    read (a job server's http:// address cannot)."""
    if cpus:
        return cpus, "--cpus"
    address = os.environ.get("RAY_ADDRESS")
    if not address:
        return os.cpu_count() or 1, "this machine (a local Ray)"
    if address.startswith("http"):
        raise ValueError(
            f"RAY_ADDRESS {address} is a job server, not a cluster to count the "
            "CPUs of: give them with --cpus N"
        )
    import ray

    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        return int(ray.cluster_resources().get("CPU", 0)), f"the Ray cluster at {address}"
    except (ConnectionError, RuntimeError) as e:
        raise ValueError(
            f"cannot reach the Ray cluster at RAY_ADDRESS {address} ({e}): give "
            "its CPUs with --cpus N"
        ) from None
    finally:
        ray.shutdown()


def _measurements(path: str, optimizers: set[str]) -> dict:
    """The measurements of an earlier ``--plan --json`` (``Measurement`` lists by optimizer);
    ValueError naming what is wrong."""
    from optfarm.farm.board.plan import Measurement

    try:
        data = json.loads(Path(path).read_text())["measurements"]
        measured = {name: [Measurement.from_dict(m) for m in ms] for name, ms in data.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(
            f"--measurements {path}: not the JSON of `farm leaderboard --plan --json` ({e})"
        ) from None
    missing = sorted(optimizers - {name for name, ms in measured.items() if ms})
    if missing:
        raise ValueError(f"--measurements {path}: no measurement of {', '.join(missing)}")
    return measured


def print_plan(spec, source: str, args) -> int:
    """Count and price the runs of the board ``spec`` (--seeds applied); print the table (or
    JSON), and with ``--plan-check N`` the plan against N of its runs run here. Writes
    nothing."""
    from optfarm.farm.board.plan import board_tables, measure, plan_rows, price, wall_hours
    from optfarm.farm.sweep.spec import expand

    runs = expand(spec, source)
    load_average = os.getloadavg()[0]
    try:
        cpus, where = _cluster_cpus(args.cpus)
        tables = board_tables(runs)
        measured = (
            _measurements(args.measurements, {r.optimizer for r in runs})
            if args.measurements
            else measure(runs, tables, args.plan_seconds)
        )
    except ValueError as e:
        print(f"farm: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    priced = price(runs, tables, measured)
    rows = plan_rows(runs, priced, measured, cpus)
    plan = {
        "runs": len(runs),
        "rows": rows,
        "cpu_hours": sum(r["cpu_hours"] for r in rows),
        "cpus": cpus,
        "cpus_from": where,
        "wall_hours": wall_hours(rows, cpus),
        "measurements": {name: [m.to_dict() for m in ms] for name, ms in measured.items()},
        "measured": _measured_source(args, load_average),
    }
    if args.plan_check:
        plan["check"] = _check(runs, tables, priced, args.plan_check)
    if args.json:
        print_json(plan)
    else:
        _print_plan(spec.name, plan)
    return EXIT_OK


def _check(runs, tables, priced, k: int) -> dict:
    """The plan against ``k`` of the board's runs, run here (``optfarm.farm.board.plan.check``)."""
    from optfarm.farm.board.plan import check, check_sample, timed_cpu

    load_average = os.getloadavg()[0]
    sample = check_sample(runs, tables, k)
    result = check(runs, tables, priced, sample, timed_cpu(sample))
    return {**result, "load_average": [load_average, os.getloadavg()[0]]}


def _print_plan(name: str, plan: dict) -> None:
    """The plan as a table, and its check."""
    print(
        f"plan of {name}: {plan['runs']} runs, nothing run or written; each optimizer's "
        f"seed-0 run {plan['measured']}; evaluations per run modelled on each table under its "
        "budget, the deadline and the cost spread (optfarm.farm.board.plan)"
    )
    _print_rows(plan["rows"])
    print(
        f"total {plan['cpu_hours']:.3g} CPU-hours; on {plan['cpus']} CPUs ({plan['cpus_from']}): "
        f"about {plan['wall_hours']:.3g} h of wall time (farm overhead not included)"
    )
    if "check" in plan:
        c = plan["check"]
        print(
            f"checked on {c['sample_runs']} of its runs, run here: planned "
            f"{c['sample_plan_s']:.0f} CPU-s, took {c['sample_cpu_s']:.0f} (plan / taken "
            f"{c['sample_plan_s'] / c['sample_cpu_s']:.2f}); the board from the sample: about "
            f"{c['board_extrapolated_hours']:.3g} CPU-hours, planned "
            f"{c['board_plan_hours']:.3g} (start-up left out of both)"
        )


def _measured_source(args, load_average: float) -> str:
    """Where the measurements come from: the --measurements file, or measured now."""
    return (
        f"as measured in {args.measurements}"
        if args.measurements
        else f"measured now in this process (load average {load_average:.1f}), up to "
        f"{args.plan_seconds:g} CPU-s per table"
    )


def _print_rows(rows: list[dict]) -> None:
    """The plan's table: each optimizer's runs, evaluations and CPU-hours."""
    print_table(
        [
            {
                **r,
                "evaluations_per_run": f"{r['evaluations_per_run']:.0f}",
                "cpu_per_evaluation_s": f"{r['cpu_per_evaluation_s']:.3g}",
                "fixed_per_run_s": f"{r['fixed_per_run_s']:.2g}",
                "cpu_hours": f"{r['cpu_hours']:.3g}",
            }
            for r in rows
        ],
        (
            "optimizer",
            "runs",
            "evaluations_per_run",
            "cpu_per_evaluation_s",
            "fixed_per_run_s",
            "cpu_hours",
            "measured_on",
        ),
    )
