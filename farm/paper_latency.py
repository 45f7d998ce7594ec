"""Recommendation latencies the papers report, to print next to ours (``farm bench``).

References:
    [Lynceus] Casimiro et al., ICDCS 2020 (seeds/002), Table II: average seconds per
        ``next()`` on RNN, Intel Xeon Gold 6138 with 20 physical cores (Java); "similar
        values for CNN and Multilayer, since the cardinality of the search space is the same".
    [TrimTuner] Mendes et al., MASCOTS 2020 (seeds/001), Sec. V, 32-core VM on a Xeon Gold
        6138 (Python 3.6). Table III: average minutes to recommend a configuration, average
        of the three data-sets, both TrimTuner variants with CEA at beta = 10%. Table IV: the
        same on RNN for each filtering heuristic (beta = 10% unless stated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["PaperLatency", "PAPER_LATENCY", "paper_latency"]


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
        return (optimizer == self.optimizer and dataset.startswith(self.dataset_prefix)
                and all(k in params and _same(params[k], v) for k, v in self.params.items()))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


_XEON20 = "Xeon Gold 6138, 20 cores"
_XEON32 = "32-core VM on Xeon Gold 6138"
_MIN = 60.0

# Most specific first: the first entry that matches a row is its paper value.
PAPER_LATENCY: tuple[PaperLatency, ...] = (
    *(PaperLatency("lynceus", {"la": la}, "lynceus-", s, f"Lynceus Tab. II LA={la}", _XEON20)
      for la, s in ((0, 0.05), (1, 0.36), (2, 0.99), (3, 2.4))),
    PaperLatency("eic-usd", {}, "lynceus-", 0.05, "Lynceus Tab. II LA=0 (EIc/USD)", _XEON20),
    # TrimTuner Table IV (RNN): GP / DT per filter
    *(PaperLatency("trimtuner", {"model": model, "filter": filt, **extra}, "trimtuner-rnn",
                   minutes * _MIN, f"TrimTuner Tab. IV RNN {model.upper()} {label}", _XEON32)
      for filt, extra, label, gp, dt in (
          ("none", {}, "no filter", 125.76, 3.69),
          ("cea", {"beta": 0.01}, "CEA 1%", 5.94, 1.07),
          ("cea", {"beta": 0.1}, "CEA 10%", 16.85, 1.72),
          ("cea", {"beta": 0.2}, "CEA 20%", 28.65, 2.05),
          ("direct", {}, "Direct", 36.18, 2.63),
          ("cmaes", {}, "CMA-ES", 30.87, 2.26),
          ("random", {}, "Random", 16.53, 1.62))
      for model, minutes in (("gp", gp), ("dt", dt))),
    # TrimTuner Table III (average of CNN, RNN, MLP; CEA 10%)
    PaperLatency("trimtuner", {"model": "gp", "filter": "cea", "beta": 0.1}, "trimtuner-",
                 18.65 * _MIN, "TrimTuner Tab. III TT-GP", _XEON32),
    PaperLatency("trimtuner", {"model": "dt", "filter": "cea", "beta": 0.1}, "trimtuner-",
                 1.36 * _MIN, "TrimTuner Tab. III TT-DT", _XEON32),
    PaperLatency("fabolas", {}, "trimtuner-", 13.96 * _MIN, "TrimTuner Tab. III FABOLAS",
                 _XEON32),
    PaperLatency("eic", {}, "trimtuner-", 1.17 * _MIN, "TrimTuner Tab. III EIc", _XEON32),
    PaperLatency("eic-usd-gp", {}, "trimtuner-", 1.17 * _MIN,
                 "TrimTuner Tab. III EIc/USD", _XEON32),
)


def paper_latency(optimizer: str, params: Mapping[str, Any], dataset: str
                  ) -> PaperLatency | None:
    """The published latency for this (optimizer, resolved params, dataset), or None."""
    return next((p for p in PAPER_LATENCY if p.matches(optimizer, params, dataset)), None)
