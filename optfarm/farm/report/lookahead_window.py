"""Lynceus Fig. 8 as a table: for every variant swept over the look-ahead window ``la``, the
quantiles of the exploration cost to reach CNO <= 1.1 at each LA, and the p90 ratio to LA=0
(the paper: "at the 90-th percentile, LA=1 allows for achieving a five-fold reduction of the
exploration cost versus a greedy approach (LA=0)", Sec. VI-F, without timeout)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from optfarm.farm.report.analysis import DatasetAnalysis
from optfarm.farm.run.targets import HEADLINE

__all__ = ["lookahead_rows"]

TARGET = HEADLINE["cno"]
QUANTILES = (0.25, 0.5, 0.75, 0.9)


def _quantiles(costs: np.ndarray) -> list[float]:
    # order statistics (never-reached runs are inf and must not be interpolated with)
    return [float(np.quantile(costs, q, method="inverted_cdf")) for q in QUANTILES]


def lookahead_rows(analyses: Mapping[str, DatasetAnalysis]) -> list[dict[str, Any]]:
    """One row per (dataset, variant, LA) for the variants whose runs differ only in ``la``
    and that ran at two LA values or more."""
    rows = []
    for name, a in analyses.items():
        if a.metric != "cno":
            continue
        families: dict[tuple, dict[int, str]] = {}
        for label, g in a.groups.items():
            if "la" in g.params and label in a.reach and TARGET in a.reach[label]:
                rest = tuple(sorted((k, str(v)) for k, v in g.params.items() if k != "la"))
                families.setdefault((g.optimizer, rest), {})[int(g.params["la"])] = label
        for by_la in families.values():
            if len(by_la) < 2:
                continue
            p90 = {la: _quantiles(a.reach[label][TARGET])[-1] for la, label in by_la.items()}
            for la in sorted(by_la):
                costs = a.reach[by_la[la]][TARGET]
                q = _quantiles(costs)
                ratio = p90[0] / p90[la] if 0 in p90 and 0 < p90[la] < np.inf else None
                rows.append(
                    {
                        "dataset": name,
                        "optimizer": by_la[la],
                        "la": la,
                        "seeds": len(costs),
                        "p25 ($)": q[0],
                        "p50 ($)": q[1],
                        "p75 ($)": q[2],
                        "p90 ($)": q[3],
                        "p90 LA0 / LA": ratio,
                    }
                )
    return rows
