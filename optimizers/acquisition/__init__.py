"""Acquisition functions: small pure functions over predictive (mean, std) arrays."""

from .analytic import (
                       constrained_ei,
                       constraints_log_pf,
                       expected_improvement,
                       gauss_hermite,
                       incumbent_for_eic,
                       log_probability_of_feasibility,
                       probability_of_feasibility,
                       reference_without_feasible,
                       truncated_gaussian_mean,
)
from .cost_aware import bivariate_gauss_hermite, eic_on_cost, eic_per_cost, timeout_cap

__all__ = ["bivariate_gauss_hermite", "constrained_ei", "constraints_log_pf", "eic_on_cost",
           "eic_per_cost", "expected_improvement", "gauss_hermite", "incumbent_for_eic",
           "log_probability_of_feasibility", "probability_of_feasibility",
           "reference_without_feasible", "timeout_cap", "truncated_gaussian_mean"]
