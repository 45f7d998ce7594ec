"""Optuna's private API, the one door to it (``optfarm.oracle.dependency_api``): where its samplers
keep a trial's constraint values (``_CONSTRAINTS_KEY`` through the study's storage) and the
CMA-ES state ``CmaEsSampler`` pickles into a trial's system attributes. Every name is listed
in ``PRIVATE``; one that an upgrade dropped raises ``DependencyAPIError`` naming it. Optuna is
imported only when a function is called (``optfarm/optimizers/`` imports no peer library at import
time)."""

from __future__ import annotations

from collections.abc import Sequence

from optfarm.oracle.dependency_api import private, private_attribute

__all__ = ["PRIVATE", "set_constraints", "told_cma_state"]

_CONSTRAINED = "optuna.study._constrained_optimization"
PRIVATE = (
    (_CONSTRAINED, "_CONSTRAINTS_KEY"),
    ("optuna.samplers", "CmaEsSampler._restore_optimizer"),
    ("optuna.study", "Study"),  # its ``_storage``: set_constraints
    ("optuna.trial", "FrozenTrial"),  # its ``_trial_id``: set_constraints
)


def set_constraints(study, trial, values: Sequence[float]) -> None:
    """Store ``values`` as ``trial``'s constraint values, where Optuna's samplers store those
    of a ``constraints_func`` (and read them: feasibility, ``best_trials``)."""
    storage = private_attribute(study, "_storage")
    storage.set_trial_system_attr(
        private_attribute(trial, "_trial_id"),
        private(_CONSTRAINED, "_CONSTRAINTS_KEY"),
        tuple(values),
    )


def told_cma_state(sampler, trial):
    """The CMA-ES state ``sampler`` (a ``CmaEsSampler``) stored with ``trial`` (pickled in its
    system attributes when that trial's ask told CMA-ES a generation), or None."""
    return private_attribute(sampler, "_restore_optimizer")([trial])
