"""The seed-aggregated statistics a sweep's variant runs and its own run carry in MLflow: what
they are is the layer above's to say (``Statistics``, e.g. the report's,
``optfarm.farm.report.tracked.STATISTICS``, handed down by ``run_sweep``'s caller; none without
it); ``log_statistics`` logs them when a sweep ends, for the variants that got news: each
variant's seed counts and statistics (step: the runs aggregated), the sweep's run and variant
counts and its sensitivity ranking.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from optfarm.farm.tracking.mlflow_connection import Connection
from optfarm.farm.tracking.mlflow_mapping import RunContext
from optfarm.farm.tracking.variant_runs import VariantRuns, members

__all__ = ["Statistics", "log_statistics"]


@dataclass(frozen=True)
class Statistics:
    """The seed-aggregated numbers of the variant and sweep runs, computed by the layer above
    (the report's, ``optfarm.farm.report.tracked.STATISTICS``) and handed down: ``variant(summaries,
    traces)`` -> the metrics of one variant's finished runs (``traces``: their trace tables'
    ``columns``, concatenated); ``sweep(summaries)`` -> (metrics, tags) of the parent run."""

    columns: tuple[str, ...]
    variant: Callable[[list[dict], Any], dict[str, float]]
    sweep: Callable[[list[dict]], tuple[dict[str, float], dict[str, str]]]


def log_statistics(
    conn: Connection,
    ctx: RunContext,
    stats: Statistics | None,
    variants: VariantRuns,
    parent: str,
    records: dict[str, dict],
    trace_of: Callable[[str], Any],
) -> None:
    """Each variant with news (``variants.news``): its seed counts and statistics; the sweep's
    run ``parent``: the sweep's counts, and the sensitivity ranking. ``records``: every stored
    run of the sweep; ``trace_of(run key)``: a done run's trace, the ``stats.columns``."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    seeds_of = members(ctx)
    for v in sorted(variants.news & set(seeds_of) & set(variants.runs)):
        metrics, n_done = _variant_statistics(
            stats, [records[k] for k in seeds_of[v] if k in records], trace_of
        )
        conn.log_batch(
            variants.runs[v][0],
            [],
            [Metric(k, float(x), now, n_done) for k, x in sorted(metrics.items())],
            [],
        )
    _log_sweep_statistics(conn, ctx, stats, parent, records, len(seeds_of), now)


def _variant_statistics(
    stats: Statistics | None, recs: list[dict], trace_of: Callable[[str], Any]
) -> tuple[dict[str, float], int]:
    """(metrics, number of done runs) of one variant's stored runs ``recs``: its seed
    counts, and the statistics over its done seeds when there are some."""
    import pyarrow as pa

    finished = [r for r in recs if r["status"] == "done"]
    metrics = {"runs_done": len(finished), "runs_failed": len(recs) - len(finished)}
    if finished and stats is not None:
        traces = pa.concat_tables(
            [trace_of(r["run_key"]) for r in finished], promote_options="default"
        )
        metrics.update(stats.variant([r["summary"] for r in finished], traces))
    return metrics, len(finished)


def _log_sweep_statistics(
    conn: Connection,
    ctx: RunContext,
    stats: Statistics | None,
    parent: str,
    records: dict[str, dict],
    n_variants: int,
    now: int,
) -> None:
    """The parent run's metrics (the sweep's run and variant counts, the sensitivity
    ranking) and tags."""
    from mlflow.entities import Metric, RunTag

    variant_of = ctx.layout.variant_of
    done = [r for k, r in records.items() if k in variant_of and r["status"] == "done"]
    sweep = {
        "runs": len(variant_of),
        "runs_done": len(done),
        "runs_failed": sum(
            1 for k, r in records.items() if r["status"] != "done" and k in variant_of
        ),
        "variants": n_variants,
    }
    ranking, tags = stats.sweep([r["summary"] for r in done]) if stats else ({}, {})
    conn.log_batch(
        parent,
        [],
        [Metric(k, float(x), now, 0) for k, x in sorted({**sweep, **ranking}.items())],
        [RunTag(k, x) for k, x in tags.items()],
    )
