"""The optimizer contract: what an optimizer suggests, what running it reveals, what the
optimizer would deploy (ARCHITECTURE.md, "One run's data flow").

    s = optimizer.suggest()          # Suggestion: what to run, at which size, under which cap
    obs = run_the_job(s)             # Observation: what the run cost, took and measured
    optimizer.observe(s, obs)
    optimizer.recommend()            # Recommendation: what it would deploy now

Both sides import these types from here: the optimizers (``optfarm/optimizers/``), the oracle that
replays a dataset to them (``optfarm.oracle.oracle``), the farm's run loop
(``optfarm.farm.run.loop``) and the tools a user drives them from (``optfarm/integrations/``). Every
field one side acts upon is typed; ``Suggestion.info`` is for reading only (logs, traces), never
read back as state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["METRICS", "Observation", "Recommendation", "Suggestion", "TimeoutPlan"]

# the metrics every job measures (accuracy: ML jobs), each a field of Observation; any other
# measured metric is named in Observation.metrics (``DatasetMeta.measured``)
METRICS = ("time", "cost", "accuracy")


@dataclass(frozen=True)
class Observation:
    """What running a configuration revealed.

    ``time`` and ``cost`` are what was spent (for a run stopped by a time cap: the cap and
    the cost of running until it). ``accuracy`` is NaN where not measured (or not yet known
    when stopped). ``metrics`` holds the other named metrics the job measures (a quality
    metric, a latency percentile, energy: ``DatasetMeta.measured``), unknown for a run
    stopped by its cap. ``accuracy_curve`` holds the accuracy points measured on the way
    (one every ``DatasetMeta.curve_interval_s``; for a stopped run, those before the stop).

    What the benchmark loop grants a suggestion's requests (``Suggestion``): ``snapshots``
    {s: Observation} of the smaller dataset sizes the run measured on its way, and
    ``full_cost``, what a run its cap stopped would have cost in full (None: not revealed).
    """

    time: float
    cost: float
    accuracy: float = math.nan
    timed_out: bool = False
    metrics: Mapping[str, float] = field(default_factory=dict)
    accuracy_curve: tuple[float, ...] = ()
    snapshots: Mapping[float, Observation] = field(default_factory=dict)
    full_cost: float | None = None

    def value(self, metric: str) -> float:
        """The observed ``metric`` (time, cost, accuracy or a named metric); NaN if unknown."""
        if metric in METRICS:
            return getattr(self, metric)
        return float(self.metrics.get(metric, math.nan))


@dataclass(frozen=True)
class TimeoutPlan:
    """What an optimizer learns from a run its time cap stops [Lynceus Sec. V-B, VI-E]: the
    timeout ``policy`` (``tg``, ``ideal``, ``no-info``, ``max-cost``, ``linear``) and what the
    cap was set from: the cost model's prediction for the configuration (``cost_mu``,
    ``cost_sigma``) and the incumbent's cost."""

    policy: str
    cost_mu: float
    cost_sigma: float
    incumbent_cost: float


@dataclass(frozen=True)
class Suggestion:
    """What to run next: a configuration at a dataset size, an optional time cap (timeout
    policies), the phase (``init``: bootstrap design, ``search``: model-guided, ``exploit``:
    a recurring job re-running its best configuration), and why (acquisition values and the
    like, in ``info``: for reading, never acted upon).

    ``timeout`` says, with a ``time_cap``, what the optimizer will learn if the cap stops the
    run (``TimeoutPlan``). Two requests the benchmark loop (``optfarm.farm.run.loop.execute``)
    grants in simulation:

    - ``snapshots``: smaller dataset sizes the same training run also measures on its way
      (TrimTuner's bootstrap); they are not charged and come back in
      ``observation.snapshots`` as {s: Observation};
    - ``reveal_full_cost`` (Lynceus' IDEAL timeout policy): if the time cap stops the run, it
      is charged as capped and ``observation.full_cost`` tells what the full run would have
      cost.

    ``margin`` says how clearly an argmax over acquisition values won
    (``optfarm.optimizers.base.decision_margin``); inf when the choice was not such an argmax
    (bootstrap, random draws) or is not reported.
    """

    config_id: int
    fidelity: float = 1.0
    time_cap: float | None = None
    phase: Literal["init", "search", "exploit"] = "search"
    info: Mapping[str, Any] = field(default_factory=dict)
    snapshots: tuple[float, ...] = ()
    reveal_full_cost: bool = False
    margin: float = math.inf
    timeout: TimeoutPlan | None = None


@dataclass(frozen=True)
class Recommendation:
    """The configuration an optimizer would deploy now, at the dataset size it would run it
    (1.0 but for optimizers over dataset sizes such as Nephele); the run loop scores it."""

    config_id: int
    fidelity: float = 1.0
