"""The variant level of a sweep in MLflow: sweep (parent run) -> variant -> seed runs.

A variant is one dataset x optimizer x parameter setting x problem x limits: a run spec
without its seed (``variant_key``). Its MLflow run spans its own seeds and carries their
seed-aggregated statistics (computed by the report layer and handed to the tracker,
``optfarm.farm.tracking.tracking.Statistics``), which is what a user compares in the MLflow UI's
chart and compare views.

Run names are short and unique within a sweep: the optimizer, the parameters that differ
between its variants in the sweep (abbreviated: ``gamma`` -> ``g``, ``n_init`` -> ``ni``) and
the dataset; a seed run's name starts with its seed, so that MLflow's run-name column, which
cuts long names, shows it: ``s3 · lynceus la=2 g=0.9 · lynceus-cnn``.

Parameters are the resolved run (``run_params``: the problem actually posed, every optimizer
parameter with its default filled in, ``opt.<name>``); MLflow is given those that tell the
sweep's runs apart (``varying``), so that the compare view's parallel coordinates show what
was varied, not constants or another optimizer's parameters.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from optfarm.farm.run.spec import spec_key

__all__ = [
    "Layout",
    "distinguishing",
    "layout",
    "metric_name",
    "resolved_problem",
    "run_params",
    "variant_key",
    "varying",
]

SEP = " · "


def variant_key(spec: Mapping) -> str:
    """The key of a run spec's variant: a hash of the spec without its seed."""
    return spec_key({k: v for k, v in spec.items() if k != "seed"})


@dataclass
class Layout:
    """The variants of a sweep's runs and the names of every run."""

    variant_of: dict[str, str]  # run key -> variant key
    variants: dict[str, dict]  # variant key -> spec without the seed
    names: dict[str, str]  # run key or variant key -> run name


def layout(specs: Mapping[str, Mapping]) -> Layout:
    """The layout of the runs ``specs`` (run key -> run spec as stored, ``spec_to_dict``)."""
    variant_of, variants = {}, {}
    for key, spec in specs.items():
        v = variant_key(spec)
        variant_of[key] = v
        variants.setdefault(v, {k: x for k, x in spec.items() if k != "seed"})
    shown = distinguishing(variants.values())
    short = {opt: _abbreviations(keys) for opt, keys in shown.items()}
    names = {}
    for v, spec in variants.items():
        opt = spec["optimizer"]
        setting = " ".join(f"{short[opt][k]}={_fmt(spec['params'][k])}" for k in shown.get(opt, ()))
        names[v] = f"{opt} {setting}".strip() + SEP + spec["dataset"]
    taken: dict[str, int] = {}
    for name in names.values():
        taken[name] = taken.get(name, 0) + 1
    for v, name in names.items():  # the same name for two variants (e.g. two problems)
        if taken[name] > 1:
            names[v] = f"{name}{SEP}{v[:6]}"
    for key, spec in specs.items():
        names[key] = f"s{spec['seed']}{SEP}{names[variant_of[key]]}"
    return Layout(variant_of, variants, names)


def distinguishing(variants: Iterable[Mapping]) -> dict[str, list[str]]:
    """Optimizer -> the parameters that tell its variants apart, in its declared order: those
    that take two values or more among its variants (``variants``: run specs without the
    seed), and those a variant sets away from the optimizer's default (one Lynceus with
    ``la=1`` beside EIc/USD shows ``la=1``)."""
    values: dict[str, dict[str, set]] = {}
    changed: dict[str, set[str]] = {}
    for spec in variants:
        opt = spec["optimizer"]
        for k, x in spec["params"].items():
            values.setdefault(opt, {}).setdefault(k, set()).add(_fmt(x))
        changed.setdefault(opt, set()).update(_changed(opt, spec["params"]))
    return {
        opt: _in_declared_order(
            opt, [k for k, xs in params.items() if len(xs) > 1 or k in changed[opt]]
        )
        for opt, params in values.items()
    }


def _changed(optimizer: str, params: Mapping) -> set[str]:
    from optfarm.optimizers.registry import get

    defaults = get(optimizer).resolve_params({})
    return {k for k, x in params.items() if k in defaults and _fmt(x) != _fmt(defaults[k])}


def _in_declared_order(optimizer: str, keys: list[str]) -> list[str]:
    """``keys`` in the order the optimizer declares its parameters (stored specs have theirs
    sorted by name)."""
    from optfarm.optimizers.registry import get

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


@functools.cache
def _problem(dataset: str, objective, constraints, budget) -> dict:
    from optfarm.farm.run.spec import RunSpec
    from optfarm.oracle.registry import load

    spec = RunSpec(dataset, "random", objective=objective, constraints=constraints, budget=budget)
    return spec.problem(load(dataset)).to_dict()


def resolved_problem(spec: Mapping, summary: Mapping | None = None) -> dict:
    """The problem a run poses (``Problem.to_dict``): from its summary when it ran, else the
    dataset's default problem with the spec's overrides."""
    if summary is not None and summary.get("problem"):
        return summary["problem"]
    constraints = spec.get("constraints")
    return _problem(
        spec["dataset"],
        spec.get("objective"),
        None if constraints is None else tuple(constraints),
        spec.get("budget"),
    )


def run_params(spec: Mapping, problem: Mapping) -> dict[str, str]:
    """MLflow parameters of a run (or, without ``seed``, of a variant): the spec with the
    resolved problem, optimizer parameters as ``opt.<name>``."""
    out = {
        k: _fmt(v)
        for k, v in spec.items()
        if k not in ("params", "objective", "constraints", "budget")
    }
    out["objective"] = str(problem["objective"])
    out["constraints"] = ", ".join(problem["constraints"]) or "none"
    out["budget"] = "inf" if problem.get("budget") is None else _fmt(float(problem["budget"]))
    out.update({f"opt.{k}": _fmt(v) for k, v in spec["params"].items()})
    return out


def varying(
    params: Mapping[str, Mapping[str, str]], shown: Mapping[str, Sequence[str]] | None = None
) -> dict[str, set[str]]:
    """Optimizer -> the parameter names worth logging for its runs, of the variants ``params``
    (variant key -> ``run_params``): ``dataset`` and ``optimizer`` (what a search filters
    on), every other run parameter that takes two values or more among the variants, each
    of the optimizer's own parameters that does among that optimizer's variants, and those in
    ``shown`` (optimizer -> its ``distinguishing`` parameters, named in the runs' names)."""
    values: dict[tuple[str, str], set[str]] = {}
    for p in params.values():
        for k, v in p.items():
            values.setdefault((p["optimizer"] if k.startswith("opt.") else "", k), set()).add(v)
    common = {"dataset", "optimizer"} | {
        k for (scope, k), vs in values.items() if not scope and len(vs) > 1
    }
    shown = shown or {}
    return {
        p["optimizer"]: common
        | {k for (scope, k), vs in values.items() if scope == p["optimizer"] and len(vs) > 1}
        | {f"opt.{k}" for k in shown.get(p["optimizer"], ())}
        for p in params.values()
    }


def metric_name(label: str) -> str:
    """``cno<=2`` -> ``cno_le_2`` (MLflow names allow letters, digits, ``_-./`` and spaces)."""
    label = label.replace("<=", "_le_").replace(">=", "_ge_")
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", label)
