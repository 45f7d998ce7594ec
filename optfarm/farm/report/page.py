"""The report as files: one PNG per figure, ``stats.json`` and one self-contained
``report.html`` (figures inlined), from the analyses of ``optfarm.farm.report.analysis``: a table
and figures per dataset, then the page-wide sections of ``optfarm.farm.report.sections``."""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from optfarm.farm.report import plots
from optfarm.farm.report.analysis import DatasetAnalysis, ordinal, plain
from optfarm.farm.report.sections import SECTIONS, Section
from optfarm.farm.run.metrics import REACH_TARGETS, final_quality, finite_json, quality_score
from optfarm.farm.run.targets import CNO_OPTIMUM
from optfarm.farm.stats import ranks

__all__ = ["MAX_CURVES", "chosen_variants", "verdict", "write_report"]


def write_report(
    analyses: Mapping[str, DatasetAnalysis],
    out_dir: Path,
    title: str = "optfarm report",
    sections: Sequence[Section] = SECTIONS,
    per_dataset: bool = True,
    intro: Sequence[str] | None = None,
) -> list[Path]:
    """Write the PNG figures, ``stats.json`` and ``report.html`` into ``out_dir``; returns
    the files written. ``sections`` are the page-wide sections (``farm leaderboard`` gives its
    own, and its ``intro`` paragraphs, the first its lead, instead of the definitions of the
    curves), after a table and figures per dataset unless ``per_dataset`` is false."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    body, files = _page_head(analyses, title, per_dataset, intro), []
    parts = (
        [_dataset_section(name, a, out_dir) for name, a in analyses.items()] if per_dataset else []
    )
    parts += [_page_section(section, analyses, out_dir) for section in sections]
    for html_parts, written in parts:
        body += html_parts
        files += written
    stats_path = out_dir / "stats.json"
    stats_path.write_text(
        json.dumps(
            finite_json({n: a.stats for n, a in analyses.items()}),
            indent=1,
            default=_json_float,
            allow_nan=False,
        )
    )
    page = out_dir / "report.html"
    page.write_text(_PAGE.format(title=html.escape(title), body="\n".join(body)))
    return files + [stats_path, page]


def _page_head(
    analyses: Mapping[str, DatasetAnalysis],
    title: str,
    per_dataset: bool,
    intro: Sequence[str] | None,
) -> list[str]:
    """The title, the verdict line (with the per-dataset part) and the definitions of the
    curves, or the ``intro`` paragraphs (the first as the page's lead)."""
    head = [f"<h1>{html.escape(title)}</h1>"]
    if per_dataset and verdict(analyses):
        head.append(f'<p class="verdict"><b>Verdict.</b> {html.escape(verdict(analyses))}</p>')
    if intro is None:
        return head + [_DEFINITIONS]
    return head + [
        f'<p class="lead">{html.escape(text)}</p>' if i == 0 else f"<p>{html.escape(text)}</p>"
        for i, text in enumerate(intro)
    ]


def _dataset_section(name: str, a: DatasetAnalysis, out_dir: Path) -> tuple[list[str], list[Path]]:
    """A dataset's heading, summary and reach tables and figures (written into ``out_dir``):
    the HTML parts and the files."""
    parts = [
        f"<h2>{html.escape(name)} ({'CNO' if a.metric == 'cno' else 'Accuracy_C'},"
        f" {sum(s['runs'] for s in a.stats.values())} runs)</h2>",
        _table(_summary_rows(a)),
        _table(_reach_rows(a)),
    ]
    figs = _figures(name, a, out_dir)
    return parts + [_img(f) for f in figs], figs


def _page_section(
    section: Section, analyses: Mapping[str, DatasetAnalysis], out_dir: Path
) -> tuple[list[str], list[Path]]:
    """A page-wide section: its heading and table (or its text when empty, if it has one),
    and its figures when it has rows, under the table (above it with ``figures_first``): the
    HTML parts and the files written."""
    rows = section.rows(analyses)
    if not rows and section.empty is None:
        return [], []
    head = [f"<h2>{html.escape(section.title)}</h2>"]
    table = [_table(rows) if rows else f"<p>{html.escape(section.empty)}</p>"]
    if not rows or section.figures is None:
        return head + table, []
    written = section.figures(analyses, out_dir)
    images = [_img(f) for f in written if f.suffix == ".png"]
    return head + (images + table if section.figures_first else table + images), written


MAX_CURVES = 6


def chosen_variants(a: DatasetAnalysis) -> dict[str, str]:
    """The variants a figure draws, each with its role in the legend: all of them up to
    ``MAX_CURVES`` (no role); beyond, per optimizer with several variants its best and worst
    (median ``quality_auc`` over seeds) and its default settings, and every optimizer that
    has one variant (the baselines, no role)."""
    if len(a.groups) <= MAX_CURVES:
        return dict.fromkeys(a.groups, "")
    from optfarm.optimizers.registry import get

    by_optimizer: dict[str, list[str]] = {}
    for label, g in a.groups.items():
        by_optimizer.setdefault(g.optimizer, []).append(label)
    keep: dict[str, list[str]] = {}
    for optimizer, labels in by_optimizer.items():
        if len(labels) == 1:
            keep[labels[0]] = []
            continue
        auc = {
            label: float(
                np.median([s.get("quality_auc", np.nan) for s in a.groups[label].summaries])
            )
            for label in labels
        }
        ranked = sorted(labels, key=lambda label: auc[label])
        defaults = get(optimizer).resolve_params({})
        default = [label for label in labels if a.groups[label].params == defaults]
        for label, role in (
            (ranked[0], "best quality_auc"),
            *((d, "default") for d in default),
            (ranked[-1], "worst quality_auc"),
        ):
            keep.setdefault(label, []).append(role)
    return {label: ", ".join(dict.fromkeys(roles)) for label, roles in keep.items()}


def _figures(name: str, a: DatasetAnalysis, out_dir: Path) -> list[Path]:
    """Lynceus Fig. 4-5 for CNO (p50 CNO against cost and p90 CNO against p90 cost; CDFs of
    the cost to reach CNO <= 2 and <= 1.1), TrimTuner Fig. 1-2 for Accuracy_C (mean against
    cost and time), for the ``chosen_variants``, labelled with their role (a grid of 72
    variants is read in the sensitivity section, not as 72 curves)."""
    slug = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)
    shown = _legend(a)
    curves = {shown[k]: v for k, v in a.curves.items() if k in shown}
    if a.metric == "cno":
        reach_by = {
            shown[k]: {t: v for t, v in r.items() if t != CNO_OPTIMUM}
            for k, r in a.reach.items()
            if k in shown
        }
        return [
            plots.plot_cno(out_dir / f"cno_{slug}.png", name, a.cost_grid, curves),
            plots.plot_reach_cdf(out_dir / f"reach_{slug}.png", name, reach_by),
        ]
    return [
        plots.plot_accuracy(
            out_dir / f"accuracy_{slug}.png",
            name,
            a.optimum,
            {
                "cumulative exploration cost ($)": (
                    a.cost_grid,
                    {k: c["mean"] for k, c in curves.items()},
                ),
                "cumulative exploration time (s)": (
                    a.time_grid,
                    {k: c["mean_by_time"] for k, c in curves.items()},
                ),
            },
        )
    ]


def _legend(a: DatasetAnalysis) -> dict[str, str]:
    """The ``chosen_variants`` with their legend entries: the label and its role, if any."""
    return {
        label: f"{label} ({role})" if role else label for label, role in chosen_variants(a).items()
    }


def _summary_rows(a: DatasetAnalysis) -> list[dict[str, Any]]:
    """One row per variant: runs, evaluations, exploration cost (in the dataset's unit) and
    the final quality."""
    rows = []
    unit = _in_unit(a)
    for label, s in a.stats.items():
        row = {
            "optimizer": label,
            "runs": s["runs"],
            "evaluations (median)": s["nex_median"],
            f"exploration cost, median{unit}": s["exploration_cost_median"],
        }
        if a.metric == "cno":
            row.update({"final CNO p50": s["final_p50"], "final CNO p90": s["final_p90"]})
        else:
            row.update(
                {"final Accuracy_C mean": s["final_mean"], "final Accuracy_C p50": s["final_p50"]}
            )
        rows.append(row)
    return rows


def _reach_rows(a: DatasetAnalysis) -> list[dict[str, Any]]:
    """One row per (variant, reach target): its costs and time to the target (a table of its
    own: as columns of the summary, three targets made the table 1,500 px wide)."""
    rows = []
    unit = _in_unit(a)
    for label, s in a.stats.items():
        for target in REACH_TARGETS[a.metric]:
            row = {
                "optimizer": label,
                "target": target,
                f"cost p50 / p90{unit}": f"{_fmt(s[f'reach_p50:{target}'])} / "
                f"{_fmt(s[f'reach_p90:{target}'])}",
            }
            if a.metric != "cno":
                row[f"cost mean{unit}"] = s[f"reach_mean:{target}"]
                row[f"own pick: cost mean{unit}"] = s[f"pick_reach_mean:{target}"]
            row["time p50 (s)"] = s[f"reach_time_p50:{target}"]
            row["reached"] = f"{s[f'reach_frac:{target}']:.0%}"
            row["never: why"] = s[f"never:{target}"]
            rows.append(row)
    return rows


def verdict(analyses: Mapping[str, DatasetAnalysis]) -> str:
    """One line: per dataset, its variants in places by their final quality, as the board
    places optimizers (``optfarm.farm.stats.ranks``): paired Wilcoxon signed-rank tests over
    the seeds every variant has, Holm-corrected, and a place 1 + the variants separated
    from it that rank ahead (lower mean rank), so that variants the data do not separate
    share a place and none is called best. Each with its final p50 and p90 and median
    exploration cost, in the dataset's cost unit."""
    parts = [_dataset_verdict(name, a) for name, a in analyses.items() if a.stats]
    return "; ".join(parts) + "." if parts else ""


SHOWN_PER_PLACE = 3


def _dataset_verdict(name: str, a: DatasetAnalysis) -> str:
    """``verdict``'s part for one dataset: "synthetic (5 seeds): 1st, tied: lynceus (final
    CNO p50 1, p90 1.05; median exploration cost 12.3 USD), ...; why none is separated"."""
    scores, seeds = _final_scores(a)
    mean = ranks.average_ranks(scores)
    pairs = ranks.wilcoxon_holm(scores)
    places = ranks.places(mean, pairs)
    sign = 1.0 if a.metric == "cno" else -1.0

    def key(label):  # within a place: the final p50, p90, then the lower cost
        s = a.stats[label]
        p50 = math.inf if s["final_p50"] is None else sign * s["final_p50"]
        p90 = math.inf if s["final_p90"] is None else sign * s["final_p90"]
        return (p50, p90, s["exploration_cost_median"] or 0.0)

    groups: dict[int, list[str]] = {}
    for label, place in places.items():
        groups.setdefault(int(place), []).append(label)
    unit = _cost_unit(a)
    texts = []
    for place, labels in groups.items():
        labels = sorted(labels, key=key)
        shown = [_variant_text(a, label, unit, i == 0) for i, label in enumerate(labels)]
        more = len(shown) - SHOWN_PER_PLACE
        shown = shown[:SHOWN_PER_PLACE] + ([f"{more} others"] if more > 0 else [])
        tied = ", tied" if len(labels) > 1 else ""
        texts.append(f"{ordinal(place)}{tied}: " + ", ".join(shown))
    if len(places) > 1 and not pairs["significant"].any():
        smallest = math.ceil(math.log2(2 / 0.05))
        texts.append(
            f"{seeds} seeds cannot separate any two (a signed-rank test needs {smallest})"
            if seeds < smallest
            else "the data separate no two (paired Wilcoxon-Holm over the seeds)"
        )
    return f"{name} ({seeds} seeds): " + "; ".join(texts)


def _final_scores(a: DatasetAnalysis):
    """Seeds x variants: each run's final score (``quality_score``, 0 the optimum), on the
    seeds every variant has; and how many those are."""
    by_label = {
        label: {
            seed: quality_score(final_quality(s), a.metric, a.optimum)
            for seed, s in zip(g.seeds, g.summaries)
        }
        for label, g in a.groups.items()
        if label in a.stats
    }
    common = set.intersection(*(set(v) for v in by_label.values()))
    scores = pd.DataFrame(
        {label: [v[seed] for seed in sorted(common)] for label, v in by_label.items()}
    )
    return scores, len(common)


def _variant_text(a: DatasetAnalysis, label: str, unit: str, named: bool) -> str:
    """ "lynceus (final CNO p50 1, p90 1.05; median exploration cost 12.3 USD)"; the words
    only for the first of a place ("eic-usd (1, 1.05; 14 USD)")."""
    s, what = a.stats[label], "CNO" if a.metric == "cno" else "Accuracy_C"
    cost = f"{_fmt(s['exploration_cost_median'])}{' ' + unit if unit else ''}"
    if named:
        return (
            f"{label} (final {what} p50 {_fmt(s['final_p50'])}, p90 {_fmt(s['final_p90'])}; "
            f"median exploration cost {cost})"
        )
    return f"{label} ({_fmt(s['final_p50'])}, {_fmt(s['final_p90'])}; {cost})"


def _in_unit(a: DatasetAnalysis) -> str:
    """A column's unit suffix: " (USD)" (nothing when the runs do not say)."""
    unit = _cost_unit(a)
    return f" ({unit})" if unit else ""


def _cost_unit(a: DatasetAnalysis) -> str:
    """The dataset's cost unit as its runs' summaries hold it ("" when they do not)."""
    for g in a.groups.values():
        for s in g.summaries:
            return (s.get("units") or {}).get("cost") or ""
    return ""


def _fmt(v: Any) -> str:
    """A table cell: "-" for nothing, "never" for inf, numbers as ``analysis.plain``."""
    if v is None:
        return "-"
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return "-"
        return "never" if math.isinf(v) else plain(v)
    return html.escape(str(v))


def _json_float(o):
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {o!r}")


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "<p>(none)</p>"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{_fmt(r.get(c))}</td>" for c in cols) + "</tr>" for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<p><img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}"></p>'


_DEFINITIONS = """<p>CNO: true cost of the recommended configuration over the cheapest feasible
one's (Lynceus Sec. VI); a run without a truly feasible recommendation has CNO = inf (drawn at
the top edge, "never" in tables). Curves are step functions of the cumulative exploration cost
on a common grid per dataset; p50/p90 are over seeds. Accuracy_C: true accuracy if the
recommendation meets the cost cap, else accuracy x C_max / cost (TrimTuner Sec. V). Cost/time
to a target: cumulative exploration cost/time at the first step whose recommendation meets it
("never" when a run did not; a p90 is "never" when more than 10% of runs did not).</p>"""

_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1300px}}
p{{overflow-wrap:anywhere;margin:0.5em 0}}p.lead{{font-size:1.15em;max-width:52em;
margin:0.8em 0}}
table{{border-collapse:collapse;margin:0.5em 0 1.5em;display:block;max-width:100%;
overflow-x:auto}}td,th{{border:1px solid #ccc;
padding:3px 8px;font-size:13px;text-align:right}}th{{background:#f0f0f0}}img{{max-width:100%}}
</style></head><body>
{body}
</body></html>
"""
