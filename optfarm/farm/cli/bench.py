"""``farm bench`` (recommendation latency), ``farm bench-farm`` (what the farm adds to a
sweep) and ``farm bench-chaos`` (a sweep under faults of every kind)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from pathlib import Path

from .console import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, print_json, print_table


def cmd_bench(args) -> int:
    from .bench_process import run_isolated

    return run_isolated({k: v for k, v in vars(args).items() if k not in ("func", "command")})


def _ratio(last: float, first: float) -> str:
    """``1.13x``; ``-`` when the first tenth took no time (logged in one batch)."""
    return f"{last / first:.2f}x" if first > 0 else "-"


def cmd_bench_farm(args) -> int:
    from optfarm.farm.bench.overhead import run

    if args.resume:
        return _resume_cost(args)
    if args.joined:
        return _joined_cost(args)
    if args.tracking:
        return _tracking_cost(args)

    res = run(args.runs, args.dataset, args.optimizer, args.iterations, args.workers, args.repeats)
    print(
        f"farm benchmark: {res['runs']} runs of {args.optimizer} on {args.dataset}"
        f" (Ray start-up {res['ray_start_s']:.1f} s, not included; {res['cpus']} CPUs,"
        f" load average {res['load_average']:.1f} over the last 5 min)"
    )
    print(f"best of {res['repeats']} interleaved repeats (wall_max_s: the slowest)")
    print_table(
        res["rows"],
        ["case", "wall_s", "wall_max_s", "runs_per_s", "ms_per_run", "in_flight", "cpu_ms_per_run"],
    )
    print(
        "in_flight: mean runs in progress (summed run durations / wall time); "
        "cpu_ms_per_run: CPU time of a run where it ran\n(resume: the driver's, per run, "
        "resuming the finished sweep: nothing to run)"
    )
    print(
        f"\nfarm overhead vs the in-process loop (1 worker): {100 * res['overhead']:+.1f}%"
        f"   (target < +10%)"
    )
    print(
        f"throughput {res['workers']} workers / 1 worker: {res['speedup']:.2f}x"
        f"   (target >= 1.7x; this machine's own speed-up for {res['workers']} CPU-bound"
        f" processes meanwhile: {res['machine_speedup']:.2f}x)"
    )
    return EXIT_OK


def _resume_cost(args) -> int:
    """``--resume SIZES``: resuming and reporting finished sweeps of these sizes."""
    from optfarm.farm.bench.overhead import resume_cost

    sizes = [int(n) for n in args.resume.split(",")]
    rows = resume_cost(sizes, args.dataset, args.optimizer, args.iterations or 5, args.workers)
    print(
        f"resume of a finished sweep: {args.optimizer} on {args.dataset}, "
        f"{args.iterations or 5} evaluations per run, tracking off, {args.workers} Ray "
        f"workers (load average {os.getloadavg()[1]:.1f})"
    )
    print_table(
        rows,
        [
            "runs",
            "sweep_s",
            "resume_s",
            "resume_cpu_s",
            "verify_s",
            "verify_cpu_s",
            "report_s",
            "report_cpu_s",
            "report_rss_mb",
        ],
    )
    print(
        "resume: as `farm sweep` resumes (files unchanged since written not hashed "
        "again); verify: `farm sweep --verify` (every file hashed); report: `farm "
        "report` of the sweep (wall, peak memory); targets for 20,000 runs: resume "
        "< 10 s, report < 20 s and < 500 MB"
    )
    return EXIT_OK


def _joined_cost(args) -> int:
    """``--joined SIZES``: a sweep on a joined loopback cluster, with and without
    ``--max-in-flight``."""
    import tempfile

    from optfarm.farm.bench.joined import joined_cost
    from optfarm.farm.cluster.local import LocalCluster

    sizes = [int(n) for n in args.joined.split(",")]
    with tempfile.TemporaryDirectory(prefix="of-bench-", dir="/tmp") as root:
        cluster = LocalCluster.up(root, nodes=1, cpus=args.workers)
        try:
            rows = joined_cost(
                cluster.address,
                sizes,
                args.dataset,
                args.optimizer,
                args.iterations or 5,
                args.workers,
                args.repeats,
            )
        finally:
            cluster.down()
    print(
        f"a sweep on a joined loopback cluster (one node of {args.workers} CPUs): "
        f"{args.optimizer} on {args.dataset}, {args.iterations or 5} evaluations per "
        f"run, tracking off (load average {os.getloadavg()[1]:.1f})"
    )
    print_table(rows, ["runs", "pair", "max_in_flight", "wall_s", "runs_per_s", "request_left"])
    for n in sizes:
        wall = {
            case: [
                r["wall_s"]
                for r in rows
                if r["runs"] == n and (r["max_in_flight"] == "-") == (case == "without")
            ]
            for case in ("without", "with")
        }
        pairs = ", ".join(f"{a / b:.2f}x" for a, b in zip(wall["without"], wall["with"]))
        left = max(r["request_left"] for r in rows if r["runs"] == n and r["max_in_flight"] == "-")
        print(
            f"{n} runs: runs/s with --max-in-flight / without "
            f"{sum(wall['without']) / sum(wall['with']):.2f}x over {len(wall['with'])} "
            f"pair(s) ({pairs}; target <= 1.2x); autoscaler request left {left} "
            "(target 0)"
        )
    return EXIT_OK


def _tracking_cost(args) -> int:
    """``--tracking SIZES``: sweeps of these sizes with MLflow tracking off, to the output
    folder's sqlite and to each server given, and the resume time after each."""
    from optfarm.farm.bench.overhead import tracking_cost

    sizes = [int(n) for n in args.tracking.split(",")]
    servers = {"server": args.tracking_uri} if args.tracking_uri else {}
    with contextlib.ExitStack() as stack:
        if args.tracking_server == "postgresql":
            servers.update(_postgres_servers(stack, args))
        rows = tracking_cost(
            sizes, args.dataset, args.optimizer, args.iterations or 5, args.workers, servers
        )
    print(
        f"MLflow tracking cost: {args.optimizer} on {args.dataset}, "
        f"{args.iterations or 5} evaluations per run, {args.workers} Ray workers; tracking "
        f"off, to the sqlite store in the output folder"
        + "".join(f", to {label} ({uri})" for label, uri in servers.items())
        + f" (load average {os.getloadavg()[1]:.1f})"
    )
    print_table(
        rows,
        [
            "runs",
            "tracking",
            "wall_s",
            "runs_per_s",
            "first_tenth_ms",
            "last_tenth_ms",
            "stored_first_tenth_ms",
            "stored_last_tenth_ms",
            "drain_s",
            "resume_s",
        ],
    )
    for n in sizes:
        runs = [r for r in rows if r["runs"] == n]
        for line in _tracking_ratios(runs):
            print(f"{n} runs, {line}")
    return EXIT_OK


def _postgres_servers(stack: contextlib.ExitStack, args) -> dict[str, str]:
    """An mlflow server backed by its own PostgreSQL, and one serving optfarm's MLflow app,
    started on ``stack``: the tracking URIs through each and into the database."""
    from optfarm.farm.bench.tracking_server import PostgresMlflowServer

    pg = stack.enter_context(
        PostgresMlflowServer(workers=args.server_workers, threads=args.server_threads)
    )
    servers = {
        "postgresql": pg.url,  # through the server (REST)
        "postgresql-db": pg.database_uri,
    }  # into the server's database
    app = stack.enter_context(
        PostgresMlflowServer(
            workers=args.server_workers, threads=args.server_threads, app="optfarm"
        )
    )
    servers["postgresql-app"] = app.url  # through optfarm's MLflow app
    return servers


def _tracking_ratios(runs: list[dict]):
    """For the rows of one sweep size, each tracking's throughput against tracking off (and
    against sqlite), its logging and storing slow-down over the sweep, and its resume time."""
    off = next(r for r in runs if r["tracking"] == "off")
    sqlite = next(r for r in runs if r["tracking"] == "sqlite")
    for on in (r for r in runs if r["tracking"] != "off"):
        beside = (
            ""
            if on is sqlite
            else f", / sqlite {on['runs_per_s'] / sqlite['runs_per_s']:.2f}x (target >= 0.5)"
        )
        yield (
            f"{on['tracking']}: tracking on / off "
            f"{on['runs_per_s'] / off['runs_per_s']:.2f}x (target >= 0.5){beside}, "
            f"last / first tenth {_ratio(on['last_tenth_ms'], on['first_tenth_ms'])} "
            f"logged, {_ratio(on['stored_last_tenth_ms'], on['stored_first_tenth_ms'])}"
            f" stored (target <= 1.1), resume {on['resume_s']:.1f} s (target < 10 s)"
        )


def cmd_bench_chaos(args) -> int:
    """The chaos soak (``optfarm.farm.bench.chaos``): its table, or one JSON object; exit 0
    when nothing was lost, doubled or left RUNNING."""
    from optfarm.farm.bench.chaos import KINDS, soak
    from optfarm.farm.bench.chaos_services import unavailable

    why = unavailable() or (
        f"--out {args.out} exists; give a new folder" if Path(args.out).exists() else None
    )
    if args.runs < 2 or args.faults < 0:
        why = "--runs must be at least 2 and --faults at least 0"
    if why:
        print(f"farm: error: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    res = soak(args.runs, args.faults, Path(args.out), args.seed, args.iterations)
    ok = (
        res["records_done"] == res["keys"] == res["keys_with_one_finished_run"] == res["seed_runs"]
        and res["running"] == res["keys_doubled"] == 0
        and res["sweep_runs"] == 1
    )
    if args.json:
        print_json({**res, "ok": ok})
        return EXIT_OK if ok else EXIT_FAILED
    print(
        f"chaos soak: {res['runs']} runs in {len(res['attempts'])} attempts (exit codes "
        f"{dict(sorted(Counter(res['attempts']).items()))}), {res['wall_s']:.0f} s wall, "
        f"{res['cpu_s']:.0f} CPU-s, load {res['load'][0]:.1f}"
    )
    print_table(
        [{"fault": k, "injected": res["faults"].get(k, 0)} for k in KINDS], ["fault", "injected"]
    )
    counts = ("keys", "records_done", "seed_runs", "keys_with_one_finished_run", "keys_doubled")
    counts += ("running", "variant_runs", "sweep_runs", "deleted_runs")
    print_table([{"count": k, "value": res[k]} for k in counts], ["count", "value"])
    print("nothing lost, doubled or left RUNNING" if ok else "FAILED: see the counts above")
    return EXIT_OK if ok else EXIT_FAILED


def add_bench_commands(sub) -> None:
    _add_bench_parser(sub)
    _add_bench_farm_parser(sub)
    _add_bench_chaos_parser(sub)


def _add_bench_chaos_parser(sub) -> None:
    """``farm bench-chaos``: the soak's size, faults and folder."""
    b = sub.add_parser(
        "bench-chaos",
        help="a sweep of short runs on Ray, stored on S3 and tracked to an mlflow server, run "
        "again until done while faults of every kind are injected (optfarm.farm.bench.chaos)",
    )
    b.add_argument("--runs", type=int, default=10_000, help="runs in the sweep (default 10000)")
    b.add_argument("--faults", type=int, default=20, help="faults of each kind (default 20)")
    b.add_argument("--iterations", type=int, default=5, help="evaluations per run (default 5)")
    b.add_argument("--seed", type=int, default=0, help="of the faults' points and lengths")
    b.add_argument("--out", required=True, help="a new folder: servers' data, logs, the spec")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.set_defaults(func=cmd_bench_chaos)


def _add_bench_parser(sub) -> None:
    """``farm bench``: recommendation latency, whole runs (``--runs``) or Lynceus' scale."""
    b = sub.add_parser(
        "bench",
        help="recommendation latency: suggest() time at fixed points "
        "of a run vs the papers (one pinned core; see optfarm.farm.bench.latency)",
    )
    b.add_argument(
        "--optimizers",
        help="name[:key=value...] list, e.g. lynceus:la=0,lynceus:la=2"
        " (default: Lynceus LA 0-3, TrimTuner DT/GP, EIc)",
    )
    b.add_argument("--datasets", help="comma list (default: each optimizer's paper dataset)")
    b.add_argument("--at", default="10,30,60", help="observation counts to time suggest() at")
    b.add_argument("--repeats", type=int, default=5, help="timed copies per point")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument(
        "--executor",
        choices=["serial", "ray"],
        default="serial",
        help="ray: also time through the Ray executor and print the speed-up",
    )
    b.add_argument("--workers", type=int, default=2, help="Ray CPUs (--executor ray)")
    b.add_argument(
        "--runs",
        type=int,
        metavar="K",
        help="instead: time K whole runs per case "
        "(seeds 0..K-1; default cases: the Lynceus TF sweep) and extrapolate the "
        "sweep's CPU hours",
    )
    b.add_argument("--sweep-seeds", type=int, default=100, help="seeds per case (--runs)")
    b.add_argument(
        "--max-drive-s",
        type=float,
        default=1800.0,
        help="skip points a case would need longer than this to reach",
    )
    _add_lynceus_scale_options(b)
    _add_scale_options(b)
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.set_defaults(func=cmd_bench)


def _add_scale_options(b) -> None:
    """``farm bench --scale`` and the options that go with it."""
    b.add_argument(
        "--scale",
        metavar="SIZES",
        help="instead: every optimizer's (or --optimizers') CPU per step and max RSS "
        "against table size, each run in its own process, on the generated tables of "
        "384,2304,9216,50176 configurations (optfarm.farm.bench.scale)",
    )
    b.add_argument(
        "--evaluations", type=int, default=25, help="--scale: evaluations per run (default 25)"
    )
    b.add_argument(
        "--memory-cap",
        type=float,
        default=8.0,
        metavar="GB",
        help="--scale: address space of each run; beyond it the run fails with a "
        "MemoryError (default 8)",
    )


def _add_lynceus_scale_options(b) -> None:
    """``farm bench --lynceus-scale`` and the options that go with it."""
    b.add_argument(
        "--lynceus-scale",
        metavar="SIZES",
        help="instead: Lynceus' CPU per step "
        "against table size on generated tables of about these many configurations, "
        "e.g. 384,2000,10000,50000 (optfarm.farm.bench.lynceus_scale)",
    )
    b.add_argument(
        "--sample",
        type=int,
        default=40,
        help="--lynceus-scale: paths timed per size (every first step's cost extrapolated beyond)",
    )
    b.add_argument(
        "--max-step-s",
        type=float,
        default=120.0,
        help="--lynceus-scale: estimate the default step instead of timing it beyond this",
    )
    b.add_argument("--figure", metavar="PNG", help="--lynceus-scale: write the figure here")
    b.add_argument(
        "--baseline",
        metavar="JSON",
        help="--lynceus-scale: another tree's --json output, drawn and compared as 'before'",
    )


def _add_bench_farm_parser(sub) -> None:
    """``farm bench-farm``: the farm's overhead and throughput, or the cost of resuming,
    tracking or a joined cluster."""
    b = sub.add_parser(
        "bench-farm",
        help="farm overhead vs the in-process loop, and 1 vs 2 "
        "workers throughput (see optfarm.farm.bench.overhead)",
    )
    b.add_argument("--runs", type=int, default=200, help="runs in the sweep (default 200)")
    b.add_argument("--dataset", default="synthetic")
    b.add_argument("--optimizer", default="random")
    b.add_argument("--iterations", type=int, help="max evaluations per run (default: all)")
    b.add_argument("--workers", type=int, default=2, help="workers of the throughput case")
    b.add_argument("--repeats", type=int, default=3, help="interleaved repeats (best kept)")
    _add_tracking_cost_options(b)
    b.add_argument(
        "--resume",
        metavar="SIZES",
        help="instead: the resume time of finished "
        "sweeps of these sizes, e.g. 2000,20000 (--iterations default 5)",
    )
    b.add_argument(
        "--joined",
        metavar="SIZES",
        help="instead: sweeps of these sizes on a "
        "joined loopback cluster without --max-in-flight against with it "
        "(optfarm.farm.bench.joined; --iterations default 5; --repeats: pairs, in turns first)",
    )
    b.set_defaults(func=cmd_bench_farm)


def _add_tracking_cost_options(b) -> None:
    """``farm bench-farm --tracking`` and the servers it also tracks to."""
    b.add_argument(
        "--tracking",
        metavar="SIZES",
        help="instead: MLflow tracking on vs off and "
        "resume time for sweeps of these sizes, e.g. 500,2000,20000 (--iterations "
        "default 5)",
    )
    b.add_argument(
        "--tracking-server",
        choices=["postgresql"],
        help="with --tracking: also "
        "track to an mlflow server backed by its own PostgreSQL on 127.0.0.1: "
        "through the server, into its database, through optfarm's MLflow app",
    )
    b.add_argument(
        "--server-workers", type=int, default=2, help="that server's gunicorn workers (default 2)"
    )
    b.add_argument("--server-threads", type=int, default=4, help="threads per worker (default 4)")
    b.add_argument("--tracking-uri", help="with --tracking: also track to this server")
