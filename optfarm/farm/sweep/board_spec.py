"""Leaderboard specs (``farm leaderboard SPEC``): a sweep spec (``optfarm.farm.sweep.spec``) with a
``board`` section, resolved into the sweep that runs it::

    board:
      budgets: [5, 10, 20]          # multiples of each table's budget unit
      evaluations: [5, 10, 20]      # evaluation budgets (x its size factor), read on the same runs
      cap: 0.25                     # no budget above this share of a table's price

A table's price is what running every configuration once costs (the sum of their true mean
costs at s = 1, ``optfarm.farm.run.metrics.exhaustive_cost``); its size N, how many there are.

**Budgets that measure any table (issue 41).** A model-based optimizer spends its initial
design before its model guides a step, and a larger space needs more guided steps, so budgets
grow with the table and initial designs are held to a share of them:

- a table's *size factor* is ``log2(N / 192)``, at least 1 (``size_factor``): 1 up to the
  papers' largest cost tables (the TF jobs, 384 configurations), +1 per doubling beyond
  (9,216: 5.6; 50,176: 8.0);
- its *budget unit* is its mean configuration cost x its size factor (``budget_unit``); the
  cost budgets are multiples of it (``DEFAULT_COST_BUDGETS``: 5, 10, 20), the evaluation
  budgets the size factor x ``DEFAULT_EVALUATIONS`` (5, 10, 20);
- every run is planned for twice the smallest budget's worth of evaluations (its multiples of
  the mean configuration cost, ``planned_evaluations``; ``limits.planned_evaluations``, no
  stop), so that an initial design, which takes at most ``init_share`` (a quarter) of the
  evaluations a run is planned for (``optfarm.optimizers.base.Optimizer.initial_design``),
  takes at most half of the smallest budget (``DESIGN_SHARE``): 2 configurations up to 384,
  13 at 9,216;
- so the largest budget (four times the smallest) leaves at least 17.5 budget units after
  the initial design (17.5 x the size factor configurations at the mean cost), and the
  largest evaluation budget at least 17.5 x the size factor evaluations: the model guides 10
  steps or more wherever a quarter of the table holds 12 configurations (48 or more; on
  Guindani's 20-41 and CherryPick's K-means 47, the cap comes first).

A board that buys the whole table measures only whether an optimizer stops early, so every
budget is capped at ``cap`` x the price on each table (evaluation budgets at ``cap`` x its size;
``cap: null`` for none): the defaults (``DEFAULT_COST_BUDGETS``, ``DEFAULT_EVALUATIONS``,
``PRICE_SHARE_CAP``) never reach the price, on a 20-configuration table as on 100,000. Every
run gets the last cost budget as its problem's exploration budget, capped: on each table
``min(budgets[-1] x its budget unit, cap x its price)`` (``table_budget``), so the runs stop
where the board's statistics stop reading them. The spec may not set a budget of its own. Every
run stops at its table's deadline (``limits: {deadline: true}``,
``optfarm.farm.run.loop.Stepper``: one rule for every optimizer) unless the spec sets
``deadline: false``.

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

from optfarm.farm.run.metrics import exhaustive_cost, mean_config_cost, table_size
from optfarm.farm.sweep.spec import SpecError, SweepSpec, expand, parse_spec, read_yaml
from optfarm.optimizers.base import INIT_SHARE, MissingExtra
from optfarm.optimizers.registry import get, make_optimizer
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.registry import load

__all__ = [
    "DEFAULT_COST_BUDGETS",
    "DEFAULT_EVALUATIONS",
    "DESIGN_SHARE",
    "ONE_TABLE_SEEDS",
    "PRICE_SHARE_CAP",
    "BoardSettings",
    "ResolvedBoard",
    "budget_unit",
    "load_board_spec",
    "parse_board_spec",
    "planned_evaluations",
    "resolve_board",
    "size_factor",
    "table_budget",
    "table_evaluations",
]

DEFAULT_COST_BUDGETS = (5.0, 10.0, 20.0)  # multiples of a table's budget unit
DEFAULT_EVALUATIONS = (5, 10, 20)  # times a table's size factor
PRICE_SHARE_CAP = 0.25  # of a table's price (and of its configurations)
DESIGN_SHARE = 0.5  # of the smallest budget, the most an initial design takes
SIZE_FACTOR_BASE = 192  # log2(N / 192): 1 at 384 configurations, the papers' largest cost tables
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
                **_table_limits(oracles[d.name], settings),
            },
        }
        for d in spec.dataset_entries()
    ]
    return ResolvedBoard(parse_spec(resolved, source), settings, notes)


def _table_limits(oracle: Oracle, settings: BoardSettings) -> dict:
    """A table's runs' limits on the board: the last cost budget as their exploration budget,
    and the evaluations they are planned for (the module docstring)."""
    mean, price, size = mean_config_cost(oracle), exhaustive_cost(oracle), table_size(oracle)
    return {
        "budget": _round(table_budget(max(settings.budgets), mean, price, settings.cap, size)),
        "planned_evaluations": planned_evaluations(
            min(settings.budgets), mean, price, settings.cap, size
        ),
    }


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


def size_factor(configurations: int | None) -> float:
    """A table's size factor: ``log2(N / SIZE_FACTOR_BASE)``, at least 1 (1 when its size is
    unknown: a summary stored before sizes were kept)."""
    if not configurations:
        return 1.0
    return max(1.0, math.log2(configurations / SIZE_FACTOR_BASE))


def budget_unit(mean_cost: float, configurations: int | None) -> float:
    """A table's budget unit: its mean configuration cost x its size factor."""
    return mean_cost * size_factor(configurations)


def table_budget(
    multiple: float,
    mean_cost: float,
    price: float,
    cap: float | None,
    configurations: int | None = None,
) -> float:
    """A cost budget on one table: ``multiple`` x its budget unit, at most ``cap`` x its
    price (no cap for None)."""
    return min(
        multiple * budget_unit(mean_cost, configurations),
        math.inf if cap is None else cap * price,
    )


def table_evaluations(evaluations: int, configurations: int | None, cap: float | None) -> int:
    """An evaluation budget on one table: ``evaluations`` x its size factor (rounded), at most
    ``cap`` x its configurations (at least 1)."""
    n = round(evaluations * size_factor(configurations))
    if cap is None or configurations is None:
        return n
    return min(n, max(1, math.floor(cap * configurations)))


def planned_evaluations(
    smallest: float, mean_cost: float, price: float, cap: float | None, configurations: int
) -> int:
    """The evaluations a board plans each run of a table for: the smallest cost budget's
    worth (its multiple of the mean configuration cost) x ``DESIGN_SHARE`` / ``INIT_SHARE``,
    so that an initial design (at most ``INIT_SHARE`` of them) takes at most
    ``DESIGN_SHARE`` of the smallest budget; at least 1."""
    worth = table_budget(smallest, mean_cost, price, cap, configurations) / mean_cost
    return max(1, math.floor(worth * DESIGN_SHARE / INIT_SHARE))


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
