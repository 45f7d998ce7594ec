"""``farm report`` (added to the parser of ``optfarm.farm.cli``), and the report files logged on a
sweep's MLflow parent run (``log_report_files``, which ``farm leaderboard`` uses too).

Exit codes: 0 written, 2 bad input (not a sweep folder, no finished run), the error on one
line on stderr.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path, PurePosixPath

from .console import EXIT_BAD_INPUT, EXIT_OK, print_json

__all__ = ["add_report_command", "log_report_files"]


def _error(message: str) -> int:
    print(f"farm: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def cmd_report(args) -> int:
    from optfarm.farm.report.analysis import TRACE_COLUMNS, analyse
    from optfarm.farm.report.page import write_report
    from optfarm.farm.store.location import Location
    from optfarm.farm.sweep.results import load_sweep

    sweep_dir = args.sweep_dir  # a path, or a URI (s3://...)
    if args.out and "://" not in args.out and os.path.isfile(args.out):
        return _error(f"--out {args.out} is a file; name a folder for the report")
    try:
        sweep = Location.of(sweep_dir)
        out = Location.of(args.out) if args.out else sweep / "report"
        trace, summaries = load_sweep(sweep_dir, current=args.current, columns=TRACE_COLUMNS)
        analyses = analyse(trace, summaries)
    except ValueError as e:
        return _error(str(e))
    with out.staged() as folder:  # on an object store: written here, then uploaded
        files = write_report(
            analyses, folder, title=f"optfarm report: {PurePosixPath(sweep.absolute()).name}"
        )
        logged = (
            None
            if args.no_tracking
            else log_report_files(sweep_dir, files, args.tracking_uri, quiet=args.json)
        )
        shown = [out.show(out.root / f.relative_to(folder).as_posix()) for f in files]
    page = out.show(out.root / "report.html")
    if args.json:
        print_json(
            {"runs": len(summaries), "report": page, "files": shown, "mlflow_logged": logged}
        )
        return EXIT_OK
    print(f"report of {len(summaries)} runs: {page}")
    for f in shown:
        if f.endswith(".png"):
            print(f"  {f}")
    return EXIT_OK


def log_report_files(
    sweep_dir: str | Path,
    files: list[Path],
    uri: str | None,
    folder: str = "report",
    quiet: bool = False,
) -> bool:
    """The report files become artifacts (in ``folder``) of the sweep's parent run; whether
    they were logged."""
    from optfarm.farm.store.store import Store
    from optfarm.farm.tracking.tracking import Tracker, sweep_uri

    sweep = Store(sweep_dir).read_sweep() or {}
    if (
        uri is None
        and (sweep.get("tracking") or {}).get("uri") is None
        and not os.environ.get("MLFLOW_TRACKING_URI")
        and "://" not in str(sweep_dir)
        and not (Path(sweep_dir) / "mlflow.db").exists()
    ):
        if not quiet:  # the sweep ran without tracking: no store to log to (none is created)
            print("MLflow: the sweep was not tracked; report not logged")
        return False
    tracker = Tracker(
        sweep_dir,
        sweep_uri(sweep_dir, uri),
        (sweep.get("tracking") or {}).get("experiment"),
        sweep.get("name"),
        sweep.get("sweep_id"),
    )
    logged = tracker.log_sweep_artifacts(files, folder)
    if not quiet and logged:
        print(f"MLflow: logged {len(files)} report files to the sweep's run at {tracker.uri}")
    elif not quiet:
        print(f"MLflow: the sweep has no parent run at {tracker.uri}; report not logged")
    return bool(logged)


def add_report_command(sub) -> None:
    """``farm report``: a sweep's plots and page."""
    r = sub.add_parser("report", help="plots and one HTML page, in the papers' form, of a sweep")
    r.add_argument("sweep_dir", help="the sweep's output folder (a path, or a URI: s3://...)")
    r.add_argument("--out", help="output folder, a path or a URI (default SWEEP_DIR/report)")
    r.add_argument(
        "--current",
        action="store_true",
        help="only the runs the sweep's spec expands to now (leave out runs stored "
        "under an older optimizer version)",
    )
    r.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default $MLFLOW_TRACKING_URI, else the folder's sqlite)",
    )
    r.add_argument(
        "--no-tracking", action="store_true", help="do not log the report to the sweep's MLflow run"
    )
    r.add_argument("--json", action="store_true", help="print one JSON object (the paths)")
    r.set_defaults(func=cmd_report)
