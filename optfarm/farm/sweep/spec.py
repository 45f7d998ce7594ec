"""Sweep specs: datasets x optimizers (with parameter grids) x seeds, expanded into run specs.

A spec is YAML (``sweeps/*.yaml``) or the same dictionary built from the command line
(``farm sweep --datasets A,B --optimizers X,Y --seeds N``)::

    name: quickstart
    datasets:                       # names, or {name, problem, limits} for per-dataset overrides
      - synthetic
    optimizers:
      - name: random
        params: {n_init: [1, 3]}    # a list sweeps the values (grid); a scalar fixes one
    seeds: 10                       # N (seeds 0..N-1), a list, or {start: S, count: N}
    problem: {objective: min cost, constraints: ["time<=300"]}
    limits: {iterations: 30, budget: 50.0}
    aggregate: sample
    runtime: {max_in_flight: 4, max_retries: 2, executor: serial, chunk_size: 0, backend: ray}
    tracking: {enabled: true, uri: null, experiment: null, artifacts: false}

``limits`` also take ``until`` (a reach target that stops a run), ``deadline`` and
``planned_evaluations``: the evaluations each run is planned for, of which an initial design
takes at most its ``init_share``, without stopping the run there (a leaderboard sets it,
``optfarm.farm.sweep.board_spec``).

The schema is validated with pydantic; every error is one line naming the offending key
(``optimizers[1].params.la: ...``). Optimizer names and parameters are checked against the
optimizer registry when the sweep is expanded (``expand``), so a spec may name optimizers that
another module registers later. Each run's key is ``optfarm.farm.run.spec.RunSpec.run_key`` (a hash
of the fully resolved run), so expansion is stable and de-duplicated. A spec is refused before it is
expanded when it would expand to more than ``max_runs`` runs (counted, not enumerated), and a
YAML file that gives one key twice is refused naming the key and its line.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from optfarm.farm.run.spec import MAX_SEED, RunSpec, changed_params
from optfarm.farm.tracking.uris import hide_password
from optfarm.optimizers.base import ParameterError
from optfarm.oracle.problem import Constraint, Objective
from optfarm.oracle.spelling import did_you_mean
from optfarm.oracle.unique_yaml import load_unique

__all__ = [
    "DEFAULT_MAX_RUNS",
    "SpecError",
    "SweepSpec",
    "expand",
    "expand_keyed",
    "hide_password",
    "inline_spec",
    "load_spec",
    "no_password",
    "parse_spec",
    "read_yaml",
]

Scalar = bool | int | float | str
DEFAULT_MAX_RUNS = 200_000  # a sweep larger than this needs --max-runs
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
MAX_NAME = 100  # a sweep's name names folders and MLflow experiments
MAX_ITERATIONS = 1_000_000_000  # a run's evaluations (the largest dataset has thousands)


class SpecError(ValueError):
    """A sweep spec is malformed; the message is one line naming the key."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProblemOverrides(_Model):
    objective: str | None = None
    constraints: list[str] | None = None

    @field_validator("objective")
    @classmethod
    def _objective(cls, v):
        if v is not None:
            Objective.parse(v)
        return v

    @field_validator("constraints")
    @classmethod
    def _constraints(cls, v):
        for c in v or ():
            Constraint.parse(c)
        return v


class Limits(_Model):
    iterations: int | None = Field(None, ge=1, le=MAX_ITERATIONS)
    budget: float | None = Field(None, gt=0)
    until: str | None = None  # stop a run once its incumbent meets this target (e.g. cno<=1.1)
    # stop every run at the problem's deadline (optfarm.farm.run.loop.Stepper); None: off, but on on
    # a leaderboard (optfarm.farm.sweep.board_spec)
    deadline: bool | None = None
    # the evaluations each run is planned for: its initial design takes at most init_share of
    # them, and it does not stop there (a board sets it: optfarm.farm.sweep.board_spec)
    planned_evaluations: int | None = Field(None, ge=1)

    @field_validator("until")
    @classmethod
    def _target(cls, v):
        from optfarm.farm.run.metrics import TARGET_LABELS

        if v is not None and v not in TARGET_LABELS:
            raise ValueError(f"{v!r} is not a target; choose one of {', '.join(TARGET_LABELS)}")
        return v


class DatasetEntry(_Model):
    name: str = Field(min_length=1)
    problem: ProblemOverrides | None = None
    limits: Limits | None = None


class OptimizerEntry(_Model):
    name: str = Field(min_length=1)
    params: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)

    @field_validator("params")
    @classmethod
    def _grids_not_empty(cls, v):
        for k, values in v.items():
            if isinstance(values, list) and not values:
                raise ValueError(f"parameter {k!r} has an empty list of values")
        return v

    def grid(self) -> list[dict[str, Scalar]]:
        """Every combination of the listed parameter values (the Cartesian product)."""
        names = sorted(self.params)
        axes = [v if isinstance(v, list) else [v] for v in (self.params[n] for n in names)]
        return [dict(zip(names, combo)) for combo in itertools.product(*axes)]


class SeedRange(_Model):
    start: StrictInt = Field(0, ge=0, le=MAX_SEED)
    count: StrictInt = Field(ge=1)

    @model_validator(mode="after")
    def _last_seed(self):
        if self.start + self.count - 1 > MAX_SEED:
            raise ValueError(
                f"the last seed, {self.start + self.count - 1}, is above {MAX_SEED} (2**32 - 1)"
            )
        return self


class Runtime(_Model):
    max_in_flight: int = Field(0, ge=0)  # 0: the cluster's CPU count
    max_retries: int = Field(2, ge=0)  # re-runs of a run whose actor died
    executor: Literal["serial", "ray"] = "serial"  # the optimizers' inner work
    chunk_size: int = Field(0, ge=0)  # items per Ray task (0: spread over the cluster)
    backend: Literal["ray", "serial"] = "ray"  # serial: in-process, no Ray


class Tracking(_Model):
    enabled: bool = True
    uri: str | None = None  # None: $MLFLOW_TRACKING_URI or sqlite in the out dir
    experiment: str | None = None  # None: the sweep's name
    artifacts: bool = False  # upload each trace (else its store path is a tag)

    @field_validator("uri")
    @classmethod
    def _uri(cls, v):
        return v if v is None else no_password(v)


def no_password(uri: str) -> str:
    """``uri``, refused (SpecError) when it carries a password: a tracking URI is kept in
    ``sweep.json`` and travels with the output folder."""
    if hide_password(uri) != uri:
        raise SpecError(
            f"the tracking URI {hide_password(uri)} carries a password, which "
            "sweep.json would keep: give it through the environment instead "
            "(PGPASSWORD or ~/.pgpass for a database, MLFLOW_TRACKING_PASSWORD "
            "for a server)"
        )
    return uri


class SweepSpec(_Model):
    name: str = Field(min_length=1)
    datasets: list[str | DatasetEntry] = Field(min_length=1)
    optimizers: list[str | OptimizerEntry] = Field(min_length=1)
    seeds: StrictInt | list[StrictInt] | SeedRange = 1
    problem: ProblemOverrides = Field(default_factory=ProblemOverrides)
    limits: Limits = Field(default_factory=Limits)
    aggregate: Literal["sample", "mean"] = "sample"
    runtime: Runtime = Field(default_factory=Runtime)
    tracking: Tracking = Field(default_factory=Tracking)
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, v):
        if len(v) > MAX_NAME:
            raise ValueError(
                f"a sweep name has at most {MAX_NAME} characters, got {len(v):,} "
                "(it names the output folder and the MLflow experiment)"
            )
        if not _NAME.fullmatch(v) or ".." in v:
            raise ValueError(
                f"{v!r} is not a sweep name (letters, digits and ._+- only, no "
                "path separators or '..': it names the output folder)"
            )
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v):
        if isinstance(v, int) and v < 1:
            raise ValueError("must be a positive number of seeds, a list or {start, count}")
        if isinstance(v, list) and (not v or min(v) < 0 or len(set(v)) != len(v)):
            raise ValueError("must list distinct non-negative seeds")
        if isinstance(v, list) and max(v) > MAX_SEED or isinstance(v, int) and v > MAX_SEED:
            raise ValueError(f"seeds are at most {MAX_SEED} (2**32 - 1)")
        return v

    def n_runs(self) -> int:
        """How many runs the spec expands to at most (before de-duplication), counted."""
        seeds = (
            self.seeds
            if isinstance(self.seeds, int)
            else self.seeds.count
            if isinstance(self.seeds, SeedRange)
            else len(self.seeds)
        )
        grids = sum(
            math.prod(len(v) if isinstance(v, list) else 1 for v in o.params.values())
            for o in self.optimizer_entries()
        )
        return len(self.datasets) * grids * seeds

    def seed_list(self) -> list[int]:
        if isinstance(self.seeds, int):
            return list(range(self.seeds))
        if isinstance(self.seeds, SeedRange):
            return list(range(self.seeds.start, self.seeds.start + self.seeds.count))
        return list(self.seeds)

    def dataset_entries(self) -> list[DatasetEntry]:
        return [DatasetEntry(name=d) if isinstance(d, str) else d for d in self.datasets]

    def optimizer_entries(self) -> list[OptimizerEntry]:
        return [OptimizerEntry(name=o) if isinstance(o, str) else o for o in self.optimizers]


def _key_path(loc: tuple) -> str:
    """pydantic's error location as the user wrote it: ``optimizers[1].params.la``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _is_branch(part):
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def parse_spec(data: Any, source: str = "spec") -> SweepSpec:
    """Validate a spec dictionary; raises SpecError naming the first offending key."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: a sweep spec is a mapping of keys, got {type(data).__name__}")
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as e:
        err = _most_specific(e.errors())
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown key{did_you_mean(str(err['loc'][-1]), _spec_keys())}"
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif err["type"] in _NOT_AN_INTEGER:
            msg = f"{err['input']!r} is not a whole number"
            if err["loc"][-1] == "iterations":
                msg += f" of evaluations from 1 to {MAX_ITERATIONS:,}"
        raise SpecError(f"{source}: {_key_path(err['loc'])}: {msg}") from None


# pydantic's errors for a value that is no integer (a float, a string, one too big to parse)
_NOT_AN_INTEGER = ("int_parsing", "int_parsing_size", "int_from_float", "int_type")


def _spec_keys() -> set[str]:
    """Every key a spec may hold, at any level (what a typo is compared with)."""
    return {key for model in _Model.__subclasses__() for key in model.model_fields}


def _most_specific(errors: list[dict]) -> dict:
    """The error to report: an unknown key first (usually a typo of a missing one), else the
    one that went deepest into the data (of a union, the branch the user meant). When every
    branch of a union failed at the same key, say so instead of quoting one branch."""
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        return unknown[0]

    def depth(err):
        return sum(1 for p in err["loc"] if not _is_branch(p))

    best = max(errors, key=depth)
    same = [e for e in errors if _key_path(e["loc"]) == _key_path(best["loc"])]
    if len(same) > 1:
        return {**best, "type": "union", "msg": f"{best['input']!r} is not an allowed value"}
    return best


def _is_branch(part) -> bool:
    return isinstance(part, str) and (
        part in ("str", "int", "float", "bool", "SeedRange", "DatasetEntry", "OptimizerEntry")
        or part.startswith(("list[", "union[", "function-"))
    )


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a YAML sweep spec."""
    return parse_spec(read_yaml(path), str(path))


def read_yaml(path: str | Path) -> Any:
    """The YAML document of a spec file; SpecError (one line) for a missing or unreadable file,
    invalid YAML or a key given twice."""
    path = Path(path)
    if path.is_dir():
        specs = sorted(p.name for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
        raise SpecError(
            f"{path} is a folder; a sweep spec is a YAML file"
            + (f" (in it: {', '.join(specs)})" if specs else " (none in it)")
        )
    if not path.is_file():
        raise SpecError(f"{path}: no such sweep spec")
    try:
        data = load_unique(path.read_text())
    except OSError as e:
        raise SpecError(f"{path}: cannot read the file ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise SpecError(
            f"{path}: not a text file (byte {e.start} is not UTF-8): a sweep spec is YAML"
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise SpecError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    return data


def inline_spec(
    datasets: str,
    optimizers: str,
    seeds: int,
    *,
    name: str = "inline",
    iterations: int | None = None,
    budget: float | None = None,
    params: dict[str, dict[str, Scalar]] | None = None,
) -> SweepSpec:
    """The spec of ``farm sweep --datasets A,B --optimizers X,Y --seeds N``."""
    params = params or {}
    opts = [{"name": o, "params": params.get(o, {})} for o in _split(optimizers)]
    unknown = sorted(set(params) - {o["name"] for o in opts})
    if unknown:
        raise SpecError(f"--param {unknown[0]}.*: optimizer {unknown[0]!r} is not in --optimizers")
    return parse_spec(
        {
            "name": name,
            "datasets": _split(datasets),
            "optimizers": opts,
            "seeds": seeds,
            "limits": {"iterations": iterations, "budget": budget},
        },
        "inline sweep",
    )


def _split(text: str) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def expand(
    spec: SweepSpec, source: str = "spec", max_runs: int | None = DEFAULT_MAX_RUNS
) -> list[RunSpec]:
    """The runs of a sweep (``expand_keyed``'s, in order)."""
    return list(expand_keyed(spec, source, max_runs).values())


def expand_keyed(
    spec: SweepSpec, source: str = "spec", max_runs: int | None = DEFAULT_MAX_RUNS
) -> dict[str, RunSpec]:
    """run key -> run of a sweep, in a stable order (dataset, optimizer, grid point, seed), each
    resolved (optimizer defaults filled in) and de-duplicated by run key. Unknown optimizers
    or parameters raise SpecError naming the entry; so does a spec of more than ``max_runs``
    runs (None: no limit), before anything is expanded."""
    from optfarm.optimizers.registry import get

    if max_runs is not None and spec.n_runs() > max_runs:
        raise SpecError(
            f"{source}: the sweep expands to {spec.n_runs():,} runs, more than the "
            f"limit of {max_runs:,} (pass --max-runs {spec.n_runs()} to run it)"
        )

    runs: dict[str, RunSpec] = {}
    for oi, opt in enumerate(spec.optimizer_entries()):
        try:
            get(opt.name)
        except ParameterError as e:
            raise SpecError(f"{source}: optimizers[{oi}].name: {e}") from None
    for d in spec.dataset_entries():
        # a dataset's own problem / limits keys override the sweep's, key by key
        problem = d.problem or spec.problem
        limits = Limits(
            **{
                **spec.limits.model_dump(),
                **(d.limits.model_dump(exclude_none=True) if d.limits else {}),
            }
        )
        for oi, opt in enumerate(spec.optimizer_entries()):
            optimizer = get(opt.name)
            for point in opt.grid():
                try:  # resolved and hashed once per grid point, not once per seed
                    params = optimizer.resolve_params(point)
                except ParameterError as e:
                    raise SpecError(f"{source}: optimizers[{oi}].params: {e}") from None
                changed = changed_params(optimizer, params)
                for seed in spec.seed_list():
                    run = RunSpec(
                        dataset=d.name,
                        optimizer=opt.name,
                        seed=seed,
                        params=dict(params),
                        budget=limits.budget,
                        iterations=limits.iterations,
                        until=limits.until,
                        deadline=bool(limits.deadline),
                        planned_evaluations=limits.planned_evaluations,
                        objective=problem.objective or spec.problem.objective,
                        constraints=_constraints(problem, spec.problem),
                        aggregate=spec.aggregate,
                    )
                    runs.setdefault(run.key_for(changed, optimizer.version), run)
    return runs


def _constraints(own: ProblemOverrides, sweep: ProblemOverrides) -> tuple[str, ...] | None:
    chosen = own.constraints if own.constraints is not None else sweep.constraints
    return None if chosen is None else tuple(chosen)
