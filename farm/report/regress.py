"""The nightly regression gate for optimizer quality (DESIGN.md, "Regression gate").

Fixed sweeps (``sweeps/nightly*.yaml``) are run and, for each (dataset, optimizer variant) and
each quality metric, the values over seeds are compared with the per-seed values of a committed
baseline. A metric regresses when BOTH
  - a one-sided Mann-Whitney U test says the current values are worse than the baseline's
    (p < ``alpha``, default 0.01), and
  - the median got worse by more than ``tolerance`` (relative, default 10%; a median going
    from finite to inf, e.g. a target no longer reached, is always beyond it).
The test keeps seed noise from failing the gate; the tolerance keeps a real but negligible
shift from failing it. ``alpha`` applies to each comparison (no multiple-testing correction:
with 5 seeds a one-sided test cannot go below p = 1/252, so a correction would silence the
short gate). Only seeds present in both are compared, so a short spec (fewer seeds, same
settings) checks against the same baseline. Runs are deterministic given their seeds, so
unchanged code on the same platform reproduces the baseline exactly.

Quality metrics per run (from its summary): the final recommendation's CNO (inf without a truly
feasible one) or Accuracy_C, and the exploration cost to reach CNO <= 1.1 and <= 2 or 90% of
the optimum's Accuracy_C (inf when never reached).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import mannwhitneyu

from farm.report.analysis import variant_labels
from farm.run.metrics import final_quality, quantile

__all__ = [
    "QUALITY",
    "BaselineError",
    "Comparison",
    "compare",
    "format_table",
    "quality_values",
    "read_baseline",
    "write_baseline",
]

# problem metric -> (quality metric, better direction); cost_to_<target> are summary targets
QUALITY = {
    "cno": (("final_cno", "lower"), ("cost_to_cno<=1.1", "lower"), ("cost_to_cno<=2", "lower")),
    "accuracy_c": (("final_accuracy_c", "higher"), ("cost_to_acc_c>=0.9opt", "lower")),
}
BASELINE_VERSION = 1


class BaselineError(ValueError):
    """A baseline file is missing, malformed, or does not fit the spec (exit code 2)."""


def quality_values(summaries: Sequence[Mapping]) -> dict[str, dict[str, Any]]:
    """``{"dataset / variant": {"metric": ..., "seeds": {seed: {quality: value}}}}``."""
    labels = variant_labels(summaries)
    out: dict[str, dict[str, Any]] = {}
    for s in sorted(summaries, key=lambda s: (s["dataset"], labels[s["run_key"]], s["seed"])):
        key = f"{s['dataset']} / {labels[s['run_key']]}"
        entry = out.setdefault(key, {"metric": s["metric"], "seeds": {}})
        values = {f"final_{s['metric']}": final_quality(s)}
        for target, cost in s["exploration_cost_to_reach"].items():
            values[f"cost_to_{target}"] = math.inf if cost is None else float(cost)
        gated = {quality for quality, _ in QUALITY[s["metric"]]}
        values = {quality: v for quality, v in values.items() if quality in gated}
        if s["seed"] in entry["seeds"]:
            raise BaselineError(f"{key}: seed {s['seed']} appears twice (the spec poses "
                                "several problems on one dataset)")
        entry["seeds"][s["seed"]] = values
    return out


@dataclass(frozen=True)
class Comparison:
    """One (dataset / variant, quality metric) row of the gate."""

    key: str
    quality: str
    better: str
    n: int
    baseline_median: float
    current_median: float
    change: float          # relative change of the median, positive = worse
    p_worse: float         # one-sided Mann-Whitney U p-value, current worse than baseline
    p_better: float
    verdict: str           # ok | REGRESSION | improved | no baseline | not run


def compare(baseline: Mapping[str, Mapping], current: Mapping[str, Mapping],
            alpha: float = 0.01, tolerance: float = 0.10) -> list[Comparison]:
    """Every quality metric of every entry, baseline against current, on their common seeds."""
    rows = []
    for key in sorted(set(baseline) | set(current)):
        b, c = baseline.get(key), current.get(key)
        metric = (c or b)["metric"]
        for quality, better in QUALITY[metric]:
            if b is None or c is None:
                rows.append(Comparison(key, quality, better, 0, math.nan, math.nan, math.nan,
                                       math.nan, math.nan,
                                       "no baseline" if b is None else "not run"))
                continue
            seeds = sorted(set(b["seeds"]) & set(c["seeds"]))
            if not seeds:
                raise BaselineError(f"{key}: no seed in common with the baseline "
                                    f"(baseline seeds {sorted(b['seeds'])})")
            bv = np.array([b["seeds"][s][quality] for s in seeds], dtype=float)
            cv = np.array([c["seeds"][s][quality] for s in seeds], dtype=float)
            rows.append(_compare_one(key, quality, better, bv, cv, alpha, tolerance))
    return rows


def _compare_one(key: str, quality: str, better: str, bv: np.ndarray, cv: np.ndarray,
                 alpha: float, tolerance: float) -> Comparison:
    sign = 1.0 if better == "lower" else -1.0   # worse = larger sign * value
    worse, improved = ("greater", "less") if better == "lower" else ("less", "greater")
    p_worse = _mwu(cv, bv, worse)
    p_better = _mwu(cv, bv, improved)
    bm, cm = quantile(bv, 0.5), quantile(cv, 0.5)
    change = _relative_change(bm, cm, sign)
    if p_worse < alpha and change > tolerance:
        verdict = "REGRESSION"
    elif p_better < alpha and change < -tolerance:
        verdict = "improved"
    else:
        verdict = "ok"
    return Comparison(key, quality, better, len(bv), bm, cm, change, p_worse, p_better, verdict)


def _mwu(x: np.ndarray, y: np.ndarray, alternative: str) -> float:
    """One-sided Mann-Whitney U p-value (1.0 when every value is the same)."""
    if np.all(x == x[0]) and np.all(y == x[0]):
        return 1.0
    return float(mannwhitneyu(x, y, alternative=alternative).pvalue)


def _relative_change(base: float, current: float, sign: float) -> float:
    """How much worse ``current`` is than ``base`` relative to it (negative: better)."""
    if base == current:
        return 0.0
    if math.isinf(base) or math.isinf(current):
        return sign * (math.inf if current > base else -math.inf)
    return sign * (current - base) / abs(base) if base else sign * math.copysign(math.inf,
                                                                                current - base)


# -- the baseline file ------------------------------------------------------------------------
def write_baseline(path: Path, values: Mapping[str, Mapping], spec: str) -> None:
    """JSON with per-seed values (inf written as "inf"), atomically replaced."""
    doc = {"version": BASELINE_VERSION, "spec": spec,
           "entries": {k: {"metric": e["metric"],
                           "seeds": {str(s): {q: _encode(v) for q, v in vals.items()}
                                     for s, vals in sorted(e["seeds"].items())}}
                       for k, e in sorted(values.items())}}
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)


def read_baseline(path: Path) -> dict[str, dict[str, Any]]:
    """The entries of a baseline file, validated; BaselineError names what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise BaselineError(f"baseline {path} does not exist (create it with "
                            "--update-baseline)")
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise BaselineError(f"baseline {path} is not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("version") != BASELINE_VERSION:
        raise BaselineError(f"baseline {path}: 'version' must be {BASELINE_VERSION}")
    entries = doc.get("entries")
    if not isinstance(entries, dict) or not entries:
        raise BaselineError(f"baseline {path}: 'entries' must be a non-empty mapping")
    out = {}
    for key, e in entries.items():
        metric = e.get("metric") if isinstance(e, dict) else None
        if metric not in QUALITY:
            raise BaselineError(f"baseline {path}: entries.{key}.metric must be one of "
                                f"{sorted(QUALITY)}")
        seeds = e.get("seeds")
        if not isinstance(seeds, dict) or not seeds:
            raise BaselineError(f"baseline {path}: entries.{key}.seeds must be a non-empty "
                                "mapping seed -> values")
        out[key] = {"metric": metric, "seeds": {}}
        for seed, vals in seeds.items():
            where = f"entries.{key}.seeds.{seed}"
            if not seed.lstrip("-").isdigit():
                raise BaselineError(f"baseline {path}: {where}: seed is not an integer")
            try:
                out[key]["seeds"][int(seed)] = {q: _decode(vals[q]) for q, _ in QUALITY[metric]}
            except (KeyError, TypeError, ValueError) as exc:
                raise BaselineError(f"baseline {path}: {where}: missing or non-numeric "
                                    f"value ({exc})") from None
    return out


def _encode(v: float) -> float | str:
    return "inf" if math.isinf(v) else v


def _decode(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise TypeError(repr(v))
    value = float(v)
    if math.isnan(value):
        raise ValueError(repr(v))
    return value


# -- the readable table -----------------------------------------------------------------------
def format_table(rows: Sequence[Comparison]) -> str:
    cols = ("dataset / optimizer", "metric", "seeds", "baseline p50", "current p50", "change",
            "p(worse)", "verdict")
    cells = [(r.key, f"{r.quality} ({r.better} better)", str(r.n), _num(r.baseline_median),
              _num(r.current_median), _pct(r.change), _num(r.p_worse), r.verdict)
             for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def _num(v: float) -> str:
    if math.isnan(v):
        return "-"
    return "inf" if math.isinf(v) else f"{v:.4g}"


def _pct(v: float) -> str:
    if math.isnan(v):
        return "-"
    if math.isinf(v):
        return "+inf" if v > 0 else "-inf"
    return f"{v:+.1%}"
