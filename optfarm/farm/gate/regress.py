"""The nightly regression gate for optimizer quality (ARCHITECTURE.md, "Where each concept
lives").

Fixed sweeps (``sweeps/nightly*.yaml``) are run and, for each (dataset, optimizer variant) and
each quality metric, the values over seeds are compared with the per-seed values of a committed
baseline (only the seeds both have). Runs are deterministic given their seeds, so unchanged code
on the same machine reproduces the baseline exactly, and on another CPU up to its last bits
(differences within ``FLOAT_TOLERANCE``, relative 1e-12, count as none); a change that only
alters random streams draws new seeds from the same distributions, and must pass.

Quality metrics per run (from its summary; worse = larger, but Accuracy_C):
  - ``quality_auc``: the area under the run's quality curve against log exploration cost
    (``optfarm.farm.run.metrics.quality_auc``) -- the whole trajectory in one number, the statistic
    with most power: a regression that delays the search or makes some seeds fail moves it;
  - the end points: the final recommendation's CNO (inf without a truly feasible one) or
    Accuracy_C, and the exploration cost to reach CNO <= 1.1 and <= 2 or 90% and 98% of the
    optimum's Accuracy_C (inf when never reached);
  - the optimizer's own pick (``pick_*``: what a user deploys, which the farm does not credit
    when it differs: a model's untested prediction, a mean over repeated runs), for the papers'
    optimizers (``gates_pick``): its ``pick_quality_auc`` (in the primary family) and its final
    CNO or Accuracy_C (an end point); on Accuracy_C also the exploration cost until the pick
    reaches 90% and 98% of the optimum's (end points: TrimTuner's statistic, Fig. 1-2, by
    which its sub-sampling pays, docs/results/ablations.md);
  - on a recurring job (the runs' summaries carry ``recurring_job``: Guindani et al.'s jobs),
    the paper's statistic, the unfeasible executions (Table 1; an end point).

A metric of an entry REGRESSES when the signed-rank rule (all three of 1-3) or the median
rule (4) holds:
  1. significance: the one-sided Wilcoxon signed-rank test on the per-seed differences
     (current - baseline, seed by seed: both use the same seeds) says current is worse, with a
     p-value below its family's share of ``alpha`` after Holm's correction within the family.
     Seeds whose value did not change (within ``FLOAT_TOLERANCE``) drop out (scipy's
     ``zero_method="wilcox"``): a change that alters some runs is judged on those runs. A difference
     involving inf (a target reached on one side only) ranks above every finite one. The test is
     valid for changes that only alter random streams: such a change redraws each seed's outcome
     from the same distribution, so a seed's (baseline, current) pair is exchangeable and its
     difference symmetric about 0. Pairing removes the between-seed spread (easy and hard seeds)
     that a two-sample test has to see through. The primary family is ``quality_auc`` of every
     entry and ``pick_quality_auc`` (``PRIMARY_SHARE`` = 64% of alpha), the secondary family
     every end point of every entry (``END_POINT_SHARE``, 16%): a regression of the
     trajectory is tested among few comparisons, a collapse of an end point (a target no
     longer reached) is still caught, and ``alpha`` (default 0.05) bounds the probability that
     a gate with no real change flags anything (the family-wise false-alarm rate, Bonferroni
     over these two families and the median's, 4.). Within a family,
     Holm's procedure counts only the rows that could reach significance (Tarone's
     refinement for discrete tests, step-down as in Hommel & Krummenauer 1998, ``holm_tarone``):
     given the magnitudes of a row's differences, the smallest p-value its signed-rank test
     can give is that of every sign worse (2^-n for n changed seeds), so a row with few
     changed seeds, or none (an entry the change does not touch), cannot spend the family's
     alpha. Under a neutral change the signs are exchangeable given the magnitudes, so the
     bound holds conditionally and the family-wise rate stays below alpha;
  2. effect size: of the seeds whose value changed, the share that got worse is at least
     ``min_effect`` (default 0.64);
  3. magnitude: the median or the 90th percentile got worse by more than the allowed change
     (relative; finite -> inf is always beyond it), which falls as consistency rises
     (``allowed_change``): ``tolerance`` (default 10%) when ``min_effect`` of the changed seeds
     got worse, down to ``consistent_tolerance`` (default 5%) when all of them did. A
     consistent small regression (every seed 7.5% worse) is caught; as every rule is a
     conjunction with 1., the false-alarm rate stays at most alpha;
  4. the distribution: a paired permutation test of every quantile at once
     (``distribution_shift``: a one-sided Kolmogorov-Smirnov statistic, the two values of
     each changed seed swapped at random) says current is worse, Holm-Tarone over every row
     at ``SHIFT_SHARE`` (20%) of alpha, and the median got worse by more than ``tolerance``.
     The signed-rank test weighs every changed seed; when a change makes some seeds much
     worse and about as many better (a bimodal change: TrimTuner's median final Accuracy_C
     halved with 18 changed seeds split both ways, issue 37) it sees no direction, while the
     quantiles between the modes, and the median a user meets on a typical run, moved.
Unchanged code reproduces the baseline up to ``FLOAT_TOLERANCE``: every difference is 0 and
every p-value 1.
Significance alone would flag a negligible shift given enough seeds; effect size and magnitude
alone would flag seed noise. The mutation catalogue (``optfarm.farm.gate.mutations``,
``farm regress --mutations``) measures the gate's detection and false-alarm rates.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import rankdata, wilcoxon

from optfarm.farm.report.analysis import variant_labels
from optfarm.farm.run.metrics import final_quality, quantile
from optfarm.farm.run.targets import ACC_C_90, ACC_C_98, CNO_1_1, CNO_2
from optfarm.farm.stats.paired import FLOAT_TOLERANCE, holm_tarone, paired_differences, same
from optfarm.optimizers.registry import get as get_optimizer
from optfarm.oracle.atomic_files import write_file_atomically

__all__ = [
    "FLOAT_TOLERANCE",
    "PICK",
    "QUALITY",
    "BaselineError",
    "Comparison",
    "aligned_lines",
    "allowed_change",
    "compare",
    "distribution_shift",
    "format_table",
    "gates_pick",
    "holm_tarone",
    "merge_baseline",
    "model_guided_share",
    "paired_differences",
    "qualities",
    "quality_values",
    "read_baseline",
    "same",
    "share_worse",
    "write_baseline",
]

# problem metric -> (quality metric, better direction); cost_to_<target> are summary targets
QUALITY = {
    "cno": (
        ("quality_auc", "lower"),
        ("final_cno", "lower"),
        (f"cost_to_{CNO_1_1}", "lower"),
        (f"cost_to_{CNO_2}", "lower"),
    ),
    "accuracy_c": (
        ("quality_auc", "lower"),
        ("final_accuracy_c", "higher"),
        (f"cost_to_{ACC_C_90}", "lower"),
        (f"cost_to_{ACC_C_98}", "lower"),
    ),
}
# the optimizer's own pick (what a user deploys, ``optfarm.farm.run.recommendation``), gated beside
# the credited values for the optimizers whose pick can differ from them (``gates_pick``): its
# trajectory area (the primary family), its final quality and, on Accuracy_C, its cost to each
# target (end points)
PICK = {
    "cno": (("pick_quality_auc", "lower"), ("pick_final_cno", "lower")),
    "accuracy_c": (
        ("pick_quality_auc", "lower"),
        ("pick_final_accuracy_c", "higher"),
        (f"pick_cost_to_{ACC_C_90}", "lower"),
        (f"pick_cost_to_{ACC_C_98}", "lower"),
    ),
}
# Guindani et al.'s Table 1 statistic, gated on the entries whose runs are a recurring job's
# (their summaries' ``recurring_job``, ``optfarm.farm.run.recurring_job``): what the paper's ML
# corrections cut
RECURRING = (("unfeasible_executions", "lower"),)
BASELINE_VERSION = 2  # 2: per-seed quality_auc
# Relative differences up to this are no change (``same``): runs are bit-identical on one
# machine, but another CPU's kernels (OpenBLAS's per-CPU kernels, NumPy's SIMD loops, numba
# compiling for the host CPU) round the last bits differently (1-2 ulp, relative <= 4e-16).


class BaselineError(ValueError):
    """A baseline file is missing, malformed, or does not fit the spec (exit code 2)."""


def gates_pick(optimizer: str) -> bool:
    """Whether the optimizer's own pick is gated beside the credited values: for the papers'
    optimizers, whose ``recommend`` (a model's prediction, a mean over repeated runs, a
    recurring job's choice) can differ from the configuration the farm credits; random search
    and the peers recommend their best observed configuration, the credited one."""
    from optfarm.optimizers.registry import is_peer

    return optimizer != "random" and not is_peer(optimizer)


def qualities(entry: Mapping) -> tuple[tuple[str, str], ...]:
    """The gated (quality, better direction) pairs of a baseline or current entry: its
    metric's ``QUALITY``, ``PICK`` when it gates the pick and ``RECURRING`` on a recurring
    job."""
    return (
        QUALITY[entry["metric"]]
        + (PICK[entry["metric"]] if entry.get("pick") else ())
        + (RECURRING if entry.get("recurring") else ())
    )


def quality_values(
    summaries: Sequence[Mapping], labels: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """``{"dataset / variant": {"metric": ..., "pick": bool, "seeds": {seed: {quality:
    value}}}}``, and ``"recurring": True`` on a recurring job; ``labels`` (run_key -> variant
    label) when ``summaries`` are part of a larger gate whose variants name them
    (``optfarm.farm.report.analysis.variant_labels`` of all its runs)."""
    labels = variant_labels(summaries) if labels is None else labels
    out: dict[str, dict[str, Any]] = {}
    for s in sorted(summaries, key=lambda s: (s["dataset"], labels[s["run_key"]], s["seed"])):
        key = f"{s['dataset']} / {labels[s['run_key']]}"
        entry = out.setdefault(
            key,
            {
                "metric": s["metric"],
                "pick": gates_pick(s["optimizer"]),
                **({"recurring": True} if "recurring_job" in s else {}),
                "seeds": {},
            },
        )
        if s["seed"] in entry["seeds"]:
            raise BaselineError(
                f"{key}: seed {s['seed']} appears twice (the spec poses "
                "several problems on one dataset)"
            )
        entry["seeds"][s["seed"]] = {
            quality: v for quality, v in _run_values(s).items() if quality in dict(qualities(entry))
        }
    return out


def _run_values(s: Mapping) -> dict[str, float]:
    """Every quality a run summary gives: the credited ones, its pick's and a recurring job's."""
    values = {"quality_auc": float(s["quality_auc"]), f"final_{s['metric']}": final_quality(s)}
    for target, cost in s["exploration_cost_to_reach"].items():
        values[f"cost_to_{target}"] = math.inf if cost is None else float(cost)
    if "pick_quality_auc" in s:
        values["pick_quality_auc"] = float(s["pick_quality_auc"])
        values[f"pick_final_{s['metric']}"] = final_quality(s, pick=True)
        for target, cost in s["pick_exploration_cost_to_reach"].items():
            values[f"pick_cost_to_{target}"] = math.inf if cost is None else float(cost)
    if "recurring_job" in s:
        values["unfeasible_executions"] = float(s["recurring_job"]["unfeasible_executions"])
    return values


@dataclass(frozen=True)
class Comparison:
    """One (dataset / variant, quality metric) row of the gate."""

    key: str
    quality: str
    better: str
    n: int
    baseline_median: float
    current_median: float
    change: float  # relative change of the median, positive = worse
    change_p90: float  # relative change of the 90th percentile (of badness), positive = worse
    n_changed: int  # seeds whose value changed
    effect: float  # of the changed seeds, the share that got worse (0.5: none changed)
    p_worse: float  # one-sided Wilcoxon signed-rank p-value, current worse than baseline
    p_better: float
    p_min: float  # the smallest p-value the row's test can give (every sign one way)
    p_shift_worse: float = math.nan  # distribution_shift's p-values
    p_shift_better: float = math.nan
    p_shift_min: float = 1.0  # the smallest p-value distribution_shift can give
    p_holm: float = math.nan  # p_worse adjusted within its family (holm_tarone)
    p_shift_holm: float = math.nan  # p_shift_worse adjusted within the shift family
    verdict: str = ""  # ok | REGRESSION | improved | no baseline | not run
    by: str = ""  # the test behind a REGRESSION or improved verdict: rank | median


def compare(
    baseline: Mapping[str, Mapping],
    current: Mapping[str, Mapping],
    alpha: float = 0.05,
    tolerance: float = 0.10,
    min_effect: float = 0.64,
    consistent_tolerance: float = 0.05,
) -> list[Comparison]:
    """Every quality metric of every entry, baseline against current, on their common seeds,
    with the verdict of the module's rule (Holm's correction over all the rows compared)."""
    rows = []
    for key in sorted(set(baseline) | set(current)):
        b, c = baseline.get(key), current.get(key)
        for quality, better in qualities(c or b):
            if c is not None and (
                b is None or quality not in dict(qualities(b)) or quality in b.get("absent", ())
            ):
                rows.append(
                    Comparison(
                        key,
                        quality,
                        better,
                        0,
                        *[math.nan] * 4,
                        0,
                        *[math.nan] * 4,
                        verdict="no baseline",
                    )
                )
                continue
            if c is None:
                rows.append(
                    Comparison(
                        key,
                        quality,
                        better,
                        0,
                        *[math.nan] * 4,
                        0,
                        *[math.nan] * 4,
                        verdict="not run",
                    )
                )
                continue
            seeds = sorted(set(b["seeds"]) & set(c["seeds"]))
            if not seeds:
                raise BaselineError(
                    f"{key}: no seed in common with the baseline "
                    f"(baseline seeds {sorted(b['seeds'])})"
                )
            bv = np.array([b["seeds"][s][quality] for s in seeds], dtype=float)
            cv = np.array([c["seeds"][s][quality] for s in seeds], dtype=float)
            rows.append(_compare_one(key, quality, better, bv, cv, tolerance))
    return _verdicts(rows, alpha, tolerance, min_effect, consistent_tolerance)


def _compare_one(
    key: str, quality: str, better: str, bv: np.ndarray, cv: np.ndarray, tolerance: float
) -> Comparison:
    """One row's statistics; the median's test only where the median moved by more than
    ``tolerance`` (elsewhere its verdict cannot fire: p = 1, which only makes Holm's
    correction of the other rows more conservative)."""
    sign = 1.0 if better == "lower" else -1.0  # badness = sign * value
    bm, cm = quantile(bv, 0.5), quantile(cv, 0.5)
    b90, c90 = (sign * quantile(sign * v, 0.9) for v in (bv, cv))
    d = paired_differences(sign * cv, sign * bv)
    change = _relative_change(bm, cm, sign)
    n_changed = int(np.count_nonzero(d))
    shift = (
        distribution_shift(sign * bv, sign * cv)
        if abs(change) > tolerance
        else (1.0, 1.0, _shift_p_min(n_changed))
    )
    return Comparison(
        key,
        quality,
        better,
        len(bv),
        bm,
        cm,
        change,
        _relative_change(b90, c90, sign),
        n_changed,
        share_worse(d),
        _signed_rank(d, "greater"),
        _signed_rank(d, "less"),
        _signed_rank(np.abs(d), "greater"),
        *shift,
    )


def share_worse(d: np.ndarray) -> float:
    """Of the seeds whose value changed (``d != 0``), the share that got worse (``d > 0``);
    0.5 when none changed."""
    changed = np.count_nonzero(d)
    return float(np.count_nonzero(d > 0) / changed) if changed else 0.5


PRIMARY = ("quality_auc", "pick_quality_auc")  # the trajectory: the primary family
# alpha's shares, Bonferroni over three families: the signed-rank test on the trajectory rows
# (PRIMARY) and on the end points, and the quantiles' permutation test on every row
PRIMARY_SHARE, END_POINT_SHARE, SHIFT_SHARE = 0.64, 0.16, 0.20
SHIFT_EXACT_UP_TO = 11  # changed seeds up to which distribution_shift enumerates swaps
SHIFT_PERMUTATIONS = 4000  # random swaps beyond that (a fixed stream: the same p each time)


def allowed_change(
    effect: float, tolerance: float, consistent_tolerance: float, min_effect: float
) -> float:
    """The relative worsening of the median or p90 that a significant row must exceed, given
    the share ``effect`` of its changed seeds that moved its way: ``tolerance`` at
    ``min_effect``, falling linearly to ``consistent_tolerance`` when every one did (a small
    shift on every seed is a regression users pay on every run; the same shift on 64% of
    them, the others better, is closer to noise)."""
    if min_effect >= 1.0:
        return consistent_tolerance
    t = min(max((effect - min_effect) / (1.0 - min_effect), 0.0), 1.0)
    return tolerance + t * (consistent_tolerance - tolerance)


def distribution_shift(base: np.ndarray, current: np.ndarray) -> tuple[float, float, float]:
    """The paired permutation test of every quantile at once (a one-sided Kolmogorov-Smirnov
    statistic on paired data): one-sided p-values (current worse, current better) and the
    smallest p-value it could give. Both arguments are badness (larger is worse; inf ranks
    highest). The statistic is the largest, over the thresholds v (the pooled values), of
    the number of current values worse than v minus the baseline's: only the changed seeds
    (``same``) whose two values straddle v count, +1 when current holds the worse one. Its
    reference distribution swaps the two values of each changed seed at random: every
    pattern when at most ``SHIFT_EXACT_UP_TO`` seeds changed, else ``SHIFT_PERMUTATIONS``
    random ones from a fixed stream (p = (1 + hits) / (1 + draws), valid as it stands).

    Exact under a change that only redraws seeds (each seed's two values exchangeable), the
    signed-rank test's null. Where that test weighs every changed seed by its rank, this one
    asks whether some quantile moved: a bimodal change (9 seeds falling from the good mode to
    the bad one, 9 others gaining as much within the bad mode) moves the quantiles between the
    modes, all 9 seeds that cross them one way."""
    base, current = np.asarray(base, dtype=float), np.asarray(current, dtype=float)
    changed = ~same(base, current)
    m = int(changed.sum())
    if m == 0:
        return 1.0, 1.0, 1.0
    ranks = rankdata(np.concatenate([base, current]))
    rb, rc = ranks[: len(base)][changed], ranks[len(base) :][changed]
    lo, hi = np.minimum(rb, rc), np.maximum(rb, rc)
    v = np.unique(ranks)
    straddles = ((lo[:, None] <= v[None, :]) & (v[None, :] < hi[:, None])).astype(float)
    observed = np.where(rc > rb, 1.0, -1.0) @ straddles  # (thresholds,)
    exact = m <= SHIFT_EXACT_UP_TO
    signs = (
        _all_swaps(m) if exact else np.random.default_rng(0).random((SHIFT_PERMUTATIONS, m)) < 0.5
    )
    t = np.where(signs, -1.0, 1.0) @ straddles  # (patterns, thresholds)
    worse = np.count_nonzero(t.max(axis=1) >= observed.max())
    better = np.count_nonzero((-t).max(axis=1) >= (-observed).max())
    if exact:
        return worse / len(t), better / len(t), _shift_p_min(m)
    return (1 + worse) / (1 + len(t)), (1 + better) / (1 + len(t)), _shift_p_min(m)


@functools.cache
def _all_swaps(m: int) -> np.ndarray:
    """Every swap pattern of ``m`` seeds, (2^m, m) booleans."""
    return np.array(list(itertools.product((False, True), repeat=m)), dtype=bool)


def _shift_p_min(n_changed: int) -> float:
    """The smallest p-value ``distribution_shift`` can give with ``n_changed`` changed seeds (one
    swap pattern of 2^n, or one random draw of ``SHIFT_PERMUTATIONS``), for Tarone's count."""
    if n_changed <= SHIFT_EXACT_UP_TO:
        return 2.0**-n_changed
    return 1.0 / (1 + SHIFT_PERMUTATIONS)


def _verdicts(
    rows: list[Comparison],
    alpha: float,
    tolerance: float,
    min_effect: float,
    consistent_tolerance: float,
) -> list[Comparison]:
    """Each compared row's verdict: the signed-rank rule within its family (PRIMARY or an
    end point) or the median's shift test, each family with its share of ``alpha``."""
    compared = [i for i, r in enumerate(rows) if not r.verdict]
    worse, better = _rank_p_holm(rows, compared, alpha)
    shift_worse, shift_better = _shift_p_holm(rows, compared, alpha)
    out = list(rows)
    for i in compared:
        r = rows[i]
        allowed = allowed_change(r.effect, tolerance, consistent_tolerance, min_effect)
        allowed_back = allowed_change(1 - r.effect, tolerance, consistent_tolerance, min_effect)
        by = _worse_by(
            r, worse[i] <= alpha, shift_worse[i] <= alpha, allowed, tolerance, min_effect
        )
        back = _worse_by(
            _turned(r),
            better[i] <= alpha,
            shift_better[i] <= alpha,
            allowed_back,
            tolerance,
            min_effect,
        )
        verdict = "REGRESSION" if by else "improved" if back else "ok"
        out[i] = replace(
            r,
            p_holm=float(min(worse[i], 1.0)),
            p_shift_holm=float(min(shift_worse[i], 1.0)),
            verdict=verdict,
            by=by or back,
        )
    return out


def _rank_p_holm(
    rows: Sequence[Comparison], compared: Sequence[int], alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """The signed-rank p-values of the ``compared`` rows (worse, better), adjusted by
    ``holm_tarone`` within each family (PRIMARY, the end points) at its share of ``alpha``
    and divided by that share (so that each compares with ``alpha``); 1 for the others."""
    worse = np.ones(len(rows))
    better = np.ones(len(rows))
    for primary, share in ((True, PRIMARY_SHARE), (False, END_POINT_SHARE)):
        family = [i for i in compared if (rows[i].quality in PRIMARY) == primary]
        p_min = [rows[i].p_min for i in family]
        worse[family] = holm_tarone([rows[i].p_worse for i in family], p_min, share * alpha)
        better[family] = holm_tarone([rows[i].p_better for i in family], p_min, share * alpha)
        worse[family], better[family] = worse[family] / share, better[family] / share
    return worse, better


def _shift_p_holm(
    rows: Sequence[Comparison], compared: Sequence[int], alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """The median's shift-test p-values of the ``compared`` rows (worse, better), adjusted
    by ``holm_tarone`` over all of them at ``SHIFT_SHARE`` of ``alpha`` and divided by that
    share; 1 for the others."""
    shift_min = [rows[i].p_shift_min for i in compared]
    shift_worse = np.ones(len(rows))
    shift_better = np.ones(len(rows))
    shift_worse[compared] = (
        holm_tarone([rows[i].p_shift_worse for i in compared], shift_min, SHIFT_SHARE * alpha)
        / SHIFT_SHARE
    )
    shift_better[compared] = (
        holm_tarone([rows[i].p_shift_better for i in compared], shift_min, SHIFT_SHARE * alpha)
        / SHIFT_SHARE
    )
    return shift_worse, shift_better


def _turned(r: Comparison) -> Comparison:
    """``r`` seen the other way round: better as worse (for the "improved" verdict)."""
    return replace(r, effect=1 - r.effect, change=-r.change, change_p90=-r.change_p90)


def _worse_by(
    r: Comparison,
    rank_significant: bool,
    shift_significant: bool,
    allowed: float,
    tolerance: float,
    min_effect: float,
) -> str:
    """Which test finds ``r`` worse ("rank", "median", or ""): the signed-rank test when
    significant with ``min_effect`` of the changed seeds worse and the median or p90 worse by
    more than ``allowed``; the median's shift test when significant with the median worse by
    more than ``tolerance``."""
    if rank_significant and r.effect >= min_effect and max(r.change, r.change_p90) > allowed:
        return "rank"
    if shift_significant and r.change > tolerance:
        return "median"
    return ""


def _signed_rank(d: np.ndarray, alternative: str) -> float:
    """One-sided Wilcoxon signed-rank p-value of the paired differences ``d``, the zeros
    dropped (1.0 when every difference is 0)."""
    if not np.any(d):
        return 1.0
    return float(wilcoxon(d, zero_method="wilcox", alternative=alternative).pvalue)


def _relative_change(base: float, current: float, sign: float) -> float:
    """How much worse ``current`` is than ``base`` relative to it (negative: better)."""
    if same(base, current):
        return 0.0
    if math.isinf(base) or math.isinf(current):
        return sign * (math.inf if current > base else -math.inf)
    return (
        sign * (current - base) / abs(base)
        if base
        else sign * math.copysign(math.inf, current - base)
    )


def model_guided_share(trace) -> dict[str, float]:
    """Per optimizer with a model, the share of a part's steps whose choice its model made:
    the trace's ``phase`` is ``search`` (``optfarm.oracle.contract.Suggestion``), not the initial
    design (``init``) nor a recurring job's re-run of its recommendation (``exploit``, Guindani's
    steps after its stopping band). Optimizers without a model (random search, Optuna's
    random sampler: ``Optimizer.has_model``) are left out."""
    optimizers = trace.column("optimizer").to_pylist()
    phases = trace.column("phase").to_pylist()
    modelled = {name: get_optimizer(name).has_model for name in set(optimizers)}
    steps: dict[str, list[int]] = {}
    for optimizer, phase in zip(optimizers, phases):
        if not modelled[optimizer]:
            continue
        counts = steps.setdefault(optimizer, [0, 0])
        counts[0] += phase == "search"
        counts[1] += 1
    return {o: guided / total for o, (guided, total) in sorted(steps.items())}


# -- the baseline file ------------------------------------------------------------------------
def merge_baseline(old: Mapping[str, Mapping], current: Mapping[str, Mapping]) -> dict:
    """``old`` with the seeds of ``current`` replaced or added, entry by entry (re-recording
    one part of the gate, or some seeds, keeps the others). An entry gates the pick (the
    recurring job's statistic) when ``current`` does and every seed it keeps holds the pick's
    trajectory area (the unfeasible executions): a part re-recorded before the others keeps
    it ungated until they are. A reach target only some kept seeds hold (one added to the
    gate since the others were recorded) is kept by none: it reads as "no baseline" until
    every seed is re-recorded."""
    out = {k: {**e, "seeds": dict(e["seeds"])} for k, e in old.items()}
    for k, e in current.items():
        entry = out.setdefault(k, {**e, "seeds": {}})
        entry["seeds"].update(e["seeds"])
        for flag, (first, _) in (("pick", PICK[e["metric"]][0]), ("recurring", RECURRING[0])):
            entry[flag] = bool(e.get(flag)) and all(
                first in values for values in entry["seeds"].values()
            )
        if not entry["recurring"]:
            del entry["recurring"]  # written only where it holds, as quality_values does
        entry.pop("absent", None)
        held = _held_qualities(entry, entry["seeds"], every=True)
        entry["seeds"] = {
            s: {q: v for q, v in values.items() if q in held}
            for s, values in entry["seeds"].items()
        }
    return out


def write_baseline(path: Path, values: Mapping[str, Mapping], spec: str) -> None:
    """JSON with per-seed values (inf written as "inf"), entries, seeds and metrics in sorted
    order (a re-record's diff shows only what moved), atomically replaced."""
    doc = {
        "version": BASELINE_VERSION,
        "spec": spec,
        "entries": {
            k: {
                "metric": e["metric"],
                "pick": bool(e.get("pick")),
                **({"recurring": True} if e.get("recurring") else {}),
                "seeds": {
                    str(s): {q: _encode(v) for q, v in sorted(vals.items())}
                    for s, vals in sorted(e["seeds"].items())
                },
            }
            for k, e in sorted(values.items())
        },
    }
    write_file_atomically(path, json.dumps(doc, indent=1) + "\n")


def read_baseline(path: Path) -> dict[str, dict[str, Any]]:
    """The entries of a baseline file, validated; BaselineError names what is wrong."""
    path = Path(path)
    return {key: _read_entry(path, key, e) for key, e in _baseline_entries(path).items()}


def _baseline_entries(path: Path) -> dict[str, Any]:
    """The ``entries`` of the baseline file at ``path``, as written: the file exists, is
    JSON, has this module's version and a non-empty mapping of entries."""
    if not path.is_file():
        raise BaselineError(f"baseline {path} does not exist (create it with --update-baseline)")
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise BaselineError(f"baseline {path} is not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("version") != BASELINE_VERSION:
        raise BaselineError(f"baseline {path}: 'version' must be {BASELINE_VERSION}")
    entries = doc.get("entries")
    if not isinstance(entries, dict) or not entries:
        raise BaselineError(f"baseline {path}: 'entries' must be a non-empty mapping")
    return entries


def _read_entry(path: Path, key: str, e: Any) -> dict[str, Any]:
    """One entry of a baseline file: its metric, whether it gates the pick and a recurring
    job's statistic, and per seed the values of its ``qualities``."""
    metric = e.get("metric") if isinstance(e, dict) else None
    if metric not in QUALITY:
        raise BaselineError(
            f"baseline {path}: entries.{key}.metric must be one of {sorted(QUALITY)}"
        )
    seeds = e.get("seeds")
    if not isinstance(seeds, dict) or not seeds:
        raise BaselineError(
            f"baseline {path}: entries.{key}.seeds must be a non-empty mapping seed -> values"
        )
    for flag in ("pick", "recurring"):
        if not isinstance(e.get(flag, False), bool):
            raise BaselineError(f"baseline {path}: entries.{key}.{flag} must be true or false")
    entry = {
        "metric": metric,
        "pick": e.get("pick", False),
        **({"recurring": True} if e.get("recurring") else {}),
        "seeds": {},
    }
    held = _held_qualities(entry, seeds, every=False)
    if len(held) < len(qualities(entry)):
        entry["absent"] = [q for q, _ in qualities(entry) if q not in held]
    for seed, vals in seeds.items():
        where = f"entries.{key}.seeds.{seed}"
        if not seed.lstrip("-").isdigit():
            raise BaselineError(f"baseline {path}: {where}: seed is not an integer")
        try:
            entry["seeds"][int(seed)] = {q: _decode(vals[q]) for q in held}
        except (KeyError, TypeError, ValueError) as exc:
            raise BaselineError(
                f"baseline {path}: {where}: missing or non-numeric value ({exc})"
            ) from None
    return entry


def _held_qualities(entry: Mapping, seeds: Mapping, every: bool) -> list[str]:
    """The entry's qualities kept for ``seeds`` ({seed: {quality: value}}): all but a reach
    target (``cost_to_*``, added to the gate after the seeds were recorded) that no seed holds
    (``every``: that some seed lacks). Such a target reads as absent: its rows say "no
    baseline" in ``compare`` until every seed is re-recorded."""
    holds = all if every else any
    return [
        q
        for q, _ in qualities(entry)
        if "cost_to_" not in q or holds(isinstance(v, Mapping) and q in v for v in seeds.values())
    ]


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
    cols = (
        "dataset / optimizer",
        "metric",
        "n",
        "changed",
        "base p50",
        "p50",
        "p50 chg",
        "p90 chg",
        "worse",
        "p (Holm)",
        "verdict",
    )
    cells = [
        (
            r.key,
            r.quality + ("" if r.better == "lower" else " (higher better)"),
            str(r.n),
            str(r.n_changed),
            _num(r.baseline_median),
            _num(r.current_median),
            _pct(r.change),
            _pct(r.change_p90),
            _num(r.effect),
            _num(r.p_holm),
            r.verdict,
        )
        for r in rows
    ]
    return "\n".join(aligned_lines(cols, cells))


def aligned_lines(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A plain-text table: the column names, a rule, the rows, each column as wide as its
    widest cell."""
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(columns)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(columns, widths)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in rows]
    return lines


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
