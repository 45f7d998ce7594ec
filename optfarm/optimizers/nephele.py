"""Nephele: Lynceus extended with the dataset-size dimension [Mendes19 ch. 3, 6].

Problem: min C(x, s) s.t. A(x, s) >= A_min, T(x, s) <= T_max (time on the cost model:
C <= T_max U(x)), exploration spend <= B. Candidates are every untested (configuration, s)
pair; the model inputs are the configuration features plus s on a normalised log2 scale
(``SearchSpace.feature_rows``). An initial budget B_init is spent on random pairs; then each
step runs the look-ahead of Lynceus (``optfarm.optimizers.lookahead``) with two bagging ensembles of
5 trees (cost and accuracy), the bivariate Gauss-Hermite quadrature (3 nodes on cost x 1 on
accuracy), gamma = 0.9 and a default horizon of 0, and picks the argmax of reward per cost.
No timeouts. It stops when the budget is spent (Alg. 2; Lynceus' marginal-reward stop is off
by default, ``stop_threshold``). The recommendation is the cheapest tested (x, s) observed to
meet the constraints, at its dataset size (the run loop computes its CNO at that s).

References:
    [Mendes19] P. Mendes. Leveraging subsampling techniques to optimize machine learning jobs
        in the cloud. MSc thesis, IST Lisbon, 2019: ch. 3 (Nephele), ch. 6 (evaluation).
    [Lynceus] Casimiro et al., ICDCS 2020 (the look-ahead it extends).
"""

from __future__ import annotations

import math

import numpy as np

from .base import MemoryUse, Param, Recommendation, Suggestion, derive, fixed
from .lynceus import Lynceus

__all__ = ["Nephele"]


class Nephele(Lynceus):
    """Nephele [Mendes19 ch. 3]: see the module docstring."""

    name = "nephele"
    summary = "Lynceus over (configuration, dataset size) with accuracy and time constraints"
    uses_fidelity = True
    memory = MemoryUse(fixed=80e6, per_config=500)  # docs/results/memory.md
    recommends_fidelity = True
    # Lynceus' table (its ablation switches too), with what Nephele does not do fixed: no
    # timeouts (so no curve extrapolation) and no LHS bootstrap (B_init of random pairs)
    params = (
        *derive(
            Lynceus.params,
            la={"default": 0, "doc": "look-ahead horizon (extra steps after the first)"},
            timeout={**fixed("none"), "doc": "no timeouts in Nephele"},
            n_trees={"default": 5, "doc": "trees in each bagging ensemble (cost, accuracy)"},
            n_init={**fixed(0), "doc": "no bootstrap design: b_init is spent instead"},
            init={**fixed("random"), "doc": "random untested (x, s) pairs until b_init"},
            target_accuracy=fixed(0.85),
            curve_interval_s=fixed(30.0),
            stop_threshold={
                "default": 0.0,
                "doc": "stop when every EIc is below this x incumbent cost (0: the thesis', "
                "only the budget stops it, Alg. 2)",
            },
        ),
        Param("k_acc", 1, "Gauss-Hermite nodes on the simulated accuracy", low=1, high=10),
        Param(
            "b_init",
            5.0,
            "initial budget spent on random (x, s) samples ($5 CNN, $1 RNN, $2 MLP in the thesis)",
            low=0.0,
        ),
    )

    def _setup_candidates(self) -> None:
        """Every (configuration, dataset size) pair."""
        fids = np.asarray(self.space.fidelities, dtype=float)
        n = self.space.n_configs
        self._cand_config = np.repeat(np.arange(n), len(fids))
        self._cand_fid = np.tile(fids, n)
        self._features = np.ascontiguousarray(
            self.space.feature_rows(self._cand_config, self._cand_fid), dtype=float
        )
        self._price = np.ascontiguousarray(self.space.price_per_s[self._cand_config], dtype=float)

    def _k_acc(self) -> int:
        return self.config["k_acc"]

    def _candidate(self, config_id: int, fidelity: float) -> int:
        fids = self.space.fidelities
        j = int(np.argmin(np.abs(np.asarray(fids) - fidelity)))
        if not math.isclose(fids[j], fidelity, rel_tol=1e-9):
            raise ValueError(f"{self.name}: fidelity {fidelity!r} is not one of {list(fids)}")
        return int(config_id) * len(fids) + j

    def suggest(self) -> Suggestion | None:
        """Random untested pairs until B_init is spent, then Lynceus' NextConfig."""
        remaining = self.problem.budget - self.spent
        if remaining <= 0:
            return self.stopped("budget")
        if not self._untested.any():
            return self.stopped("exhausted")
        if self.spent < self.config["b_init"] or not self._cost_y or not self._acc_y:
            cand = int(self.rng.choice(np.flatnonzero(self._untested)))
            return self._suggestion(cand, phase="init")
        return self.next_config(remaining)

    def _best_pair(self) -> tuple[int, float, float] | None:
        """(config_id, fidelity, cost) of the cheapest run observed to meet the constraints."""
        best = None
        for s, o in self.history:
            if self.observed_feasible(o) and (best is None or o.cost < best[2]):
                best = (s.config_id, s.fidelity, o.cost)
        return best

    def _incumbent_cost(self) -> float:
        best = self._best_pair()
        return math.inf if best is None else best[2]

    def recommend(self) -> Recommendation | None:
        """The cheapest tested (config_id, fidelity) observed to meet the constraints."""
        best = self._best_pair()
        return None if best is None else Recommendation(best[0], best[1])
