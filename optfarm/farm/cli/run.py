"""``farm run``: one optimizer run on one dataset, and a summary a newcomer can read.

The summary says what was optimised under which constraints, the recommended configuration
with its true cost and time against them, how far it is from the dataset's optimum (CNO or
Accuracy_C, explained in words), what exploring cost, and, when the recommendation breaks a
constraint, which one and what the optimizer had observed. ``--json`` prints the same as one
JSON object (schema in docs/guide/command-line.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import textwrap
import time

from optfarm.farm.run.targets import REACH_TARGETS

from .console import EXIT_OK, UsageError, fmt, json_default, parse_params
from .run_summary import headline, summary_rows

__all__ = ["add_run_command"]

# `farm run` with no --optimizer: Lynceus with a one-step look-ahead, a model-based optimizer
# that finds a near-optimal configuration of the synthetic job in a few seconds
FIRST_RUN = ("lynceus", ["la=1"])
# the evaluations of a run that nothing else would stop before it has run every configuration
DEFAULT_ITERATIONS = 50


def cmd_run(args) -> int:
    _check_args(args)
    spec, given = _run_spec(args)
    t0 = time.perf_counter()
    result = _run(spec, args)
    if args.trace:
        import pyarrow.parquet as pq

        pq.write_table(result.trace, args.trace)
    if args.json:
        print(json.dumps(result.summary, default=json_default))
        return EXIT_OK
    print(
        "\n".join(
            describe(
                result.summary,
                time.perf_counter() - t0,
                first_run=args.optimizer is None,
                given=given,
            )
        )
    )
    return EXIT_OK


def _check_args(args) -> None:
    """A ``UsageError`` naming the first option ``farm run`` cannot take as given."""
    from optfarm.farm.run.spec import MAX_SEED
    from optfarm.oracle.problem import Constraint, Objective

    try:
        for text in args.constraint or ():
            Constraint.parse(text)
        if args.objective:
            Objective.parse(args.objective)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if not 0 <= args.seed <= MAX_SEED:
        raise UsageError(f"--seed must be in [0, {MAX_SEED}], got {args.seed}")
    if args.iterations is not None and args.iterations < 1:
        raise UsageError(f"--iterations must be at least 1, got {args.iterations}")
    if args.budget is not None and not args.budget > 0:
        raise UsageError(f"--budget must be positive, got {args.budget:g}")
    if args.until is not None:
        from optfarm.farm.run.metrics import TARGET_LABELS

        if args.until not in TARGET_LABELS:
            raise UsageError(
                f"--until {args.until!r} is not a target; choose one of " + ", ".join(TARGET_LABELS)
            )


def _run_spec(args):
    """The ``RunSpec`` the options ask for (no --optimizer: ``FIRST_RUN``), and the optimizer
    parameters as the user typed them."""
    from optfarm.farm.run.spec import RunSpec

    optimizer, params = args.optimizer, args.param or []
    if optimizer is None:
        optimizer, params = FIRST_RUN[0], FIRST_RUN[1] + params
    spec = RunSpec(
        dataset=args.dataset,
        optimizer=optimizer,
        seed=args.seed,
        params=parse_params(params),
        budget=args.budget,
        iterations=args.iterations,
        objective=args.objective,
        constraints=tuple(args.constraint) if args.constraint else None,
        aggregate=args.aggregate,
        until=args.until,
    )
    return spec, parse_params(params)


def _run(spec, args):
    """``spec`` run, with a progress line on stderr unless --quiet or --json."""
    from optfarm.farm.run.loop import run_one

    progress = Progress(
        sys.stderr, f"{spec.optimizer} on {args.dataset}", enabled=not (args.quiet or args.json)
    )
    oracle = _oracle(spec)
    spec = _default_limit(spec, oracle.problem)
    _say_first_compile(spec, oracle)
    try:
        return run_one(spec, oracle=oracle, on_step=progress.step)
    finally:
        progress.close()


def _oracle(spec):
    """The run's oracle; a constraint given on the command line that every or no
    configuration meets is a ``warning:`` line on stderr (a threshold in another unit looks
    so), as ``farm datasets import`` says of a description's."""
    from optfarm.oracle.oracle import Oracle
    from optfarm.oracle.registry import load

    dataset = load(spec.dataset)
    oracle = Oracle(dataset, spec.problem(dataset), aggregate=spec.aggregate)
    if spec.constraints is not None:
        for line in oracle.constraint_report():
            if line.startswith("warning: "):
                print(f"farm: {line.replace('the file', 'the dataset')}", file=sys.stderr)
    return oracle


def _default_limit(spec, problem):
    """``spec`` limited to ``DEFAULT_ITERATIONS`` evaluations, and a line on stderr saying so,
    when nothing else would stop it before every configuration has run: no --iterations,
    --until or budget, and an optimizer without a stopping rule of its own."""
    from optfarm.optimizers.registry import get

    optimizer = get(spec.optimizer)
    if (
        spec.iterations is not None
        or spec.until is not None
        or math.isfinite(problem.budget)
        or optimizer.stops_itself(optimizer.resolve_params(spec.params))
    ):
        return spec
    print(
        f"farm: {spec.optimizer} has no stopping rule of its own and the run no budget: "
        f"stopping after {DEFAULT_ITERATIONS} evaluations (--iterations N or --budget B to "
        "choose)",
        file=sys.stderr,
    )
    return dataclasses.replace(spec, iterations=DEFAULT_ITERATIONS)


def _say_first_compile(spec, oracle) -> None:
    """A line on stderr before a run that compiles the numba kernels first: once per install
    (numba caches them), a minute or two, with nothing else to show meanwhile. Not before a
    run that bad input stops at once: its error stays the one line on stderr."""
    from optfarm.optimizers.base import ParameterError
    from optfarm.optimizers.registry import make_optimizer
    from optfarm.oracle.problem import ProblemError

    try:  # imports the kernels when the optimizer uses them; compiles nothing yet
        optimizer = make_optimizer(
            spec.optimizer,
            oracle.space,
            oracle.problem,
            seed=spec.seed,
            evaluations=spec.design_evaluations,
            **spec.params,
        )
    except (ParameterError, ProblemError):
        return
    if not _builds_on_the_trees(type(optimizer)):
        return
    from optfarm.farm.run.numba_cache import SECONDS_PER_KERNEL, uncompiled_kernels

    missing = uncompiled_kernels()
    if missing:
        print(
            f"farm: compiling {len(missing)} numba kernels of the tree models first, roughly "
            f"{SECONDS_PER_KERNEL * len(missing)} s of CPU (once for this install: numba "
            "caches them)",
            file=sys.stderr,
            flush=True,
        )


def _builds_on_the_trees(cls) -> bool:
    """Whether an optimizer class's modules (its own and its bases') use the tree models or
    the look-ahead, whose kernels numba compiles (whatever else this process imported)."""
    homes = (
        "optfarm.optimizers.models.trees",
        "optfarm.optimizers.lookahead",
        "optfarm.optimizers.models._kernels",
    )
    return any(
        getattr(value, "__module__", getattr(value, "__name__", "")) in homes
        for base in cls.__mro__
        for value in vars(sys.modules[base.__module__]).values()
    )


class Progress:
    """One line on ``stream`` (a terminal): "starting" at once, then rewritten in place at
    most every 0.2 s once the run has taken ``after_s``, and erased at the end."""

    def __init__(self, stream, what: str, enabled: bool = True, after_s: float = 1.0):
        self.stream, self.what = stream, what
        self.enabled = enabled and stream.isatty()
        self.t0 = time.perf_counter()
        self.after_s, self.shown_at, self.width = after_s, 0.0, 0
        if self.enabled:
            self._write(f"{what}: starting (loading the dataset, compiling the models)")

    def step(self, row: dict) -> None:
        now = time.perf_counter()
        if not self.enabled or now - self.t0 < self.after_s or now - self.shown_at < 0.2:
            return
        self.shown_at = now
        cno, acc = row["incumbent_cno"], row["incumbent_accuracy_c"]
        best = (
            "no feasible incumbent yet"
            if not row["incumbent_feasible"]
            else f"incumbent CNO {fmt(cno)}"
            if cno == cno
            else f"incumbent Accuracy_C {fmt(acc)}"
        )
        self._write(
            f"{self.what}: {row['step'] + 1} evaluations, exploring cost "
            f"{fmt(row['cum_exploration_cost'])}, {best} ({now - self.t0:.0f} s)"
        )

    def close(self) -> None:
        if self.enabled and self.width:
            self._write("")

    def _write(self, text: str) -> None:
        text = text[:99]
        self.stream.write("\r" + text.ljust(self.width) + ("\r" if not text else ""))
        self.stream.flush()
        self.width = len(text)


def describe(
    s: dict, wall_s: float, first_run: bool = False, given: dict | None = None
) -> list[str]:
    """The human summary of a run (``s``: the --json summary; ``given``: the parameters as
    the user typed them), lines of at most 100 columns: the rows of ``run_summary``."""
    out = [headline(s, wall_s)]
    for label, text in summary_rows(s, given):
        out += textwrap.wrap(
            text,
            100,
            initial_indent=f"{label:<12}",
            subsequent_indent=" " * 12,
            break_on_hyphens=False,
        )
    return out + (_next_step(s["dataset"]) if first_run else [])


def _next_step(dataset: str) -> list[str]:
    """After a first run: the sweep that compares it with other optimizers."""
    return [
        "",
        "Compare it with other optimizers over 10 seeds (the papers' plots in "
        "sweeps-out/first/report):",
        f"  farm sweep --name first --datasets {dataset} --optimizers "
        "lynceus,eic-usd,random --seeds 10 \\",
        f"      --iterations {DEFAULT_ITERATIONS} --param lynceus.la=1 --out "
        "sweeps-out/first && farm report sweeps-out/first",
    ]


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default unless it has none."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def add_run_command(sub) -> None:
    r = sub.add_parser(
        "run",
        help="run one optimizer on one dataset and print a summary",
        formatter_class=_HelpFormatter,
        description="Run one optimizer on one dataset (its oracle replays the "
        "measurements) and print what it recommends against the optimum.",
    )
    r.add_argument("--dataset", default="synthetic", help="see `farm datasets list`")
    r.add_argument(
        "--optimizer",
        help=f"see `farm optimizers` (default: {FIRST_RUN[0]} with "
        f"--param {' '.join(FIRST_RUN[1])}, a few seconds once numba has compiled "
        "its kernels)",
    )
    r.add_argument("--seed", type=int, default=0, help="seed of the optimizer and the oracle")
    r.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="optimizer parameter (repeatable); see `farm optimizers NAME`",
    )
    r.add_argument(
        "--budget",
        type=float,
        help="exploration budget in the dataset's cost unit (default: unlimited)",
    )
    r.add_argument(
        "--iterations",
        type=int,
        help="max evaluations, bootstrap included (default: until the optimizer "
        f"stops; {DEFAULT_ITERATIONS} for one with no stopping rule of its own run "
        "without a budget or --until)",
    )
    r.add_argument(
        "--until",
        metavar="TARGET",
        help=f"stop once the incumbent meets TARGET: {', '.join(REACH_TARGETS['cno'])} "
        f"on a cost problem, {', '.join(REACH_TARGETS['accuracy_c'])} on an accuracy "
        "one (default: do not stop)",
    )
    r.add_argument("--objective", help="override the dataset's objective, e.g. 'min cost'")
    r.add_argument(
        "--constraint",
        action="append",
        help="override the dataset's constraints (repeatable), e.g. time<=300",
    )
    r.add_argument(
        "--aggregate",
        choices=["sample", "mean"],
        default="sample",
        help="repeated measurements: draw one per run, or use their mean",
    )
    r.add_argument("--trace", metavar="FILE", help="also write the trace as Parquet")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    r.set_defaults(func=cmd_run)
