"""The report's numbers for MLflow: what ``optfarm.farm.tracking.tracking`` logs on the variant runs
(the seed-aggregated statistics of ``analyse``) and on the sweep's parent run (the
sensitivity ranking of ``optfarm.farm.report.sensitivity``), handed down to the tracker as
``STATISTICS`` by the commands that run or sync a sweep (ARCHITECTURE.md, "Layers": the
report layer computes, the sweep layer logs)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from optfarm.farm.report.analysis import TRACE_COLUMNS, analyse
from optfarm.farm.report.sensitivity import sensitivity
from optfarm.farm.tracking.tracking import Statistics
from optfarm.farm.tracking.variants import metric_name

__all__ = ["STATISTICS", "sweep_metrics", "variant_metrics"]


def variant_metrics(summaries: Sequence[Mapping], traces) -> dict[str, float]:
    """The seed-aggregated statistics of one variant's finished runs, as ``farm report``
    computes them (``traces``: their trace tables concatenated), under MLflow metric names
    (``reach_p90:cno<=1.1`` -> ``reach_p90_cno_le_1.1``); values that are not finite (a
    target never reached at that quantile) are left out: ``reach_frac_*`` says how often it
    was reached."""
    (analysis,) = analyse(traces, summaries).values()
    (stats,) = analysis.stats.values()
    return {
        metric_name(k.replace(":", "_")): float(v)
        for k, v in stats.items()
        if isinstance(v, (int, float)) and math.isfinite(v)
    }


def sweep_metrics(summaries: Sequence[Mapping]) -> tuple[dict[str, float], dict[str, str]]:
    """For the parent run: per optimizer (and quality metric) whose parameters form a grid, the
    functional-ANOVA share of each factor and top pair in ``quality_auc``'s variance
    (metrics ``importance.<optimizer>.<factor>``) and the ranking (tag
    ``optfarm.sensitivity.<optimizer>``: ``lynceus.la > lynceus.gamma``)."""
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
            f"{f} ({found.importance[f]:.0%})" for f in found.ranking
        )
    return metrics, tags


STATISTICS = Statistics(TRACE_COLUMNS, variant_metrics, sweep_metrics)
