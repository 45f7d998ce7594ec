"""optfarm.farm.report.analysis: curves, reach costs and tables on hand-made traces with known
answers; the figures and the self-contained page from real runs; the papers' numbers shown only
where the sweep matches their experiment."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from optfarm.farm.report.analysis import analyse, paper_rows, peer_rows, variant_labels
from optfarm.farm.report.page import write_report
from optfarm.farm.report.papers import PAPER_NUMBERS, PaperNumber, Selector
from optfarm.farm.run.loop import TRACE_SCHEMA, run_one
from optfarm.farm.run.spec import RunSpec


def make_run(
    run_key,
    dataset,
    optimizer,
    seed,
    costs,
    cnos,
    feasible,
    params=None,
    metric="cno",
    latency=0.01,
    optimum=1.0,
    extra=None,
):
    """A trace and summary of a CNO (or Accuracy_C) run with the given per-step values."""
    params = params or {}
    n = len(costs)
    cum = np.cumsum(costs)
    rows = [
        {
            "run_key": run_key,
            "dataset": dataset,
            "optimizer": optimizer,
            "params": json.dumps(params),
            "seed": seed,
            "step": i,
            "phase": "search",
            "config_id": i,
            "config": "{}",
            "fidelity": 1.0,
            "time": 10.0 * costs[i],
            "cost": costs[i],
            "accuracy": 0.9,
            "timed_out": False,
            "cum_exploration_cost": float(cum[i]),
            "cum_exploration_time": 10.0 * cum[i],
            "incumbent_config_id": i,
            "incumbent_cno": cnos[i] if metric == "cno" else math.nan,
            "incumbent_accuracy_c": math.nan if metric == "cno" else cnos[i],
            "incumbent_feasible": feasible[i],
            "recommendation_latency_s": latency,
            "model_fit_s": 0.0,
        }
        for i in range(n)
    ]
    for row in rows:  # the optimizer's own pick: the credited incumbent
        row.update(
            {
                f"pick_{k[len('incumbent_') :]}": v
                for k, v in list(row.items())
                if k.startswith("incumbent_")
            }
        )
    trace = pa.Table.from_pylist(rows, schema=TRACE_SCHEMA)
    value = cnos[-1]
    summary = {
        "run_key": run_key,
        "dataset": dataset,
        "optimizer": optimizer,
        "params": params,
        "seed": seed,
        "metric": metric,
        "problem": {
            "objective": "min cost" if metric == "cno" else "max accuracy",
            "constraints": ["time<=100"],
            "budget": None,
        },
        "n_evaluations": n,
        "exploration_cost": float(cum[-1]),
        "recommendation": {"config_id": n - 1, metric: value, "feasible": feasible[-1]},
        "optimum": {"config_id": 0, metric: optimum},
        "exploration_cost_to_reach": {},
        **(extra or {}),
    }
    return trace, summary


def sweep(runs):
    traces, summaries = zip(*runs)
    return pa.concat_tables(traces), list(summaries)


def test_cno_percentiles_are_step_functions_over_seeds_and_reach_costs_are_exact():
    trace, summaries = sweep(
        [
            make_run("a", "d", "opt", 0, [1, 1, 2], [5.0, 1.5, 1.0], [True, True, True]),
            make_run("b", "d", "opt", 1, [1, 3, 4], [3.0, 3.0, 1.05], [True, True, True]),
            # an infeasible incumbent is no valid recommendation: CNO inf until step 2
            make_run("c", "d", "opt", 2, [2, 2, 2], [0.5, 0.5, 2.0], [False, False, True]),
        ]
    )
    a = analyse(trace, summaries)["d"]
    grid = a.cost_grid
    assert grid[0] == pytest.approx(1.0) and grid[-1] == pytest.approx(8.0)
    at = {x: int(np.argmin(abs(grid - x))) for x in (1.0, 2.0, 4.0, 8.0)}
    p50 = a.curves["opt"]["p50"]
    # cost 1: runs a, b have 5 and 3, run c nothing yet (inf)
    assert p50[at[1.0]] == 5.0
    # cost 8: a = 1.0, b = 1.05, c = 2.0
    assert p50[at[8.0]] == 1.05
    # Lynceus Fig. 4, step by step: the p90 of 3 runs is the largest
    assert a.curves["opt"]["fig4_cost"].tolist() == [2.0, 4.0, 8.0]
    assert a.curves["opt"]["fig4_cno"].tolist() == [math.inf, math.inf, 2.0]
    reach = a.reach["opt"]
    assert reach["cno<=2"].tolist() == [2.0, 8.0, 6.0]
    assert reach["cno<=1.1"].tolist() == [4.0, 8.0, math.inf]
    assert reach["cno<=1"].tolist() == [4.0, math.inf, math.inf]
    s = a.stats["opt"]
    assert s["reach_p50:cno<=2"] == 6.0 and s["reach_p90:cno<=1.1"] == math.inf
    assert s["reach_frac:cno<=1.1"] == pytest.approx(2 / 3)
    assert s["reach_time_p50:cno<=1.1"] == 80.0
    assert s["final_p50"] == 1.05 and s["final_p90"] == 2.0
    assert s["dopt_median"] == pytest.approx(0.05)
    assert s["nex_median"] == 3 and s["latency_median_s"] == 0.01


def test_accuracy_c_curves_average_seeds_and_reach_ninety_percent_of_the_optimum():
    trace, summaries = sweep(
        [
            make_run("a", "tt", "opt", 0, [1, 1], [0.5, 0.95], [True, True], metric="accuracy_c"),
            make_run("b", "tt", "opt", 1, [1, 1], [0.8, 0.85], [True, True], metric="accuracy_c"),
        ]
    )
    a = analyse(trace, summaries)["tt"]
    mean = a.curves["opt"]["mean"]
    assert mean[0] == pytest.approx(0.65) and mean[-1] == pytest.approx(0.9)
    assert a.reach["opt"]["acc_c>=0.9opt"].tolist() == [2.0, math.inf]
    assert a.stats["opt"]["final_mean"] == pytest.approx(0.9)
    # the paper's statistic: the mean over runs, infinite while one run never got there
    assert a.stats["opt"]["reach_mean:acc_c>=0.9opt"] == math.inf


def test_variants_of_one_optimizer_are_labelled_by_the_parameters_that_differ():
    runs = [
        make_run(k, "d", "lynceus", 0, [1], [1.0], [True], params={"la": la, "gamma": 0.9})
        for k, la in (("x", 1), ("y", 2))
    ]
    runs.append(make_run("z", "d", "random", 0, [1], [1.0], [True], params={"n_init": 1}))
    labels = variant_labels(sweep(runs)[1])
    assert labels == {"x": "lynceus[la=1]", "y": "lynceus[la=2]", "z": "random"}


LYNCEUS = {"la": 2, "gamma": 0.9, "timeout": "tg"}  # the paper's settings


def test_paper_numbers_appear_only_where_the_sweep_matches_the_experiment():
    def runs(dataset, lynceus=LYNCEUS):
        return [
            make_run(
                f"{dataset}{opt}{s}{params}",
                dataset,
                opt,
                s,
                [1.0] * 4,
                cnos,
                [True] * 4,
                params=params,
            )
            for s in range(3)
            for opt, cnos, params in (
                ("lynceus", [3.0, 1.5, 1.0, 1.0], lynceus),
                ("eic-usd", [3.0, 3.0, 1.9, 1.05], {}),
            )
        ]

    a = analyse(*sweep(runs("lynceus-cnn") + runs("synthetic")))
    rows = paper_rows(a)
    assert rows and all(r["section"] == "lynceus-cnn" for r in rows)
    cno11 = next(r for r in rows if "CNO<=1.1" in r["quantity"] and r["paper"] == "Lynceus")
    # BO reaches CNO <= 1.1 at cost 4, Lynceus at 3
    assert cno11["ours"] == pytest.approx(4 / 3) and cno11["paper value"] == 6.2
    assert cno11["our variants"] == "eic-usd / lynceus"
    # Lynceus at other settings is not the paper's Lynceus: no BO / Lynceus row for it
    other = analyse(*sweep(runs("lynceus-cnn", {**LYNCEUS, "timeout": "none"})))
    assert not [r for r in paper_rows(other) if "BO / Lynceus" in r["quantity"]]
    # BO's p90 CNO never reaches the optimum, Lynceus' does at cost 3 (Fig. 4a)
    fig4 = next(r for r in rows if "reaches CNO = 1" in r["quantity"])
    assert fig4["ours"] == math.inf and fig4["our values"] == "never / 3"
    assert not paper_rows(analyse(*sweep(runs("synthetic"))))
    # a number needing a baseline variant that is absent is not shown
    lonely = PaperNumber(
        "P",
        "Fig. 0",
        r"lynceus-cnn",
        "q",
        "final_p50",
        Selector("lynceus"),
        1.0,
        baseline=Selector("cherrypick"),
    )
    assert paper_rows(a, [lonely]) == []


def test_lynceus_fig4_and_fig5_are_read_at_the_papers_points():
    """Fig. 4: p90 CNO against p90 cost per step, read where the curve reaches CNO = 1; Fig. 5:
    the CDFs of the cost to reach CNO <= 2 and <= 1.1 at 0.9. Ten runs per optimizer, so a
    p90 is the 9th smallest value."""
    lynceus = (
        # five runs reach the optimum at cost 2, then spend a lot more
        [
            make_run(
                f"l{s}",
                "lynceus-multilayer",
                "lynceus",
                s,
                [1, 1, 28, 10],
                [2, 1, 1, 1],
                [True] * 4,
                params=LYNCEUS,
            )
            for s in range(5)
        ]
        # four reach it at cost 9
        + [
            make_run(
                f"l{s}",
                "lynceus-multilayer",
                "lynceus",
                s,
                [3, 3, 3, 3],
                [2, 2, 1, 1],
                [True] * 4,
                params=LYNCEUS,
            )
            for s in range(5, 9)
        ]
        # one stops after two steps at CNO 1.5 (it keeps cost 2 and CNO 1.5)
        + [
            make_run(
                "l9",
                "lynceus-multilayer",
                "lynceus",
                9,
                [1, 1],
                [0.5, 1.5],
                [False, True],
                params=LYNCEUS,
            )
        ]
    )
    bo = [
        make_run(f"b{s}", "lynceus-multilayer", "eic-usd", s, [10] * 4, [3, 2, 1.05, 1], [True] * 4)
        for s in range(10)
    ]
    a = analyse(*sweep(lynceus + bo))["lynceus-multilayer"]
    # per step, the 9th of the 10 cumulative costs and CNOs:
    #   costs {1 x5, 3 x4, 1}, {2 x5, 6 x4, 2}, {30 x5, 9 x4, 2}, {40 x5, 12 x4, 2}
    #   CNOs  {2 x9, inf},     {1 x5, 2 x4, 1.5}, {1 x9, 1.5},   {1 x9, 1.5}
    assert a.curves["lynceus"]["fig4_cost"].tolist() == [3.0, 6.0, 30.0, 40.0]
    assert a.curves["lynceus"]["fig4_cno"].tolist() == [2.0, 2.0, 1.0, 1.0]
    # the curve reaches CNO = 1 at step 2, at p90 cost 30, although 9 of 10 runs had found
    # the optimum by cost 9 (the p90 of the cost to reach it, Fig. 5's statistic)
    assert a.stats["lynceus"]["fig4_p90_cost:cno<=1"] == 30.0
    assert a.stats["lynceus"]["reach_p90:cno<=1"] == 9.0
    assert a.stats["eic-usd"]["fig4_p90_cost:cno<=1"] == 40.0
    rows = {r["quantity"]: r for r in paper_rows({"lynceus-multilayer": a})}
    fig4 = "p90 exploration cost where the p90-CNO curve reaches CNO = 1"
    assert rows[f"{fig4}, Lynceus ($)"]["ours"] == 30.0
    assert rows[f"{fig4}, Lynceus ($)"]["paper value"] == 19.5
    assert rows[f"{fig4}, BO ($)"]["ours"] == 40.0
    assert rows[f"{fig4}, BO / Lynceus"]["ours"] == pytest.approx(40 / 30)
    assert rows[f"{fig4}, BO / Lynceus"]["paper value"] == 11.0
    # a ratio shows its two terms, so "-" (BO's or Lynceus' curve never got there) is read
    assert rows[f"{fig4}, BO / Lynceus"]["our values"] == "40 / 30"
    # Fig. 5: Lynceus' first costs to CNO <= 2 are {1 x5, 3 x4, 2} (9th: 3), BO's all 20;
    # to CNO <= 1.1, {2 x5, 9 x4, never} (9th: 9) against BO's 30
    fig5 = "p90 exploration cost to reach CNO<={} (its CDF at 0.9), BO / Lynceus"
    assert rows[fig5.format(2)]["ours"] == pytest.approx(20 / 3)
    assert rows[fig5.format(2)]["paper value"] == 2.7
    assert rows[fig5.format(1.1)]["ours"] == pytest.approx(30 / 9)
    assert rows[fig5.format(1.1)]["paper value"] == 6.2


def test_every_published_number_names_a_statistic_the_report_computes():
    trace, summaries = sweep(
        [
            make_run(
                "a",
                "d",
                "o",
                0,
                [1],
                [1.0],
                [True],
                extra={
                    "recurring_job": {
                        "unfeasible_executions": 3,
                        "unfeasible_cost_ratio": 0.1,
                        "mean_feasible_cost": 1.2,
                    }
                },
            ),
            make_run("b", "t", "o", 0, [1], [0.9], [True], metric="accuracy_c"),
        ]
    )
    a = analyse(trace, summaries)
    known = set(a["d"].stats["o"]) | set(a["t"].stats["o"])
    assert {n.stat for n in PAPER_NUMBERS} <= known
    for n in PAPER_NUMBERS:
        re.compile(n.datasets)


def test_the_papers_optimizers_are_compared_with_the_best_peer(tmp_path):
    # reach CNO <= 1.1 at costs (seeds 0, 1): lynceus 2, 4; optuna-tpe 3, 8; optuna-random 5, 6
    runs = []
    for opt, costs in (("lynceus", (2, 4)), ("optuna-tpe", (3, 8)), ("optuna-random", (5, 6))):
        for seed, c in enumerate(costs):
            runs.append(
                make_run(f"{opt}{seed}", "d", opt, seed, [1, c - 1], [3.0, 1.0], [True, True])
            )
    analyses = analyse(*sweep(runs))
    rows = {r["optimizer"]: r for r in peer_rows(analyses)}
    # p90 over two seeds is the larger (inverted CDF): lynceus 4, tpe 8, random 6
    assert {k: r["value"] for k, r in rows.items()} == {
        "lynceus": 4,
        "optuna-tpe": 8,
        "optuna-random": 6,
    }
    assert {r["best peer"] for r in rows.values()} == {"optuna-random"}
    assert rows["lynceus"]["ratio to the best peer"] == pytest.approx(4 / 6)
    assert rows["lynceus"]["kind"] == "paper" and rows["optuna-tpe"]["kind"] == "peer"
    assert rows["optuna-tpe"]["ratio to the best paper optimizer"] == 2.0
    assert rows["optuna-tpe"]["runs"] == 2 and rows["optuna-tpe"]["reached"] == 1.0
    write_report(analyses, tmp_path)
    assert "Against the peers" in (tmp_path / "report.html").read_text()
    # without a peer in the sweep there is no such table
    assert peer_rows(analyse(*sweep(runs[:2]))) == []


def test_guindani_and_trimtuner_sections_compare_the_peers_on_their_papers_statistics():
    def job(unfeasible, cost):
        return {
            "recurring_job": {
                "unfeasible_executions": unfeasible,
                "unfeasible_cost_ratio": 0.1,
                "mean_feasible_cost": cost,
            }
        }

    runs = [
        make_run(
            f"{opt}{s}",
            "guindani-kmeans",
            opt,
            s,
            [1, 1],
            [2.0, cno],
            [True, True],
            params=params,
            extra=job(n, cost),
        )
        for opt, params, n, cost, cno in (
            ("guindani", {"variant": "d"}, 2, 1.0, 1.0),
            ("optuna-tpe", {}, 6, 1.5, 1.2),
            ("optuna-random", {}, 8, 1.2, 1.1),
        )
        for s in range(2)
    ]
    # TrimTuner's statistic: the mean cost to 90% of the optimum's Accuracy_C (optimum 1)
    runs += [
        make_run(
            f"t{opt}{s}",
            "trimtuner-cnn",
            opt,
            s,
            [1, c],
            [0.5, 0.95],
            [True, True],
            metric="accuracy_c",
        )
        for opt, costs in (("trimtuner", (1, 3)), ("optuna-gp", (4, 6)))
        for s, c in enumerate(costs)
    ]
    rows = peer_rows(analyse(*sweep(runs)))
    by = {(r["section"], r["statistic"], r["optimizer"]): r for r in rows}
    unfeasible = by["guindani-kmeans", "mean unfeasible executions", "guindani"]
    assert unfeasible["value"] == 2 and unfeasible["best peer"] == "optuna-tpe"
    assert unfeasible["ratio to the best peer"] == pytest.approx(2 / 6)
    cost = by["guindani-kmeans", "mean feasible cost per execution", "optuna-random"]
    assert cost["ratio to the best paper optimizer"] == pytest.approx(1.2)
    final = by["guindani-kmeans", "mean final CNO", "guindani"]
    assert final["best peer"] == "optuna-random"
    assert final["ratio to the best peer"] == pytest.approx(1 / 1.1)
    # the mean of 1 + 1 and 1 + 3 against 1 + 4 and 1 + 6
    tt = by["trimtuner-cnn", "mean cost to 90% of the optimum's Accuracy_C", "trimtuner"]
    assert tt["value"] == 3 and tt["ratio to the best peer"] == pytest.approx(3 / 6)
    # and, TrimTuner Fig. 1-2's statistic, the same of each optimizer's own pick
    own = by["trimtuner-cnn", "the same, own pick (TrimTuner Fig. 1-2)", "trimtuner"]
    assert own["value"] == 3
    assert len(rows) == 3 * 3 + 2 * 2


def test_trimtuner_against_eic_gives_the_own_pick_and_the_tested_incumbent_side_by_side():
    # TrimTuner's own pick reaches 90% of the optimum's Accuracy_C at the first step, the best
    # configuration it tested only at the second; EIc's pick is what it tested (issue 33)
    runs = []
    for s in range(2):
        trace, summary = make_run(
            f"t{s}",
            "trimtuner-cnn",
            "trimtuner",
            s,
            [1, 3],
            [0.5, 0.95],
            [True, True],
            params={"model": "dt"},
            metric="accuracy_c",
        )
        pick = trace.column_names.index("pick_accuracy_c")
        runs.append((trace.set_column(pick, "pick_accuracy_c", pa.array([0.95, 0.95])), summary))
        runs.append(
            make_run(
                f"e{s}",
                "trimtuner-cnn",
                "eic",
                s,
                [1, 1],
                [0.5, 0.95],
                [True, True],
                metric="accuracy_c",
            )
        )
    rows = [
        r
        for r in paper_rows(analyse(*sweep(runs)))
        if r["quantity"].startswith("exploration cost") and "EIc / TrimTuner-DT" in r["quantity"]
    ]
    assert len(rows) == 1 and rows[0]["statistic"] == "own pick"
    assert rows[0]["ours"] == pytest.approx(2 / 1)  # by the pick: EIc 2x
    assert rows[0]["ours, tested incumbent"] == pytest.approx(2 / 4)  # tested: EIc ahead


def test_scout_and_cherrypick_pool_together_against_the_best_peer():
    from optfarm.farm.report.pooled import pooled_reach_rows

    runs = []
    for job, u in {"scout-a": 2.0, "scout-b": 1.0, "cherrypick-c": 4.0}.items():
        for opt, first in (("lynceus", 1), ("optuna-tpe", 2), ("optuna-cmaes", 3)):
            cnos = [2.0] * first + [1.0] * (4 - first)
            runs.append(
                make_run(
                    f"{job}{opt}",
                    job,
                    opt,
                    0,
                    [u] * 4,
                    cnos,
                    [True] * 4,
                    extra={"mean_config_cost": u},
                )
            )
    rows = pooled_reach_rows(analyse(*sweep(runs)))
    joint = {r["optimizer"]: r for r in rows if r["family"] == "Scout and CherryPick"}
    assert joint["lynceus"]["runs"] == 3 and joint["lynceus"]["jobs"] == 3
    # CNO <= 1.1 after first + 1 configurations' costs, in units of one: lynceus 2, TPE 3
    assert joint["lynceus"]["best peer"] == "optuna-tpe"
    assert joint["lynceus"]["p90 / best peer p90"] == pytest.approx(2 / 3)
    assert joint["optuna-cmaes"]["p90 / best peer p90"] == pytest.approx(4 / 3)
    # CherryPick alone has one job: no pool; Scout alone has two
    assert {r["family"] for r in rows} == {"Scout", "Scout and CherryPick"}
    only_scout = [r for r in runs if r[1]["dataset"].startswith("scout-")]
    assert {r["family"] for r in pooled_reach_rows(analyse(*sweep(only_scout)))} == {"Scout"}


def test_report_page_is_self_contained_with_figures_and_tables(tmp_path):
    results = [
        run_one(RunSpec("synthetic", "random", seed=s, iterations=25, params={"n_init": n_init}))
        for s in range(4)
        for n_init in (1, 2)
    ]
    results += [
        run_one(
            RunSpec(
                "synthetic",
                "random",
                seed=s,
                iterations=15,
                objective="max accuracy",
                constraints=("cost<=0.5",),
            )
        )
        for s in range(3)
    ]
    trace = pa.concat_tables([r.trace for r in results])
    files = write_report(
        analyse(trace, [r.summary for r in results]), tmp_path / "out", title="test sweep"
    )
    names = sorted(f.name for f in files)
    pngs = [n for n in names if n.endswith(".png") and not n.startswith("sensitivity_")]
    assert len(pngs) == 3 and any(n.startswith("cno_") for n in pngs)
    # random's n_init grid (CNO problem only) gets main-effect panels per response
    assert "sensitivity_random__cno__quality_auc.png" in names
    assert any(n.startswith("reach_") for n in pngs) and any(
        n.startswith("accuracy_") for n in pngs
    )
    for f in files:
        if f.suffix == ".png":
            assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f.stat().st_size > 10_000
    page = (tmp_path / "out" / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3 + 3
    assert not re.search(r'src="(?!data:)', page)
    assert "Recommendation latency" in page and "random[n_init=2]" in page
    assert "No published experiment matches" in page
    assert "Guindani" not in page  # no run carries those metrics
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert len(stats) == 2


def test_guindani_table_when_summaries_carry_its_metrics(tmp_path):
    def job(unfeasible, cost):
        return {
            "recurring_job": {
                "unfeasible_executions": unfeasible,
                "unfeasible_cost_ratio": 0.2,
                "mean_feasible_cost": cost,
            }
        }

    trace, summaries = sweep(
        [
            make_run(
                f"g{v}{s}",
                "guindani-query26",
                "guindani",
                s,
                [1, 1],
                [2.0, 1.0],
                [True, True],
                params={"variant": v},
                extra=job(n + s, cost),
            )
            for v, n, cost in (("a", 10, 2.0), ("b", 4, 1.5))
            for s in range(2)
        ]
    )
    a = analyse(trace, summaries)
    assert a["guindani-query26"].stats["guindani[variant=b]"]["unfeasible_executions_mean"] == 4.5
    rows = {(r["quantity"]): r for r in paper_rows(a) if r["paper"] == "Guindani"}
    assert rows["unfeasible executions, variant B"]["paper value"] == 4.34
    assert rows["unfeasible executions, variant B"]["ours"] == 4.5
    normalised = rows["mean feasible cost normalised to variant A, variant B"]
    assert normalised["ours"] == 0.75 and normalised["paper value"] == 0.87
    write_report(a, tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert "Guindani et al. Table 1" in page and "<td>10.5</td>" in page


def test_bad_inputs_are_named():
    trace, summaries = sweep([make_run("a", "d", "o", 0, [1], [1.0], [True])])
    with pytest.raises(ValueError, match="no runs"):
        analyse(trace, [])
    with pytest.raises(ValueError, match="lacks column 'incumbent_cno'"):
        analyse(trace.drop_columns(["incumbent_cno"]), summaries)
    with pytest.raises(ValueError, match="no rows for run b"):
        analyse(trace, summaries + [{**summaries[0], "run_key": "b"}])


def test_farm_report_reads_a_sweep_folder_and_logs_to_its_mlflow_parent_run(tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    from optfarm.farm.cli import main

    out = tmp_path / "sweep"
    assert (
        main(
            [
                "sweep",
                "--datasets",
                "synthetic",
                "--optimizers",
                "random",
                "--seeds",
                "2",
                "--iterations",
                "10",
                "--serial",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert main(["report", str(out)]) == 0
    assert "logged 4 report files" in capsys.readouterr().out
    page = (out / "report" / "report.html").read_text()
    assert "synthetic" in page and page.count("data:image/png;base64,") == 2
    client = MlflowClient(f"sqlite:///{out.resolve() / 'mlflow.db'}")
    sweep_id = json.loads((out / "sweep.json").read_text())["sweep_id"]
    (parent,) = client.search_runs(
        [client.get_experiment_by_name("inline").experiment_id],
        f"tags.`optfarm.sweep_id` = '{sweep_id}' and tags.`optfarm.kind` = 'sweep'",
    )
    logged = {Path(a.path).name for a in client.list_artifacts(parent.info.run_id, "report")}
    assert logged == {"report.html", "stats.json", "cno_synthetic.png", "reach_synthetic.png"}
    # --current: only the runs the stored spec expands to now (here: seed 0 only, the sweep
    # run again with one seed)
    assert (
        main(
            [
                "sweep",
                "--datasets",
                "synthetic",
                "--optimizers",
                "random",
                "--seeds",
                "1",
                "--iterations",
                "10",
                "--serial",
                "--out",
                str(out),
                "--no-progress",
                "--no-tracking",
            ]
        )
        == 0
    )
    assert (
        main(["report", str(out), "--current", "--no-tracking", "--out", str(tmp_path / "r")]) == 0
    )
    assert "report of 1 runs" in capsys.readouterr().out


def test_farm_report_bad_input_exits_2(tmp_path, capsys):
    from optfarm.farm.cli import main

    assert main(["report", str(tmp_path)]) == 2
    assert "not a sweep output folder" in capsys.readouterr().err


def test_scout_jobs_pool_into_one_cdf_in_mean_configuration_cost_units():
    from optfarm.farm.report.pooled import pooled_reach_rows

    runs, unit = [], {"scout-a": 2.0, "scout-b": 10.0}
    for job, u in unit.items():
        for seed in range(2):
            for opt, first in (("lynceus", 1), ("eic-usd", 3)):
                # CNO <= 1.1 reached at step `first`: cumulative cost (first + 1) x u
                cnos = [2.0] * first + [1.0] * (4 - first)
                runs.append(
                    make_run(
                        f"{job}{opt}{seed}",
                        job,
                        opt,
                        seed,
                        [u] * 4,
                        cnos,
                        [True] * 4,
                        extra={"mean_config_cost": u},
                    )
                )
    rows = pooled_reach_rows(analyse(*sweep(runs)))
    by = {r["optimizer"]: r for r in rows}
    assert {r["family"] for r in rows} == {"Scout"} and by["lynceus"]["runs"] == 4
    assert by["lynceus"]["cost to cno<=1.1 p90 (mean config costs)"] == 2.0
    assert by["eic-usd"]["cost to cno<=1.1 p90 (mean config costs)"] == 4.0
    assert by["eic-usd"]["p90 / lynceus p90"] == 2.0
    assert by["eic-usd"]["paper (BO / Lynceus)"] == 1.6
    assert by["lynceus"]["p90 / lynceus p90"] is None


SENSITIVITY_SPEC = """\
name: sens
datasets: [synthetic]
optimizers:
  - name: lynceus
    params: {la: [0, 1], timeout: [none, tg]}
  - random
seeds: 3
limits: {iterations: 14}
tracking: {enabled: false}
"""


def test_a_grid_sweep_gets_a_sensitivity_section_with_figures(tmp_path, capsys):
    """A real (small) grid sweep: the report ranks the grid's parameters per response, writes
    main-effect and interaction figures and sensitivity.json; random (no grid) is left out."""
    import json

    from optfarm.farm.cli import main

    spec, out = tmp_path / "sens.yaml", tmp_path / "out"
    spec.write_text(SENSITIVITY_SPEC)
    assert main(["sweep", str(spec), "--out", str(out), "--serial", "--no-progress"]) == 0
    assert main(["report", str(out), "--no-tracking"]) == 0
    report = out / "report"
    doc = json.loads((report / "sensitivity.json").read_text())
    assert list(doc) == ["lynceus"]
    auc = doc["lynceus"]["quality_auc"]
    assert sorted(auc["ranking"]) == ["lynceus.la", "lynceus.timeout"]
    assert auc["n_seeds"] == 3
    shares = auc["importance"]
    assert 0 <= shares["lynceus.la"] <= 1 and 0 <= shares["lynceus.la x lynceus.timeout"] <= 1
    assert (report / "sensitivity_lynceus_quality_auc.png").stat().st_size > 0
    assert (report / "interaction_lynceus_lynceus.la_lynceus.timeout.png").stat().st_size > 0
    page = (report / "report.html").read_text()
    assert "Sensitivity: parameter importance" in page and "lynceus.timeout" in page


def test_a_large_grid_draws_its_best_worst_and_default_variants_only():
    from optfarm.farm.report.page import MAX_CURVES, chosen_variants

    results = [
        run_one(RunSpec("synthetic", "random", seed=s, iterations=12, params={"n_init": n}))
        for s in range(2)
        for n in range(1, MAX_CURVES + 2)
    ]
    trace = pa.concat_tables([r.trace for r in results])
    [a] = analyse(trace, [r.summary for r in results]).values()
    assert len(a.groups) == MAX_CURVES + 1
    chosen = chosen_variants(a)
    auc = {
        label: np.median([s["quality_auc"] for s in g.summaries]) for label, g in a.groups.items()
    }
    # each is drawn with its role in the legend (ties: either of the tied variants)
    [best] = [label for label, role in chosen.items() if "best quality_auc" in role]
    [worst] = [label for label, role in chosen.items() if "worst quality_auc" in role]
    assert auc[best] == min(auc.values()) and auc[worst] == max(auc.values())
    assert "default" in chosen["random[n_init=1]"]  # the default setting
    assert len(chosen) <= 3


def test_lookahead_table_gives_quantiles_per_la_and_the_p90_ratio_to_la0():
    """Lynceus Fig. 8: one family per variant that differs only in ``la``; p90 LA0 / LA."""
    from optfarm.farm.report.lookahead_window import lookahead_rows

    runs = []
    for la, first in ((0, 3), (1, 1)):
        for seed in range(4):
            # one cost unit per step; CNO <= 1.1 at step `first` (seed 3 of LA=0: never)
            cnos = [2.0] * first + [1.0] * (4 - first) if (la, seed) != (0, 3) else [2.0] * 4
            runs.append(
                make_run(
                    f"r{la}{seed}",
                    "lynceus-cnn",
                    "lynceus",
                    seed,
                    [1.0] * 4,
                    cnos,
                    [True] * 4,
                    params={"la": la, "timeout": "none"},
                )
            )
    runs.append(make_run("other", "lynceus-cnn", "eic-usd", 0, [1.0] * 4, [1.0] * 4, [True] * 4))
    rows = lookahead_rows(analyse(*sweep(runs)))
    assert [r["la"] for r in rows] == [0, 1]
    la0, la1 = rows
    assert la0["p50 ($)"] == 4.0 and la0["p90 ($)"] == math.inf and la0["seeds"] == 4
    assert la1["p90 ($)"] == 2.0 and la1["p90 LA0 / LA"] == math.inf
    assert la0["p90 LA0 / LA"] is None  # never reached at p90: no ratio


def _drawn(monkeypatch, draw):
    """The matplotlib figure ``draw()`` saves (captured before it is closed)."""
    from optfarm.farm.report import plots

    figures, save = [], plots._save
    monkeypatch.setattr(
        plots, "_save", lambda fig, *a, **k: (figures.append(fig), save(fig, *a, **k))[1]
    )
    draw()
    (fig,) = figures
    fig.canvas.draw()
    return fig


def _legend_clear_of_the_axes(fig):
    (legend,) = fig.legends
    box = legend.get_window_extent()
    assert all(box.y1 <= ax.get_window_extent().y0 for ax in fig.axes)


def test_cno_figure_shows_no_feasible_recommendation_as_such(tmp_path, monkeypatch):
    from optfarm.farm.report import plots

    grid = np.geomspace(1, 100, 20)
    curve = np.where(grid < 10, np.inf, 2.0)
    curves = {"random": {"p50": curve, "fig4_cost": grid, "fig4_cno": curve}}
    fig = _drawn(monkeypatch, lambda: plots.plot_cno(tmp_path / "c.png", "d", grid, curves))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert "no feasible\nrecommendation" in labels and "1000" not in labels
    none_at = ax.get_yticks()[labels.index("no feasible\nrecommendation")]
    x, y = ax.lines[0].get_data()
    assert np.all(y[x < 10] == none_at) and np.all(y[x >= 10] == 2.0)
    assert none_at > 2.0 * 2 and ax.get_ylim()[1] < 100  # a band just above the values
    _legend_clear_of_the_axes(fig)


def test_reach_figure_says_cno_and_draws_the_read_off_line(tmp_path, monkeypatch):
    from optfarm.farm.report import plots

    reach = {
        "random": {
            "cno<=2": np.array([1.0, 2.0, np.inf]),
            "cno<=1.1": np.array([3.0, np.inf, np.inf]),
        }
    }
    fig = _drawn(monkeypatch, lambda: plots.plot_reach_cdf(tmp_path / "r.png", "d", reach))
    assert [ax.get_title() for ax in fig.axes] == [
        "CDF over seeds, CNO <= 2",
        "CDF over seeds, CNO <= 1.1",
    ]
    for ax in fig.axes:
        assert any(np.allclose(line.get_ydata(), 0.9) for line in ax.lines[1:])
    _legend_clear_of_the_axes(fig)


def test_never_says_whether_runs_hit_their_limits_or_stopped_themselves():
    from optfarm.farm.report.analysis import never_text

    def run(reason, n, cost):
        return {"stop_reason": reason, "n_evaluations": n, "exploration_cost": cost}

    runs = [
        run("iterations", 400, 50.0),
        run("iterations", 380, 40.0),
        run("gave up: 2000 repeats", 30, 2.3),
        run("converged", 25, 3.2),
        run("target", 60, 4.0),
        run("iterations", 400, 9.0),
    ]
    reach = np.array([math.inf] * 5 + [8.0])
    assert never_text(runs, reach) == (
        "1 stopped at the run's own target (until); 2 not within 400 runs; 2 stopped "
        "themselves at 2.3-3.2 (converged, gave up: 2000 repeats)"
    )
    assert never_text(runs[-1:], reach[-1:]) == ""
