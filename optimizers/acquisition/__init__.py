"""Acquisition functions: small pure functions over predictive (mean, std) arrays."""

from .analytic import (
                       constrained_ei,
                       expected_improvement,
                       gauss_hermite,
                       incumbent_for_eic,
                       log_probability_of_feasibility,
                       probability_of_feasibility,
                       truncated_gaussian_mean,
)
from .cost_aware import bivariate_gauss_hermite, eic_on_cost, eic_per_cost, timeout_cap

__all__ = ["bivariate_gauss_hermite", "constrained_ei", "eic_on_cost", "eic_per_cost",
           "expected_improvement", "gauss_hermite", "incumbent_for_eic",
           "log_probability_of_feasibility", "probability_of_feasibility", "timeout_cap",
           "truncated_gaussian_mean"]
