"""Full-data Bayesian optimisation baselines of TrimTuner [TrimTuner Sec. IV] with GP models:

- ``eic``: CherryPick [Alipourfard17]: GP (Matern 5/2) models of the objective and of every
  constrained metric at s = 1 (any measured metric: accuracy, time, cost, or a named one
  such as ``rmsd`` or ``p95_ms``), constrained expected improvement EIc = EI x P(feasible), 4 LHS
  initial configurations;
- ``eic-usd-gp``: EIc per dollar, EIc / predicted cost of the run (Lynceus' "EIc/USD" with a GP
  instead of trees);
- ``bo-ei``: plain EI, constraints ignored while searching.

Models are on log(1 - accuracy) / log(cost) (``models/targets.py``), so every objective is a
minimisation of the model-scale value z. EI's reference y* is the best observed feasible z; with
none feasible yet, the worst observed + 3 x the largest std (Lynceus' rule,
``incumbent_for_eic``). Recommendation: the best configuration observed feasible; before any,
the model's incumbent (best predicted among predicted feasible). The models' predictions at
the untested configurations are made once per fit: that recommendation and the next suggestion
share them (on a table of 10^4 configurations a prediction is most of a step); beyond 100
observations the GPs keep their variances at every configuration from fit to fit
(``GaussianProcess.predict_rows``). A run stopped at
its time cap (a board's deadline) is censored: its time and cost are fed to the models at
``PAR_K`` = 2 times what it spent (``models/targets.py``), so the time model reads it as
infeasible.

References:
    [Alipourfard17] Alipourfard et al. CherryPick, NSDI 2017.
    [TrimTuner] Mendes et al. TrimTuner, MASCOTS 2020, Sec. IV (EIc and EIc/USD baselines).
    [Lynceus] Casimiro et al. Lynceus, ICDCS 2020 (EIc/USD = lookahead 0).
"""

from __future__ import annotations

import numpy as np

from .acquisition.analytic import (
    constraints_log_pf,
    expected_improvement,
    incumbent_for_eic,
)
from .acquisition.incumbent import incumbent
from .base import (
    MemoryUse,
    Optimizer,
    Param,
    Recommendation,
    Suggestion,
    decision_margin,
    init_share,
    stopped_at_cap,
)
from .blas import single_threaded
from .models.gp import GaussianProcess
from .models.targets import Targets, to_model_scale
from .seeds import drawn_seed

__all__ = ["EIc", "EIcUSDGP", "BoEI"]


class EIc(Optimizer):
    """CherryPick-style constrained EI over untested configurations at s = 1."""

    name = "eic"
    summary = "GP + constrained EI at full data size (CherryPick), 4 LHS points"
    memory = MemoryUse(fixed=64e6, per_config=1e3)  # docs/results/memory.md
    params = (
        Param(
            "n_init",
            4,
            "initial configurations by LHS (at most init_share of the run's evaluations)",
            low=1,
        ),
        init_share(),
        Param(
            "hyper",
            "mcmc",
            "GP hyperparameters: emcee samples or maximum likelihood",
            choices=("mcmc", "ml"),
        ),
        Param("burn_in", 100, "emcee burn-in steps (first fit)", low=0),
        Param("chain_length", 100, "emcee steps per fit", low=1),
        Param(
            "stop_ratio",
            0.0,
            "stop once max EI < this x |y*| after 6 runs, one model-guided (0: never)",
            low=0.0,
        ),
    )
    per_cost = False
    constrained = True

    @classmethod
    def stops_itself(cls, config) -> bool:
        return config["stop_ratio"] > 0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._init = self.lhs_configs(self.initial_design(self.config["n_init"]))
        self._model_rng = np.random.default_rng(drawn_seed(self.rng))
        self._targets = Targets(self.problem, self._make_model)
        # (observations fitted, untested configurations, the models' predictions there)
        self._untested_pred: tuple[int, np.ndarray, dict] | None = None

    def _make_model(self, basis: str):
        cfg = self.config
        return GaussianProcess(
            hyper=cfg["hyper"],
            burn_in=cfg["burn_in"],
            chain_length=cfg["chain_length"],
            seed=self._model_rng,
        )

    @single_threaded
    def _observe(self, suggestion, observation) -> None:
        ids = [s.config_id for s, _ in self.history]
        observed = {
            m: np.array([o.value(m) for _, o in self.history]) for m in self._targets.metrics
        }
        censored = np.array([stopped_at_cap(s, o) for s, o in self.history])
        self._targets.fit(self.space.features[ids], observed, censored)

    @single_threaded
    def suggest(self) -> Suggestion | None:
        untested = np.flatnonzero(~self.tested())
        if len(untested) == 0:
            return self.stopped("exhausted")
        if self.spent >= self.problem.budget:
            return self.stopped("budget")
        if len(self.history) < len(self._init):
            return Suggestion(self._init[len(self.history)], 1.0, phase="init")
        acq, ei, y_star = self.acquisition(untested)
        best = int(np.argmax(acq))
        if (
            self.config["stop_ratio"] > 0
            and len(self.history) >= max(6, len(self._init) + 1)  # CherryPick's N, a guided run
            and ei[best] < self.config["stop_ratio"] * abs(y_star)
        ):
            return self.stopped("converged")
        return Suggestion(
            int(untested[best]),
            1.0,
            phase="search",
            info={"acquisition": float(acq[best])},
            margin=decision_margin(acq),
        )

    def _untested_predictions(self) -> tuple[np.ndarray, dict]:
        """The untested configurations and the models' {metric: (mean, std)} there, predicted
        once per fit."""
        if self._untested_pred is None or self._untested_pred[0] != len(self.history):
            ids = np.flatnonzero(~self.tested())
            pred = self._targets.predict_rows(self.space.features, ids)
            self._untested_pred = (len(self.history), ids, pred)
        return self._untested_pred[1], self._untested_pred[2]

    def acquisition(self, ids: np.ndarray):
        """(acquisition, EI, y*) over the configurations ``ids``, vectorised."""
        t = self._targets
        untested, pred = self._untested_predictions()
        if not np.array_equal(ids, untested):
            pred = t.predict(self.space.features[ids])
        mu, sd = pred[t.objective]
        z = to_model_scale(t.objective, [o.value(t.objective) for _, o in self.history])
        feasible = [self.observed_feasible(o) for _, o in self.history]
        y_star = incumbent_for_eic(z, feasible, sd)
        ei = expected_improvement(mu, sd, y_star)
        acq = ei * np.exp(constraints_log_pf(t.constraints, pred)) if self.constrained else ei
        if self.per_cost:
            acq = acq / np.exp(pred["cost"][0])
        return acq, ei, y_star

    @single_threaded
    def recommend(self) -> Recommendation | None:
        best = self.recommend_best_observed()
        if best is not None or not self.history:
            return best
        pred = self._every_prediction()
        log_pf = constraints_log_pf(self._targets.constraints, pred)
        return Recommendation(incumbent(pred[self._targets.objective][0], log_pf, 0.5))

    def _every_prediction(self) -> dict:
        """{metric: (mean, std)} at every configuration: the untested ones' shared with the
        next suggestion, the tested ones' predicted apart."""
        untested, shared = self._untested_predictions()
        tested = np.flatnonzero(self.tested())
        apart = self._targets.predict(self.space.features[tested])
        pred = {}
        for m, (mean, std) in shared.items():
            every = np.empty((2, self.space.n_configs))
            every[:, untested] = mean, std
            every[:, tested] = apart[m]
            pred[m] = (every[0], every[1])
        return pred


class EIcUSDGP(EIc):
    """EIc per predicted dollar (GP models)."""

    name = "eic-usd-gp"
    summary = "GP + constrained EI / predicted cost at full data size"
    per_cost = True


class BoEI(EIc):
    """Plain EI (constraints ignored while searching; the recommendation still uses them)."""

    name = "bo-ei"
    summary = "GP + expected improvement at full data size, no constraints"
    constrained = False
