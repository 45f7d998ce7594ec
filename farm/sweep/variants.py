"""The variant level of a sweep in MLflow: sweep (parent run) -> variant -> seed runs.

A variant is one dataset x optimizer x parameter setting x problem x limits: a run spec
without its seed (``variant_key``). Its MLflow run carries the seed-aggregated numbers of the
report (``farm.report.analysis``: p50/p90 final quality, cost and time to the reach targets,
median latency, ...), which is what a user compares in the MLflow UI's chart and compare views;
the sweep's parent run carries the sweep's counts and, where the optimizer parameters form a
grid, the sensitivity ranking (``farm.report.sensitivity``).

Run names are short and unique within a sweep: the optimizer, the parameters that differ
between its variants in the sweep (abbreviated: ``gamma`` -> ``g``, ``n_init`` -> ``ni``),
the dataset, and for a seed run its seed: ``lynceus la=2 g=0.9 · lynceus-cnn · s3``.

Logged parameters are the resolved run: the problem actually posed (objective, constraints with
their thresholds, budget: the dataset's defaults with the spec's overrides) and every optimizer
parameter with its default filled in (``opt.<name>``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Layout", "aggregate", "layout", "resolved_problem", "run_params",
           "sensitivity_summary", "variant_key"]

SEP = " · "


def variant_key(spec: Mapping) -> str:
    """The key of a run spec's variant: a hash of the spec without its seed."""
    body = {k: v for k, v in spec.items() if k != "seed"}
    text = json.dumps(body, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Layout:
    """The variants of a sweep's runs and the names of every run."""

    variant_of: dict[str, str]      # run key -> variant key
    variants: dict[str, dict]       # variant key -> spec without the seed
    names: dict[str, str]           # run key or variant key -> run name


def layout(specs: Mapping[str, Mapping]) -> Layout:
    """The layout of the runs ``specs`` (run key -> run spec as stored, ``spec_to_dict``)."""
    variant_of, variants = {}, {}
    for key, spec in specs.items():
        v = variant_key(spec)
        variant_of[key] = v
        variants.setdefault(v, {k: x for k, x in spec.items() if k != "seed"})
    values: dict[str, dict[str, set]] = {}
    for spec in variants.values():
        for k, x in spec["params"].items():
            values.setdefault(spec["optimizer"], {}).setdefault(k, set()).add(_fmt(x))
    shown = {opt: _in_declared_order(opt, [k for k, xs in params.items() if len(xs) > 1])
             for opt, params in values.items()}
    short = {opt: _abbreviations(keys) for opt, keys in shown.items()}
    names = {}
    for v, spec in variants.items():
        opt = spec["optimizer"]
        setting = " ".join(f"{short[opt][k]}={_fmt(spec['params'][k])}"
                           for k in shown.get(opt, ()))
        names[v] = f"{opt} {setting}".strip() + SEP + spec["dataset"]
    taken: dict[str, int] = {}
    for name in names.values():
        taken[name] = taken.get(name, 0) + 1
    for v, name in names.items():  # the same name for two variants (e.g. two problems)
        if taken[name] > 1:
            names[v] = f"{name}{SEP}{v[:6]}"
    for key, spec in specs.items():
        names[key] = f"{names[variant_of[key]]}{SEP}s{spec['seed']}"
    return Layout(variant_of, variants, names)


def _in_declared_order(optimizer: str, keys: list[str]) -> list[str]:
    """``keys`` in the order the optimizer declares its parameters (stored specs have theirs
    sorted by name)."""
    from optimizers.registry import get

    order = {p.name: i for i, p in enumerate(get(optimizer).params)}
    return sorted(keys, key=lambda k: (order.get(k, len(order)), k))


def _abbreviations(keys: Sequence[str]) -> dict[str, str]:
    """Parameter name -> short name (initials of its words; names of up to three letters
    kept); the full names when two would read the same."""
    short = {k: k if len(k) <= 3 else "".join(w[0] for w in k.split("_") if w) for k in keys}
    return short if len(set(short.values())) == len(short) else {k: k for k in keys}


def _fmt(v) -> str:
    if v is None:
        return "none"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v, default=str)
    return str(v)


@functools.lru_cache(maxsize=None)
def _problem(dataset: str, objective, constraints, budget) -> dict:
    from farm.run.spec import RunSpec
    from oracle.registry import load

    spec = RunSpec(dataset, "random", objective=objective, constraints=constraints,
                   budget=budget)
    return spec.problem(load(dataset)).to_dict()


def resolved_problem(spec: Mapping, summary: Mapping | None = None) -> dict:
    """The problem a run poses (``Problem.to_dict``): from its summary when it ran, else the
    dataset's default problem with the spec's overrides."""
    if summary is not None and summary.get("problem"):
        return summary["problem"]
    constraints = spec.get("constraints")
    return _problem(spec["dataset"], spec.get("objective"),
                    None if constraints is None else tuple(constraints), spec.get("budget"))


def run_params(spec: Mapping, problem: Mapping) -> dict[str, str]:
    """MLflow parameters of a run (or, without ``seed``, of a variant): the spec with the
    resolved problem, optimizer parameters as ``opt.<name>``."""
    out = {k: _fmt(v) for k, v in spec.items()
           if k not in ("params", "objective", "constraints", "budget")}
    out["objective"] = str(problem["objective"])
    out["constraints"] = ", ".join(problem["constraints"]) or "none"
    out["budget"] = "inf" if problem.get("budget") is None else _fmt(float(problem["budget"]))
    out.update({f"opt.{k}": _fmt(v) for k, v in spec["params"].items()})
    return out


def aggregate(summaries: Sequence[Mapping], traces) -> dict[str, float]:
    """The seed-aggregated statistics of one variant's finished runs, as ``farm report``
    computes them (``farm.report.analysis.analyse``; ``traces``: their trace tables
    concatenated), under MLflow metric names (``reach_p90:cno<=1.1`` ->
    ``reach_p90_cno_le_1.1``); values that are not finite (a target never reached at that
    quantile) are left out: ``reach_frac_*`` says how often it was reached."""
    from farm.report.analysis import analyse

    (analysis,) = analyse(traces, summaries).values()
    (stats,) = analysis.stats.values()
    return {metric_name(k.replace(":", "_")): float(v) for k, v in stats.items()
            if isinstance(v, (int, float)) and math.isfinite(v)}


def sensitivity_summary(summaries: Sequence[Mapping]) -> tuple[dict[str, float], dict[str, str]]:
    """For the parent run: per optimizer (and quality metric) whose parameters form a grid, the
    functional-ANOVA share of each factor and top pair in ``quality_auc``'s variance
    (metrics ``importance.<optimizer>.<factor>``) and the ranking (tag
    ``optfarm.sensitivity.<optimizer>``: ``lynceus.la > lynceus.gamma``)."""
    from farm.report.sensitivity import sensitivity

    groups: dict[tuple[str, str], list] = {}
    for s in summaries:
        groups.setdefault((s["optimizer"], s["metric"]), []).append(s)
    metrics, tags = {}, {}
    several = len({m for _, m in groups}) > 1
    for (optimizer, metric), runs in sorted(groups.items()):
        found = sensitivity(runs, "quality_auc")
        if found is None:
            continue
        name = f"{optimizer}.{metric}" if several else optimizer
        for factor, share in found.importance.items():
            metrics[metric_name(f"importance.{name}.{factor.replace(' x ', '_x_')}")] = share
        tags[f"optfarm.sensitivity.{name}"] = " > ".join(
            f"{f} ({found.importance[f]:.0%})" for f in found.ranking)
    return metrics, tags


def metric_name(label: str) -> str:
    """``cno<=2`` -> ``cno_le_2`` (MLflow names allow letters, digits, ``_-./`` and spaces)."""
    label = label.replace("<=", "_le_").replace(">=", "_ge_")
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", label)
