"""Lynceus Sec. VI pools the Scout jobs (and the CherryPick jobs) into one CDF of the
exploration cost to reach CNO <= 1.1, each run's cost in units of its job's mean
configuration cost (``mean_config_cost`` of the run summaries), and compares BO (EIc/USD)
with Lynceus at the 90th percentile: BO spends 60% (Scout) and 48% (CherryPick) more.
The two families taken together make a third pool, where the peers
(``optimizers.registry.is_peer``) are compared with the papers' optimizers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from farm.report.analysis import DatasetAnalysis
from farm.run.metrics import quantile
from farm.run.targets import HEADLINE

__all__ = ["FAMILIES", "pooled_reach_rows"]

# family: (dataset name prefixes, published p90 ratio BO / Lynceus)
FAMILIES = {"Scout": (("scout-",), 1.6), "CherryPick": (("cherrypick-",), 1.48),
            "Scout and CherryPick": (("scout-", "cherrypick-"), None)}
TARGET = HEADLINE["cno"]


def pooled_reach_rows(analyses: Mapping[str, DatasetAnalysis]) -> list[dict[str, Any]]:
    """Per family and variant present on two or more of its jobs: p50 / p90 over every
    (job, seed) of the cost to reach CNO <= 1.1 in mean-configuration-cost units; the p90
    of eic-usd over lynceus' beside the paper's ratio, and every variant's p90 over the best
    peer's when peers ran."""
    from optimizers.registry import is_peer

    rows = []
    for family, (prefixes, paper) in FAMILIES.items():
        pooled: dict[str, list[float]] = {}
        optimizer_of: dict[str, str] = {}
        jobs: dict[str, set[str]] = {}
        for a in analyses.values():
            if not a.dataset.startswith(prefixes) or a.metric != "cno":
                continue
            for label, g in a.groups.items():
                units = [s.get("mean_config_cost") for s in g.summaries]
                if None in units:
                    continue  # summaries stored before they carried the unit
                pooled.setdefault(label, []).extend(np.asarray(a.reach[label][TARGET]) /
                                                    np.asarray(units))
                optimizer_of[label] = g.optimizer
                jobs.setdefault(label, set()).add(a.dataset)
        p90 = {label: quantile(v, 0.9) for label, v in pooled.items() if len(jobs[label]) > 1}
        if len(prefixes) > 1 and len({j.split("-")[0] for js in jobs.values() for j in js}) < 2:
            continue  # the joint pool only when both families ran
        lynceus = next((p90[k] for k in p90 if optimizer_of[k] == "lynceus"), None)
        peers = [k for k in p90 if is_peer(optimizer_of[k])]
        best_peer = min(peers, key=p90.get, default=None)
        for label in sorted(p90):
            ratio = (p90[label] / lynceus if paper and optimizer_of[label] == "eic-usd"
                     and lynceus and np.isfinite(lynceus) else None)
            row = {"family": family, "optimizer": label, "jobs": len(jobs[label]),
                   "runs": len(pooled[label]),
                   "reached": float(np.isfinite(pooled[label]).mean()),
                   f"cost to {TARGET} p50 (mean config costs)": quantile(pooled[label], 0.5),
                   f"cost to {TARGET} p90 (mean config costs)": p90[label],
                   "p90 / lynceus p90": ratio,
                   "paper (BO / Lynceus)": paper if ratio is not None else None}
            if best_peer is not None:
                row["best peer"] = best_peer
                row["p90 / best peer p90"] = (p90[label] / p90[best_peer]
                                              if np.isfinite(p90[best_peer]) else None)
            rows.append(row)
    return rows
