"""Acquisition functions: small pure functions over predictive (mean, std) arrays."""

from .analytic import (constrained_ei, expected_improvement, gauss_hermite, incumbent_for_eic,
                       log_probability_of_feasibility, probability_of_feasibility,
                       truncated_gaussian_mean)

__all__ = ["constrained_ei", "expected_improvement", "gauss_hermite", "incumbent_for_eic",
           "log_probability_of_feasibility", "probability_of_feasibility",
           "truncated_gaussian_mean"]
