"""Stored runs -> MLflow runs, as pure functions of the store's records (no server, no client):
what ``optfarm.farm.tracking.tracking`` writes for each seed run and variant run, testable on its
own.

A seed run (one run key) carries: its name (``optfarm.farm.tracking.variants.layout``), its own
start and end (the record's finish time less its wall time, ``span_ms``), status FINISHED or FAILED
(the error as the tag ``optfarm.error``), the parameters that tell the sweep's runs apart
(``optfarm.farm.tracking.variants.varying``) and its seed, the complete resolved run as the tag
``optfarm.params``, per-step metrics from its trace (``incumbent_cno`` or
``incumbent_accuracy_c``, ``exploration_cost``, ``recommendation_latency_s``; step =
evaluation index, the warm-up step apart as ``latency_warmup_s``), its summary metrics and
why it stopped (the tag ``optfarm.stop_reason``: budget, converged, iterations, ...).
Metric timestamps are the run's finish time, so logging a run again (an orphan completed)
adds nothing twice. A variant run spans its seeds (``variant_span``) and ends with the status
of its seeds (``variant_status``).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from optfarm.farm.run.metrics import CNO_CAP
from optfarm.farm.tracking import variants

__all__ = [
    "STOP_REASON_TAG",
    "NewRun",
    "RunContext",
    "seed_run",
    "span_ms",
    "variant_run",
    "variant_span",
    "variant_status",
]

STOP_REASON_TAG = "optfarm.stop_reason"
_STEP_COLUMNS = {
    "cum_exploration_cost": "exploration_cost",
    "recommendation_latency_s": "recommendation_latency_s",
}


@dataclass
class NewRun:
    """One MLflow run to write: its name, times (ms; end None while RUNNING), status, tags,
    parameters and metrics (``mlflow.entities`` RunTag / Param / Metric objects)."""

    name: str
    start_ms: int
    end_ms: int | None
    status: str
    tags: list = field(default_factory=list)
    params: list = field(default_factory=list)
    metrics: list = field(default_factory=list)
    key: str = ""  # the run key, or the variant key of a variant run
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)  # the bulk path's id


@dataclass
class RunContext:
    """What the mapping needs of the sweep: its identity, run layout and logged parameters."""

    sweep_id: str
    sweep_name: str
    layout: variants.Layout
    shown: dict[str, set[str]]  # optimizer -> parameter names logged (``varying``)
    params: dict[str, dict]  # variant key -> its ``run_params``

    @classmethod
    def of(cls, sweep_id: str, sweep_name: str, specs: Mapping[str, Mapping]) -> RunContext:
        """The context of the sweep's runs ``specs`` (run key -> spec as stored)."""
        layout = variants.layout(specs)
        params = {
            v: variants.run_params(spec, variants.resolved_problem(spec))
            for v, spec in layout.variants.items()
        }
        shown = variants.distinguishing(layout.variants.values())
        return cls(sweep_id, sweep_name, layout, variants.varying(params, shown), params)


def span_ms(record: Mapping) -> tuple[int, int]:
    """(start, end) of a stored run in ms since the epoch: the record's finish time, less the
    run's wall time."""
    end = record["finished_at"]
    duration = record.get("duration_s")
    if not isinstance(duration, (int, float)) or not math.isfinite(duration):
        duration = 0.0
    return int((end - duration) * 1000), int(end * 1000)


def variant_span(
    spans: Mapping[str, tuple[int, int]], keys: Iterable[str]
) -> tuple[int, int] | None:
    """(first start, last end) of a variant's stored seed runs ``keys`` (``spans``: run key ->
    ``span_ms`` of its record); None when none is stored."""
    known = [spans[k] for k in keys if k in spans]
    return (min(s for s, _ in known), max(e for _, e in known)) if known else None


def variant_status(members: int, statuses: Iterable[str]) -> str:
    """The status of a variant of ``members`` seeds whose logged seed runs have ``statuses``:
    KILLED while seeds are missing, FAILED when one failed, else FINISHED."""
    statuses = list(statuses)
    if len(statuses) < members:
        return "KILLED"
    return "FAILED" if any(s != "FINISHED" for s in statuses) else "FINISHED"


def _tags(**tags: str) -> list:
    from mlflow.entities import RunTag

    return [RunTag(k, v) for k, v in tags.items()]


def _params(values: Mapping[str, str]) -> list:
    from mlflow.entities import Param

    return [Param(k, v) for k, v in sorted(values.items())]


def variant_run(ctx: RunContext, v: str, parent_id: str, start_ms: int) -> NewRun:
    """The RUNNING variant run of variant ``v`` in the sweep's run ``parent_id``."""
    params = ctx.params[v]
    shown = ctx.shown[params["optimizer"]]
    tags = _tags(
        **{
            "mlflow.parentRunId": parent_id,
            "optfarm.kind": "variant",
            "optfarm.variant_key": v,
            "optfarm.sweep_id": ctx.sweep_id,
            "optfarm.sweep": ctx.sweep_name,
            "optfarm.params": json.dumps(params, sort_keys=True),
        }
    )
    return NewRun(
        ctx.layout.names[v],
        start_ms,
        None,
        "RUNNING",
        tags,
        _params({k: x for k, x in params.items() if k in shown}),
        key=v,
    )


def seed_run(
    ctx: RunContext, record: Mapping, trace, parent_id: str, trace_path: str | None
) -> NewRun:
    """The MLflow run of a stored run: ``trace`` its trace table (a done run's), nested in
    ``parent_id`` (its variant's run); ``trace_path`` the trace's path in the store."""
    key, spec = record["run_key"], record["spec"]
    start_ms, end_ms = span_ms(record)
    v = ctx.layout.variant_of.get(key)
    tags = {
        "mlflow.parentRunId": parent_id,
        "optfarm.run_key": key,
        "optfarm.sweep_id": ctx.sweep_id,
        "optfarm.kind": "run",
        "optfarm.sweep": ctx.sweep_name,
        "optfarm.node_id": str(record["where"].get("node_id")),
    }
    if v is not None:
        tags["optfarm.variant_key"] = v
    if record["status"] == "done":
        metrics = _metrics(record["summary"], trace, end_ms)
        if trace_path is not None:
            tags["optfarm.trace"] = trace_path
        tags[STOP_REASON_TAG] = str(record["summary"]["stop_reason"])
        status = "FINISHED"
    else:
        metrics = []
        tags["optfarm.error"] = str(record.get("error"))[:5000]
        status = "FAILED"
    params = ctx.params.get(v) if v is not None else None
    if params is None:  # a stored run the sweep's spec no longer expands to
        params = variants.run_params(
            {k: x for k, x in spec.items() if k != "seed"},
            variants.resolved_problem(spec, record.get("summary")),
        )
    tags["optfarm.params"] = json.dumps({**params, "seed": str(spec["seed"])}, sort_keys=True)
    shown = ctx.shown.get(params["optimizer"], set(params))
    logged = {k: x for k, x in params.items() if k in shown}
    name = ctx.layout.names.get(key) or variants.layout({key: spec}).names[key]
    return NewRun(
        name,
        start_ms,
        end_ms,
        status,
        _tags(**tags),
        _params({**logged, "seed": str(spec["seed"])}),
        metrics,
        key,
    )


def _metrics(summary: Mapping, trace, timestamp_ms: int) -> list:
    """Per-step metrics from the trace and the summary metrics of a done run."""
    from mlflow.entities import Metric

    metric = summary["metric"]
    columns = {f"incumbent_{metric}": f"incumbent_{metric}", **_STEP_COLUMNS}
    out = []
    for column, name in columns.items():
        for step, value in enumerate(trace.column(column).to_pylist()):
            if value is not None and math.isfinite(value):
                out.append(Metric(name, float(value), timestamp_ms, step))
    out += [
        Metric(name, value, timestamp_ms, 0) for name, value in summary_metrics(summary).items()
    ]
    return out


def summary_metrics(summary: Mapping) -> dict[str, float]:
    """A done run's summary as metrics: evaluations, exploration cost, the final quality and
    its feasibility, the area under its quality curve, the costs to reach each target, the
    recommendation latency statistics. ``final_cno`` is logged where it is finite;
    ``final_cno_capped`` for every run (CNO capped at ``CNO_CAP``, a run with no feasible
    recommendation at the cap), so that the worst runs stay in MLflow's charts and parallel
    coordinates, which leave out a run that lacks the metric."""
    metric, rec = summary["metric"], summary["recommendation"]
    out = {
        "n_evaluations": float(summary["n_evaluations"]),
        "exploration_cost_total": float(summary["exploration_cost"]),
        "final_feasible": float(bool(rec and rec["feasible"])),
    }
    if summary.get("quality_auc") is not None:
        out["quality_auc"] = float(summary["quality_auc"])
    final = math.inf if rec is None else rec[metric]
    if math.isfinite(final):
        out[f"final_{metric}"] = float(final)
    if metric == "cno":
        out["final_cno_capped"] = float(min(final, CNO_CAP))
    for label, cost in summary["exploration_cost_to_reach"].items():
        if cost is not None:
            out[f"cost_to_{variants.metric_name(label)}"] = float(cost)
    for stat, value in summary["recommendation_latency_s"].items():
        if value is not None:
            out[f"latency_{stat}_s"] = float(value)
    return out
