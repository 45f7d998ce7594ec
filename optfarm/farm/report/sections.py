"""The report's page-wide sections, after the per-dataset tables and figures: each is a title
and a function from the analyses (``optfarm.farm.report.analysis.analyse``) to table rows; a section
with no rows is left out (or says ``empty``). To add one, write its rows function (in its own
module if it is more than a few lines) and add a line to ``SECTIONS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optfarm.farm.report import sensitivity
from optfarm.farm.report.analysis import DatasetAnalysis, paper_rows, peer_rows
from optfarm.farm.report.lookahead_window import lookahead_rows
from optfarm.farm.report.papers import paper_latency
from optfarm.farm.report.pooled import pooled_reach_rows
from optfarm.farm.run.recurring_job import table1

__all__ = ["SECTIONS", "Section", "guindani_rows", "latency_rows", "published_rows"]

Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Section:
    title: str
    rows: Callable[[Mapping[str, DatasetAnalysis]], Rows]
    empty: str | None = None  # shown when there are no rows; None: the section is left out
    # files the section writes into the report folder (PNGs are shown under its table)
    figures: Callable[[Mapping[str, DatasetAnalysis], Path], list[Path]] | None = None
    figures_first: bool = False  # the PNGs above the table (a page's lead picture)


def latency_rows(analyses: Mapping[str, DatasetAnalysis]) -> list[dict[str, Any]]:
    """Ours per dataset and variant, with the paper's mean latency where one was published
    (``optfarm.farm.report.papers``: other hardware, Java for Lynceus)."""
    rows = []
    for name, a in analyses.items():
        for label, s in a.stats.items():
            g = a.groups[label]
            paper = paper_latency(g.optimizer, g.params, a.dataset)
            rows.append(
                {
                    "dataset": name,
                    "optimizer": label,
                    "median (s)": s["latency_median_s"],
                    "p90 (s)": s["latency_p90_s"],
                    "mean (s)": s["latency_mean_s"],
                    "model update mean (s)": s["model_fit_mean_s"],
                    "paper mean (s)": paper.seconds if paper else None,
                    "paper source": f"{paper.ref} ({paper.machine})" if paper else None,
                }
            )
    return rows


def guindani_rows(analyses: Mapping[str, DatasetAnalysis]) -> list[dict[str, Any]]:
    """Table 1 (``optfarm.farm.run.recurring_job.table1``) for each section where the guindani
    optimizer ran, over every variant there whose runs carry the recurring-job metrics; mean
    feasible cost normalised to variant A's (else to the first variant's)."""
    rows = []
    for name, a in analyses.items():
        if not any(g.optimizer == "guindani" for g in a.groups.values()):
            continue
        runs = {
            label: [s["recurring_job"] for s in g.summaries if s.get("recurring_job")]
            for label, g in a.groups.items()
        }
        runs = {label: jobs for label, jobs in runs.items() if jobs}
        if not runs:
            continue
        reference = next(
            (label for label in runs if a.groups[label].params.get("variant") == "a"),
            next(iter(runs)),
        )
        rows += [
            {"section": name, "optimizer": r.pop("variant"), **r} for r in table1(runs, reference)
        ]
    return rows


def published_rows(analyses: Mapping[str, DatasetAnalysis]) -> Rows:
    """``optfarm.farm.report.analysis.paper_rows``, by section, paper and place in the paper."""
    return sorted(paper_rows(analyses), key=lambda r: (r["section"], r["paper"], r["where"]))


SECTIONS: list[Section] = [
    Section("Recommendation latency", latency_rows, empty="(no runs)"),
    Section("Guindani et al. Table 1 metrics (means over seeds)", guindani_rows),
    Section("Scout and CherryPick jobs pooled (Lynceus Sec. VI)", pooled_reach_rows),
    Section(
        "Sensitivity: parameter importance (functional ANOVA over the grid)",
        sensitivity.importance_rows,
        figures=sensitivity.figures,
    ),
    Section(
        "Sensitivity: main effects (median and mean over runs at each level)",
        sensitivity.main_effect_rows,
    ),
    Section("Look-ahead: cost to reach CNO <= 1.1 per LA (Lynceus Fig. 8)", lookahead_rows),
    Section(
        "Against the peers (the paper's statistic; ratio below 1: better than the best peer)",
        peer_rows,
    ),
    Section(
        "Published numbers beside ours",
        published_rows,
        empty="No published experiment matches this sweep's datasets and optimizers.",
    ),
]
