"""The papers' published numbers, for display beside ours in ``farm report``.

Each ``PaperNumber`` names the statistic of our report that measures the same thing (a key of
``optfarm.farm.report.analysis.group_stats``), the groups it applies to (a dataset pattern and
optimizer selectors), and the value the paper published. A number is shown only when the sweep holds
every group it needs, so a report says "paper vs ours" only where the experiment matches.

References (the values as each paper prints them):
  [Lynceus] Casimiro et al., ICDCS 2020, Sec. VI-C (Fig. 4-5: their exact statistics).
  [OBOL]    Casimiro et al., Reduzindo o Custo de Explorar Configuracoes..., Sec. 4 (Fig. 1-2).
  [TrimTuner] Mendes et al., MASCOTS 2020, Fig. 1-3.
  [Guindani] Guindani, Ardagna, Guglielmi, Table 1.
Published recommendation latencies (``PAPER_LATENCY``, ``paper_latency``) are shown by
``farm bench`` and the report's latency table:
  [Lynceus] Table II: average seconds per ``next()`` on RNN, Intel Xeon Gold 6138 with 20
      physical cores (Java); "similar values for CNN and Multilayer, since the cardinality of
      the search space is the same".
  [TrimTuner] Sec. V, 32-core VM on a Xeon Gold 6138 (Python 3.6). Table III: average minutes
      to recommend a configuration, average of the three data-sets, both TrimTuner variants
      with CEA at beta = 10%. Table IV: the same on RNN for each filtering heuristic (beta = 10%
      unless stated).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from optfarm.farm.run.targets import ACC_C_90, CNO_1_1, CNO_2, CNO_OPTIMUM

__all__ = [
    "FIG4_STAT",
    "PAPER_LATENCY",
    "PAPER_NUMBERS",
    "PAPER_TABLE1",
    "PaperLatency",
    "PaperNumber",
    "Selector",
    "paper_latency",
]

# [Guindani] Table 1: (unfeasible executions, ratio of unfeasible costs, normalised mean
# feasible cost) per variant.
PAPER_TABLE1 = {
    "Query26": {
        "a": (11.23, 0.36, 1.00),
        "b": (4.34, 0.14, 0.87),
        "c": (4.11, 0.13, 0.87),
        "d": (4.31, 0.14, 0.88),
    },
    "K-means": {
        "a": (10.52, 0.34, 1.00),
        "b": (5.74, 0.20, 1.00),
        "c": (5.93, 0.21, 1.01),
        "d": (5.96, 0.21, 1.00),
    },
}


@dataclass(frozen=True)
class Selector:
    """An optimizer (a regular expression over names) with (a subset of) its parameters,
    e.g. lynceus with la = 2."""

    optimizer: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, optimizer: str, params: Mapping[str, Any]) -> bool:
        return re.fullmatch(self.optimizer, optimizer) is not None and all(
            str(params.get(k)) == str(v) for k, v in self.params.items()
        )

    def __str__(self) -> str:
        if not self.params:
            return self.optimizer
        return f"{self.optimizer}[{','.join(f'{k}={v}' for k, v in self.params.items())}]"


@dataclass(frozen=True)
class PaperNumber:
    """One published value. Ours is ``stat`` of ``selector``'s group on a dataset matching
    ``datasets`` (a regular expression), divided by ``stat`` of ``baseline``'s group when a
    baseline is given (the papers state most results as ratios)."""

    paper: str
    where: str
    datasets: str
    quantity: str
    stat: str
    selector: Selector
    published: float
    baseline: Selector | None = None
    note: str = ""

    def applies_to(self, dataset: str) -> bool:
        return re.fullmatch(self.datasets, dataset) is not None


_TF = r"lynceus-(cnn|multilayer|rnn)"
# Lynceus Fig. 4's read-out (``optfarm.farm.report.analysis.paper_p90_curve``): the p90 exploration
# cost at which the p90-CNO curve first reaches the optimum (CNO = 1)
FIG4_STAT = f"fig4_p90_cost:{CNO_OPTIMUM}"
# the paper's Lynceus (Sec. VI-B, "Default settings"): LA = 2, gamma = 0.9, TG timeout; a sweep
# of Lynceus variants is compared with the paper's numbers through this one only
_LY = Selector("lynceus", {"la": 2, "gamma": 0.9, "timeout": "tg"})
_BO = Selector("eic-usd")
_GUINDANI_DATASETS = {"Query26": r"guindani-query26.*", "K-means": r"guindani-kmeans"}
_TT_GP, _TT_DT = Selector("trimtuner", {"model": "gp"}), Selector("trimtuner", {"model": "dt"})

PAPER_NUMBERS: tuple[PaperNumber, ...] = (
    # Lynceus Sec. VI-C, TF jobs, 100 runs, BO (= LA 0, EIc/USD) against Lynceus.
    # Fig. 4: the p90 CNO against the p90 exploration cost (per step, over runs), read where
    # each curve reaches the optimum (CNO = 1).
    PaperNumber(
        "Lynceus",
        "Sec. VI-C, Fig. 4c",
        r"lynceus-multilayer",
        "p90 exploration cost where the p90-CNO curve reaches CNO = 1, Lynceus ($)",
        FIG4_STAT,
        _LY,
        19.5,
        note="~$19.5",
    ),
    PaperNumber(
        "Lynceus",
        "Sec. VI-C, Fig. 4c",
        r"lynceus-multilayer",
        "p90 exploration cost where the p90-CNO curve reaches CNO = 1, BO ($)",
        FIG4_STAT,
        _BO,
        230.0,
        note="~$230",
    ),
    PaperNumber(
        "Lynceus",
        "Sec. VI-C, Fig. 4c",
        r"lynceus-multilayer",
        "p90 exploration cost where the p90-CNO curve reaches CNO = 1, BO / Lynceus",
        FIG4_STAT,
        _BO,
        11.0,
        baseline=_LY,
        note="more than 11x ($230 / $19.5)",
    ),
    PaperNumber(
        "Lynceus",
        "Sec. VI-C, Fig. 4a-b",
        r"lynceus-(cnn|rnn)",
        "p90 exploration cost where the p90-CNO curve reaches CNO = 1, BO / Lynceus",
        FIG4_STAT,
        _BO,
        2.0,
        baseline=_LY,
        note="~2x",
    ),
    # Fig. 5: CDFs over runs of the exploration cost to reach CNO <= 2 and <= 1.1, their
    # ratio at the 90th percentile.
    PaperNumber(
        "Lynceus",
        "Sec. VI-C, Fig. 5a",
        _TF,
        "p90 exploration cost to reach CNO<=2 (its CDF at 0.9), BO / Lynceus",
        f"reach_p90:{CNO_2}",
        _BO,
        2.7,
        baseline=_LY,
        note="~2.7x",
    ),
    PaperNumber(
        "Lynceus",
        "Sec. VI-C, Fig. 5b",
        _TF,
        "p90 exploration cost to reach CNO<=1.1 (its CDF at 0.9), BO / Lynceus",
        f"reach_p90:{CNO_1_1}",
        _BO,
        6.2,
        baseline=_LY,
        note="up to ~6.2x",
    ),
    PaperNumber(
        "Lynceus",
        "Sec. VI",
        r"scout-.*",
        "p90 exploration cost to reach CNO<=1.1, BO / Lynceus",
        f"reach_p90:{CNO_1_1}",
        _BO,
        1.6,
        baseline=_LY,
        note="BO spends ~60% more",
    ),
    PaperNumber(
        "Lynceus",
        "Sec. VI",
        r"cherrypick-.*",
        "p90 exploration cost to reach CNO<=1.1, BO / Lynceus",
        f"reach_p90:{CNO_1_1}",
        _BO,
        1.48,
        baseline=_LY,
        note="BO spends ~48% more",
    ),
    # Sec. VI-F, Fig. 8: "without using the timeout mechanism"
    PaperNumber(
        "Lynceus",
        "Sec. VI-F, Fig. 8",
        _TF,
        "p90 exploration cost to reach CNO<=1.1, LA=0 / LA=1 (no timeout)",
        f"reach_p90:{CNO_1_1}",
        Selector("lynceus", {"la": 0, "timeout": "none"}),
        5.0,
        baseline=Selector("lynceus", {"la": 1, "timeout": "none"}),
    ),
    # OBOL Sec. 4: TF (CNN) jobs, finite budget, median DOPT = CNO - 1 and NEX (Fig. 1-2).
    PaperNumber(
        "OBOL",
        "Sec. 4, Fig. 2",
        r"lynceus-cnn",
        "median DOPT of CherryPick-style EIc (budget 8-20 x mean cost)",
        "dopt_median",
        Selector("cherrypick(-trees)?"),
        0.18,
        note="stagnates at 18%",
    ),
    PaperNumber(
        "OBOL",
        "Sec. 4, Fig. 2",
        r"lynceus-cnn",
        "median DOPT of OBOL, depth 2, budget 20 x mean cost",
        "dopt_median",
        Selector("obol", {"la": 2}),
        0.0,
        note="optimum found in 50% of runs",
    ),
    PaperNumber(
        "OBOL",
        "Sec. 4, Fig. 1",
        r"lynceus-cnn",
        "median NEX, OBOL (depth 2) / CherryPick, budget 20 x mean cost",
        "nex_median",
        Selector("obol", {"la": 2}),
        1.35,
        baseline=Selector("cherrypick(-trees)?"),
        note="1.35x-2x across depths",
    ),
    # TrimTuner Fig. 1-2: cost and time to reach 90% of the feasible optimum's Accuracy_C,
    # averaged over runs as the paper does ("the average of 10 independent runs"), of each
    # optimizer's own recommendation (its incumbent, Sec. V), for all four compared: the
    # ``pick_`` statistics (optfarm.farm.report.analysis), not the credited tested configuration.
    *(
        PaperNumber(
            "TrimTuner",
            "Fig. 1-2",
            r"trimtuner-.*",
            f"{what} to reach 90% of the optimum (mean, own pick), {shown} / TrimTuner-{tt}",
            stat,
            Selector(base),
            value,
            baseline=sel,
            note="up to",
        )
        for tt, sel in (("GP", _TT_GP), ("DT", _TT_DT))
        for what, stat, shown, base, value in (
            ("exploration cost", f"pick_reach_mean:{ACC_C_90}", "EIc", "eic", 50.0),
            ("exploration cost", f"pick_reach_mean:{ACC_C_90}", "EIc/USD", "eic-usd(-gp)?", 10.0),
            ("exploration time", f"pick_reach_time_mean:{ACC_C_90}", "EIc", "eic", 65.0),
            (
                "exploration time",
                f"pick_reach_time_mean:{ACC_C_90}",
                "EIc/USD",
                "eic-usd(-gp)?",
                15.0,
            ),
        )
    ),
    # TrimTuner Fig. 3: the CEA filter against CMA-ES and Direct (TrimTuner's own pick).
    *(
        PaperNumber(
            "TrimTuner",
            "Fig. 3",
            r"trimtuner-.*",
            f"exploration cost to reach 90% of the optimum (mean, own pick), filter {f} / CEA",
            f"pick_reach_mean:{ACC_C_90}",
            Selector("trimtuner", {"filter": f}),
            value,
            baseline=Selector("trimtuner", {"filter": "cea"}),
        )
        for f, value in (("cmaes", 3.62), ("direct", 7.0))
    ),
    # Guindani et al. Table 1 (values kept in optfarm.farm.run.recurring_job): means over
    # repetitions.
    *(
        PaperNumber(
            "Guindani",
            "Table 1",
            _GUINDANI_DATASETS[job],
            f"{what}, variant {v.upper()}",
            stat,
            Selector("guindani", {"variant": v}),
            values[i],
            baseline=Selector("guindani", {"variant": "a"}) if i == 2 else None,
        )
        for job, variants in PAPER_TABLE1.items()
        for v, values in variants.items()
        for i, (what, stat) in enumerate(
            (
                ("unfeasible executions", "unfeasible_executions_mean"),
                ("ratio of unfeasible cost", "unfeasible_cost_ratio_mean"),
                ("mean feasible cost normalised to variant A", "mean_feasible_cost_mean"),
            )
        )
    ),
)


# -- recommendation latencies ------------------------------------------------------------
@dataclass(frozen=True)
class PaperLatency:
    """One published latency: applies to ``optimizer`` runs whose resolved parameters
    include ``params`` on datasets whose name starts with ``dataset_prefix``."""

    optimizer: str
    params: Mapping[str, Any]
    dataset_prefix: str
    seconds: float
    ref: str
    machine: str

    def matches(self, optimizer: str, params: Mapping[str, Any], dataset: str) -> bool:
        return (
            optimizer == self.optimizer
            and dataset.startswith(self.dataset_prefix)
            and all(k in params and _same(params[k], v) for k, v in self.params.items())
        )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


_XEON20 = "Xeon Gold 6138, 20 cores"
_XEON32 = "32-core VM on Xeon Gold 6138"
_MIN = 60.0

# Most specific first: the first entry that matches a row is its paper value.
PAPER_LATENCY: tuple[PaperLatency, ...] = (
    *(
        PaperLatency("lynceus", {"la": la}, "lynceus-", s, f"Lynceus Tab. II LA={la}", _XEON20)
        for la, s in ((0, 0.05), (1, 0.36), (2, 0.99), (3, 2.4))
    ),
    PaperLatency("eic-usd", {}, "lynceus-", 0.05, "Lynceus Tab. II LA=0 (EIc/USD)", _XEON20),
    # TrimTuner Table IV (RNN): GP / DT per filter
    *(
        PaperLatency(
            "trimtuner",
            {"model": model, "filter": filt, **extra},
            "trimtuner-rnn",
            minutes * _MIN,
            f"TrimTuner Tab. IV RNN {model.upper()} {label}",
            _XEON32,
        )
        for filt, extra, label, gp, dt in (
            ("none", {}, "no filter", 125.76, 3.69),
            ("cea", {"beta": 0.01}, "CEA 1%", 5.94, 1.07),
            ("cea", {"beta": 0.1}, "CEA 10%", 16.85, 1.72),
            ("cea", {"beta": 0.2}, "CEA 20%", 28.65, 2.05),
            ("direct", {}, "Direct", 36.18, 2.63),
            ("cmaes", {}, "CMA-ES", 30.87, 2.26),
            ("random", {}, "Random", 16.53, 1.62),
        )
        for model, minutes in (("gp", gp), ("dt", dt))
    ),
    # TrimTuner Table III (average of CNN, RNN, MLP; CEA 10%)
    PaperLatency(
        "trimtuner",
        {"model": "gp", "filter": "cea", "beta": 0.1},
        "trimtuner-",
        18.65 * _MIN,
        "TrimTuner Tab. III TT-GP",
        _XEON32,
    ),
    PaperLatency(
        "trimtuner",
        {"model": "dt", "filter": "cea", "beta": 0.1},
        "trimtuner-",
        1.36 * _MIN,
        "TrimTuner Tab. III TT-DT",
        _XEON32,
    ),
    PaperLatency("fabolas", {}, "trimtuner-", 13.96 * _MIN, "TrimTuner Tab. III FABOLAS", _XEON32),
    PaperLatency("eic", {}, "trimtuner-", 1.17 * _MIN, "TrimTuner Tab. III EIc", _XEON32),
    PaperLatency(
        "eic-usd-gp", {}, "trimtuner-", 1.17 * _MIN, "TrimTuner Tab. III EIc/USD", _XEON32
    ),
)


def paper_latency(optimizer: str, params: Mapping[str, Any], dataset: str) -> PaperLatency | None:
    """The published latency for this (optimizer, resolved params, dataset), or None."""
    return next((p for p in PAPER_LATENCY if p.matches(optimizer, params, dataset)), None)
