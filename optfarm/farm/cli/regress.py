"""``farm regress``: the nightly quality gate against a baseline, or the gate tested on itself
(``--mutations``), added to the parser of ``optfarm.farm.cli``.

The default specs and ``--baseline nightly-baseline`` are built-in (``optfarm.farm.sweep.
builtin_specs``: a bare name names the package's file), so the gate runs from any folder.

Exit codes: 0 no regression (or baseline updated), 1 a quality regression or a failed run,
2 bad input (spec, baseline file, output folder), each error on one line on stderr.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from .console import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, print_json

__all__ = ["DEFAULT_SPECS", "add_regress_command"]

# the nightly's parts, built-in specs (optfarm/sweeps/NAME.yaml), run one after the other
DEFAULT_SPECS = [
    "nightly",
    "nightly-lynceus",
    "nightly-accuracy",
    "nightly-trimtuner",
    "nightly-trimtuner-cost",
    "nightly-guindani",
    "nightly-obol",
    "nightly-nephele",
    "nightly-lynceus-timeout",
    "nightly-fabulinus-cost",
]


def _error(message: str) -> int:
    print(f"farm: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


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
        baseline_file = _baseline_file(args)
        baseline = None if args.update_baseline else read_baseline(baseline_file)
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
            **_gate_rule(args),
        )
    except BaselineError as e:
        return _error(str(e))
    return _print_verdict(args, rows, failed, guided)


def _baseline_file(args):
    """The baseline ``--baseline`` names: a file, or a built-in baseline's name; with
    ``--update-baseline`` a file to write (never the package's own)."""
    from optfarm.farm.gate.regress import BaselineError
    from optfarm.farm.sweep.builtin_specs import BASELINE_SUFFIX, is_builtin_name, resolve

    if args.update_baseline:
        if is_builtin_name(args.baseline) and not Path(args.baseline).exists():
            raise BaselineError(
                f"--update-baseline writes FILE: give a path (e.g. {args.baseline}.json), "
                f"not a built-in baseline's name ({args.baseline})"
            )
        return Path(args.baseline)
    try:
        return resolve(args.baseline, BASELINE_SUFFIX, "baseline")
    except FileNotFoundError as e:
        raise BaselineError(str(e)) from None


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
    from optfarm.farm.gate.mutations import format_mutation_table, load_catalogue
    from optfarm.farm.sweep.spec import expand

    try:
        known = {m.name: m for m in load_catalogue().MUTATIONS}
    except LookupError as e:
        return _error(str(e))
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
            **_gate_rule(args),
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


def add_regress_command(sub) -> None:
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
        help="sweep spec files or built-in specs' names, run one after the other "
        f"(default the nightly's: {' '.join(DEFAULT_SPECS)})",
    )
    g.add_argument(
        "--baseline",
        required=True,
        metavar="FILE",
        help="baseline JSON with per-seed values: a file, or a built-in's name "
        "(nightly-baseline, nightly-peers-baseline)",
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
        help="test the gate itself: rerun its runs under each mutation of the "
        "checkout's catalogue (mutations/catalogue.py) and print which it catches "
        "(exit 1 on a missed regression or a false alarm)",
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


def _gate_rule(args) -> dict:
    """The gate's thresholds as the command line gives them (``compare``'s and the mutation
    table's keyword arguments)."""
    return {
        "alpha": args.alpha,
        "tolerance": args.tolerance,
        "min_effect": args.min_effect,
        "consistent_tolerance": args.consistent_tolerance,
    }
