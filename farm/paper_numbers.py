"""The papers' published numbers, for display beside ours in ``farm report``.

Each ``PaperNumber`` names the statistic of our report that measures the same thing (a key of
``farm.report.group_stats``), the groups it applies to (a dataset pattern and optimizer
selectors), and the value the paper published. A number is shown only when the sweep holds
every group it needs, so a report says "paper vs ours" only where the experiment matches.

References (see ``../shared/ALGORITHMS.md``, which collects these values):
  [Lynceus] Casimiro et al., ICDCS 2020, Sec. VI (Fig. 4-5).
  [OBOL]    Casimiro et al., Reduzindo o Custo de Explorar Configuracoes..., Sec. 4 (Fig. 1-2).
  [TrimTuner] Mendes et al., MASCOTS 2020, Fig. 1-3.
  [Guindani] Guindani, Ardagna, Guglielmi, Table 1.
Published recommendation latencies (Lynceus Table II, TrimTuner Tables III-IV) are in
``farm.paper_latency``; the report's latency table shows them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .guindani_metrics import PAPER_TABLE1

__all__ = ["PAPER_NUMBERS", "PaperNumber", "Selector"]


@dataclass(frozen=True)
class Selector:
    """An optimizer (a regular expression over names) with (a subset of) its parameters,
    e.g. lynceus with la = 2."""

    optimizer: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, optimizer: str, params: Mapping[str, Any]) -> bool:
        return re.fullmatch(self.optimizer, optimizer) is not None and all(
            str(params.get(k)) == str(v) for k, v in self.params.items())

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
_LY, _BO = Selector("lynceus"), Selector("eic-usd")
_GUINDANI_DATASETS = {"Query26": r"guindani-query26.*", "K-means": r"guindani-kmeans"}
_TT_GP, _TT_DT = Selector("trimtuner", {"model": "gp"}), Selector("trimtuner", {"model": "dt"})

PAPER_NUMBERS: tuple[PaperNumber, ...] = (
    # Lynceus Sec. VI: TF jobs, BO (= LA 0, EIc/USD) vs Lynceus, CDF of exploration cost (Fig. 5).
    PaperNumber("Lynceus", "Sec. VI, Fig. 5", _TF,
                "p90 exploration cost to reach CNO<=2, BO / Lynceus", "reach_p90:cno<=2",
                _BO, 2.7, baseline=_LY),
    PaperNumber("Lynceus", "Sec. VI, Fig. 5", _TF,
                "p90 exploration cost to reach CNO<=1.1, BO / Lynceus", "reach_p90:cno<=1.1",
                _BO, 6.2, baseline=_LY),
    PaperNumber("Lynceus", "Sec. VI, Fig. 4", r"lynceus-multilayer",
                "exploration cost for the p90 CNO to reach the optimum, Lynceus ($)",
                "reach_p90:cno<=1", _LY, 19.5, note="read from the figure (~)"),
    PaperNumber("Lynceus", "Sec. VI, Fig. 4", r"lynceus-multilayer",
                "exploration cost for the p90 CNO to reach the optimum, BO ($)",
                "reach_p90:cno<=1", _BO, 230.0, note="read from the figure (~)"),
    PaperNumber("Lynceus", "Sec. VI, Fig. 4", r"lynceus-(cnn|rnn)",
                "exploration cost to reach the optimum (p90), BO / Lynceus", "reach_p90:cno<=1",
                _BO, 2.0, baseline=_LY, note="~2x"),
    PaperNumber("Lynceus", "Sec. VI", r"scout-.*",
                "p90 exploration cost to reach CNO<=1.1, BO / Lynceus", "reach_p90:cno<=1.1",
                _BO, 1.6, baseline=_LY, note="BO spends ~60% more"),
    PaperNumber("Lynceus", "Sec. VI", r"cherrypick-.*",
                "p90 exploration cost to reach CNO<=1.1, BO / Lynceus", "reach_p90:cno<=1.1",
                _BO, 1.48, baseline=_LY, note="BO spends ~48% more"),
    PaperNumber("Lynceus", "Sec. VI", _TF,
                "p90 exploration cost to reach CNO<=1.1, LA=0 / LA=1 (no timeout)",
                "reach_p90:cno<=1.1", Selector("lynceus", {"la": 0}), 5.0,
                baseline=Selector("lynceus", {"la": 1})),
    # OBOL Sec. 4: TF (CNN) jobs, finite budget, median DOPT = CNO - 1 and NEX (Fig. 1-2).
    PaperNumber("OBOL", "Sec. 4, Fig. 2", r"lynceus-cnn",
                "median DOPT of CherryPick-style EIc (budget 8-20 x mean cost)", "dopt_median",
                Selector("cherrypick(-trees)?"), 0.18, note="stagnates at 18%"),
    PaperNumber("OBOL", "Sec. 4, Fig. 2", r"lynceus-cnn",
                "median DOPT of OBOL, depth 2, budget 20 x mean cost", "dopt_median",
                Selector("obol", {"la": 2}), 0.0,
                note="optimum found in 50% of runs"),
    PaperNumber("OBOL", "Sec. 4, Fig. 1", r"lynceus-cnn",
                "median NEX, OBOL (depth 2) / CherryPick, budget 20 x mean cost", "nex_median",
                Selector("obol", {"la": 2}), 1.35,
                baseline=Selector("cherrypick(-trees)?"), note="1.35x-2x across depths"),
    # TrimTuner Fig. 1-2: cost and time to reach 90% of the feasible optimum's Accuracy_C,
    # averaged over runs as the paper does ("the average of 10 independent runs").
    *(PaperNumber("TrimTuner", "Fig. 1-2", r"trimtuner-.*",
                  f"{what} to reach 90% of the optimum (mean), {shown} / TrimTuner-{tt}", stat,
                  Selector(base), value, baseline=sel, note="up to")
      for tt, sel in (("GP", _TT_GP), ("DT", _TT_DT))
      for what, stat, shown, base, value in (
          ("exploration cost", "reach_mean:acc_c>=0.9opt", "EIc", "eic", 50.0),
          ("exploration cost", "reach_mean:acc_c>=0.9opt", "EIc/USD", "eic-usd(-gp)?", 10.0),
          ("exploration time", "reach_time_mean:acc_c>=0.9opt", "EIc", "eic", 65.0),
          ("exploration time", "reach_time_mean:acc_c>=0.9opt", "EIc/USD", "eic-usd(-gp)?",
           15.0))),
    # TrimTuner Fig. 3: the CEA filter against CMA-ES and Direct.
    *(PaperNumber("TrimTuner", "Fig. 3", r"trimtuner-.*",
                  f"exploration cost to reach 90% of the optimum (mean), filter {f} / CEA",
                  "reach_mean:acc_c>=0.9opt", Selector("trimtuner", {"filter": f}), value,
                  baseline=Selector("trimtuner", {"filter": "cea"}))
      for f, value in (("cmaes", 3.62), ("direct", 7.0))),
    # Guindani et al. Table 1 (values kept in farm.guindani_metrics): means over repetitions.
    *(PaperNumber("Guindani", "Table 1", _GUINDANI_DATASETS[job], f"{what}, variant {v.upper()}",
                  stat, Selector("guindani", {"variant": v}), values[i],
                  baseline=Selector("guindani", {"variant": "a"}) if i == 2 else None)
      for job, variants in PAPER_TABLE1.items() for v, values in variants.items()
      for i, (what, stat) in enumerate((
          ("unfeasible executions", "unfeasible_executions_mean"),
          ("ratio of unfeasible cost", "unfeasible_cost_ratio_mean"),
          ("mean feasible cost normalised to variant A", "mean_feasible_cost_mean")))),
)
