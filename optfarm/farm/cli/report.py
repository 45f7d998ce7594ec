"""``farm report`` and ``farm regress`` (added to the parser of ``optfarm.farm.cli``).

Exit codes: ``report`` 0 written, 2 bad input (not a sweep folder, no finished run);
``regress`` 0 no regression (or baseline updated), 1 a quality regression or a failed run,
2 bad input (spec, baseline file, output folder), each error on one line on stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path, PurePosixPath

from .console import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, print_json

__all__ = ["add_report_commands", "log_report_files"]

DEFAULT_SPECS = [
    "sweeps/nightly.yaml",
    "sweeps/nightly-lynceus.yaml",
    "sweeps/nightly-accuracy.yaml",
    "sweeps/nightly-trimtuner.yaml",
    "sweeps/nightly-guindani.yaml",
    "sweeps/nightly-obol.yaml",
    "sweeps/nightly-nephele.yaml",
]


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


def cmd_regress(args) -> int:
    from optfarm.farm.gate.regress import BaselineError, compare, quality_values, read_baseline
    from optfarm.farm.store.location import Location, LocationError
    from optfarm.farm.sweep.spec import SpecError, load_spec

    try:
        _check_gate_options(args)
        specs = [load_spec(path) for path in args.specs]
        names = [spec.name for spec in specs]
        if len(set(names)) < len(names):
            raise SpecError(f"the specs' names must differ (got {', '.join(names)})")
        baseline = None if args.update_baseline else read_baseline(args.baseline)
        if args.mutations:
            return _mutations(specs, baseline, args)
        out = Location.of(args.out or tempfile.mkdtemp(prefix="farm-regress-"))
        if args.out and not out.empty():
            raise BaselineError(
                f"--out {out.uri} is not empty (a regression runs every run afresh)"
            )
    except (SpecError, BaselineError, LocationError) as e:
        return _error(str(e))
    try:
        summaries, failed, guided = _run_specs(specs, args, out)
    except SpecError as e:  # an unknown optimizer or parameter, found when expanding
        return _error(str(e))
    finally:
        if not args.out:
            shutil.rmtree(out.root, ignore_errors=True)
    try:
        current = quality_values(summaries)
        if args.update_baseline:
            return _update_baseline(args, current, len(summaries), failed, guided)
        rows = compare(
            baseline,
            current,
            alpha=args.alpha,
            tolerance=args.tolerance,
            min_effect=args.min_effect,
            consistent_tolerance=args.consistent_tolerance,
        )
    except BaselineError as e:
        return _error(str(e))
    return _print_verdict(args, rows, failed, guided)


def _check_gate_options(args) -> None:
    """BaselineError for a statistic's option out of its range."""
    from optfarm.farm.gate.regress import BaselineError

    if not 0 < args.alpha < 1 or args.tolerance < 0 or not 0.5 <= args.min_effect <= 1:
        raise BaselineError(
            f"--alpha must be in (0, 1), --tolerance >= 0 and --min-effect "
            f"in [0.5, 1], got {args.alpha:g}, {args.tolerance:g} and "
            f"{args.min_effect:g}"
        )
    if not 0 <= args.consistent_tolerance <= args.tolerance:
        raise BaselineError(
            f"--consistent-tolerance must be in [0, --tolerance], got {args.consistent_tolerance:g}"
        )


def _update_baseline(args, current: dict, n_runs: int, failed: int, guided: dict) -> int:
    """``--update-baseline``: the given specs' seeds replaced, the baseline's others kept."""
    from optfarm.farm.gate.regress import merge_baseline, write_baseline

    if failed:
        print(f"baseline not written: {failed} run(s) failed", file=sys.stderr)
        return EXIT_FAILED
    old, specs_before = _previous_baseline(Path(args.baseline))
    merged = merge_baseline(old, current)
    write_baseline(
        Path(args.baseline), merged, " ".join(dict.fromkeys([*specs_before, *args.specs]))
    )
    kept = sorted(set(old) - set(current))
    _print_guided(guided)
    print(
        f"baseline written: {args.baseline} ({len(current)} entries, "
        f"{n_runs} runs"
        + (
            f"; kept the seeds these specs do not run, and {len(kept)} entries: {', '.join(kept)}"
            if old
            else ""
        )
        + ")"
    )
    return EXIT_OK


def _print_verdict(args, rows: list, failed: int, guided: dict) -> int:
    """The gate's rows (or --json), the model-guided shares and the verdict line; the exit
    code."""
    from optfarm.farm.gate.regress import (
        END_POINT_SHARE,
        FLOAT_TOLERANCE,
        PRIMARY_SHARE,
        SHIFT_SHARE,
        format_table,
    )

    not_run = sorted({r.key for r in rows if r.verdict == "not run"})
    regressions = [r for r in rows if r.verdict == "REGRESSION"]
    if args.json:
        print_json(
            {
                "rows": [asdict(r) for r in rows if r.verdict != "not run"],
                "not_run": not_run,
                "regressions": len(regressions),
                "failed_runs": failed,
                "model_guided_share": guided,
                "alpha": args.alpha,
                "tolerance": args.tolerance,
                "consistent_tolerance": args.consistent_tolerance,
            }
        )
        return EXIT_FAILED if regressions or failed else EXIT_OK
    print(format_table([r for r in rows if r.verdict != "not run"]))
    _print_guided(guided)
    if not_run:
        print(f"\nbaseline entries these specs do not run ({len(not_run)}): {', '.join(not_run)}")
    print(
        f"\n{len(regressions)} regression(s), {failed} failed run(s) (one-sided "
        f"Wilcoxon signed-rank on the per-seed differences, Holm-Tarone correction: the "
        f"trajectory areas at {PRIMARY_SHARE * args.alpha:.2g}, the end points at "
        f"{END_POINT_SHARE * args.alpha:.2g}; of the changed seeds a share >= "
        f"{args.min_effect:g} worse; median or p90 worse by more than {args.tolerance:.0%} at "
        f"that share, falling to {args.consistent_tolerance:.0%} when every changed seed is "
        f"worse; or the quantiles' paired permutation test at {SHIFT_SHARE * args.alpha:.2g} "
        f"with the median worse by more than {args.tolerance:.0%}; pick_* rows: the "
        f"optimizer's own pick; differences within {FLOAT_TOLERANCE:g} relative are none)"
    )
    return EXIT_FAILED if regressions or failed else EXIT_OK


def _print_guided(guided: dict) -> None:
    print(
        "model-guided steps (the model chose the configuration: not the initial design, "
        "not a re-run of the recommendation), per part: "
        + "; ".join(
            f"{name}: " + ", ".join(f"{o} {share:.0%}" for o, share in shares.items())
            for name, shares in guided.items()
        )
    )


def _previous_baseline(path: Path) -> tuple[dict, list[str]]:
    """The entries of the baseline at ``path`` and the specs that wrote them (none when it does
    not exist or does not read): re-recording one part of the gate, or some seeds, keeps the
    others."""
    from optfarm.farm.gate.regress import BaselineError, read_baseline

    try:
        old = read_baseline(path) if path.is_file() else {}
    except BaselineError:
        return {}, []
    return old, (json.loads(path.read_text()).get("spec", "").split() if old else [])


def _mutations(specs, baseline, args) -> int:
    """``farm regress --mutations``: the gate's detection and false-alarm rates."""
    from optfarm.farm.gate.mutations import MUTATIONS, format_mutation_table
    from optfarm.farm.sweep.spec import expand

    known = {m.name: m for m in MUTATIONS}
    names = list(known) if args.mutations == "all" else args.mutations.split(",")
    unknown = [n for n in names if n not in known]
    if unknown:
        return _error(f"unknown mutation {unknown[0]!r} (known: {', '.join(known)})")
    runs = [r for spec in specs for r in expand(spec)]
    print(
        f"{len(names)} mutation(s) against {args.baseline} ({len(runs)} runs in the gate; "
        "each mutation reruns those it can change)",
        flush=True,
    )
    results = _mutation_results(runs, baseline, [known[n] for n in names], args)
    print()
    print(format_mutation_table(results))
    return EXIT_FAILED if _gate_missed(results) else EXIT_OK


def _mutation_results(runs, baseline, mutations, args) -> list:
    """Each mutation's rerun of the gate's runs it can change, judged against ``baseline``."""
    from optfarm.farm.gate.mutations import mutation_table
    from optfarm.farm.store.location import Location

    with contextlib.ExitStack() as stack:  # an --out URI: its files mirrored here meanwhile
        store = stack.enter_context(Location.of(args.out).mirrored()) if args.out else None
        return mutation_table(
            runs,
            baseline,
            mutations,
            workers=args.workers,
            alpha=args.alpha,
            tolerance=args.tolerance,
            min_effect=args.min_effect,
            consistent_tolerance=args.consistent_tolerance,
            store=store,
            progress=lambda line: print(line, flush=True),
        )


def _gate_missed(results) -> bool:
    """Whether the gate missed a regression it could see or raised a false alarm."""
    missed = [r for r in results if r.mutation.kind == "regression" and r.n_runs and not r.caught]
    alarms = [r for r in results if r.mutation.kind == "neutral" and r.caught]
    return bool(missed or alarms)


def _run_specs(specs, args, out) -> tuple[list[dict], int, dict]:
    """Run each spec afresh into ``out/<spec name>`` (a ``Location``); the finished runs'
    summaries, the number of failed runs (each reported on stderr), and each spec's share of
    model-guided steps per optimizer (``model_guided_share``)."""
    from optfarm.farm.gate.regress import model_guided_share
    from optfarm.farm.sweep.results import load_sweep
    from optfarm.farm.sweep.runner import run_sweep

    summaries, failed, guided = [], 0, {}
    for spec, path in zip(specs, args.specs):
        result = run_sweep(
            spec,
            out / spec.name,
            source=path,
            backend="serial" if args.serial else None,
            tracking=False,
            progress=not args.no_progress,
        )
        summaries += [
            result.records[key]["summary"]
            for key in sorted(result.records)
            if result.records[key]["status"] == "done"
        ]
        if any(r["status"] == "done" for r in result.records.values()):
            guided[spec.name] = model_guided_share(load_sweep(out / spec.name)[0])
        failed += result.failed
        for f in result.failures:
            s = f["spec"]
            print(
                f"failed: {s['optimizer']} on {s['dataset']} seed {s['seed']}: {f['error']}",
                file=sys.stderr,
            )
    return summaries, failed, guided


def add_report_commands(sub) -> None:
    _add_report_parser(sub)
    _add_regress_parser(sub)


def _add_report_parser(sub) -> None:
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


def _add_regress_parser(sub) -> None:
    """``farm regress``: the quality gate against a baseline, or a test of the gate."""
    g = sub.add_parser(
        "regress",
        help="run a sweep and compare optimizer quality over seeds "
        "with a baseline; exit 1 on a regression",
    )
    g.add_argument(
        "specs",
        nargs="*",
        default=DEFAULT_SPECS,
        metavar="SPEC",
        help=f"sweep specs, run one after the other (default {' '.join(DEFAULT_SPECS)})",
    )
    g.add_argument(
        "--baseline",
        required=True,
        metavar="FILE",
        help="baseline JSON with per-seed values (sweeps/nightly-baseline.json)",
    )
    g.add_argument(
        "--update-baseline",
        action="store_true",
        help="write FILE from this run instead of comparing (the seeds these "
        "specs run are replaced, FILE's other seeds and entries kept)",
    )
    _add_gate_statistics_options(g)
    g.add_argument(
        "--mutations",
        metavar="all|NAME,...",
        help="test the gate itself: rerun its runs under each mutation of "
        "optfarm.farm.gate.mutations and print which it catches (exit 1 on a missed "
        "regression or a false alarm)",
    )
    g.add_argument("--workers", type=int, default=2, help="processes for --mutations (default 2)")
    g.add_argument(
        "--out",
        help="keep the sweeps in this (new or empty) folder, a path or a "
        "URI (s3://...), one "
        "subfolder per spec name, e.g. for `farm report`; default a temporary folder. "
        "With --mutations: keep each mutation's per-seed values there and rerun "
        "only the runs they lack (delete them after changing the code)",
    )
    g.add_argument("--serial", action="store_true", help="run in this process, without Ray")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("--json", action="store_true", help="print one JSON object (the rows)")
    g.set_defaults(func=cmd_regress)


def _add_gate_statistics_options(g) -> None:
    """The gate's statistics: significance, effect size and the worsening allowed."""
    g.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="family-wise significance: one-sided Wilcoxon signed-rank tests on the "
        "per-seed differences and a paired permutation test of the quantiles, "
        "Holm's correction counting the rows that can reach significance (Tarone) "
        "within three families: trajectories, end points, quantiles (default 0.05)",
    )
    g.add_argument(
        "--min-effect",
        type=float,
        default=0.64,
        help="smallest share of worse seeds among the seeds whose value changed "
        "that counts as a regression (default 0.64)",
    )
    g.add_argument(
        "--tolerance",
        type=float,
        default=0.10,
        help="relative worsening of the median or p90 allowed when --min-effect of "
        "the changed seeds got worse (default 0.10)",
    )
    g.add_argument(
        "--consistent-tolerance",
        type=float,
        default=0.05,
        help="relative worsening allowed when every changed seed got worse; the "
        "allowance falls linearly from --tolerance to this as that share rises "
        "(default 0.05)",
    )
