"""``farm run``: one optimizer run on one dataset, and its summary."""

from __future__ import annotations

import json
import time

from .console import EXIT_OK, UsageError, fmt, json_default, parse_params


def cmd_run(args) -> int:
    from farm.run.loop import run_one
    from farm.run.spec import RunSpec
    from oracle.problem import Constraint, Objective

    try:
        for text in args.constraint or ():
            Constraint.parse(text)
        if args.objective:
            Objective.parse(args.objective)
    except ValueError as e:
        raise UsageError(str(e)) from None
    spec = RunSpec(dataset=args.dataset, optimizer=args.optimizer, seed=args.seed,
                   params=parse_params(args.param), budget=args.budget, iterations=args.iterations,
                   objective=args.objective,
                   constraints=tuple(args.constraint) if args.constraint else None,
                   aggregate=args.aggregate)
    t0 = time.perf_counter()
    result = run_one(spec)
    summary = result.summary
    if args.trace:
        import pyarrow.parquet as pq

        pq.write_table(result.trace, args.trace)
    if args.json:
        print(json.dumps(summary, default=json_default))
        return EXIT_OK
    rec = summary["recommendation"]
    metric = summary["metric"]
    print(f"{summary['optimizer']} on {summary['dataset']} (seed {summary['seed']}): "
          f"{summary['n_evaluations']} evaluations, exploration cost "
          f"{summary['exploration_cost']:.4g}, stopped by {summary['stop_reason']} "
          f"({time.perf_counter() - t0:.1f} s)")
    print(f"problem: {summary['problem']['objective']} s.t. "
          f"{', '.join(summary['problem']['constraints']) or 'nothing'}")
    if rec is None:
        print("recommendation: none (no configuration observed feasible)")
    elif metric == "cno" and not rec["feasible"]:
        print(f"recommendation: {rec['config']} -> infeasible: CNO inf (cost ratio "
              f"{fmt(rec['cno_raw'])})")
    else:
        print(f"recommendation: {rec['config']} -> {metric} {fmt(rec[metric])}"
              f"{'' if rec['feasible'] else ' (infeasible)'}")
    for label, cost in summary["exploration_cost_to_reach"].items():
        print(f"exploration cost to reach {label}: {'never' if cost is None else fmt(cost)}")
    lat = summary["recommendation_latency_s"]
    print(f"recommendation latency (observe + suggest): median {fmt(lat['median'])} s, p90 "
          f"{fmt(lat['p90'])} s; first step (warm-up) {fmt(lat.get('warmup'))} s")
    return EXIT_OK


def add_run_command(sub) -> None:
    r = sub.add_parser("run", help="run one optimizer on one dataset and print a summary")
    r.add_argument("--dataset", default="synthetic")
    r.add_argument("--optimizer", default="random")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="optimizer parameter (repeatable); see `farm optimizers`")
    r.add_argument("--budget", type=float, help="exploration budget (default: unlimited)")
    r.add_argument("--iterations", type=int, help="max evaluations, bootstrap included")
    r.add_argument("--objective", help="override the objective, e.g. 'min cost'")
    r.add_argument("--constraint", action="append",
                   help="override the constraints (repeatable), e.g. time<=300")
    r.add_argument("--aggregate", choices=["sample", "mean"], default="sample",
                   help="repeated measurements: draw one per run, or use their mean")
    r.add_argument("--trace", metavar="FILE", help="also write the trace as Parquet")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.set_defaults(func=cmd_run)
