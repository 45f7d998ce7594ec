"""Stored runs -> MLflow runs without a server (``optfarm.farm.tracking.mlflow_mapping``,
``variants``): names that show the seed first, parameters that tell the sweep's runs apart (the rest
as the ``optfarm.params`` tag), spans and statuses of seed and variant runs."""

from __future__ import annotations

import json

from optfarm.farm.run.loop import run_one
from optfarm.farm.run.spec import RunSpec
from optfarm.farm.store.store import spec_to_dict
from optfarm.farm.sweep.spec import expand_keyed, parse_spec
from optfarm.farm.tracking.mlflow_mapping import (
    RunContext,
    seed_run,
    span_ms,
    variant_run,
    variant_span,
    variant_status,
)
from optfarm.farm.tracking.variants import varying


def _specs(optimizers) -> dict[str, dict]:
    spec = parse_spec(
        {
            "name": "m",
            "datasets": ["synthetic"],
            "optimizers": optimizers,
            "seeds": 2,
            "limits": {"iterations": 4},
            "runtime": {"backend": "serial"},
        }
    )
    return {k: spec_to_dict(r) for k, r in expand_keyed(spec).items()}


def _record(spec: dict, finished_at=1000.0, duration_s=2.5) -> tuple[dict, object]:
    result = run_one(RunSpec(**{**spec, "constraints": None}))
    return {
        "run_key": "k",
        "spec": spec,
        "status": "done",
        "summary": result.summary,
        "finished_at": finished_at,
        "duration_s": duration_s,
        "where": {"node_id": "n"},
    }, result.trace


def test_only_the_parameters_that_vary_are_logged_the_rest_kept_as_a_tag():
    specs = _specs([{"name": "random", "params": {"n_init": [1, 3]}}, "lynceus"])
    ctx = RunContext.of("sid", "m", specs)
    assert ctx.shown == {
        "random": {"dataset", "optimizer", "opt.n_init"},
        "lynceus": {"dataset", "optimizer"},
    }  # its own are constant here
    # lynceus' first_step is not logged for it, and random has none: no "unknown" axis
    key, spec = next((k, s) for k, s in specs.items() if s["optimizer"] == "lynceus")
    record, trace = _record(spec)
    record["run_key"] = key
    run = seed_run(ctx, record, trace, "variant-run", "/trace.parquet")
    assert {p.key: p.value for p in run.params} == {
        "dataset": "synthetic",
        "optimizer": "lynceus",
        "seed": str(spec["seed"]),
    }
    tags = {t.key: t.value for t in run.tags}
    full = json.loads(tags["optfarm.params"])
    assert full["opt.first_step"] and full["objective"] == "min cost"
    assert tags["mlflow.parentRunId"] == "variant-run" and tags["optfarm.run_key"] == key
    assert tags["optfarm.trace"] == "/trace.parquet"
    assert tags["optfarm.stop_reason"] == record["summary"]["stop_reason"]  # a column of the view
    assert run.name == f"s{spec['seed']} · lynceus · synthetic"  # the seed first
    assert (run.start_ms, run.end_ms) == span_ms(record) == (997_500, 1_000_000)
    assert run.status == "FINISHED"
    assert {m.key for m in run.metrics} >= {"n_evaluations", "exploration_cost"}
    # the variant run: the same parameters but the seed, RUNNING from the start given
    v = ctx.layout.variant_of[key]
    vrun = variant_run(ctx, v, "sweep-run", 5)
    assert {p.key for p in vrun.params} == {"dataset", "optimizer"}
    assert (vrun.status, vrun.start_ms, vrun.end_ms) == ("RUNNING", 5, None)
    assert vrun.name == "lynceus · synthetic"


def test_a_parameter_varies_only_among_its_own_optimizers_variants():
    params = {
        "a": {"dataset": "d", "optimizer": "x", "opt.p": "1", "iterations": "4"},
        "b": {"dataset": "d", "optimizer": "x", "opt.p": "2", "iterations": "8"},
        "c": {"dataset": "d", "optimizer": "y", "opt.p": "1", "iterations": "4"},
    }
    assert varying(params) == {
        "x": {"dataset", "optimizer", "opt.p", "iterations"},
        "y": {"dataset", "optimizer", "iterations"},
    }


def test_failed_run_and_variant_span_and_status():
    spec = next(iter(_specs(["random"]).values()))
    ctx = RunContext.of("sid", "m", {"k": spec})
    failed = {
        "run_key": "k",
        "spec": spec,
        "status": "failed",
        "error": "boom",
        "finished_at": 10.0,
        "duration_s": float("nan"),
        "where": {},
    }
    run = seed_run(ctx, failed, None, "p", None)
    assert run.status == "FAILED" and run.metrics == []
    assert {t.key: t.value for t in run.tags}["optfarm.error"] == "boom"
    assert (run.start_ms, run.end_ms) == (10_000, 10_000)  # no wall time: an instant
    spans = {"a": (5, 9), "b": (1, 4), "c": (7, 12)}
    assert variant_span(spans, ["a", "b", "x"]) == (1, 9)
    assert variant_span(spans, ["x"]) is None
    assert variant_status(3, ["FINISHED", "FINISHED", "FINISHED"]) == "FINISHED"
    assert variant_status(3, ["FINISHED", "FAILED", "FINISHED"]) == "FAILED"
    assert variant_status(3, ["FINISHED", "FINISHED"]) == "KILLED"
