"""``farm leaderboard``: which optimizer for my job, across every table (added to the parser
of ``optfarm.farm.cli``).

``farm leaderboard SPEC`` runs the runs of a leaderboard spec (``optfarm.farm.sweep.board_spec``)
its output folder lacks, as ``farm sweep`` does, then writes the board
(``optfarm.farm.board.leaderboard``) into ``OUT/leaderboard/`` and logs it on the sweep's MLflow
parent run, as ``farm report`` does; ``farm leaderboard SWEEP_DIR`` reads a finished sweep;
``--datasets A,B`` puts the user's own tables (``farm datasets import``) on the board of SPEC
(default the shipped first look), named after them; one table runs ``ONE_TABLE_SEEDS`` seeds
(``optfarm.farm.sweep.board_spec``), the first seed of every optimizer first, from which the CPU the
rest will take is estimated and printed.

Exit codes: 0 the board is written; 1 some runs failed (the board of the runs that finished
is still written) or the folder could not be written; 2 bad input, one line on stderr.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import textwrap
from pathlib import Path

from .console import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, WIDTH, print_json, print_table
from .report import log_report_files
from .sweep import _signals_interrupt as signals_interrupt

__all__ = ["add_leaderboard_command"]

FIRST_LOOK = Path(__file__).resolve().parents[2] / "sweeps" / "leaderboard-first-look.yaml"
SETTINGS_FILE = "board.json"  # the board's budgets, beside the sweep's own files
PLAN_SECONDS = 60.0  # --plan: CPU-seconds an optimizer's run is timed for, per table


def _error(message: str) -> int:
    print(f"farm: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _numbers(text: str | None, kind, flag: str) -> list | None:
    """A comma list of distinct positive finite numbers (``kind``), sorted; ValueError naming
    the flag otherwise."""
    if text is None:
        return None
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(not math.isfinite(v) or v <= 0 for v in values):
        raise ValueError(f"{flag} {text!r}: give positive finite numbers separated by commas")
    if len(set(values)) < len(values):
        raise ValueError(f"{flag} {text!r}: give each budget once")
    return sorted(values)


def _check_counts(args) -> None:
    """ValueError for a count flag below 1 (or seeds past the largest seed), or an --out or
    --report that is a file: checked before anything is read, run or written."""
    from optfarm.farm.run.spec import MAX_SEED

    for flag, value in (
        ("--seeds", args.seeds),
        ("--max-in-flight", args.max_in_flight),
        ("--plan-check", args.plan_check),
        ("--cpus", args.cpus),
    ):
        if value is not None and value < 1:
            raise ValueError(f"{flag} must be at least 1, got {value}")
    if not (math.isfinite(args.plan_seconds) and args.plan_seconds > 0):
        raise ValueError(f"--plan-seconds must be a positive number, got {args.plan_seconds:g}")
    if args.seeds is not None and args.seeds - 1 > MAX_SEED:
        raise ValueError(f"--seeds: seeds are at most {MAX_SEED} (2**32 - 1), got {args.seeds:,}")
    for flag, value in (("--out", args.out), ("--report", args.report)):
        if value and Path(value).is_file():
            raise ValueError(f"{flag} {value} is a file; name a folder")


def cmd_leaderboard(args) -> int:
    try:
        _check_counts(args)
        budgets = _numbers(args.budgets, float, "--budgets")
        evaluations = _numbers(args.evaluations, int, "--evaluations")
    except ValueError as e:
        return _error(str(e))
    target = Path(args.target) if args.target else None
    if target is not None and target.is_dir():
        return _board_of_folder(target, budgets, evaluations, args)
    if target is None and not args.datasets:
        return _error("give a leaderboard SPEC, a sweep folder, or --datasets")
    return _board_of_spec(target or FIRST_LOOK, budgets, evaluations, args)


def _board_of_folder(sweep_dir: Path, budgets, evaluations, args) -> int:
    """The board of a sweep folder's runs as they are (nothing to run, nothing to price)."""
    for flag, given in (("--datasets", args.datasets), ("--seeds", args.seeds)):
        if given is not None:
            return _error(f"{flag} runs a spec; give a SPEC (or none), not a sweep folder")
    if args.plan:
        return _error("--plan prices a SPEC before it runs, not a sweep folder")
    return _board(sweep_dir, budgets, evaluations, args, failed=0)


def _board_of_spec(spec_path: Path, budgets, evaluations, args) -> int:
    """The board of a leaderboard spec (on --datasets' tables when given): its price with
    --plan, else the runs its folder lacks, then the board."""
    from optfarm.farm.sweep.board_spec import load_board_spec
    from optfarm.farm.sweep.spec import DEFAULT_MAX_RUNS, SpecError, expand, parse_spec

    datasets = [d.strip() for d in (args.datasets or "").split(",") if d.strip()] or None
    try:
        resolved = load_board_spec(spec_path, datasets)
        spec = resolved.sweep
        if args.seeds is not None:  # validated as a spec's seeds are
            spec = parse_spec({**spec.model_dump(mode="json"), "seeds": args.seeds}, "--seeds")
        if spec.n_runs() > DEFAULT_MAX_RUNS:  # farm sweep's limit; a board has no --max-runs
            raise SpecError(
                f"{spec_path}: the board expands to {spec.n_runs():,} runs, more than "
                f"{DEFAULT_MAX_RUNS:,}: give fewer --seeds or tables"
            )
        runs = len(expand(spec, str(spec_path)))
    except SpecError as e:
        return _error(str(e))
    if args.plan:
        from .leaderboard_plan import print_plan

        return print_plan(spec, str(spec_path), args)
    out = Path(args.out or Path("sweeps-out") / spec.name)
    for note in resolved.notes:
        print(f"left out: {note}", file=sys.stderr)
    _keep_settings(out, resolved, runs, spec, _resume_command(args, out))
    failed = _run_with_estimate(spec, str(spec_path), out, args)
    if failed is None:
        return EXIT_FAILED
    return _board(out, budgets, evaluations, args, failed)


def _keep_settings(out: Path, resolved, runs: int, spec, resume: str) -> None:
    """``board.json`` beside the sweep, before any run (a board stopped early is read with
    them): the budgets, the optimizers left out, how many runs and which optimizers the
    board has, and the command that resumes it."""
    from optfarm.farm.store.store import atomic_write_json

    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(
        out / SETTINGS_FILE,
        {
            **resolved.settings.model_dump(),
            "left_out": resolved.notes,
            "runs": runs,
            "optimizers": [o.name for o in spec.optimizer_entries()],
            "resume": resume,
        },
    )


def _resume_command(args, out: Path) -> str:
    """The command that runs what the board's folder lacks (the same board, the same
    --out), then writes its board."""
    words = ["farm", "leaderboard", *([args.target] if args.target else [])]
    for flag, value in (
        ("--datasets", args.datasets),
        ("--seeds", args.seeds),
        ("--budgets", args.budgets),
        ("--evaluations", args.evaluations),
        ("--tracking-uri", args.tracking_uri),
    ):
        if value is not None:
            words += [flag, str(value)]
    words += ["--serial"] * args.serial + ["--no-tracking"] * args.no_tracking
    return shlex.join([*words, "--out", str(out)])


def _run_with_estimate(spec, source: str, out: Path, args) -> int | None:
    """On a board of one table, run the first seed of every optimizer, print the CPU the
    runs still to do will take at the CPU seconds those took, then run the rest; the failed
    runs (None: the sweep could not run, said on stderr)."""
    from optfarm.farm.sweep.spec import expand

    runs = expand(spec, source)
    seeds = sorted({r.seed for r in runs})
    if len(seeds) <= 1 or len({r.dataset for r in runs}) > 1:
        report = _run(spec, source, out, args)
        return None if report is None else report.failed
    pilot = _run(spec.model_copy(update={"seeds": seeds[:1]}), source, out, args)
    if pilot is None:
        return None
    if not args.json:
        _say_cpu_estimate(pilot, runs)
    rest = _run(spec, source, out, args)
    return None if rest is None else pilot.failed + rest.failed


def _say_cpu_estimate(pilot, runs) -> None:
    """The CPU and wall time the runs the first seed (``pilot``) left will take, each at its
    own optimizer's first-seed pace (``optfarm.farm.board.plan.remaining_cost``)."""
    from optfarm.farm.board.plan import remaining_cost

    left = remaining_cost(pilot.records, pilot.keys, runs)
    if left is None:
        return
    print(
        f"CPU estimate: the other {left.runs} runs take about {_span(left.cpu_s)} of CPU, "
        f"{_span(left.wall_s)} on {left.workers} worker{'s' * (left.workers != 1)}, each at "
        f"what its optimizer's first-seed run took (the first seed: {left.first_cpu_s:.0f} "
        "CPU-s)",
        flush=True,
    )


def _span(seconds: float) -> str:
    """A time span in seconds, in minutes from 2 minutes on."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} minutes"


def _run(spec, source: str, out: Path, args):
    """Run what the folder lacks; the sweep's report (None: the sweep could not run, said
    on stderr)."""
    from optfarm.farm.runtime.capacity import ClusterLost
    from optfarm.farm.store.store import DamagedFile, FolderBusy, StoreError
    from optfarm.farm.sweep.runner import run_sweep

    try:
        with signals_interrupt():  # SIGTERM / SIGHUP end it as Ctrl-C does, runs kept
            report = run_sweep(
                spec,
                out,
                source=source,
                backend="serial" if args.serial else None,
                max_in_flight=args.max_in_flight,
                tracking=False if args.no_tracking else None,
                tracking_uri=args.tracking_uri,
                progress=not args.no_progress,
            )
    except (FolderBusy, DamagedFile, ClusterLost, StoreError) as e:
        print(f"farm: error: {e}", file=sys.stderr)
        return None
    for f in report.failures[:10]:
        s = f["spec"]
        print(
            f"failed: {s['optimizer']} on {s['dataset']} seed {s['seed']}: {f['error']}",
            file=sys.stderr,
        )
    if not args.json:
        print(
            f"sweep {spec.name}: {len(report.runs)} runs, {report.skipped} already done, "
            f"{report.done} run now, {report.failed} failed ({report.wall_s:.1f} s) -> {out}"
        )
    return report


def _board(sweep_dir: Path, budgets, evaluations, args, failed: int) -> int:
    """The boards of a sweep folder's runs written (``leaderboard.json`` and its page),
    logged to MLflow unless --no-tracking, and printed (tables, or one JSON object)."""
    from optfarm.farm.board.leaderboard import build_boards
    from optfarm.farm.report.analysis import analyse
    from optfarm.farm.store.store import Store
    from optfarm.farm.sweep.results import load_sweep

    stored, settings = _stored_settings(sweep_dir)
    try:
        trace, summaries = load_sweep(sweep_dir)
        analyses = analyse(trace, summaries)
    except ValueError as e:
        return _error(str(e))
    boards = build_boards(analyses, _budgets(budgets, evaluations, settings), settings.cap)
    name = (Store(sweep_dir).read_spec() or {}).get("name", sweep_dir.resolve().name)
    out = Path(args.report) if args.report else sweep_dir / "leaderboard"
    missing = _missing(stored, summaries, sweep_dir)
    files, result = _write_boards(analyses, boards, out, name, missing.get("partial"))
    logged = (
        None
        if args.no_tracking
        else log_report_files(
            sweep_dir, files, args.tracking_uri, folder="leaderboard", quiet=args.json
        )
    )
    if args.json:
        print_json(
            {
                "name": name,
                "runs": len(summaries),
                "failed": failed,
                **missing,
                "report": str(out / "report.html"),
                "files": [str(f) for f in files],
                "mlflow_logged": logged,
                "boards": result,
                "left_out": stored.get("left_out", []),
            }
        )
    else:
        _print_boards(result, missing.get("partial"), stored.get("left_out", []))
        print(f"\nleaderboard {name} of {len(summaries)} runs: {out / 'report.html'}")
    return EXIT_FAILED if failed else EXIT_OK


def _missing(stored: dict, summaries: list[dict], sweep_dir: Path) -> dict:
    """What a partial board lacks: the runs the board has (``board.json``, else the stored
    spec's) that have not finished, the optimizers without any, the command that resumes,
    and all that in one sentence ("partial"); {} when nothing is missing."""
    from optfarm.farm.store.store import Store
    from optfarm.farm.sweep.spec import SpecError, expand, parse_spec

    planned, optimizers = stored.get("runs"), stored.get("optimizers")
    if planned is None:
        try:
            spec = parse_spec(Store(sweep_dir).read_spec() or {}, str(sweep_dir))
            planned = len(expand(spec, str(sweep_dir), max_runs=None))
            optimizers = [o.name for o in spec.optimizer_entries()]
        except SpecError:
            return {}
    ran = {s["optimizer"] for s in summaries}
    lacking = [o for o in optimizers if o not in ran]
    missing = max(planned - len(summaries), 0)
    if not missing:
        return {}
    resume = stored.get("resume") or f"the command that made it, with --out {sweep_dir}"
    none = f" ({', '.join(lacking)}: none yet)" if lacking else ""
    note = (
        f"A partial sweep: {missing:,} of its {planned:,} runs are missing{none}; the board "
        f"ranks the seeds every optimizer on it has. Resume: {resume}"
    )
    return {"missing_runs": missing, "planned_runs": planned, "resume": resume, "partial": note}


def _stored_settings(sweep_dir: Path):
    """What ``farm leaderboard SPEC`` kept beside the sweep (``board.json``: its budgets, the
    tables left out, its runs and optimizers, the command that resumes it; nothing for a
    plain sweep folder), and its board settings."""
    from optfarm.farm.sweep.board_spec import BoardSettings

    settings_path = sweep_dir / SETTINGS_FILE
    stored = json.loads(settings_path.read_text()) if settings_path.is_file() else {}
    settings = BoardSettings.model_validate(
        {k: v for k, v in stored.items() if k in BoardSettings.model_fields}
    )
    return stored, settings


def _budgets(budgets, evaluations, settings) -> list:
    """The budgets the board reads: the options', else the spec's."""
    from optfarm.farm.board.leaderboard import Budget

    return [
        *(Budget("cost", float(b)) for b in sorted(budgets or settings.budgets)),
        *(Budget("evaluations", int(n)) for n in sorted(evaluations or settings.evaluations)),
    ]


def _write_boards(analyses, boards, out: Path, name: str, partial: str | None):
    """The board's page and ``leaderboard.json`` written into ``out``: the files, and the
    boards as the JSON holds them."""
    from optfarm.farm.board.page import intro, sections
    from optfarm.farm.report.page import write_report

    files = write_report(
        analyses,
        out,
        f"optfarm leaderboard: {name}",
        sections=sections(boards, analyses),
        per_dataset=False,
        intro=intro(boards, partial),
    )
    result = {metric: _board_json(b) for metric, b in boards.items()}
    board_json = out / "leaderboard.json"
    board_json.write_text(json.dumps(result, indent=1, default=str))
    files.append(board_json)
    return files, result


def _board_json(b) -> dict:
    """One board as ``leaderboard.json`` and ``--json`` hold it."""
    from optfarm.farm.board.decision import budget_lines, decision, decision_rows
    from optfarm.farm.board.leaderboard import (
        BOARD_TITLES,
        best_by_family,
        budget_rows,
        headroom_rows,
        overall_text,
        pair_rows,
        standings_rows,
        statistics_rows,
    )

    return {
        "title": BOARD_TITLES[b.metric],
        "headline": b.headline.budget.label,
        "tables": len(b.tables),
        "seeds": int(b.tidy["seed"].nunique()),
        "blocks": b.blocks,
        "decision": decision(b),
        "use": decision_rows(b),
        "detail": budget_lines(b),
        "overall": overall_text(b),
        "budgets": budget_rows(b),
        "friedman": b.headline.friedman,
        "nemenyi_cd": b.headline.cd,
        "cliques": b.headline.cliques,
        "standings": standings_rows(b),
        "statistics": statistics_rows(b),
        "pairs": pair_rows(b),
        "headroom": headroom_rows(b),
        "best_by_family": {
            f: {"optimizers": o, "mean_rank": r} for f, (o, r) in best_by_family(b).items()
        },
        "left_out": b.left_out,
        "shown_once": b.same_as,
    }


def _print_boards(result: dict, partial: str | None, left_out: list[str]) -> None:
    """The terminal's board: each board's decision first, what a partial sweep lacks, a line
    per budget; then each board's tables."""
    for r in result.values():
        _say(r["decision"])
    if partial:
        _say(partial)
    for r in result.values():
        print()
        for line in r["detail"]:
            _say(line)
        for note in r["left_out"]:
            _say(f"left off the board: {note}")
        for note in r["shown_once"]:
            _say(f"same choices: {note}")
    for note in left_out:
        _say(f"left out: {note}")
    for r in result.values():
        _print_tables(r)


def _say(text: str) -> None:
    print(textwrap.fill(text, WIDTH, break_on_hyphens=False, break_long_words=False))


def _print_tables(r: dict) -> None:
    h = r["headline"]
    seeds = f"{r['seeds']} seed{'s' * (r['seeds'] != 1)}" + (" each" if r["tables"] > 1 else "")
    print(
        f"\n{r['title']}: {r['tables']} table{'s' * (r['tables'] != 1)}, {seeds}; "
        f"headline: the {h} score"
    )
    print_table(r["budgets"], list(r["budgets"][0]))
    standings = r["standings"]
    print_table(
        standings,
        [k for k in standings[0] if not k.startswith("rank at") and not k.startswith("lowest")],
    )
    print(r["overall"])
    if r["headroom"]:
        print("\nheadroom: random search's median CNO (or Accuracy_C / optimum's) per table")
        print_table(r["headroom"], list(r["headroom"][0]))


def add_leaderboard_command(sub) -> None:
    b = sub.add_parser(
        "leaderboard",
        help="rank every optimizer across every table at equal "
        "budgets (runs what a spec's folder lacks, or reads a sweep folder)",
    )
    b.add_argument(
        "target",
        nargs="?",
        metavar="SPEC|SWEEP_DIR",
        help="a leaderboard spec (sweeps/leaderboard*.yaml) or a sweep folder",
    )
    b.add_argument(
        "--datasets",
        help="your tables (comma list): the board of SPEC (default "
        "sweeps/leaderboard-first-look.yaml) on these tables",
    )
    b.add_argument(
        "--seeds",
        type=int,
        help="seeds 0..N-1 instead of the spec's (one table given with --datasets: 20)",
    )
    b.add_argument(
        "--budgets",
        help="cost budgets read, in multiples of each table's budget unit (its mean "
        "configuration cost x its size factor), capped at the board's share of the price "
        "(default the spec's, e.g. 5,10,20)",
    )
    b.add_argument(
        "--evaluations",
        help="evaluation budgets read, times each table's size factor (default the spec's, "
        "e.g. 5,10,20)",
    )
    b.add_argument("--out", help="the sweep's output folder (default sweeps-out/NAME)")
    b.add_argument("--report", help="where the board goes (default OUT/leaderboard)")
    b.add_argument("--serial", action="store_true", help="run in this process, without Ray")
    b.add_argument("--max-in-flight", type=int, help="runs at once (default: cluster CPUs)")
    b.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default $MLFLOW_TRACKING_URI, else sqlite:///OUT/mlflow.db)",
    )
    b.add_argument("--no-tracking", action="store_true", help="no MLflow")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_plan_options(b)
    b.add_argument("--json", action="store_true", help="print one JSON object (the boards)")
    b.set_defaults(func=cmd_leaderboard)


def _add_plan_options(b) -> None:
    """``--plan`` and what it prices the board's runs with."""
    b.add_argument(
        "--plan",
        action="store_true",
        help="print the runs and their estimated "
        "CPU-hours and wall time per optimizer, run nothing (optfarm.farm.board.plan)",
    )
    b.add_argument(
        "--plan-seconds",
        type=float,
        metavar="S",
        default=PLAN_SECONDS,
        help="--plan: CPU-seconds each optimizer's seed-0 run is timed for on each table it "
        f"is measured on (default {PLAN_SECONDS:g}; a run that ends sooner is timed whole)",
    )
    b.add_argument(
        "--plan-check",
        type=int,
        metavar="N",
        help="--plan: then run N of the board's runs here (as many per optimizer and size of "
        "table) and compare the CPU they take with the plan's",
    )
    b.add_argument(
        "--measurements",
        metavar="JSON",
        help="--plan: the measurements of an earlier `--plan --json` instead of measuring",
    )
    b.add_argument(
        "--cpus",
        type=int,
        help="--plan: the cluster's CPUs (default: the Ray "
        "cluster at $RAY_ADDRESS, else this machine's)",
    )
