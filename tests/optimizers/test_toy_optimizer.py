"""Adding an optimizer takes one class and one registry line: a toy one, registered here in a
test, runs through ``farm run`` (the CLI, ``RunSpec`` and ``run_one``) and ``farm optimizers``
like the built-in ones."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq

from optfarm.farm.cli import main as farm_main
from optfarm.optimizers.base import Optimizer, Param, Recommendation, Suggestion
from optfarm.optimizers.registry import OPTIMIZERS
from optfarm.oracle.registry import load


class DearestFirst(Optimizer):
    """Runs the untested configurations by decreasing price per second."""

    name = "dearest-first"
    summary = "untested configurations by decreasing price per second"
    params = (Param("n_init", 2, "configurations counted as the initial phase", low=0),)

    def suggest(self) -> Suggestion | None:
        untested = np.flatnonzero(~self.tested())
        if len(untested) == 0 or self.spent >= self.problem.budget:
            return None
        dearest = int(untested[np.argmax(self.space.price_per_s[untested])])
        phase = "init" if len(self.history) < self.config["n_init"] else "search"
        return Suggestion(dearest, phase=phase)

    def recommend(self) -> Recommendation | None:
        return self.recommend_best_observed()


def test_a_toy_optimizer_runs_through_farm_run(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(OPTIMIZERS, "dearest-first", f"{__name__}:DearestFirst")  # the line
    trace_path = tmp_path / "trace.parquet"
    code = farm_main(
        [
            "run",
            "--optimizer",
            "dearest-first",
            "--dataset",
            "synthetic",
            "--iterations",
            "12",
            "--param",
            "n_init=3",
            "--json",
            "--trace",
            str(trace_path),
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["optimizer"] == "dearest-first" and summary["params"] == {"n_init": 3}
    rows = pq.read_table(trace_path).to_pylist()
    # the twelve dearest configurations by price (stable order), the first three as "init"
    price = load("synthetic").space().price_per_s
    assert [r["config_id"] for r in rows] == list(np.argsort(-price, kind="stable")[:12])
    assert [r["phase"] for r in rows] == ["init"] * 3 + ["search"] * 9
    # the recommendation: the cheapest run observed to meet the problem's constraints
    problem = load("synthetic").meta.problem
    ok = [r for r in rows if all(c.holds(r[c.metric]) for c in problem.constraints)]
    rec = summary["recommendation"]
    assert ok and rec["config_id"] == min(ok, key=lambda r: r["cost"])["config_id"]


def test_a_toy_optimizer_is_listed_with_its_parameters(monkeypatch, capsys):
    monkeypatch.setitem(OPTIMIZERS, "dearest-first", f"{__name__}:DearestFirst")
    assert farm_main(["optimizers"]) == 0
    assert "dearest-first" in capsys.readouterr().out
    assert farm_main(["optimizers", "dearest-first"]) == 0
    block = capsys.readouterr().out
    assert "untested configurations by decreasing price per second" in block
    assert "n_init" in block and "configurations counted as the initial phase" in block
