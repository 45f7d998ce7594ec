"""The ``farm`` command line.

Exit codes: 0 success; 1 a run or command failed; 2 bad input (unknown dataset, optimizer or
parameter, malformed file or spec), reported on one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any, Sequence

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit code 2."""


def _params(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for p in pairs or ():
        if "=" not in p:
            raise UsageError(f"--param {p!r} is not of the form key=value")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _print_table(rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    cells = [[_fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:.4g}"
    return str(v)


# -- farm run ---------------------------------------------------------------------------------
def cmd_run(args) -> int:
    from oracle.problem import Constraint, Objective

    from .loop import run_one
    from .spec import RunSpec

    try:
        for text in args.constraint or ():
            Constraint.parse(text)
        if args.objective:
            Objective.parse(args.objective)
    except ValueError as e:
        raise UsageError(str(e)) from None
    spec = RunSpec(dataset=args.dataset, optimizer=args.optimizer, seed=args.seed,
                   params=_params(args.param), budget=args.budget, iterations=args.iterations,
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
        print(json.dumps(summary, default=_json_default))
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
    else:
        print(f"recommendation: {rec['config']} -> {metric} {_fmt(rec[metric])}"
              f"{'' if rec['feasible'] else ' (infeasible)'}")
    for label, cost in summary["exploration_cost_to_reach"].items():
        print(f"exploration cost to reach {label}: {_fmt(cost)}")
    lat = summary["recommendation_latency_s"]
    print(f"recommendation latency: median {_fmt(lat['median'])} s, p90 {_fmt(lat['p90'])} s")
    return EXIT_OK


def _json_default(o):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {o!r}")


# -- farm datasets ----------------------------------------------------------------------------
def cmd_datasets_list(args) -> int:
    from oracle.registry import available, load

    rows = []
    for name in available():
        t0 = time.perf_counter()
        d = load(name)
        load_s = time.perf_counter() - t0
        rows.append({"name": name, "rows": d.table.num_rows, "configs": d.space().n_configs,
                     "fidelities": len(d.fidelities),
                     "objective": str(d.meta.problem.objective),
                     "constraints": ", ".join(map(str, d.meta.problem.constraints)),
                     "load_s": f"{load_s:.4f}"})
    columns = ["name", "rows", "configs", "fidelities", "objective", "constraints"]
    _print_table(rows, columns + (["load_s"] if args.timing else []))
    from oracle.sources import SOURCES

    missing = sorted(set(SOURCES) - {r["name"] for r in rows})
    if missing:
        print(f"\nnot fetched yet ({len(missing)}): {', '.join(missing)}\n"
              "get them with `farm datasets fetch NAME` or `farm datasets import FORMAT --from PATH`")
    return EXIT_OK


def cmd_datasets_show(args) -> int:
    from oracle.registry import load

    info = load(args.name).summary()
    if args.json:
        print(json.dumps(info, default=_json_default))
        return EXIT_OK
    for k, v in info.items():
        if k == "dimensions":
            v = "; ".join(f"{d['name']} ({d['kind']}): {d['values']}" for d in v)
        print(f"{k:>16}: {v}")
    return EXIT_OK


def cmd_datasets_import(args) -> int:
    from oracle.registry import data_dir, import_datasets

    options = {"name": args.name} if args.name else {}
    if args.description:
        options["description"] = args.description
    datasets = import_datasets(args.format, args.source, **options)
    for d in datasets:
        print(f"imported {d.name}: {d.table.num_rows} rows -> {data_dir() / (d.name + '.parquet')}")
    return EXIT_OK


def cmd_datasets_fetch(args) -> int:
    from oracle.sources import fetch

    names = fetch(args.names, from_dir=args.from_dir)
    for n in names:
        print(f"fetched {n}")
    return EXIT_OK


# -- farm optimizers --------------------------------------------------------------------------
def cmd_optimizers(args) -> int:
    from optimizers.base import describe
    from optimizers.registry import available, get

    for name in available():
        cls = get(name)
        print(f"{name}: {cls.summary}")
        rows = describe(cls)
        if rows:
            _print_table(rows, ["name", "default", "allowed", "doc"])
        print()
    return EXIT_OK


# -- farm bench -------------------------------------------------------------------------------
def cmd_bench(args) -> int:
    from .latency import run_isolated

    return run_isolated({k: v for k, v in vars(args).items() if k not in ("func", "command")})


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="farm", description="optfarm: a benchmark farm for "
                                "cloud-configuration optimizers")
    sub = p.add_subparsers(dest="command", required=True)

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

    d = sub.add_parser("datasets", help="list, show, import and fetch datasets")
    dsub = d.add_subparsers(dest="datasets_command", required=True)
    dl = dsub.add_parser("list", help="datasets available now")
    dl.add_argument("--timing", action="store_true",
                    help="also print the time to load each dataset from its Parquet file")
    dl.set_defaults(func=cmd_datasets_list)
    ds = dsub.add_parser("show", help="one dataset's facts")
    ds.add_argument("name")
    ds.add_argument("--json", action="store_true")
    ds.set_defaults(func=cmd_datasets_show)
    di = dsub.add_parser("import", help="import a dataset from a public format or a table")
    di.add_argument("format", help="trimtuner, lynceus, cherrypick, scout, guindani or csv")
    di.add_argument("--from", dest="source", required=True, metavar="PATH")
    di.add_argument("--name", help="dataset name (formats that yield one dataset)")
    di.add_argument("--description", metavar="YAML",
                    help="csv format: the YAML file describing the table")
    di.set_defaults(func=cmd_datasets_import)
    df = dsub.add_parser("fetch", help="download public datasets into the cache")
    df.add_argument("names", nargs="+", help="dataset names, or 'all'")
    df.add_argument("--from", dest="from_dir", metavar="DIR",
                    help="take the files from a local copy instead of downloading")
    df.set_defaults(func=cmd_datasets_fetch)

    o = sub.add_parser("optimizers", help="list optimizers with their parameters")
    o.set_defaults(func=cmd_optimizers)

    b = sub.add_parser("bench", help="recommendation latency: suggest() time at fixed points "
                       "of a run vs the papers (one pinned core; see farm.latency)")
    b.add_argument("--optimizers", help="name[:key=value...] list, e.g. lynceus:la=0,lynceus:la=2"
                   " (default: Lynceus LA 0-3, TrimTuner DT/GP, EIc)")
    b.add_argument("--datasets", help="comma list (default: each optimizer's paper dataset)")
    b.add_argument("--at", default="10,30,60", help="observation counts to time suggest() at")
    b.add_argument("--repeats", type=int, default=5, help="timed copies per point")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--executor", choices=["serial", "ray"], default="serial",
                   help="ray: also time through the Ray executor and print the speed-up")
    b.add_argument("--workers", type=int, default=2, help="Ray CPUs (--executor ray)")
    b.add_argument("--runs", type=int, metavar="K", help="instead: time K whole runs per case "
                   "(seeds 0..K-1; default cases: the Lynceus TF sweep) and extrapolate the "
                   "sweep's CPU hours")
    b.add_argument("--sweep-seeds", type=int, default=100, help="seeds per case (--runs)")
    b.add_argument("--max-drive-s", type=float, default=1800.0,
                   help="skip points a case would need longer than this to reach")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.set_defaults(func=cmd_bench)

    from .sweep_cli import add_sweep_commands

    add_sweep_commands(sub)
    from .report_cli import add_report_commands

    add_report_commands(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from optimizers.base import ParameterError
    from oracle.dataset import DatasetError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (UsageError, DatasetError, ParameterError) as e:
        print(f"farm: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("farm: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a crash: one line, exit 1; FARM_DEBUG=1 shows the traceback
        if os.environ.get("FARM_DEBUG"):
            raise
        print(f"farm: failed: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
