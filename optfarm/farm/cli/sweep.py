"""``farm sweep`` and ``farm sync``.

Exit codes: 0 every run of the sweep is done; 1 some runs failed (recorded in the index with
their error, retried on the next invocation), the cluster was lost (its head stopped
answering: one line with the command that resumes, printed by this process, the parent of the
sweep's driver on Ray: ``optfarm.farm.runtime.driver``), Ray could not start or the cluster at
``--address`` does not answer (one line, nothing run), or a file of the output folder could
not be written (disk full; the path named); 2 bad input (spec, dataset, optimizer or parameter, a
damaged ``sweep.json``, or an output folder another sweep is using), on one line on stderr;
130 interrupted by Ctrl-C, SIGTERM or SIGHUP (finished runs are kept).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

from .console import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    WIDTH,
    print_json,
    table_blocks,
)

__all__ = ["add_sweep_commands"]


def _param_overrides(pairs) -> dict[str, dict[str, str]]:
    from optfarm.farm.sweep.spec import SpecError

    out: dict[str, dict[str, str]] = {}
    for p in pairs or ():
        name, _, value = p.partition("=")
        optimizer, dot, key = name.partition(".")
        if not (dot and key and _):
            raise SpecError(f"--param {p!r} is not of the form optimizer.key=value")
        out.setdefault(optimizer.strip(), {})[key.strip()] = value.strip()
    return out


def cmd_sweep(args) -> int:
    from optfarm.farm.store.location import StoreError
    from optfarm.farm.sweep.spec import SpecError

    try:
        spec, source = _sweep_spec(args)
        _check_sweep_options(args)
        out = _out_folder(args, spec)
    except SpecError as e:
        print(f"farm: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except StoreError as e:  # an object store that does not answer
        print(f"farm: error: {e}; {_nothing_run()}", file=sys.stderr)
        return EXIT_FAILED
    try:
        return _run(spec, source, out, args)
    except SpecError as e:  # found when expanding (an unknown optimizer, the run limit)
        print(f"farm: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _nothing_run() -> str:
    return "nothing was run, run the sweep again when fixed"


def _sweep_spec(args):
    """The sweep to run and where it comes from: a SPEC file, or the inline options."""
    from optfarm.farm.sweep.spec import SpecError, inline_spec, load_spec

    if args.spec:
        if args.datasets or args.optimizers:
            raise SpecError("give a SPEC file or --datasets/--optimizers, not both")
        return load_spec(args.spec), args.spec
    if not (args.datasets and args.optimizers):
        raise SpecError("give a SPEC file, or --datasets and --optimizers")
    spec = inline_spec(
        args.datasets,
        args.optimizers,
        1 if args.seeds is None else args.seeds,
        name=args.name or "inline",
        iterations=args.iterations,
        budget=args.budget,
        params=_param_overrides(args.param),
    )
    return spec, "inline sweep"


def _check_sweep_options(args) -> None:
    """SpecError for a tracking URI with a password in it, or a limit below 1."""
    from optfarm.farm.sweep.spec import SpecError, no_password

    if args.tracking_uri:
        no_password(args.tracking_uri)
    if args.max_runs is not None and args.max_runs < 1:
        raise SpecError(f"--max-runs must be at least 1, got {args.max_runs}")
    if args.max_in_flight is not None and args.max_in_flight < 1:
        raise SpecError(f"--max-in-flight must be at least 1, got {args.max_in_flight}")
    _check_start_wait(args.ray_start_wait)


def _check_start_wait(seconds: float | None) -> None:
    """SpecError for a local Ray's start wait that is not a number of seconds >= 0, given
    (--ray-start-wait) or in the environment (``$FARM_RAY_START_WAIT``)."""
    from optfarm.farm.runtime.ray_setup import start_wait
    from optfarm.farm.sweep.spec import SpecError

    if seconds is not None and not 0 <= seconds < float("inf"):
        raise SpecError(f"--ray-start-wait must be a number of seconds >= 0, got {seconds}")
    try:
        start_wait()
    except ValueError as e:
        raise SpecError(str(e)) from None


def _out_folder(args, spec) -> str:
    """The sweep's output folder (default ``sweeps-out/NAME``): a path that is not a file, or
    a URI of a store a sweep can lock."""
    from optfarm.farm.sweep.spec import SpecError

    out = args.out or str(Path("sweeps-out") / spec.name)  # a path, or a URI (s3://...)
    if "://" not in out and os.path.isfile(out):
        raise SpecError(f"--out {out} is a file; name a folder (new, or a sweep's to resume it)")
    _refuse_unlockable(out)
    return out


def _refuse_unlockable(out: str) -> None:
    """SpecError for an --out no sweep can lock (``gs://``), before anything reads it;
    StoreError when its server does not answer (``Location.reach``)."""
    from optfarm.farm.store.location import Location, LocationError
    from optfarm.farm.store.locks import check_lockable
    from optfarm.farm.sweep.spec import SpecError

    try:
        location = Location.of(out)
        check_lockable(location)
    except LocationError as e:
        raise SpecError(str(e)) from None
    location.reach()


def _run(spec, source, out, args) -> int:
    if args.address:  # before Ray is imported (see optfarm.farm.runtime.ray_runtime)
        os.environ["RAY_ADDRESS"] = args.address
    from optfarm.farm.runtime import driver

    if not (
        args.serial or spec.runtime.backend == "serial" or driver.watched() or _ray_running_here()
    ):
        import optfarm.farm.store.store  # noqa: F401  now: the lost line, in a hurry, reads the store

        return driver.supervise(
            args.argv,
            lambda why: _lost_line(why, args, out),
            lambda: _settle(spec, source, out, args),
            args.address or os.environ.get("RAY_ADDRESS"),
        )
    driver.end_with_parent()
    code = _run_here(spec, source, out, args)
    driver.notify(done=code)
    return code


def _ray_running_here() -> bool:
    """Whether this process is already a Ray driver (a sweep started from Python)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def _settle(spec, source, out, args) -> None:
    """What a driver lost with its head could not do: the index of what is stored, its runs
    MLflow missed logged and the sweep run ended FAILED (created if the driver died before
    it made one), then any run of the sweep still RUNNING ended
    (``optfarm.farm.tracking.tracking.close_open_runs``)."""
    _sweep(spec, source, out, args, run=False)
    if not (args.no_tracking or not spec.tracking.enabled):
        from optfarm.farm.tracking.tracking import close_open_runs

        close_open_runs(out, args.tracking_uri)


def _sweep(spec, source, out, args, run: bool = True, tracking: bool | None = None):
    from optfarm.farm.report.tracked import STATISTICS
    from optfarm.farm.sweep.runner import run_sweep
    from optfarm.farm.sweep.spec import DEFAULT_MAX_RUNS

    return run_sweep(
        spec,
        out,
        source=source,
        address=args.address,
        backend="serial" if args.serial else None,
        max_in_flight=args.max_in_flight,
        tracking=False if args.no_tracking else tracking,
        tracking_uri=args.tracking_uri,
        artifacts=True if args.artifacts else None,
        max_runs=DEFAULT_MAX_RUNS if args.max_runs is None else args.max_runs,
        progress=run and not args.no_progress,
        verify=args.verify,
        run=run,
        statistics=STATISTICS,
        ray_start_wait=args.ray_start_wait,
    )


def _lost_line(why: str, args, out) -> str:
    from optfarm.farm.store.store import Store

    return (
        f"farm: error: {why}; {len(Store(out).finished())} runs are stored in {out}; "
        f"resume with: {_resume_command(args, out)}"
    )


def _run_here(spec, source, out, args) -> int:
    """The sweep run in this process: its summary (a table, or one JSON object with --json),
    exit 0 when every run is done; a failure as one line on stderr and its exit code."""
    from optfarm.farm.runtime.capacity import ClusterLost, RayStartError
    from optfarm.farm.store.store import DamagedFile, FolderBusy, LocationError, StoreError
    from optfarm.farm.sweep.runner import summary_rows

    try:
        if not (args.no_tracking or not spec.tracking.enabled):
            _say_where_tracking_goes(out, args.tracking_uri or spec.tracking.uri)
        with _signals_interrupt():
            report = _sweep(spec, source, out, args)
    except (FolderBusy, LocationError, DamagedFile, ClusterLost, StoreError, RayStartError) as e:
        return _say_failure(e, args, out)
    rows = summary_rows(report.records, report.keys)
    (_print_report_json if args.json else _print_report)(spec, out, report, rows)
    return EXIT_OK if report.complete else EXIT_FAILED


def _say_failure(e: Exception, args, out) -> int:
    """The line on stderr for a sweep that could not finish, and its exit code: bad input for
    a busy or unreadable folder or a damaged file, failed for a lost cluster, a store that
    could not be written or a Ray that could not start."""
    from optfarm.farm.runtime import driver
    from optfarm.farm.runtime.capacity import ClusterLost
    from optfarm.farm.store.store import DamagedFile, FolderBusy, LocationError, StoreError

    if isinstance(e, (FolderBusy, LocationError)):
        print(f"farm: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(e, DamagedFile):
        remedy = (
            "; restore it from a copy (it holds the sweep's id, which names its MLflow "
            "runs), or start the sweep afresh in a new --out folder"
            if str(e.path).endswith("sweep.json")
            else ""
        )
        print(f"farm: error: {e}{remedy}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(e, ClusterLost):
        # what finished is stored, the index written, MLflow's run FAILED
        if not driver.watched():  # else the watching parent printed it when it happened
            print(_lost_line(str(e), args, out), file=sys.stderr)
        return EXIT_FAILED
    if isinstance(e, StoreError):
        kept = "the runs stored so far are kept, run the sweep again when fixed"
        print(f"farm: error: {e}; {kept if e.during_runs else _nothing_run()}", file=sys.stderr)
        return EXIT_FAILED
    # RayStartError: nothing run, nor logged to MLflow
    print(
        f"farm: error: {e}; nothing was run (--serial runs the sweep in this process, without Ray)",
        file=sys.stderr,
    )
    return EXIT_FAILED


def _print_report_json(spec, out, report, rows) -> None:
    """The sweep's end as one JSON object: its counts, tracking, summary rows and failures."""
    print_json(
        {
            "sweep": spec.name,
            "out": str(out),
            "runs": len(report.runs),
            "skipped": report.skipped,
            "done": report.done,
            "failed": report.failed,
            "wall_s": report.wall_s,
            "complete": report.complete,
            "tracking_uri": report.tracking_uri,
            "tracking_offline": report.tracking_offline,
            "mlflow_page": report.mlflow_page and report.mlflow_page[0],
            "rows": rows,
            "failures": [
                {
                    "run_key": f["run_key"],
                    "error": f["error"],
                    **{k: f["spec"][k] for k in ("dataset", "optimizer", "seed")},
                }
                for f in report.failures
            ],
        }
    )


def _print_report(spec, out, report, rows) -> None:
    """The sweep's end for a reader: its counts, the summary tables, the first ten failures
    on stderr, and where its MLflow runs are."""
    print(
        f"\nsweep {spec.name}: {len(report.runs)} runs, {report.skipped} already done, "
        f"{report.done} run now, {report.failed} failed ({report.wall_s:.1f} s) -> {out}"
    )
    print_summary(rows)
    for f in report.failures[:10]:
        s = f["spec"]
        print(
            f"failed: {s['optimizer']} on {s['dataset']} seed {s['seed']} "
            f"({f['run_key']}): {f['error']}",
            file=sys.stderr,
        )
    if report.tracking_uri:
        state = "offline, run `farm sync` later" if report.tracking_offline else "ok"
        print(f"MLflow: {report.tracking_uri} ({state})")
    if report.mlflow_page and not report.tracking_offline:
        page, command = report.mlflow_page  # the runs, not MLflow's GenAI overview
        print(f"  to look: {command}, then open {page}" if command else f"  to look: open {page}")


# the human summary: one table per dataset (its name and metric above it), each row's
# parameters set away from the defaults on the line under it; --json keeps every key of
# optfarm.farm.sweep.runner.summary_rows
SUMMARY_COLUMNS = [
    "optimizer",
    "runs",
    "failed",
    "final_p50",
    "final_p90",
    "cost_p50",
    "evals_p50",
    "latency_p50_s",
]


def print_summary(rows: list[dict]) -> None:
    """The sweep's summary rows as one table per dataset, within ``console.WIDTH`` columns."""
    by_dataset: dict[str, list[dict]] = {}
    for row in rows:
        by_dataset.setdefault(row["dataset"], []).append(row)
    for dataset, group in by_dataset.items():
        metrics = "/".join(dict.fromkeys(str(r["metric"] or "-") for r in group))
        print(f"\n{dataset}: metric {metrics}")
        unit = next((r["cost_unit"] for r in group if r.get("cost_unit")), None)
        cost = f"cost_p50 ({unit})" if unit else "cost_p50"  # the exploration cost's unit
        group = [{**r, cost: r["cost_p50"]} for r in group]
        header, *blocks = table_blocks(
            group, [cost if c == "cost_p50" else c for c in SUMMARY_COLUMNS]
        )
        print("\n".join(header))
        for row, block in zip(group, blocks):
            print("\n".join(block))
            if row["params"] != "-":
                print(
                    "\n".join(
                        textwrap.wrap(
                            row["params"].replace(",", ", "),
                            WIDTH,
                            initial_indent="  params: ",
                            subsequent_indent=" " * 10,
                            break_on_hyphens=False,
                        )
                    )
                )


@contextmanager
def _signals_interrupt():
    """SIGTERM and SIGHUP (the driver stopped by a scheduler, a closed terminal) end the sweep
    as Ctrl-C does: finished runs stay stored, the index is written, MLflow's runs are closed.
    The first of these signals interrupts; those after it (a terminal's Ctrl-C reaches a
    watched driver twice: directly and from its parent) do not cut that clean-up short."""
    interrupted = []

    def interrupt(signum, frame):
        if not interrupted:
            interrupted.append(signum)
            raise KeyboardInterrupt

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, interrupt) for sig in sigs}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _say_where_tracking_goes(out: str, uri: str | None) -> None:
    """One line when the output is not a path and MLflow's runs go to a sqlite file of this
    machine (an object store cannot hold one): a sweep resumed elsewhere logs elsewhere."""
    from optfarm.farm.store.location import Location
    from optfarm.farm.tracking.tracking import sweep_uri

    location = Location.of(out)
    uri = sweep_uri(location, uri)
    if not location.local and uri.startswith("sqlite:"):
        print(
            f"farm: MLflow tracking goes to {uri} on this machine ({location.uri} cannot hold"
            " mlflow.db); give --tracking-uri http://SERVER to keep one MLflow history "
            "wherever the sweep resumes",
            file=sys.stderr,
        )


def _resume_command(args, out) -> str:
    """The command that finishes the sweep's missing runs (the same sweep, the same --out)."""
    if args.spec:
        what = [args.spec]
    else:
        what = [
            "--datasets",
            args.datasets,
            "--optimizers",
            args.optimizers,
            "--seeds",
            str(1 if args.seeds is None else args.seeds),
        ]
        what += [
            f"--{k}={v}"
            for k, v in (
                ("iterations", args.iterations),
                ("budget", args.budget),
                ("name", args.name),
            )
            if v is not None
        ]
        what += [f"--param={p}" for p in args.param or ()]
    return (
        f"{shlex.join(['farm', 'sweep', *what, '--out', str(out)])} "
        "(with --address of a new cluster, or --serial)"
    )


def cmd_sync(args) -> int:
    from optfarm.farm.report.tracked import STATISTICS
    from optfarm.farm.store.store import (
        DamagedFile,
        FolderBusy,
        LocationError,
        Store,
        StoreError,
    )
    from optfarm.farm.tracking.tracking import sweep_uri, sync

    try:
        if Store(args.dir).read_spec() is None:
            print(
                f"farm: error: {args.dir}: not a sweep output folder (no sweep.json)",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        uploaded, missing = sync(
            args.dir,
            args.tracking_uri,
            args.experiment,
            True if args.artifacts else None,
            STATISTICS,
        )
    except (FolderBusy, DamagedFile, LocationError) as e:
        print(f"farm: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except StoreError as e:
        print(f"farm: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    print(
        f"synced {uploaded} runs to {sweep_uri(args.dir, args.tracking_uri)}"
        + (f"; {missing} could not be uploaded" if missing else "")
    )
    return EXIT_FAILED if missing else EXIT_OK


def add_sweep_commands(sub) -> None:
    _add_sweep_parser(sub)
    _add_sync_parser(sub)


def _add_sweep_parser(sub) -> None:
    """``farm sweep``: a SPEC file or an inline sweep, where it runs and where it logs."""
    s = sub.add_parser(
        "sweep",
        help="run a sweep (a YAML spec, or inline) on Ray; resumable",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run every (dataset, optimizer, parameters, seed) of a sweep."
        "\nRe-running skips the runs already finished in --out.",
    )
    s.add_argument(
        "spec", nargs="?", help="a sweep spec file, or a built-in spec's name (quickstart, ...)"
    )
    _add_inline_options(s)
    s.add_argument(
        "--out",
        help="output folder: a path, or a pyarrow.fs URI such as "
        "s3://BUCKET/PATH (default sweeps-out/NAME)",
    )
    _add_where_options(s)
    s.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default $MLFLOW_TRACKING_URI, else sqlite:///OUT/mlflow.db)",
    )
    s.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    s.add_argument(
        "--artifacts",
        action="store_true",
        help="upload each run's trace to MLflow"
        " (default: its path in the output folder is a tag of the run)",
    )
    s.add_argument(
        "--max-runs",
        type=int,
        metavar="N",
        help="refuse a sweep of more than N runs (default 200,000: "
        "optfarm.farm.sweep.spec.DEFAULT_MAX_RUNS)",
    )
    s.add_argument(
        "--verify",
        action="store_true",
        help="hash every stored record and trace "
        "(default: only those changed since they were written or last hashed)",
    )
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument(
        "--json",
        action="store_true",
        help="end with one JSON object (the summary table's rows) instead of the table",
    )
    s.set_defaults(func=cmd_sweep)


def _add_where_options(s) -> None:
    """Where the sweep runs: a cluster, a local Ray (and how long its start may take), or
    this process."""
    s.add_argument(
        "--address",
        help="Ray cluster to join, or 'auto' for the one started on "
        "this machine by `ray start` (default $RAY_ADDRESS, else a local Ray)",
    )
    s.add_argument("--max-in-flight", type=int, help="runs at once (default: cluster CPUs)")
    s.add_argument("--serial", action="store_true", help="run in this process, without Ray")
    s.add_argument(
        "--ray-start-wait",
        type=float,
        metavar="SECONDS",
        help="how long starting a local Ray may take, its tries together, before the sweep "
        "runs in this process instead, as --serial (default $FARM_RAY_START_WAIT, else 300)",
    )


def _add_inline_options(s) -> None:
    """The inline sweep's options: what a SPEC file would say."""
    s.add_argument("--datasets", help="inline sweep: comma list of datasets")
    s.add_argument("--optimizers", help="inline sweep: comma list of optimizers")
    s.add_argument("--seeds", type=int, help="inline sweep: seeds 0..N-1 (default 1)")
    s.add_argument("--iterations", type=int, help="inline sweep: max evaluations per run")
    s.add_argument("--budget", type=float, help="inline sweep: exploration budget per run")
    s.add_argument(
        "--param",
        action="append",
        metavar="OPT.KEY=VALUE",
        help="inline sweep: optimizer parameter (repeatable)",
    )
    s.add_argument("--name", help="inline sweep: its name (default 'inline')")


def _add_sync_parser(sub) -> None:
    """``farm sync``: a sweep's stored runs uploaded to MLflow."""
    y = sub.add_parser("sync", help="upload a sweep's stored runs to MLflow (those not there)")
    y.add_argument("dir", help="the sweep's output folder (a path or a URI)")
    y.add_argument(
        "--tracking-uri",
        help="default the one the sweep ran with (kept in "
        "sweep.json), else $MLFLOW_TRACKING_URI, else the folder's sqlite",
    )
    y.add_argument("--experiment", help="default the sweep's")
    y.add_argument("--artifacts", action="store_true", help="upload each run's trace")
    y.set_defaults(func=cmd_sync)
