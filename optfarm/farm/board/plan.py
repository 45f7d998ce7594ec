"""A leaderboard's price before it runs (``farm leaderboard SPEC --plan``), and the price of
what a one-table board has left after its first seed (``remaining_cost``).

The plan prices every run of the resolved board (``optfarm.farm.sweep.board_spec``: each
table's budget, the deadline rule, the iteration limit) as its fixed cost plus the CPU of each
of its evaluations, from measurements:

1. **Measured** (``measure``). Each optimizer (its first grid point) is driven here, in this
   process, through seed 0 of its board run (``run_one`` as the sweep runs it; nothing stored
   or tracked) on tables that cover the board's sizes within a factor of 2 (``anchors``: one
   for a one-table board, four for sweeps/leaderboard.yaml): once to start up, then timed,
   until the run ends or has taken ``seconds`` CPU-seconds. Start-up (imports, compiled
   kernels) is what the first drive took beyond the timed one over the same evaluations: a
   sweep pays it once per worker process, not per run. Timed: each evaluation's CPU (process
   time between trace rows, the harness's own work in it), and the run's fixed cost (building
   the optimizer and its first evaluation; for a run that ended, its summary after the last).
   Each evaluation's charge is kept as its quantile in the table's *cost spread*: the charges
   of its configurations at s = 1 under the deadline (a run still going at the deadline T is
   charged T x its price, ``Stepper``).
2. **Evaluations per run** on a table (``evaluations``), from the measurement on the table of
   nearest size: a run stops when what it was charged reaches the table's budget, when the
   optimizer stops itself, or at the iteration limit. A measured run that ended on the table
   under its budget gives its count. Otherwise its evaluations' quantiles are read in the
   priced table's spread (what they would cost there), each taking a configuration of that
   charge out of those not run yet; the evaluations after the measured ones take, in turn,
   the configuration at the ranks the model-guided ones had among those left (the bootstrap's
   when none was guided), until the budget is spent: an optimizer that seeks the cheap
   configurations runs out of them and pays more per evaluation late in its run, as the runs
   do (TrimTuner's charges on lynceus-cnn doubled from its first 40 evaluations to its last
   30). When those ranks show a trend over the guided evaluations (Kendall's tau, p <= 0.05),
   each is first moved along it (its Theil-Sen slope) to the last measured one, within the
   range they span: the later evaluations keep the level the optimizer has reached, not its
   early one, nor one extrapolated past what it was seen to take (Lynceus homes in on cheap
   configurations near its optimum: on synthetic its seed-0 run took 39 evaluations, 24 and
   26 read from its first 12 and 16 without the trend, 32 and 33 with it). One that stopped
   itself on the measured table stops at the same share of the table's configurations
   (converged), at all of them (exhausted), or at the same count (its own iteration limit).
3. **CPU of the i-th evaluation**: as measured up to the last timed one, then the curve
   through the model-guided evaluations' CPU against i (Theil-Sen: one slow step under load
   does not tilt it), never below 0: a + b i^2 when they grow and 30 or more were timed (GP
   and entropy-search steps grow with the square of the observations once their fixed work no
   longer hides it), else the line a + b i (Lynceus' steps shrink with the configurations
   left). Replayed on lynceus-cnn's seed-0 runs profiled whole and cut at 60 CPU-s each, the
   board's CPU reads 0.86x (the line: 0.78x), TrimTuner's run 0.79x (0.66x). An emcee GP
   (an optimizer whose ``hyper`` is ``mcmc`` by default) beyond ``LARGE_N`` evaluations keeps
   12 samples and samples anew only as its observations grow by a quarter
   (``optfarm.optimizers.models.gp``): each step there is priced at the 10th percentile of its
   timed guided steps (no MCMC in it), and each step that samples anew (the 101st, 127th,
   159th, ...: ``resamplings``) on the curve (EIc's on lynceus-cnn: 2.3 s at its 101st, 4.2
   at its 127th, 0.06-0.1 in between, against 2.3 at its 95th). Other growing curves
   (Optuna's GP sampler, SMAC) keep growing.
4. **The board**: the sum over its runs of fixed + evaluations' CPU, plus each optimizer's
   start-up once per worker process (min(its runs, the CPUs)). Wall time on the cluster: the
   total over its CPUs, and never less than the longest single run.
5. **Checked** (``check``, ``farm leaderboard SPEC --plan --plan-check N``): N of the board's
   runs (``check_sample``: as many per optimizer and size class, seeds other than the measured
   0) run here after the plan, their CPU against the plan's.

CPU time is measured on the machine at hand and under its load (a CPU-second does less work on
cores and caches shared with other processes), so the plan says the load it measured at.
"""

from __future__ import annotations

import bisect
import math
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from itertools import accumulate
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from optfarm.farm.run.loop import run_one
from optfarm.farm.run.metrics import config_charges
from optfarm.farm.run.spec import RunSpec
from optfarm.optimizers.models.gp import LARGE_N, RESAMPLE_GROWTH
from optfarm.optimizers.registry import get
from optfarm.oracle.oracle import Oracle
from optfarm.oracle.registry import load

__all__ = [
    "Measurement",
    "Priced",
    "RemainingCost",
    "Table",
    "anchors",
    "board_tables",
    "check",
    "check_sample",
    "evaluations",
    "measure",
    "measure_one",
    "nearest",
    "plan_rows",
    "price",
    "remaining_cost",
    "resamplings",
    "run_cpu",
    "timed_cpu",
    "wall_hours",
]

CURVE_STEPS = 30  # model-guided steps timed before their CPU's curve is read as quadratic
TREND_P = 0.05  # Kendall's p below which the guided evaluations' ranks show a trend (_moved)
OWN_COUNT = ("iterations",)  # an optimizer's own stop at a count (Guindani's n0 + N runs)


@dataclass(frozen=True)
class Table:
    """What the plan reads of one table under the board's rules: the evaluations a run can
    make (configurations x dataset sizes), the run's budget and iteration limit there, and its
    cost spread (every configuration's charge at s = 1 under the deadline, sorted)."""

    name: str
    configs: int
    budget: float
    iterations: int | None
    charges: np.ndarray

    @classmethod
    def of(cls, run: RunSpec, oracle: Oracle) -> Table:
        charged = config_charges(oracle, run.deadline)
        return cls(
            run.dataset,
            oracle.space.n_configs * len(oracle.space.fidelities),
            oracle.problem.budget,
            run.iterations,
            np.sort(charged[~np.isnan(charged)]),
        )

    def quantile(self, charge: float) -> float:
        """Where ``charge`` falls in the table's spread, from 0 (its cheapest configuration's
        charge or less) to 1 (its dearest's or more), linear in between: ``charge``'s
        inverse."""
        return float(np.interp(charge, self.charges, np.linspace(0.0, 1.0, len(self.charges))))

    def charge(self, quantiles: np.ndarray) -> np.ndarray:
        """The charges at those quantiles of the table's spread."""
        return np.quantile(self.charges, quantiles)


@dataclass(frozen=True)
class Measurement:
    """One optimizer's seed-0 board run on one table, as timed (the module docstring, item
    1): per evaluation after the first its CPU-seconds, and for every evaluation its phase
    and its charge's quantile in the table's spread; ``stop_reason`` None when the plan
    stopped it (its CPU-seconds spent)."""

    optimizer: str
    dataset: str
    configs: int
    budget: float
    startup_s: float
    fixed_s: float
    step_s: list[float]
    phases: list[str]
    quantiles: list[float]
    stop_reason: str | None
    utc: str

    @property
    def evaluations(self) -> int:
        return len(self.phases)

    @property
    def guided(self) -> np.ndarray:
        """Whether each evaluation was model-guided (not the bootstrap)."""
        return np.array([p != "init" for p in self.phases], dtype=bool)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Spent(Exception):
    """A measured run's CPU-seconds are spent (raised from its trace rows' callback)."""


class _Clock:
    """The process time at each trace row of a run, the run stopped once ``seconds`` are
    spent, or at the first model-guided row with ``until_guided``."""

    def __init__(self, seconds: float, until_guided: bool = False):
        self.seconds, self.until_guided = seconds, until_guided
        self.rows: list[dict] = []
        self.times: list[float] = []
        self.start = time.process_time()

    def tick(self, row: dict) -> None:
        self.times.append(time.process_time() - self.start)
        self.rows.append(row)
        if self.times[-1] > self.seconds or (self.until_guided and row["phase"] != "init"):
            raise _Spent

    def drive(self, run: RunSpec, oracle: Oracle) -> str | None:
        """Drive ``run``; its stop reason (None: stopped here)."""
        try:
            return run_one(run, oracle, on_step=self.tick).summary["stop_reason"]
        except _Spent:
            return None


def measure_one(run: RunSpec, oracle: Oracle, table: Table, seconds: float) -> Measurement:
    """Measure the board run ``run`` (seed 0) on its table (the module docstring, item 1)."""
    warm = _Clock(seconds, until_guided=True)
    warm.drive(run, oracle)
    timed = _Clock(seconds)
    stop = timed.drive(run, oracle)
    total = time.process_time() - timed.start
    times = np.array(timed.times)
    same = min(len(warm.times), len(times)) - 1
    after = total - times[-1] if stop is not None else 0.0  # the summary
    return Measurement(
        optimizer=run.optimizer,
        dataset=run.dataset,
        configs=table.configs,
        budget=table.budget,
        startup_s=max(0.0, warm.times[same] - times[same]) if same >= 0 else 0.0,
        fixed_s=float(times[0] + after),
        step_s=np.diff(times).tolist(),
        phases=[r["phase"] for r in timed.rows],
        quantiles=[table.quantile(r["cost"]) for r in timed.rows],
        stop_reason=stop,
        utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )


def board_tables(runs: Sequence[RunSpec]) -> dict[str, Table]:
    """Each table of the board's runs under its rules (``Table``)."""
    out = {}
    for run in runs:
        if run.dataset not in out:
            dataset = load(run.dataset)
            oracle = Oracle(dataset, run.problem(dataset), aggregate=run.aggregate)
            out[run.dataset] = Table.of(run.resolved(), oracle)
    return out


def anchors(tables: Sequence[Table]) -> list[Table]:
    """The tables to measure on, covering the board's sizes within a factor of 2: from the
    smallest table not yet covered, the most common size up to twice its own (the dearest of
    equally common ones; its first table in the board's order), which covers from half to
    twice its size."""
    out: list[Table] = []
    for t in sorted(tables, key=lambda t: t.configs):
        if any(a.configs / 2 <= t.configs <= 2 * a.configs for a in out):
            continue
        sizes = Counter(u.configs for u in tables if t.configs <= u.configs <= 2 * t.configs)
        size = max(sizes, key=lambda c: (sizes[c], c))
        out.append(next(u for u in tables if u.configs == size))
    return out


def measure(
    runs: Sequence[RunSpec], tables: Mapping[str, Table], seconds: float
) -> dict[str, list[Measurement]]:
    """Each optimizer of ``runs`` measured on the anchor tables (its first grid point, seed
    0; ``measure_one``), for ``seconds`` CPU-seconds at most on each."""
    on = anchors([tables[name] for name in dict.fromkeys(r.dataset for r in runs)])
    first: dict[tuple[str, str], RunSpec] = {}
    for run in runs:
        first.setdefault((run.optimizer, run.dataset), run)
    out: dict[str, list[Measurement]] = defaultdict(list)
    for table in on:
        dataset = load(table.name)
        oracle = None
        for (name, where), run in first.items():
            if where != table.name:
                continue
            run = replace(run.resolved(), seed=0)
            if oracle is None:
                oracle = Oracle(dataset, run.problem(dataset), aggregate=run.aggregate)
            out[name].append(measure_one(run, oracle, table, seconds))
    return dict(out)


def nearest(measured: Sequence[Measurement], table: Table) -> Measurement:
    """The measurement on ``table`` itself, else on the table nearest in size (by the ratio
    of configurations)."""
    return min(
        measured,
        key=lambda m: (m.dataset != table.name, abs(math.log(m.configs / table.configs))),
    )


def _own_stop(m: Measurement, table: Table) -> float:
    """Where the optimizer stops itself on ``table``, as it did on the measured one (inf:
    it did not)."""
    if m.stop_reason is None or m.stop_reason == "budget":
        return math.inf
    if m.stop_reason == "exhausted":
        return table.configs
    if m.stop_reason in OWN_COUNT:
        return m.evaluations
    return max(1, round(m.evaluations * table.configs / m.configs))


def evaluations(m: Measurement, table: Table) -> int:
    """The evaluations of a run on ``table`` (the module docstring, item 2)."""
    if m.stop_reason is not None and m.dataset == table.name and m.budget == table.budget:
        return m.evaluations
    limit = min(_own_stop(m, table), table.iterations or math.inf, table.configs)
    left = table.charges.tolist()  # the charges of the configurations not run yet, sorted
    spent, ranks = 0.0, []
    for n, (charge, guided) in enumerate(
        zip(table.charge(np.array(m.quantiles)), m.guided, strict=True), start=1
    ):
        i = min(bisect.bisect_left(left, charge), len(left) - 1)
        ranks.append((guided, i / len(left)))
        left.pop(i)
        spent += charge
        if spent >= table.budget or n >= limit or not left:
            return int(min(n, limit))
    later = [r for guided, r in ranks if guided] or [r for _, r in ranks]
    return int(min(m.evaluations + _more(left, _moved(later), table.budget - spent), limit))


def _moved(ranks: Sequence[float]) -> list[float]:
    """The measured ``ranks`` moved along their trend to the last of them: each shifted by
    the Theil-Sen slope times the steps from it to the last, kept within the range they
    span; unmoved when they show no trend (Kendall's tau, p > ``TREND_P``). An optimizer
    that homes in on cheap configurations near its optimum (Lynceus) takes cheaper ones as
    its run goes on; random search's ranks show none."""
    r = np.array(ranks, dtype=float)
    x = np.arange(len(r), dtype=float)
    if len(r) < 3 or not kendalltau(x, r).pvalue <= TREND_P:
        return r.tolist()
    _, slope = _theil_sen(x, r)
    return np.clip(r + slope * (x[-1] - x), r.min(), r.max()).tolist()


def _more(left: list[float], ranks: Sequence[float], budget: float) -> int:
    """The evaluations after the measured ones until ``budget`` is spent (or no configuration
    is left): each the configuration at the next of the measured ``ranks`` among those not run
    yet (``left``, their charges, sorted; taken as run)."""
    n = 0
    while budget > 0 and left:
        budget -= left.pop(min(int(ranks[n % len(ranks)] * len(left)), len(left) - 1))
        n += 1
    return n


def _theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(intercept, slope) of ``y`` against ``x`` by Theil and Sen: the median of the pairwise
    slopes (one slow step under load does not tilt it)."""
    i, j = np.triu_indices(len(x), k=1)
    slope = float(np.median((y[j] - y[i]) / (x[j] - x[i])))
    return float(np.median(y - slope * x)), slope


def _step_curve(m: Measurement) -> tuple[float, float, int]:
    """(a, b, p): the model-guided evaluations' CPU against their index i as a + b i^p (flat
    at the mean without two). p = 2 when the steps grow and at least ``CURVE_STEPS`` were
    timed: a GP's or entropy search's step grows with the square of its observations once
    its fixed work no longer hides it (TrimTuner's on lynceus-cnn: 1.5 CPU-s flat to its
    40th evaluation, 5 at its 129th); p = 1 otherwise (fewer steps do not tell the curve,
    and Lynceus' steps shrink with the configurations left)."""
    steps = np.array(m.step_s)
    index = np.arange(1, m.evaluations)
    guided = m.guided[1:]
    x, y = index[guided].astype(float), steps[guided]
    if len(x) < 2:
        return (float(steps.mean()) if len(steps) else 0.0), 0.0, 1
    a, b = _theil_sen(x, y)
    if b <= 0 or len(x) < CURVE_STEPS:
        return a, b, 1
    a, b = _theil_sen(x**2, y)
    return a, b, 2


def run_cpu(m: Measurement, n: int) -> float:
    """The CPU-seconds of a run of ``n`` evaluations (the module docstring, item 3)."""
    measured = sum(m.step_s[: max(n - 1, 0)])
    if n <= m.evaluations:
        return m.fixed_s + measured
    a, b, p = _step_curve(m)
    i = np.arange(m.evaluations, n, dtype=float)
    cpu = np.maximum(a + b * i**p, 0.0)
    if n > LARGE_N + 1 and _emcee_gp(m.optimizer):  # beyond LARGE_N: the kept samples
        cpu[i > LARGE_N] = _kept_samples_step(m)
        again = np.isin(i, resamplings(n))
        cpu[again] = np.maximum(a + b * i[again] ** p, 0.0)
    return m.fixed_s + measured + float(cpu.sum())


def resamplings(n: int) -> list[int]:
    """The evaluations below ``n`` at which an emcee GP beyond ``LARGE_N`` observations
    samples its hyperparameters anew: the first beyond it, then each time the observations
    have grown by ``RESAMPLE_GROWTH`` (``optfarm.optimizers.models.gp``: 101, 127, 159, ...)."""
    out = [LARGE_N + 1]
    while (nxt := math.ceil(RESAMPLE_GROWTH * out[-1])) < n:
        out.append(nxt)
    return [i for i in out if i < n]


def _kept_samples_step(m: Measurement) -> float:
    """An emcee GP's step beyond ``LARGE_N`` between two samplings: conditioning the kept
    samples and scoring, no MCMC; priced at the 10th percentile of the timed model-guided
    steps (of every timed step when none was guided). On lynceus-cnn EIc's steps there took
    0.06-0.1 s against 0.28 for its first guided ones (the price errs high)."""
    steps = np.array(m.step_s)
    guided = steps[m.guided[1:]]
    timed = guided if len(guided) else steps  # none guided: the bootstrap's steps
    return float(np.quantile(timed, 0.1)) if len(timed) else 0.0


def _emcee_gp(optimizer: str) -> bool:
    """Whether ``optimizer`` models with an emcee GP by default (``hyper=mcmc``), whose steps
    stop growing as the square beyond ``LARGE_N`` observations."""
    return any(p.name == "hyper" and p.default == "mcmc" for p in get(optimizer).params)


@dataclass(frozen=True)
class Priced:
    """One run of an optimizer on a table as the plan prices it (every seed alike)."""

    evaluations: int
    cpu_s: float
    fixed_s: float


def price(
    runs: Sequence[RunSpec],
    tables: Mapping[str, Table],
    measured: Mapping[str, Sequence[Measurement]],
) -> dict[tuple[str, str], Priced]:
    """Each (optimizer, table) of ``runs`` priced from the measurement nearest the table."""
    out = {}
    for run in runs:
        key = (run.optimizer, run.dataset)
        if key not in out:
            m = nearest(measured[run.optimizer], tables[run.dataset])
            n = evaluations(m, tables[run.dataset])
            out[key] = Priced(n, run_cpu(m, n), m.fixed_s)
    return out


def plan_rows(
    runs: Sequence[RunSpec],
    priced: Mapping[tuple[str, str], Priced],
    measured: Mapping[str, Sequence[Measurement]],
    cpus: int,
) -> list[dict[str, Any]]:
    """Per optimizer: its runs, their mean evaluations, fixed cost and CPU per evaluation,
    its start-up once per worker process, its CPU-hours and longest run; dearest first."""
    acc: dict[str, dict[str, float]] = defaultdict(
        lambda: {"runs": 0, "evaluations": 0, "cpu_s": 0.0, "fixed_s": 0.0, "longest_s": 0.0}
    )
    for run in runs:
        p = priced[run.optimizer, run.dataset]
        a = acc[run.optimizer]
        a["runs"] += 1
        a["evaluations"] += p.evaluations
        a["cpu_s"] += p.cpu_s
        a["fixed_s"] += p.fixed_s
        a["longest_s"] = max(a["longest_s"], p.cpu_s)
    return sorted(
        (_row(name, a, measured[name], cpus) for name, a in acc.items()),
        key=lambda r: -r["cpu_hours"],
    )


def _row(name: str, a: Mapping[str, float], measured: Sequence[Measurement], cpus: int) -> dict:
    """One optimizer's line of the plan."""
    startup = max(m.startup_s for m in measured) * min(a["runs"], max(cpus, 1))
    return {
        "optimizer": name,
        "runs": int(a["runs"]),
        "evaluations_per_run": a["evaluations"] / a["runs"],
        "cpu_per_evaluation_s": (a["cpu_s"] - a["fixed_s"]) / max(a["evaluations"], 1),
        "fixed_per_run_s": a["fixed_s"] / a["runs"],
        "startup_s": startup,
        "cpu_hours": (a["cpu_s"] + startup) / 3600.0,
        "longest_run_s": a["longest_s"],
        "measured_on": ", ".join(_measured_text(m) for m in measured),
    }


def _measured_text(m: Measurement) -> str:
    timed = "whole run" if m.stop_reason is not None else f"{m.evaluations} timed"
    return f"{m.dataset}: {timed}"


def _size_class(tables: Mapping[str, Table]) -> dict[str, str]:
    """Each table's measured table (``anchors``, ``nearest``): the runs a check draws from
    and extrapolates to alike."""
    on = anchors(list(tables.values()))
    return {
        name: min(on, key=lambda a: abs(math.log(a.configs / t.configs))).name
        for name, t in tables.items()
    }


def check_sample(runs: Sequence[RunSpec], tables: Mapping[str, Table], k: int) -> list[RunSpec]:
    """``k`` runs of the board to check its plan against (``check``): the same number for
    each optimizer and size class (``_size_class``), drawn at random (a fixed draw), seed 0
    (the plan's own measurement) left out when the board has other seeds."""
    rng = np.random.default_rng(0)
    size = _size_class(tables)
    pool = [r for r in runs if r.seed != 0] or list(runs)
    strata: dict[tuple[str, str], list[RunSpec]] = defaultdict(list)
    for run in pool:
        strata[run.optimizer, size[run.dataset]].append(run)
    each = max(1, k // len(strata))
    return [
        members[i]
        for members in strata.values()
        for i in sorted(rng.permutation(len(members))[:each])
    ]


def timed_cpu(runs: Sequence[RunSpec]) -> list[float]:
    """The CPU-seconds of each run of ``runs``, run here one after the other (nothing stored)."""
    oracles: dict[str, Oracle] = {}
    out = []
    for run in runs:
        if run.dataset not in oracles:
            dataset = load(run.dataset)
            oracles[run.dataset] = Oracle(dataset, run.problem(dataset), aggregate=run.aggregate)
        c0 = time.process_time()
        run_one(run, oracles[run.dataset])
        out.append(time.process_time() - c0)
    return out


def check(
    runs: Sequence[RunSpec],
    tables: Mapping[str, Table],
    priced: Mapping[tuple[str, str], Priced],
    sample: Sequence[RunSpec],
    cpu: Sequence[float],
) -> dict[str, Any]:
    """The plan against the CPU ``cpu`` its runs ``sample`` took (start-up left out of both:
    the sampled runs ran after the plan's measurement): per run, per optimizer and in all, the
    sample's planned and measured CPU-seconds, and the board's CPU-hours by the plan and
    extrapolated from the sample (each optimizer's mean run in each size class times its runs
    there)."""
    size = _size_class(tables)

    def stratum(run: RunSpec) -> tuple[str, str]:
        return run.optimizer, size[run.dataset]

    took: dict[tuple[str, str], list[float]] = defaultdict(list)
    rows: dict[str, dict[str, float]] = defaultdict(
        lambda: {"runs": 0, "plan_s": 0.0, "cpu_s": 0.0}
    )
    for run, c in zip(sample, cpu, strict=True):
        took[stratum(run)].append(c)
        row = rows[run.optimizer]
        row["runs"] += 1
        row["plan_s"] += priced[run.optimizer, run.dataset].cpu_s
        row["cpu_s"] += c
    extrapolated = sum(float(np.mean(took[stratum(run)])) for run in runs if stratum(run) in took)
    plan = sum(priced[run.optimizer, run.dataset].cpu_s for run in runs)
    return {
        "runs": [
            {
                "optimizer": run.optimizer,
                "dataset": run.dataset,
                "seed": run.seed,
                "plan_s": priced[run.optimizer, run.dataset].cpu_s,
                "cpu_s": c,
            }
            for run, c in zip(sample, cpu, strict=True)
        ],
        "optimizers": {name: {**r, "ratio": r["plan_s"] / r["cpu_s"]} for name, r in rows.items()},
        "sample_runs": len(sample),
        "sample_plan_s": sum(r["plan_s"] for r in rows.values()),
        "sample_cpu_s": float(sum(cpu)),
        "board_plan_hours": plan / 3600.0,
        "board_extrapolated_hours": extrapolated / 3600.0,
    }


def wall_hours(rows: Sequence[dict[str, Any]], cpus: int) -> float:
    """The board's wall time on ``cpus`` CPUs: total CPU over them, at least the longest run."""
    total = sum(r["cpu_hours"] for r in rows)
    longest = max((r["longest_run_s"] for r in rows), default=0.0) / 3600.0
    return max(total / max(cpus, 1), longest)


@dataclass(frozen=True)
class RemainingCost:
    """What the runs a board has left will take at its first seed's pace."""

    runs: int
    cpu_s: float
    wall_s: float
    workers: int
    first_cpu_s: float


def _variant(optimizer: str, dataset: str, params: Mapping[str, Any]) -> tuple:
    """What tells a board's variants apart: its runs differ by their seed alone."""
    return optimizer, dataset, tuple(sorted((k, repr(v)) for k, v in params.items()))


def remaining_cost(
    records: Mapping[str, dict], first: Sequence[str], runs: Sequence[RunSpec]
) -> RemainingCost | None:
    """The CPU and wall time of the runs of ``runs`` not done in ``records`` (every stored
    record), each at what its own variant's (optimizer, table, parameters) first-seed run
    took (``first``: the first seed's run keys; an optimizer whose first seed failed, at their
    mean): its CPU, and its wall time (at least its CPU: a run resumed from a checkpoint
    records its last attempt's wall time, its CPU over every attempt), that wall time shared
    by as many workers as ran first-seed runs at one time, at least the longest run's. The
    same stored records give the same estimate whichever call ran them. None when no
    first-seed run is done or none is left."""
    done = [records[k] for k in first if records.get(k, {}).get("status") == "done"]
    took = {
        _variant(r["spec"]["optimizer"], r["spec"]["dataset"], r["spec"]["params"]): (
            r["cpu_s"],
            max(r["duration_s"], r["cpu_s"]),
        )
        for r in done
    }
    todo = [r for r in runs if records.get(r.run_key, {}).get("status") != "done"]
    if not (took and todo):
        return None
    mean = tuple(float(np.mean(column)) for column in zip(*took.values(), strict=True))
    each = [took.get(_variant(r.optimizer, r.dataset, r.params), mean) for r in todo]
    workers = _most_at_once(done)
    return RemainingCost(
        runs=len(todo),
        cpu_s=sum(cpu for cpu, _ in each),
        wall_s=max(sum(wall for _, wall in each) / workers, max(wall for _, wall in each)),
        workers=workers,
        first_cpu_s=sum(cpu for cpu, _ in took.values()),
    )


def _most_at_once(records: Sequence[dict]) -> int:
    """The most of ``records``' runs that ran at one time, their last attempts' spans
    (``finished_at`` less ``duration_s``): the workers the board had, however many processes
    ran its runs across restarts. At least 1."""
    edges = sorted(
        [(r["finished_at"] - r["duration_s"], 1) for r in records]
        + [(r["finished_at"], -1) for r in records]
    )  # a run ending as another starts: the end first
    return max(1, max(accumulate(step for _, step in edges), default=0))
