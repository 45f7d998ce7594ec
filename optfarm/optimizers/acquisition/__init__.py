"""Acquisition functions: small pure functions over predictive (mean, std) arrays."""

from .analytic import (
    constraints_log_pf,
    expected_improvement,
    gauss_hermite,
    incumbent_for_eic,
    log_probability_of_feasibility,
    reference_without_feasible,
    truncated_gaussian_mean,
)
from .cost_aware import timeout_cap

__all__ = [
    "constraints_log_pf",
    "expected_improvement",
    "gauss_hermite",
    "incumbent_for_eic",
    "log_probability_of_feasibility",
    "reference_without_feasible",
    "timeout_cap",
    "truncated_gaussian_mean",
]
