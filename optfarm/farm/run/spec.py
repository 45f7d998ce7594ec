"""A run specification: which optimizer, with which parameters, on which dataset and problem,
with which seed and limits. Its ``run_key`` keys resumable sweeps, MLflow runs and ``farm
sync``: a hash stable across machines and sessions, and across optimizer releases that add a
parameter (only the parameters set away from their defaults are hashed, with the optimizer's
``version``, which is bumped when its results change on purpose)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from optfarm.oracle.dataset import Dataset
from optfarm.oracle.problem import (
    Constraint,
    Objective,
    Problem,
    ProblemError,
    parse_constraint,
)

__all__ = ["MAX_SEED", "RunSpec", "changed_params", "problem_for", "run_words", "spec_key"]

MAX_SEED = 2**32 - 1  # the largest seed: traces store it as int64, numpy's generators take it


@dataclass(frozen=True)
class RunSpec:
    dataset: str
    optimizer: str
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    budget: float | None = None  # exploration budget; None: the dataset's (inf)
    iterations: int | None = None  # max evaluations, bootstrap included
    objective: str | None = None  # e.g. "min cost"; None: the dataset's
    constraints: tuple[str, ...] | None = None  # e.g. ("time<=300",); None: the dataset's
    aggregate: str = "sample"  # repeated measurements: "sample" or "mean"
    until: str | None = None  # stop once the incumbent meets this REACH_TARGETS label
    deadline: bool = False  # stop every run at the problem's deadline (Stepper)
    # the evaluations the run is planned for (a board's: optfarm.farm.sweep.board_spec): its
    # initial design takes at most ``init_share`` of them; unlike ``iterations``, no stop
    planned_evaluations: int | None = None

    def problem(self, dataset: Dataset) -> Problem:
        """The dataset's default problem with this spec's overrides (``problem_for``)."""
        return problem_for(dataset, self.objective, self.constraints, self.budget)

    def resolved(self) -> RunSpec:
        """The same spec with every optimizer parameter made explicit (defaults filled in)."""
        from optfarm.optimizers.registry import get

        return RunSpec(
            **{
                **asdict(self),
                "params": get(self.optimizer).resolve_params(self.params),
                "constraints": None if self.constraints is None else tuple(self.constraints),
            }
        )

    @property
    def design_evaluations(self) -> int | None:
        """The evaluation budget the optimizer sizes its initial design against
        (``Optimizer.initial_design``): the smaller of ``iterations`` and
        ``planned_evaluations`` (None without either)."""
        given = [n for n in (self.iterations, self.planned_evaluations) if n is not None]
        return min(given) if given else None

    @property
    def run_key(self) -> str:
        from optfarm.optimizers.registry import get

        optimizer = get(self.optimizer)
        return self.key_for(
            changed_params(optimizer, optimizer.resolve_params(self.params)), optimizer.version
        )

    def key_for(self, changed: dict[str, Any], version: Any) -> str:
        """``run_key`` given what it hashes of the optimizer: the resolved parameters set away
        from their defaults (``changed_params``) and its version (a sweep computes those once
        per grid point, not once per seed)."""
        d = {name: getattr(self, name) for name in _FIELDS}
        for name, before in (("until", None), ("deadline", False), ("planned_evaluations", None)):
            if d[name] == before:  # keys stay those of the specs written before the field
                del d[name]
        d["params"] = changed
        d["version"] = version
        budget = d["budget"]
        d["budget"] = None if budget is None or math.isinf(budget) else float(budget)
        return spec_key(d)


def spec_key(body: Mapping[str, Any]) -> str:
    """The key of a spec's fields: the first 16 hex digits of the sha256 of their JSON, keys
    sorted, what JSON cannot hold written as ``str``. ``run_key`` hashes a whole run this way,
    ``optfarm.farm.tracking.variants.variant_key`` a run without its seed; stable across
    machines."""
    text = json.dumps(body, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_FIELDS = tuple(f.name for f in fields(RunSpec))


def problem_for(
    dataset: Dataset,
    objective: str | None,
    constraints: tuple[str, ...] | None,
    budget: float | None = None,
) -> Problem:
    """The dataset's default problem with a run's overrides (None: the dataset's). Raises
    ProblemError when they name a metric the dataset does not measure, or give a time without
    its unit on a dataset whose source measured time in another unit than seconds."""
    for text in constraints or ():
        metric, op, value, unit = parse_constraint(text)
        if metric == "time" and unit is None and dataset.meta.time_unit != "s":
            raise ProblemError(
                f"{dataset.name}: constraint {text!r} needs its unit: the table gave times in "
                f"{dataset.meta.time_unit} (its description's constraints are in "
                f"{dataset.meta.time_unit}), farm stores seconds; write "
                f"'time{op}{value:g} {dataset.meta.time_unit}' or 'time{op}... s'"
            )
    problem = dataset.meta.problem.with_overrides(
        objective=None if objective is None else Objective.parse(objective),
        constraints=None if constraints is None else [Constraint.parse(c) for c in constraints],
        budget=budget,
    )
    problem.check_measured(dataset.name, dataset.meta.measured)
    return problem


def changed_params(optimizer, resolved: dict[str, Any]) -> dict[str, Any]:
    """The parameters of ``resolved`` (all of ``optimizer``'s) that differ from its defaults."""
    defaults = optimizer.resolve_params({})
    return {k: v for k, v in resolved.items() if v != defaults[k]}


def run_words(spec: RunSpec) -> str:
    """How the farm's lines name a run: ``run OPTIMIZER on DATASET seed SEED``."""
    return f"run {spec.optimizer} on {spec.dataset} seed {spec.seed}"
