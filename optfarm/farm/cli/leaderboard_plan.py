"""``farm leaderboard SPEC --plan``: the board's runs and price, printed before (instead of)
running it (``optfarm.farm.board.plan`` says how the price is measured and estimated)."""

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


def _step_costs(path: str, optimizers: set[str]) -> dict:
    try:
        costs = json.loads(Path(path).read_text())["step_costs"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"--step-costs {path}: not the JSON of `farm leaderboard --plan --json` ({e})"
        ) from None
    missing = sorted(optimizers - set(costs))
    if missing:
        raise ValueError(f"--step-costs {path}: no measurement of {', '.join(missing)}")
    return costs


def print_plan(spec, source: str, args) -> int:
    """Count and price the runs of the board ``spec`` (with ``--seeds``); print the table (or
    JSON). Runs nothing of the board and writes nothing."""
    from optfarm.farm.board.plan import measure_step_costs, plan_rows, wall_hours
    from optfarm.farm.sweep.spec import expand

    if args.seeds:
        spec = spec.model_copy(update={"seeds": args.seeds})
    runs = expand(spec, source)
    try:
        cpus, where = _cluster_cpus(args.cpus)
        costs = (
            _step_costs(args.step_costs, {r.optimizer for r in runs})
            if args.step_costs
            else measure_step_costs(runs, args.plan_steps)
        )
    except ValueError as e:
        print(f"farm: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    rows = plan_rows(runs, costs)
    total = sum(r["cpu_hours"] for r in rows)
    wall = wall_hours(rows, cpus)
    source_text = _costs_source(args)
    if args.json:
        print_json(
            {
                "runs": len(runs),
                "rows": rows,
                "cpu_hours": total,
                "cpus": cpus,
                "cpus_from": where,
                "wall_hours": wall,
                "step_costs": costs,
                "step_costs_from": source_text,
            }
        )
        return EXIT_OK
    print(
        f"plan of {spec.name}: {len(runs)} runs, nothing run or written; CPU per "
        f"evaluation {source_text}; evaluations per run = min(configurations, iteration "
        "limit, the run's budget / the table's mean configuration cost)"
    )
    _print_rows(rows)
    print(
        f"total {total:.3g} CPU-hours; on {cpus} CPUs ({where}): about {wall:.3g} h of "
        "wall time (farm overhead not included)"
    )
    return EXIT_OK


def _costs_source(args) -> str:
    """Where the CPU per evaluation comes from: the --step-costs file, or measured now."""
    return (
        f"from {args.step_costs}"
        if args.step_costs
        else f"measured now in this process (load average {os.getloadavg()[0]:.1f}): "
        f"seed 0, the bootstrap then {args.plan_steps} evaluations timed"
    )


def _print_rows(rows: list[dict]) -> None:
    """The plan's table: each optimizer's runs, evaluations and CPU-hours."""
    print_table(
        [
            {
                **r,
                "evaluations_per_run": f"{r['evaluations_per_run']:.0f}",
                "cpu_per_evaluation_s": f"{r['cpu_per_evaluation_s']:.3g}",
                "cpu_hours": f"{r['cpu_hours']:.3g}",
            }
            for r in rows
        ],
        (
            "optimizer",
            "runs",
            "evaluations_per_run",
            "cpu_per_evaluation_s",
            "cpu_hours",
            "measured_on",
        ),
    )
