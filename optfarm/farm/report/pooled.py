"""Lynceus Sec. VI pools the Scout jobs (and the CherryPick jobs) into one CDF of the
exploration cost to reach CNO <= 1.1, each run's cost in units of its job's mean
configuration cost (``mean_config_cost`` of the run summaries), and compares BO (EIc/USD)
with Lynceus at the 90th percentile: BO spends 60% (Scout) and 48% (CherryPick) more.
The two families taken together make a third pool, where the peers
(``optfarm.optimizers.registry.is_peer``) are compared with the papers' optimizers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optfarm.farm.report.analysis import DatasetAnalysis
from optfarm.farm.run.metrics import quantile
from optfarm.farm.run.targets import HEADLINE

__all__ = ["FAMILIES", "pooled_reach_rows"]

# family: (dataset name prefixes, published p90 ratio BO / Lynceus)
FAMILIES = {
    "Scout": (("scout-",), 1.6),
    "CherryPick": (("cherrypick-",), 1.48),
    "Scout and CherryPick": (("scout-", "cherrypick-"), None),
}
TARGET = HEADLINE["cno"]


def pooled_reach_rows(analyses: Mapping[str, DatasetAnalysis]) -> list[dict[str, Any]]:
    """Per family and variant present on two or more of its jobs: p50 / p90 over every
    (job, seed) of the cost to reach CNO <= 1.1 in mean-configuration-cost units; the p90
    of eic-usd over lynceus' beside the paper's ratio, and every variant's p90 over the best
    peer's when peers ran."""
    rows = []
    for family, (prefixes, paper) in FAMILIES.items():
        pool = _pool(analyses, prefixes)
        if (
            len(prefixes) > 1
            and len({j.split("-")[0] for js in pool.jobs.values() for j in js}) < 2
        ):
            continue  # the joint pool only when both families ran
        rows += _family_rows(family, paper, pool)
    return rows


@dataclass
class _Pool:
    """A family's pool, per variant: the costs to reach the target of each (job, seed) in
    mean-configuration-cost units, its optimizer, the jobs it ran."""

    costs: dict[str, list[float]] = field(default_factory=dict)
    optimizer_of: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, set[str]] = field(default_factory=dict)


def _pool(analyses: Mapping[str, DatasetAnalysis], prefixes: tuple[str, ...]) -> _Pool:
    """The runs of the CNO datasets named with one of ``prefixes``, pooled by variant (runs
    whose summaries do not carry the unit left out)."""
    pool = _Pool()
    for a in analyses.values():
        if not a.dataset.startswith(prefixes) or a.metric != "cno":
            continue
        for label, g in a.groups.items():
            units = [s.get("mean_config_cost") for s in g.summaries]
            if None in units:
                continue  # summaries stored before they carried the unit
            pool.costs.setdefault(label, []).extend(
                np.asarray(a.reach[label][TARGET]) / np.asarray(units)
            )
            pool.optimizer_of[label] = g.optimizer
            pool.jobs.setdefault(label, set()).add(a.dataset)
    return pool


def _family_rows(family: str, paper: float | None, pool: _Pool) -> list[dict[str, Any]]:
    """A row per variant of ``pool`` on two or more jobs, in label order."""
    from optfarm.optimizers.registry import is_peer

    p90 = {label: quantile(v, 0.9) for label, v in pool.costs.items() if len(pool.jobs[label]) > 1}
    lynceus = next((p90[k] for k in p90 if pool.optimizer_of[k] == "lynceus"), None)
    peers = [k for k in p90 if is_peer(pool.optimizer_of[k])]
    best_peer = min(peers, key=p90.get, default=None)
    rows = []
    for label in sorted(p90):
        ratio = _bo_over_lynceus(paper, pool.optimizer_of[label], p90[label], lynceus)
        costs = pool.costs[label]
        row = {
            "family": family,
            "optimizer": label,
            "jobs": len(pool.jobs[label]),
            "runs": len(costs),
            "reached": float(np.isfinite(costs).mean()),
            f"cost to {TARGET} p50 (mean config costs)": quantile(costs, 0.5),
            f"cost to {TARGET} p90 (mean config costs)": p90[label],
            "p90 / lynceus p90": ratio,
            "paper (BO / Lynceus)": paper if ratio is not None else None,
        }
        if best_peer is not None:
            row["best peer"] = best_peer
            row["p90 / best peer p90"] = (
                p90[label] / p90[best_peer] if np.isfinite(p90[best_peer]) else None
            )
        rows.append(row)
    return rows


def _bo_over_lynceus(
    paper: float | None, optimizer: str, p90: float, lynceus: float | None
) -> float | None:
    """BO's (eic-usd's) p90 over Lynceus', where the family has the paper's ratio and
    Lynceus' p90 is finite; else None."""
    if paper and optimizer == "eic-usd" and lynceus and np.isfinite(lynceus):
        return p90 / lynceus
    return None
