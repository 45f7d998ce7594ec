"""The rows of ``farm run``'s summary, built from the one summary ``farm run --json`` prints
(``optfarm.farm.run.metrics.summarize``), so the text and the JSON say the same: pure functions,
each taking that summary and giving ``(label, text)`` rows in the order the summary shows them.

Rows name the goal and the optimizer, the recommended configuration with its true (mean)
values against the constraints and why a broken one passed, the optimizer's own pick when the
farm credited another, the dataset's optimum, the CNO or Accuracy_C in words, what exploring
cost and which reach targets it met, and the latency per suggestion.
"""

from __future__ import annotations

import math

from optfarm.farm.run.targets import target_text

from .console import duration, fmt

__all__ = ["headline", "stop_text", "summary_rows"]

# the metrics every measurement has; a constraint may also be on a metric a dataset names
MEASURED = ("cost", "time", "accuracy")

STOP_TEXT = {
    "converged": "it stopped itself (converged)",
    "exhausted": "it stopped itself (every configuration run)",
    "optimizer": "the optimizer stopped by itself",
    "budget": "its budget was spent",
    "iterations": "the iteration limit was reached",
    "target": "its incumbent met the --until target",
}


def stop_text(reason: str) -> str:
    """Why a run stopped, in words (``stop_reason``: the loop's ``iterations``, ``budget`` and
    ``target``, or the optimizer's own ``converged``, ``exhausted``, ``gave up: N repeats``;
    ``optimizer``: a run stored before the optimizers said why)."""
    if reason.startswith("gave up: "):
        return f"it gave up after {reason.split()[2]} repeats"
    return STOP_TEXT.get(reason, reason)


def headline(s: dict, wall_s: float) -> str:
    """The first line: what ran, how many evaluations in how long, and why it stopped."""
    return (
        f"{s['optimizer']} on {s['dataset']}, seed {s['seed']}: {s['n_evaluations']} "
        f"evaluations in {wall_s:.1f} s; {stop_text(s['stop_reason'])}"
    )


def summary_rows(s: dict, given: dict | None = None) -> list[tuple[str, str]]:
    """Every row of the summary ``s`` (``given``: the parameters as the user typed them)."""
    return [
        goal_row(s),
        optimizer_row(s, given),
        *recommendation_rows(s),
        *pick_rows(s),
        *optimum_rows(s),
        *quality_rows(s),
        *exploring_rows(s),
        latency_row(s),
    ]


def goal_row(s: dict) -> tuple[str, str]:
    """What was optimised, in which unit, under which constraints and budget."""
    unit, problem = s["units"]["cost"], s["problem"]
    objective = problem["objective"].replace("min ", "minimise ").replace("max ", "maximise ")
    constraints = " and ".join(_constraint_text(c, unit) for c in problem["constraints"])
    constraints = constraints or "nothing"
    goal_unit = _unit(_goal_metric(s), unit)
    goal_unit = f" ({goal_unit})" if goal_unit else ""
    budget = f", exploration budget {problem['budget']:g} {unit}" if problem["budget"] else ""
    return "goal", f"{objective}{goal_unit} subject to {constraints}{budget}"


def optimizer_row(s: dict, given: dict | None) -> tuple[str, str]:
    return "optimizer", f"{s['optimizer']} {_given_params(s['optimizer'], s['params'], given)}"


def recommendation_rows(s: dict) -> list[tuple[str, str]]:
    """The recommended configuration, its true values against the constraints, and a "why"
    row for each constraint it breaks."""
    rec, unit = s["recommendation"], s["units"]["cost"]
    if rec is None:
        return [("recommended", "nothing: no configuration was observed feasible")]
    broken = [c for c in rec["constraints"] if not c["holds"]]
    return [
        ("recommended", _config_text(rec["config"]) + _at_size(rec.get("fidelity", 1))),
        (
            "",
            "true (mean) "
            + ", ".join(_true_values(rec, unit))
            + ": "
            + ("INFEASIBLE" if broken else "feasible"),
        ),
        *(("why", _why_broken(c, unit)) for c in broken),
    ]


def pick_rows(s: dict) -> list[tuple[str, str]]:
    """The optimizer's own recommendation, when the farm credited another configuration."""
    pick, rec = s.get("pick"), s["recommendation"]
    if pick is None or (
        rec is not None
        and (pick["config_id"], pick["fidelity"]) == (rec["config_id"], rec["fidelity"])
    ):
        return []
    return [
        (
            "own pick",
            _config_text(pick["config"])
            + _at_size(pick["fidelity"])
            + ": the optimizer's own recommendation, "
            + ("tested" if pick["tested"] else "never run at this size")
            + ", not credited (the farm credits the best tested feasible configuration)",
        )
    ]


def optimum_rows(s: dict) -> list[tuple[str, str]]:
    best, unit = s["optimum"], s["units"]["cost"]
    if best is None:
        return []
    return [
        (
            "optimum",
            f"{_config_text(best['config'])}: cost "
            f"{_value('cost', best.get('cost'), unit)}, time "
            f"{_value('time', best.get('time'), unit)}",
        )
    ]


def quality_rows(s: dict) -> list[tuple[str, str]]:
    """The recommendation's quality against the optimum: its CNO or its Accuracy_C."""
    rec, best = s["recommendation"], s["optimum"]
    if rec is None:
        return []
    if s["metric"] == "cno":
        return [("CNO", _cno_text(rec["cno"], _goal_metric(s)))]
    return [
        (
            "Accuracy_C",
            f"{fmt(rec['accuracy_c'])} against the optimum's "
            f"{fmt(best['accuracy_c']) if best else '-'} (its true accuracy, scaled by "
            "cost limit / cost when it is over the cost limit)",
        )
    ]


def exploring_rows(s: dict) -> list[tuple[str, str]]:
    """What exploring cost and when it reached each target; a footnote when the final
    recommendation no longer meets a target an earlier one met."""
    unit = s["units"]["cost"]
    reached, lost = _reached(s, unit)
    rows = [
        (
            "exploring",
            f"{s['n_evaluations']} runs cost "
            f"{_value('cost', s['exploration_cost'], unit)}{_times_optimum_cost(s)} and "
            f"{s['exploration_time'] / 3600:.3g} h of job time; reached " + ", ".join(reached),
        )
    ]
    if lost:
        rows.append(
            (
                "",
                "* an earlier recommendation met it; the final one does not (its "
                "incumbent changed to one that looked better on what the optimizer saw)",
            )
        )
    return rows


def latency_row(s: dict) -> tuple[str, str]:
    lat = s["recommendation_latency_s"]
    return (
        "latency",
        f"{duration(lat['median'])} per suggestion (median; p90 {duration(lat['p90'])})",
    )


def _goal_metric(s: dict) -> str:
    return s["problem"]["objective"].split()[1]


def _config_text(config: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


def _at_size(fidelity: float) -> str:
    return f" at dataset size s = {fidelity:g}" if fidelity != 1 else ""


def _unit(metric: str, unit: str) -> str:
    """The unit a summary shows ``metric`` in: seconds, the dataset's cost unit, else none
    (accuracy, a named metric in the dataset's own unit)."""
    return {"time": "s", "cost": unit}.get(metric, "")


def _value(metric: str, v, unit: str) -> str:
    if v is None:
        return "-"
    shown = f"{v:.3g}" if metric == "accuracy" else fmt(float(v))
    return f"{shown} {_unit(metric, unit)}".rstrip()


def _constraint_text(c: str, unit: str) -> str:
    """``time<=5330`` -> ``time <= 5330 s``."""
    for op in ("<=", ">="):
        c = c.replace(op, f" {op} ")
    return f"{c} {_unit(c.split()[0], unit)}".rstrip()


def _verdict(check: dict, unit: str) -> str:
    """``(meets time <= 5330 s)`` or ``(BREAKS ...)``."""
    verdict = "meets" if check["holds"] else "BREAKS"
    return f"({verdict} {_constraint_text(check['constraint'], unit)})"


def _true_values(rec: dict, unit: str) -> list[str]:
    """The recommendation's true cost, time and accuracy, then the named metrics a constraint
    is on, each with its verdict when a constraint is on it."""
    checks = {c["metric"]: c for c in rec["constraints"]}
    values = [
        f"{m} {_value(m, rec[m], unit)}" + (f" {_verdict(checks[m], unit)}" if m in checks else "")
        for m in MEASURED
        if rec.get(m) is not None
    ]
    return values + [
        f"{m} {_value(m, c['true'], unit)} {_verdict(c, unit)}"
        for m, c in checks.items()
        if m not in MEASURED
    ]


def _why_broken(c: dict, unit: str) -> str:
    """Why a recommendation breaking constraint ``c`` was credited: a noisy draw passed, or
    the optimizer never ran it at this size."""
    seen = [_value(c["metric"], v, unit) for v in c["observed"] if v is not None]
    return (
        f"its mean {c['metric']} {_value(c['metric'], c['true'], unit)} breaks "
        f"{_constraint_text(c['constraint'], unit)}, but "
        + (
            f"the run the optimizer observed measured {', '.join(seen)}: a noisy draw "
            "passed where the mean does not"
            if seen
            else "the optimizer never ran it at this size"
        )
    )


def _cno_text(cno: float, goal_metric: str) -> str:
    ratio = (
        f"none: the recommendation is infeasible, so no {goal_metric} ratio counts"
        if cno == float("inf")
        else f"{fmt(cno)}: the recommendation's true {goal_metric} is {fmt(cno)} x the optimum's"
    )
    if goal_metric == "cost":
        return ratio + " (Cost Normalised to the Optimum: 1 is the best possible)"
    return ratio + (
        f" (CNO here normalises the {goal_metric} to the optimum's: 1 is the best possible)"
    )


def _reached(s: dict, unit: str) -> tuple[list[str], bool]:
    """Each reach target with the exploration cost at which it was met (``*``: the final
    recommendation no longer meets it), and whether any is so starred."""
    reached, lost = [], False
    for label, v in s["exploration_cost_to_reach"].items():
        lost_here = v is not None and not _still_met(label, s)
        lost |= lost_here
        reached.append(
            f"{target_text(label)} "
            f"{'never' if v is None else 'after ' + _value('cost', v, unit)}"
            + ("*" if lost_here else "")
        )
    return reached, lost


def _times_optimum_cost(s: dict) -> str:
    """`` (12 x the optimum's cost)``: the exploration cost in runs of the optimum."""
    best = s["optimum"]
    if not (best and best.get("cost")):
        return ""
    ratio = s["exploration_cost"] / best["cost"]
    return f" ({ratio:,.{0 if ratio >= 10 else 1}f} x the optimum's cost)"


def _given_params(optimizer: str, params: dict, given: dict | None) -> str:
    """The parameters the user gave (``given``: as typed, None when not known) or else those
    set away from the defaults; a given value equal to its default says so."""
    from optfarm.optimizers.registry import get

    defaults = get(optimizer).resolve_params({})
    if given is None:
        changed = [f"{k}={v}" for k, v in params.items() if defaults.get(k) != v]
        return " ".join(changed) or "(defaults)"
    texts = [
        f"{k}={params.get(k, v)}" + (" (its default)" if defaults.get(k) == params.get(k) else "")
        for k, v in given.items()
    ]
    return " ".join(texts) or "(defaults)"


def _still_met(label: str, s: dict) -> bool:
    """Whether the final recommendation of summary ``s`` meets the reach target ``label``
    (``optfarm.farm.run.metrics.meets_target``): an earlier incumbent may have reached it."""
    from optfarm.farm.run.metrics import REACH_TARGETS, meets_target

    metric, rec, best = s["metric"], s["recommendation"], s["optimum"]
    if rec is None or rec.get(metric) is None:
        return False
    optimum = best.get(metric, math.nan) if best else math.nan
    return bool(meets_target(rec[metric], metric, REACH_TARGETS[metric][label], optimum))
