"""The regression gate tested on itself: ``farm regress --mutations`` reruns the gate's runs
under each mutation of a catalogue (plausible regressions of a paper's key mechanism, and
neutral changes: new random streams, reordered work) and reports which the gate catches
(``optfarm.farm.gate.regress``).

The catalogue is not shipped: its mutations patch the optimizers' code by name, private methods
included (``Lynceus._context``), so it lives in the checkout beside this package,
``mutations/catalogue.py``, and ``load_catalogue`` reads it from there (an editable install;
an installed wheel has none, and ``--mutations`` says so). A mutation's ``patch`` applies it
for the duration of a ``with`` block. Runs go to worker processes forked inside the block (they
inherit the patch); only the runs a mutation can change are rerun (those of the optimizers it
touches, at the settings where its mechanism acts: ``Mutation.when``), the others keep the
baseline's values. That a mutation bites, in forked workers, is checked on a short probe run
per mutation (``Mutation.probe``, ``changes_trajectory``): its chosen configurations or
incumbents must differ from the unmutated run's on the same seed. The table's ``changed``
column counts the gate's runs whose gated values moved at all: a mechanism that bites but
changes no outcome shows 0.

Regressions are expected to be caught, unless the gate's sweeps do not exercise the mechanism
(e.g. a budget filter with no budget): ``exercised_by`` names what a spec needs for that.
Neutral changes must pass: they draw new seeds from the same distributions.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import multiprocessing
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import optfarm
from optfarm.farm.run.spec import RunSpec

__all__ = [
    "CATALOGUE",
    "Mutation",
    "MutationResult",
    "affects",
    "changes_trajectory",
    "format_mutation_table",
    "load_catalogue",
    "mutation_table",
    "run_forked",
    "run_mutation",
    "trajectory",
]

CATALOGUE = Path("mutations") / "catalogue.py"  # in a checkout, beside the optfarm package


@dataclass(frozen=True)
class Mutation:
    """One change of the code: ``patch`` is a context manager factory that applies it."""

    name: str
    kind: str  # "regression" | "neutral"
    optimizers: tuple[str, ...]  # whose runs it can change ("*": every optimizer)
    what: str
    patch: Callable[[], contextlib.AbstractContextManager]
    probe: Mapping[str, Any] | None = None  # RunSpec fields of a short run whose trajectory
    #                                   it changes (changes_trajectory); None: a change at the
    #                                   last bits of floats, which may leave every choice as is
    when: Callable[[RunSpec], bool] | None = None  # which of its optimizers' runs (resolved
    #                                   parameters) it can change; None: all of them
    exercised_by: str = ""  # what a sweep needs to exercise it, if not obvious


def load_catalogue() -> ModuleType:
    """The catalogue module (its ``MUTATIONS``, and ``patched``) of the checkout this
    ``optfarm`` runs from: ``CATALOGUE`` beside the package (an editable install); LookupError,
    one line, when there is none (an installed wheel ships no catalogue)."""
    path = Path(optfarm.__file__).resolve().parents[1] / CATALOGUE
    if not path.is_file():
        raise LookupError(
            f"--mutations needs optfarm's checkout: the mutation catalogue ({CATALOGUE}) is "
            f"not shipped, and none is beside {Path(optfarm.__file__).parent} (install a "
            "checkout with pip install -e .)"
        )
    name = "optfarm_mutation_catalogue"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def affects(mutation: Mutation, run: RunSpec) -> bool:
    """Whether ``mutation`` can change ``run`` (its optimizer and, with ``when``, its
    resolved parameters, budget or dataset)."""
    if "*" not in mutation.optimizers and run.optimizer not in mutation.optimizers:
        return False
    return mutation.when is None or mutation.when(run.resolved())


def _run(spec):
    from optfarm.farm.run.loop import run_one

    return run_one(spec).summary


def trajectory(spec: RunSpec) -> list[tuple]:
    """A run's path: at each step the chosen (configuration, fidelity), whether it timed out,
    the incumbent after it and the optimizer's own pick."""
    from optfarm.farm.run.loop import run_one

    trace = run_one(spec).trace
    columns = ("config_id", "fidelity", "timed_out", "incumbent_config_id", "pick_config_id")
    return list(zip(*(trace.column(c).to_pylist() for c in columns)))


def run_forked(runs: Sequence, workers: int = 2, work: Callable = _run) -> list:
    """``work(spec)`` (by default the run's summary) of each of ``runs`` (``RunSpec``s), in
    ``workers`` processes forked from this one (so they run the code as it is patched here
    now)."""
    with multiprocessing.get_context("fork").Pool(max(1, min(workers, len(runs)))) as pool:
        return pool.map(work, runs, chunksize=1)


def run_mutation(
    mutation: Mutation, runs: Sequence, workers: int = 2, work: Callable = _run
) -> list:
    """``work`` of each of ``runs`` under ``mutation``, in forked workers."""
    with mutation.patch():
        return run_forked(runs, workers, work)


def changes_trajectory(mutation: Mutation) -> bool:
    """Whether ``mutation``, applied in a forked worker, changes the trajectory of its probe
    run against the unmutated run on the same seed: proof that it bites where the gate runs."""
    probe = RunSpec(**mutation.probe)
    return run_forked([probe], 1, trajectory) != run_mutation(mutation, [probe], 1, trajectory)


@dataclass
class MutationResult:
    mutation: Mutation
    n_runs: int  # the gate's runs it can change (rerun, or reused from a folder)
    n_changed: int  # of them, those whose gated values differ from the baseline's
    wall_s: float
    cpu_s: float  # of the forked workers
    reused: int  # of its runs, those whose values came from the folder
    flagged: list  # the gate's REGRESSION rows
    improved: list  # the gate's "improved" rows: the mutation made those better
    strongest: object  # the affected row with the smallest Holm p-value (or None)

    @property
    def caught(self) -> bool:
        return bool(self.flagged)


def mutation_table(
    runs: Sequence,
    baseline: dict,
    mutations: Sequence[Mutation],
    workers: int = 2,
    alpha: float = 0.05,
    tolerance: float = 0.10,
    min_effect: float = 0.64,
    consistent_tolerance: float = 0.05,
    store: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[MutationResult]:
    """For each mutation: rerun the ``runs`` it affects under it and run the gate against
    ``baseline``, the other runs keeping the baseline's values (what unmutated code
    reproduces exactly: ``farm regress`` checks that). With ``store``, each mutation's values
    are kept in ``store/<name>.json`` (the baseline's format) and reused by a later call:
    only the runs whose (entry, seed) it does not hold are rerun, e.g. a gate with more seeds
    reruns its new seeds, and a new statistic or a gate on a subset of the runs (the short CI
    gate on the nightly's results) reruns nothing."""
    from optfarm.farm.report.analysis import variant_labels

    labels = variant_labels(
        [
            {"run_key": r.run_key, "optimizer": r.optimizer, "params": r.resolved().params}
            for r in runs
        ]
    )
    key = {r.run_key: f"{r.dataset} / {labels[r.run_key]}" for r in runs}
    gate = {
        "alpha": alpha,
        "tolerance": tolerance,
        "min_effect": min_effect,
        "consistent_tolerance": consistent_tolerance,
    }
    base = _restrict(baseline, runs, key)
    out = []
    for m in mutations:
        affected = [r for r in runs if affects(m, r)]
        path = None if store is None else Path(store) / f"{m.name}.json"
        t0, cpu0 = time.perf_counter(), _children_cpu()
        kept, n_rerun = _mutated_values(m, affected, key, labels, path, workers)
        mutated = _restrict(kept, affected, key)
        wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
        flagged, improved, strongest = _gate_verdicts(base, mutated, gate)
        out.append(
            MutationResult(
                m,
                len(affected),
                _changed_seeds(mutated, base),
                wall,
                cpu,
                len(affected) - n_rerun,
                flagged,
                improved,
                strongest,
            )
        )
        if progress is not None:
            progress(_progress_line(out[-1]))
    return out


def _mutated_values(
    m: Mutation,
    affected: Sequence,
    key: Mapping[str, str],
    labels: Mapping[str, str],
    path: Path | None,
    workers: int,
) -> tuple[dict, int]:
    """The values of the ``affected`` runs under ``m`` and how many were rerun: those kept
    at ``path`` (the baseline's format) are reused, the others rerun in ``workers`` forked
    processes and added there."""
    from optfarm.farm.gate.regress import quality_values, read_baseline, write_baseline

    kept = read_baseline(path) if path is not None and path.is_file() else {}
    missing = [r for r in affected if r.seed not in kept.get(key[r.run_key], {}).get("seeds", ())]
    if missing:
        new = quality_values(run_mutation(m, missing, workers), labels)
        kept = _merge(kept, new)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_baseline(path, kept, f"mutation {m.name}")
    return kept, len(missing)


def _gate_verdicts(
    base: dict, mutated: dict, gate: Mapping[str, float]
) -> tuple[list, list, object]:
    """The gate run on the baseline with the ``mutated`` entries replaced: its REGRESSION
    rows, its "improved" rows and, of the rows the mutation ran, the one with the strongest
    evidence (the smallest Holm p-value; None if it ran none)."""
    from optfarm.farm.gate.regress import compare

    rows = compare(base, {**base, **mutated}, **gate)
    touched = [r for r in rows if r.key in mutated and r.verdict != "not run"]
    strongest = min(touched, key=lambda r: (r.p_holm, r.p_worse, -r.effect), default=None)
    return (
        [r for r in rows if r.verdict == "REGRESSION"],
        [r for r in rows if r.verdict == "improved"],
        strongest,
    )


def _changed_seeds(mutated: dict, base: dict) -> int:
    """How many (entry, seed) values of ``mutated`` differ from the baseline's."""
    from optfarm.farm.gate.regress import same

    return sum(
        not all(same(v[q], was[q]) for q in v if q in was)
        for k, e in mutated.items()
        for s, v in e["seeds"].items()
        if (was := base.get(k, {}).get("seeds", {}).get(s)) is not None
    )


def _progress_line(res: MutationResult) -> str:
    """One line of ``mutation_table``'s progress: runs, reruns, changed, the verdict."""
    n, reused, strongest = res.n_runs, res.reused, res.strongest
    how = (
        f"{reused} reused"
        if reused == n
        else f"{n - reused} rerun in {res.wall_s:.0f} s ({res.cpu_s:.0f} CPU-s)"
        + (f", {reused} reused" if reused else "")
    )
    return (
        f"{res.mutation.name}: {n} runs, {how}, {res.n_changed} changed, "
        f"{'CAUGHT' if res.caught else 'not caught'}"
        + (
            f" ({strongest.key}: {strongest.quality}, worse {strongest.effect:.2f}"
            f" of {strongest.n_changed}, p {strongest.p_holm:.2g})"
            if strongest
            else ""
        )
    )


def _merge(values: Mapping, more: Mapping) -> dict:
    """``values`` with the seeds of ``more`` added, entry by entry."""
    out = {k: {**e, "seeds": dict(e["seeds"])} for k, e in values.items()}
    for k, e in more.items():
        out.setdefault(k, {**e, "seeds": {}})["seeds"].update(e["seeds"])
    return out


def _restrict(values: Mapping, runs: Sequence, key: Mapping[str, str]) -> dict:
    """The entries and seeds of ``values`` that ``runs`` have."""
    seeds: dict[str, set] = {}
    for r in runs:
        seeds.setdefault(key[r.run_key], set()).add(r.seed)
    return {
        k: {**e, "seeds": {s: v for s, v in e["seeds"].items() if s in seeds[k]}}
        for k, e in values.items()
        if k in seeds
    }


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the forked workers)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


MUTATION_COLUMNS = (
    "mutation",
    "kind",
    "runs",
    "changed",
    "verdict",
    "strongest evidence",
    "worse",
    "p (Holm)",
)
# the rates under the table: (kind of mutation, its line given (flagged, tried))
RATE_LINES = (
    ("regression", "\ndetection rate: {}/{} regressions caught"),
    ("neutral", "false-alarm rate: {}/{} neutral changes flagged"),
)


def format_mutation_table(results: Sequence[MutationResult]) -> str:
    """One row per mutation, then the detection and false-alarm rates."""
    from optfarm.farm.gate.regress import aligned_lines

    return "\n".join(
        aligned_lines(MUTATION_COLUMNS, [_table_row(r) for r in results])
        + _footer(results)
        + _rerun_time(results)
    )


def _footer(results: Sequence[MutationResult]) -> list[str]:
    """Under the table: what a sweep needs to exercise each missed regression, the
    detection and false-alarm rates."""
    lines = [
        f"{r.mutation.name}: exercised only by {r.mutation.exercised_by}"
        for r in results
        if r.mutation.kind == "regression" and not r.caught and r.mutation.exercised_by
    ]
    for kind, line in RATE_LINES:
        tried = [r for r in results if r.mutation.kind == kind and r.n_runs]
        if tried:
            lines.append(line.format(sum(r.caught for r in tried), len(tried)))
    return lines


def _rerun_time(results: Sequence[MutationResult]) -> list[str]:
    """The wall and CPU time of the mutations that reran runs (none if all were reused)."""
    rerun = [r for r in results if r.reused < r.n_runs]
    if not rerun:
        return []
    return [
        f"rerun: {sum(r.wall_s for r in rerun):.0f} s wall, "
        f"{sum(r.cpu_s for r in rerun):.0f} CPU-s in the workers"
    ]


def _table_row(r: MutationResult) -> tuple[str, ...]:
    """A mutation's cells: what it is, how many runs it changed, the verdict, the evidence."""
    s = r.strongest
    evidence = (
        ("-", "-", "-")
        if s is None
        else (
            f"{s.key}: {s.quality} {_pct(s.change)}",
            f"{s.effect:.2f} of {s.n_changed}",
            f"{s.p_holm:.2g}",
        )
    )
    return (
        r.mutation.name,
        r.mutation.kind,
        str(r.n_runs),
        str(r.n_changed),
        _verdict(r),
        *evidence,
    )


def _verdict(r: MutationResult) -> str:
    """A regression is caught or missed, a neutral change passed or a false alarm."""
    if r.n_runs == 0:
        return "not in this gate"
    if r.mutation.kind != "regression":
        return "FALSE ALARM" if r.caught else "passed"
    return ("caught" if r.caught else "missed") + (
        f" ({len(r.improved)} improved)" if r.improved else ""
    )


def _pct(v: float) -> str:
    if math.isnan(v):
        return "-"
    return ("+inf" if v > 0 else "-inf") if math.isinf(v) else f"{v:+.0%}"
