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

from farm.run.targets import REACH_TARGETS, target_text

from .console import EXIT_OK, UsageError, fmt, json_default, parse_params

__all__ = ["add_run_command"]

# `farm run` with no --optimizer: Lynceus with a one-step look-ahead, a model-based optimizer
# that finds a near-optimal configuration of the synthetic job in a few seconds
FIRST_RUN = ("lynceus", ["la=1"])
# the evaluations of a run that nothing else would stop before it has run every configuration
DEFAULT_ITERATIONS = 50


def cmd_run(args) -> int:
    from farm.run.loop import run_one
    from farm.run.spec import MAX_SEED, RunSpec
    from oracle.problem import Constraint, Objective

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
        from farm.run.metrics import TARGET_LABELS

        if args.until not in TARGET_LABELS:
            raise UsageError(f"--until {args.until!r} is not a target; choose one of "
                             + ", ".join(TARGET_LABELS))
    optimizer, params = args.optimizer, args.param or []
    if optimizer is None:
        optimizer, params = FIRST_RUN[0], FIRST_RUN[1] + params
    spec = RunSpec(dataset=args.dataset, optimizer=optimizer, seed=args.seed,
                   params=parse_params(params), budget=args.budget,
                   iterations=args.iterations, objective=args.objective,
                   constraints=tuple(args.constraint) if args.constraint else None,
                   aggregate=args.aggregate, until=args.until)
    progress = Progress(sys.stderr, f"{optimizer} on {args.dataset}",
                        enabled=not (args.quiet or args.json))
    t0 = time.perf_counter()
    oracle = _oracle(spec)
    spec = _default_limit(spec, oracle.problem)
    _say_first_compile(spec, oracle)
    try:
        result = run_one(spec, oracle=oracle, on_step=progress.step)
    finally:
        progress.close()
    if args.trace:
        import pyarrow.parquet as pq

        pq.write_table(result.trace, args.trace)
    if args.json:
        print(json.dumps(result.summary, default=json_default))
        return EXIT_OK
    print("\n".join(describe(result.summary, time.perf_counter() - t0,
                             first_run=args.optimizer is None,
                             given=parse_params(params))))
    return EXIT_OK


def _oracle(spec):
    """The run's oracle; a constraint given on the command line that every or no
    configuration meets is a ``warning:`` line on stderr (a threshold in another unit looks
    so), as ``farm datasets import`` says of a description's."""
    from oracle.oracle import Oracle
    from oracle.registry import load

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
    from optimizers.registry import get

    optimizer = get(spec.optimizer)
    if spec.iterations is not None or spec.until is not None or math.isfinite(problem.budget) \
            or optimizer.stops_itself(optimizer.resolve_params(spec.params)):
        return spec
    print(f"farm: {spec.optimizer} has no stopping rule of its own and the run no budget: "
          f"stopping after {DEFAULT_ITERATIONS} evaluations (--iterations N or --budget B to "
          "choose)", file=sys.stderr)
    return dataclasses.replace(spec, iterations=DEFAULT_ITERATIONS)


def _say_first_compile(spec, oracle) -> None:
    """A line on stderr before a run that compiles the numba kernels first: once per install
    (numba caches them), a minute or two, with nothing else to show meanwhile. Not before a
    run that bad input stops at once: its error stays the one line on stderr."""
    from optimizers.base import ParameterError
    from optimizers.registry import make_optimizer
    from oracle.problem import ProblemError

    try:  # imports the kernels when the optimizer uses them; compiles nothing yet
        optimizer = make_optimizer(spec.optimizer, oracle.space, oracle.problem, seed=spec.seed,
                                   evaluations=spec.iterations, **spec.params)
    except (ParameterError, ProblemError):
        return
    if not _builds_on_the_trees(type(optimizer)):
        return
    from farm.run.numba_cache import uncompiled_kernels

    missing = uncompiled_kernels()
    if missing:
        print(f"farm: compiling {len(missing)} numba kernels of the tree models first, roughly "
              f"{5 * len(missing)} s (once for this install: numba caches them)",
              file=sys.stderr, flush=True)


def _builds_on_the_trees(cls) -> bool:
    """Whether an optimizer class's modules (its own and its bases') use the tree models or
    the look-ahead, whose kernels numba compiles (whatever else this process imported)."""
    homes = ("optimizers.models.trees", "optimizers.lookahead", "optimizers.models._kernels")
    return any(getattr(value, "__module__", getattr(value, "__name__", "")) in homes
               for base in cls.__mro__ for value in vars(sys.modules[base.__module__]).values())


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
        best = ("no feasible incumbent yet" if not row["incumbent_feasible"] else
                f"incumbent CNO {fmt(cno)}" if cno == cno else f"incumbent Accuracy_C {fmt(acc)}")
        self._write(f"{self.what}: {row['step'] + 1} evaluations, exploring cost "
                    f"{fmt(row['cum_exploration_cost'])}, {best} ({now - self.t0:.0f} s)")

    def close(self) -> None:
        if self.enabled and self.width:
            self._write("")

    def _write(self, text: str) -> None:
        text = text[:99]
        self.stream.write("\r" + text.ljust(self.width) + ("\r" if not text else ""))
        self.stream.flush()
        self.width = len(text)


def _config_text(config: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


def _unit(metric: str, unit: str) -> str:
    """The unit a summary shows ``metric`` in: seconds, the dataset's cost unit, else none
    (accuracy, a named metric in the dataset's own unit)."""
    return {"time": "s", "cost": unit}.get(metric, "")


def _value(metric: str, v, unit: str) -> str:
    if v is None:
        return "-"
    digits = 3 if metric == "accuracy" else 4
    return f"{v:.{digits}g} {_unit(metric, unit)}".rstrip()


def _constraint_text(c: str, unit: str) -> str:
    """``time<=5330`` -> ``time <= 5330 s``."""
    for op in ("<=", ">="):
        c = c.replace(op, f" {op} ")
    return f"{c} {_unit(c.split()[0], unit)}".rstrip()


def _given_params(optimizer: str, params: dict, given: dict | None) -> str:
    """The parameters the user gave (``given``: as typed, None when not known) or else those
    set away from the defaults; a given value equal to its default says so."""
    from optimizers.registry import get

    defaults = get(optimizer).resolve_params({})
    if given is None:
        changed = [f"{k}={v}" for k, v in params.items() if defaults.get(k) != v]
        return " ".join(changed) or "(defaults)"
    texts = [f"{k}={params.get(k, v)}" + (" (its default)" if defaults.get(k) == params.get(k)
                                          else "") for k, v in given.items()]
    return " ".join(texts) or "(defaults)"


def stop_text(reason: str) -> str:
    """Why a run stopped, in words (``stop_reason``: the loop's ``iterations``, ``budget`` and
    ``target``, or the optimizer's own ``converged``, ``exhausted``, ``gave up: N repeats``;
    ``optimizer``: a run stored before the optimizers said why)."""
    if reason.startswith("gave up: "):
        return f"it gave up after {reason.split()[2]} repeats"
    return {"converged": "it stopped itself (converged)",
            "exhausted": "it stopped itself (every configuration run)",
            "optimizer": "the optimizer stopped by itself",
            "budget": "its budget was spent", "iterations": "the iteration limit was reached",
            "target": "its incumbent met the --until target"}.get(reason, reason)


def describe(s: dict, wall_s: float, first_run: bool = False,
             given: dict | None = None) -> list[str]:
    """The human summary of a run (``s``: the --json summary; ``given``: the parameters as
    the user typed them), lines of at most 100 columns."""
    unit = s["units"]["cost"]
    problem, rec, best, metric = s["problem"], s["recommendation"], s["optimum"], s["metric"]
    objective = problem["objective"].replace("min ", "minimise ").replace("max ", "maximise ")
    constraints = " and ".join(_constraint_text(c, unit) for c in problem["constraints"]) or "nothing"
    stop = stop_text(s["stop_reason"])
    goal_metric = problem["objective"].split()[1]
    goal_unit = f" ({_unit(goal_metric, unit)})" if _unit(goal_metric, unit) else ""
    rows = [("goal", f"{objective}{goal_unit} subject to {constraints}"
             + (f", exploration budget {problem['budget']:g} {unit}" if problem["budget"]
                else "")),
            ("optimizer",
             f"{s['optimizer']} {_given_params(s['optimizer'], s['params'], given)}")]
    if rec is None:
        rows.append(("recommended", "nothing: no configuration was observed feasible"))
    else:
        at = f" at dataset size s = {rec['fidelity']:g}" if rec.get("fidelity", 1) != 1 else ""
        rows.append(("recommended", _config_text(rec["config"]) + at))
        checks = {c["metric"]: c for c in rec["constraints"]}
        values = []
        for m in ("cost", "time", "accuracy"):
            if rec.get(m) is None:
                continue
            text = f"{m} {_value(m, rec[m], unit)}"
            if m in checks:
                text += f" ({'meets' if checks[m]['holds'] else 'BREAKS'} " \
                        f"{_constraint_text(checks[m]['constraint'], unit)})"
            values.append(text)
        for m, c in checks.items():  # the named metrics a constraint is on
            if m in ("cost", "time", "accuracy"):
                continue
            verdict = "meets" if c["holds"] else "BREAKS"
            values.append(f"{m} {_value(m, c['true'], unit)} ({verdict} "
                          f"{_constraint_text(c['constraint'], unit)})")
        broken = [c for c in rec["constraints"] if not c["holds"]]
        rows.append(("", "true (mean) " + ", ".join(values) + ": "
                     + ("INFEASIBLE" if broken else "feasible")))
        for c in broken:
            seen = [_value(c["metric"], v, unit) for v in c["observed"] if v is not None]
            rows.append(("why", f"its mean {c['metric']} {_value(c['metric'], c['true'], unit)}"
                         f" breaks {_constraint_text(c['constraint'], unit)}, but "
                         + (f"the run the optimizer observed measured {', '.join(seen)}: a "
                            "noisy draw passed where the mean does not" if seen else
                            "the optimizer never ran it at this size")))
    pick = s.get("pick")
    if pick is not None and (rec is None or (pick["config_id"], pick["fidelity"]) !=
                             (rec["config_id"], rec["fidelity"])):
        at = f" at dataset size s = {pick['fidelity']:g}" if pick["fidelity"] != 1 else ""
        rows.append(("own pick", _config_text(pick["config"]) + at + ": the optimizer's own "
                     "recommendation, " + ("tested" if pick["tested"] else "never run at this "
                     "size") + ", not credited (the farm credits the best tested feasible "
                     "configuration)"))
    if best is not None:
        rows.append(("optimum", f"{_config_text(best['config'])}: cost "
                     f"{_value('cost', best.get('cost'), unit)}, time "
                     f"{_value('time', best.get('time'), unit)}"))
    if rec is not None and metric == "cno":
        cno = rec["cno"]
        rows.append(("CNO", (
            f"none: the recommendation is infeasible, so no {goal_metric} ratio counts"
            if cno == float("inf") else f"{fmt(cno)}: the recommendation's true "
            f"{goal_metric} is {fmt(cno)} x the optimum's") +
            (" (Cost Normalised to the Optimum: 1 is the best possible)" if goal_metric == "cost"
             else f" (CNO here normalises the {goal_metric} to the optimum's: 1 is the best "
             "possible)")))
    elif rec is not None:
        rows.append(("Accuracy_C", f"{fmt(rec['accuracy_c'])} against the optimum's "
                     f"{fmt(best['accuracy_c']) if best else '-'} (its true accuracy, scaled by "
                     "cost limit / cost when it is over the cost limit)"))
    reached, lost = [], False
    for label, v in s["exploration_cost_to_reach"].items():
        lost_here = v is not None and not _still_met(label, s)
        lost |= lost_here
        reached.append(f"{target_text(label)} "
                       f"{'never' if v is None else 'after ' + _value('cost', v, unit)}"
                       + ("*" if lost_here else ""))
    ratio = s["exploration_cost"] / best["cost"] if best and best.get("cost") else None
    runs_of_best = "" if ratio is None else f" ({ratio:,.{0 if ratio >= 10 else 1}f} x the " \
        "optimum's cost)"
    rows.append(("exploring", f"{s['n_evaluations']} runs cost "
                 f"{_value('cost', s['exploration_cost'], unit)}{runs_of_best} and "
                 f"{s['exploration_time'] / 3600:.3g} h of job time; reached "
                 + ", ".join(reached)))
    if lost:
        rows.append(("", "* an earlier recommendation met it; the final one does not (its "
                     "incumbent changed to one that looked better on what the optimizer saw)"))
    lat = s["recommendation_latency_s"]
    rows.append(("latency", f"{fmt(lat['median'])} s per suggestion (median; p90 "
                 f"{fmt(lat['p90'])} s)"))
    out = [f"{s['optimizer']} on {s['dataset']}, seed {s['seed']}: {s['n_evaluations']} "
           f"evaluations in {wall_s:.1f} s; {stop}"]
    for label, text in rows:
        out += textwrap.wrap(text, 100, initial_indent=f"{label:<12}",
                             subsequent_indent=" " * 12, break_on_hyphens=False)
    if first_run:
        out += ["", "Compare it with other optimizers over 10 seeds (the papers' plots in "
                "sweeps-out/first/report):",
                f"  farm sweep --name first --datasets {s['dataset']} --optimizers "
                "lynceus,eic-usd,random --seeds 10 \\",
                f"      --iterations {DEFAULT_ITERATIONS} --param lynceus.la=1 --out "
                "sweeps-out/first && farm report sweeps-out/first"]
    return out


def _still_met(label: str, s: dict) -> bool:
    """Whether the final recommendation of summary ``s`` meets the reach target ``label``
    (``farm.run.metrics.meets_target``): an earlier incumbent may have reached it."""
    from farm.run.metrics import REACH_TARGETS, meets_target

    metric, rec, best = s["metric"], s["recommendation"], s["optimum"]
    if rec is None or rec.get(metric) is None:
        return False
    optimum = best.get(metric, math.nan) if best else math.nan
    return bool(meets_target(rec[metric], metric, REACH_TARGETS[metric][label], optimum))


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default unless it has none."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or \
                action.default == argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def add_run_command(sub) -> None:
    r = sub.add_parser("run", help="run one optimizer on one dataset and print a summary",
                       formatter_class=_HelpFormatter,
                       description="Run one optimizer on one dataset (its oracle replays the "
                       "measurements) and print what it recommends against the optimum.")
    r.add_argument("--dataset", default="synthetic", help="see `farm datasets list`")
    r.add_argument("--optimizer", help=f"see `farm optimizers` (default: {FIRST_RUN[0]} with "
                   f"--param {' '.join(FIRST_RUN[1])}, a few seconds once numba has compiled "
                   "its kernels)")
    r.add_argument("--seed", type=int, default=0, help="seed of the optimizer and the oracle")
    r.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="optimizer parameter (repeatable); see `farm optimizers NAME`")
    r.add_argument("--budget", type=float,
                   help="exploration budget in the dataset's cost unit (default: unlimited)")
    r.add_argument("--iterations", type=int,
                   help="max evaluations, bootstrap included (default: until the optimizer "
                   f"stops; {DEFAULT_ITERATIONS} for one with no stopping rule of its own run "
                   "without a budget or --until)")
    r.add_argument("--until", metavar="TARGET",
                   help=f"stop once the incumbent meets TARGET: {', '.join(REACH_TARGETS['cno'])} "
                   f"on a cost problem, {', '.join(REACH_TARGETS['accuracy_c'])} on an accuracy "
                   "one (default: do not stop)")
    r.add_argument("--objective", help="override the dataset's objective, e.g. 'min cost'")
    r.add_argument("--constraint", action="append",
                   help="override the dataset's constraints (repeatable), e.g. time<=300")
    r.add_argument("--aggregate", choices=["sample", "mean"], default="sample",
                   help="repeated measurements: draw one per run, or use their mean")
    r.add_argument("--trace", metavar="FILE", help="also write the trace as Parquet")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    r.set_defaults(func=cmd_run)
