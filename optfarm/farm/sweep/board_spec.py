"""Leaderboard specs (``farm leaderboard SPEC``): a sweep spec (``optfarm.farm.sweep.spec``) with a
``board`` section, resolved into the sweep that runs it::

    board:
      budgets: [2, 5, 10]           # multiples of each table's mean configuration cost
      evaluations: [5, 10, 20]      # evaluation budgets, read on the same runs
      cap: 0.25                     # no budget above this share of a table's price

A table's price is what running every configuration once costs (the sum of their true mean
costs at s = 1, ``optfarm.farm.run.metrics.exhaustive_cost``); its size, how many there are. A board
that buys the whole table measures only whether an optimizer stops early, so every budget is
capped at ``cap`` x the price on each table (evaluation budgets at ``cap`` x its size;
``cap: null`` for none): the defaults (``DEFAULT_COST_BUDGETS``, ``DEFAULT_EVALUATIONS``,
``PRICE_SHARE_CAP``) never reach the price. Every run gets the last cost budget as its
problem's exploration budget, capped: on each table ``min(budgets[-1] x its mean
configuration cost, cap x its price)`` (``table_budget``), so the runs stop where the board's
statistics stop reading them. The spec may not set a budget of its own. Every run stops at its
table's deadline (``limits: {deadline: true}``, ``optfarm.farm.run.loop.Stepper``: one rule for
every optimizer) unless the spec sets ``deadline: false``.

The board holds the optimizers that can pose the problem on every table: one the table's
problem makes refuse to start (e.g. a cost-minimiser on an accuracy-maximisation job), or a
peer whose extra is not installed, is left out with a note, never run to fail. A board has
one quality metric (``optfarm.farm.board.leaderboard``), so cost- and accuracy-tables go in
specs of their own.

A board of one user's table (``farm leaderboard --datasets MYJOB``) answers that job: it is
named after it (``leaderboard-MYJOB``) and runs ``ONE_TABLE_SEEDS`` seeds, the blocks its
statistics rank within.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optfarm.farm.run.metrics import exhaustive_cost, mean_config_cost
from optfarm.farm.sweep.spec import SpecError, SweepSpec, expand, parse_spec, read_yaml
from optfarm.optimizers.base import MissingExtra
from optfarm.optimizers.registry import get, make_optimizer
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.registry import load

__all__ = [
    "DEFAULT_COST_BUDGETS",
    "DEFAULT_EVALUATIONS",
    "ONE_TABLE_SEEDS",
    "PRICE_SHARE_CAP",
    "BoardSettings",
    "ResolvedBoard",
    "load_board_spec",
    "parse_board_spec",
    "resolve_board",
    "table_budget",
]

DEFAULT_COST_BUDGETS = (2.0, 5.0, 10.0)  # multiples of a table's mean configuration cost
DEFAULT_EVALUATIONS = (5, 10, 20)
PRICE_SHARE_CAP = 0.25  # of a table's price (and of its configurations)
ONE_TABLE_SEEDS = 20


class BoardSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    budgets: list[float] = Field(list(DEFAULT_COST_BUDGETS), min_length=1)
    evaluations: list[int] = Field(list(DEFAULT_EVALUATIONS))
    cap: float | None = Field(PRICE_SHARE_CAP, gt=0)


@dataclass(frozen=True)
class ResolvedBoard:
    sweep: SweepSpec  # the sweep to run, each table's budget set
    settings: BoardSettings
    notes: list[str]  # optimizers left out, and why


def load_board_spec(path: str | Path, datasets: list[str] | None = None) -> ResolvedBoard:
    """Read a leaderboard spec file; ``datasets`` replace its tables (``farm leaderboard
    --datasets``)."""
    return resolve_board(read_yaml(path), str(path), datasets)


def resolve_board(data, source: str, datasets: list[str] | None = None) -> ResolvedBoard:
    """Validate a leaderboard spec dictionary (``parse_board_spec``) and resolve it against
    its tables (``ResolvedBoard``); SpecError naming the key for bad input."""
    spec, settings = parse_board_spec(data, source, datasets)
    last = max(settings.budgets)
    oracles = _oracles(spec, source)
    notes, keep = [], []
    for entry in spec.optimizer_entries():
        why = _cannot_pose(entry, oracles)
        if why:
            notes.append(f"{entry.name}: {why}")
        else:
            keep.append(entry.model_dump(mode="json"))
    if not keep:
        raise SpecError(
            f"{source}: no optimizer can pose the problem on every table (" + "; ".join(notes) + ")"
        )
    resolved = spec.model_dump(mode="json", exclude={"datasets", "optimizers"})
    resolved["optimizers"] = keep
    if resolved["limits"].get("deadline") is None:  # the board's rule unless the spec says
        resolved["limits"]["deadline"] = True
    resolved["datasets"] = [
        {
            **d.model_dump(mode="json", exclude_none=True),
            "limits": {
                **(d.limits.model_dump(mode="json", exclude_none=True) if d.limits else {}),
                "budget": _round(
                    table_budget(
                        last,
                        mean_config_cost(oracles[d.name]),
                        exhaustive_cost(oracles[d.name]),
                        settings.cap,
                    )
                ),
            },
        }
        for d in spec.dataset_entries()
    ]
    return ResolvedBoard(parse_spec(resolved, source), settings, notes)


def parse_board_spec(
    data, source: str, datasets: list[str] | None = None
) -> tuple[SweepSpec, BoardSettings]:
    """The sweep part (its budget not yet set) and the ``board`` section of a leaderboard
    spec dictionary, validated without reading any table; ``datasets`` replace its tables."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: a leaderboard spec is a mapping of keys")
    data = dict(data)
    try:
        settings = BoardSettings.model_validate(data.pop("board", None) or {})
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise SpecError(f"{source}: board.{where}: {err['msg']}") from None
    if any(b <= 0 for b in settings.budgets) or any(n < 1 for n in settings.evaluations):
        raise SpecError(f"{source}: board: budgets must be > 0 and evaluations >= 1")
    if datasets:
        data["description"] = f"every optimizer of {data.get('name', 'the board')} on " + ", ".join(
            datasets
        )
        data["datasets"] = datasets
        data["name"] = f"leaderboard-{'+'.join(datasets)}"[:80]
        if len(datasets) == 1:
            data["seeds"] = ONE_TABLE_SEEDS
    spec = parse_spec(data, source)
    if spec.limits.budget is not None or any(
        d.limits and d.limits.budget is not None for d in spec.dataset_entries()
    ):
        raise SpecError(
            f"{source}: limits.budget: a leaderboard sets each table's budget "
            "(board.budgets); leave it out"
        )
    return spec, settings


def _oracles(spec: SweepSpec, source: str) -> dict[str, Oracle]:
    """Each table's oracle under the problem the sweep poses there (as ``expand`` resolves
    it: the table's own problem keys over the sweep's)."""
    probe = spec.model_dump(mode="json")
    probe.update(optimizers=["random"], seeds=1)
    out = {}
    for run in expand(parse_spec(probe, source), source):
        dataset = load(run.dataset)  # DatasetError (bad input) for an unknown table
        out[run.dataset] = Oracle(dataset, run.problem(dataset), aggregate=spec.aggregate)
    return out


def table_budget(multiple: float, mean_cost: float, price: float, cap: float | None) -> float:
    """A cost budget on one table: ``multiple`` x its mean configuration cost, at most
    ``cap`` x its price (no cap for None)."""
    return min(multiple * mean_cost, math.inf if cap is None else cap * price)


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def _cannot_pose(entry, oracles: dict[str, Oracle]) -> str | None:
    """Why the optimizer cannot run on some table (None: it can on all)."""
    try:
        params = get(entry.name).resolve_params(entry.grid()[0])
    except MissingExtra as e:
        return f"left out ({e})"
    for name, oracle in oracles.items():
        try:
            make_optimizer(entry.name, oracle.space, oracle.problem, 0, **params)
        except MissingExtra as e:
            return f"left out ({e})"
        except ValueError as e:
            return f"cannot pose the problem of {name} ({e})"
    return None
