"""Reproduce the Lynceus-family claims (Lynceus ICDCS'20 Sec. VI, OBOL seed 004, Nephele
thesis ch. 6) and print our numbers next to the papers'.

    OPTFARM_DATA=... farm datasets fetch all --from ../shared/datasets
    nice python scripts/repro_lynceus.py tf --seeds 30          # TF jobs: Fig. 4-8 orderings
    nice python scripts/repro_lynceus.py scout-cherrypick --seeds 30
    nice python scripts/repro_lynceus.py obol --seeds 50
    nice python scripts/repro_lynceus.py nephele --seeds 30
    nice python scripts/repro_lynceus.py latency                # one core, LA = 0..3
    nice python scripts/repro_lynceus.py peers tf --no-stop     # against the peers (optfarm[peers])

Each run is driven exactly as ``farm.run.loop.run_one`` drives it (same oracle noise stream, the
IDEAL policy's full-cost reveal), except that a run stops as soon as its recommendation is
truly feasible with CNO <= ``--stop-cno`` (1.1 by default): the exploration cost needed to
reach a CNO target, the quantity of the papers' CDFs, is fixed by then. Unreached targets
count as infinite cost. Percentiles use ``method="higher"`` (an order statistic, so
infinities never interpolate). Runs go through a process pool of ``--workers`` processes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from farm.run.loop import execute
from farm.run.spec import RunSpec
from optimizers.registry import get, make_optimizer
from oracle.oracle import Oracle
from oracle.registry import available, load

TF_JOBS = ("lynceus-cnn", "lynceus-multilayer", "lynceus-rnn")


# -- one run ---------------------------------------------------------------------------------
def drive(task: dict) -> dict:
    """One run; returns the exploration cost at which each CNO target was first reached
    (keyed by the target), the final recommendation's CNO, evaluations, timeouts."""
    params = dict(task.get("params", {}))
    stops = any(p.name == "stop_threshold" for p in get(task["optimizer"]).params)
    if task.get("no_stop") and stops:
        params["stop_threshold"] = 0.0  # explore until the target CNO (or the space) is reached
    spec = RunSpec(task["dataset"], task["optimizer"], task["seed"], params,
                   budget=task.get("budget"), objective=task.get("objective"),
                   constraints=task.get("constraints"))
    dataset = load(spec.dataset)
    oracle = Oracle(dataset, spec.problem(dataset))
    opt = make_optimizer(spec.optimizer, oracle.space, oracle.problem, spec.seed,
                         **spec.params)
    noise = np.random.default_rng([spec.seed, 7])
    norm = task.get("cno_scale", 1.0)  # CNO relative to another optimum (Nephele: any s)
    targets = sorted(task.get("targets", (2.0, 1.1)), reverse=True)
    reached = {t: math.inf for t in targets}
    spent, n, timeouts, latency = 0.0, 0, 0, []
    cno = math.inf
    while n < task.get("max_evals", 10**9) and spent < oracle.problem.budget:
        t0, c0 = time.perf_counter(), time.process_time()
        s = opt.suggest()
        latency.append((s.phase if s else "none", time.perf_counter() - t0,
                        time.process_time() - c0))
        if s is None:
            break
        obs = execute(oracle, s, noise)
        opt.observe(s, obs)
        spent += obs.cost
        n += 1
        timeouts += bool(obs.timed_out)
        inc = opt.recommend()
        cid, fid = (None, 1.0) if inc is None else (inc.config_id, inc.fidelity)
        if cid is not None and oracle.is_feasible(cid, fid):
            cno = oracle.cno(cid, fid) * norm
            for t in targets:
                if cno <= t + 1e-12 and math.isinf(reached[t]):
                    reached[t] = spent
        else:
            cno = math.inf
        if cno <= task.get("stop_cno", -1.0):
            break
    search_lat = [t for p, t, _ in latency if p == "search"]
    search_cpu = [c for p, _, c in latency if p == "search"]
    return {**{k: task[k] for k in ("dataset", "optimizer", "seed", "label")},
            "reached": {str(t): v for t, v in reached.items()}, "final_cno": cno,
            "spent": spent, "n": n, "timeouts": timeouts,
            "latency_median": float(np.median(search_lat)) if search_lat else math.nan,
            "latency_cpu_median": float(np.median(search_cpu)) if search_cpu else math.nan}


def run_all(tasks: list[dict], workers: int, out: str | None) -> list[dict]:
    t0 = time.time()
    results = []
    with ProcessPoolExecutor(workers) as pool:
        for r in pool.map(drive, tasks, chunksize=1):
            results.append(r)
            if len(results) % 25 == 0:
                print(f"# {len(results)}/{len(tasks)} runs, {time.time() - t0:.0f} s",
                      file=sys.stderr, flush=True)
                if out:   # what is done so far survives an interrupted run
                    _write(out + ".partial", results)
    print(f"# {len(tasks)} runs in {time.time() - t0:.0f} s", file=sys.stderr)
    if out:
        _write(out, results)
    return results


def _write(path: str, results: list[dict]) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(results, f)
    os.replace(path + ".tmp", path)


def q(values, p) -> float:
    return float(np.quantile(np.asarray(values, dtype=float), p, method="higher"))


def reach(results, label, target, dataset=None):
    return [r["reached"][str(target)] for r in results
            if r["label"] == label and (dataset is None or r["dataset"] == dataset)]


def fmt(v: float) -> str:
    return "inf" if math.isinf(v) else f"{v:.3g}"


# -- experiments ------------------------------------------------------------------------------
TF_VARIANTS = {  # label: (optimizer, params)
    "lynceus LA=2 tg": ("lynceus", {"la": 2, "timeout": "tg"}),
    "eic-usd (LA=0, none)": ("eic-usd", {}),
    "random": ("random", {}),
    "LA=1 none": ("lynceus", {"la": 1, "timeout": "none"}),
    "LA=0 tg": ("lynceus", {"la": 0, "timeout": "tg"}),
    "LA=0 no-info": ("lynceus", {"la": 0, "timeout": "no-info"}),
    "LA=0 max-cost": ("lynceus", {"la": 0, "timeout": "max-cost"}),
}
TF_EXTRA = {  # --all: the other timeout policies and LA = 2 without timeout
    "LA=2 none": ("lynceus", {"la": 2, "timeout": "none"}),
    "LA=0 ideal": ("lynceus", {"la": 0, "timeout": "ideal"}),
    "LA=0 linear": ("lynceus", {"la": 0, "timeout": "linear"}),
}


def tf(args) -> None:
    """Lynceus Sec. VI-C..F on the TF jobs, infinite budget."""
    variants = {**TF_VARIANTS, **(TF_EXTRA if args.all else {})}
    if args.only:
        variants = {k: v for k, v in variants.items() if k in args.only.split(";")}
    tasks = [{"dataset": d, "optimizer": o, "params": p, "seed": s, "label": lab,
              "stop_cno": args.stop_cno, "max_evals": args.max_evals, "no_stop": args.no_stop}
             for d in TF_JOBS for lab, (o, p) in variants.items()
             for s in range(args.seeds)]
    res = run_all(tasks, args.workers, args.out)
    print(f"\n## TF jobs, {args.seeds} seeds: p90 / p50 exploration cost ($) to reach CNO<=1.1 "
          "(and p90 to CNO<=2)")
    print("| variant | " + " | ".join(TF_JOBS) + " |")
    print("|---|" + "---|" * len(TF_JOBS))
    for lab in variants:
        cells = []
        for d in TF_JOBS:
            r11, r2 = reach(res, lab, 1.1, d), reach(res, lab, 2.0, d)
            cells.append(f"{fmt(q(r11, .9))} / {fmt(q(r11, .5))} ({fmt(q(r2, .9))})")
        print(f"| {lab} | " + " | ".join(cells) + " |")
    print("\nratios at p90 (CNO<=1.1): paper: BO/Lynceus 6.2x (all TF, p90), LA=0/LA=1 5x")
    for d in TF_JOBS if set(TF_VARIANTS) <= set(variants) else ():
        p = {lab: q(reach(res, lab, 1.1, d), .9) for lab in variants}
        print(f"- {d}: eic-usd/lynceus {p['eic-usd (LA=0, none)'] / p['lynceus LA=2 tg']:.2f}x, "
              f"random/eic-usd {p['random'] / p['eic-usd (LA=0, none)']:.2f}x, "
              f"LA0/LA1 {p['eic-usd (LA=0, none)'] / p['LA=1 none']:.2f}x, "
              f"no-info/tg {p['LA=0 no-info'] / p['LA=0 tg']:.2f}x, "
              f"max-cost/tg {p['LA=0 max-cost'] / p['LA=0 tg']:.2f}x")


def scout_cherrypick(args) -> None:
    """Lynceus vs EIc/USD on the Scout and CherryPick jobs (Lynceus Sec. VI-C, Fig. 6);
    each run's cost is in units of its job's mean configuration cost, pooled over jobs."""
    jobs = [d for d in available() if d.startswith(("scout-", "cherrypick-"))]
    tasks = [{"dataset": d, "optimizer": o, "params": p, "seed": s, "label": lab,
              "stop_cno": args.stop_cno, "max_evals": args.max_evals, "no_stop": args.no_stop}
             for d in jobs for lab, (o, p) in (("lynceus", ("lynceus", {})),
                                                ("eic-usd", ("eic-usd", {})))
             for s in range(args.seeds)]
    res = run_all(tasks, args.workers, args.out)
    unit = {d: float(np.nanmean(Oracle(load(d)).true_cost[:, -1])) for d in jobs}
    print(f"\n## Scout ({sum(j.startswith('scout') for j in jobs)} jobs) + CherryPick "
          f"({sum(j.startswith('cherry') for j in jobs)} jobs), {args.seeds} seeds: exploration "
          "cost to CNO<=1.1 in mean-configuration-cost units")
    print("| group | lynceus p50 | lynceus p90 | eic-usd p50 | eic-usd p90 | p90 ratio (paper) |")
    print("|---|---|---|---|---|---|")
    for group, prefix, paper in (("Scout", "scout-", "1.6x"), ("CherryPick", "cherrypick-", "1.48x"),
                                 ("both", "", "-")):
        vals = {lab: [r["reached"]["1.1"] / unit[r["dataset"]] for r in res
                      if r["label"] == lab and r["dataset"].startswith(prefix)]
                for lab in ("lynceus", "eic-usd")}
        a, b = q(vals["lynceus"], .9), q(vals["eic-usd"], .9)
        print(f"| {group} | {fmt(q(vals['lynceus'], .5))} | {fmt(a)} | "
              f"{fmt(q(vals['eic-usd'], .5))} | {fmt(b)} | {b / a:.2f}x ({paper}) |")


PEERS = ("optuna-tpe", "optuna-gp", "optuna-cmaes", "optuna-random", "smac-hpo")
LYNCEUS = "lynceus LA=2 tg"


def peers(args) -> None:
    """Lynceus (LA = 2, TG) against every peer (Optuna, SMAC: optfarm[peers]) with the
    paper's statistic: p50 / p90 exploration cost to reach CNO <= 1.1 per TF job, or pooled
    over the Scout and CherryPick jobs in units of each job's mean configuration cost.
    ``--report FILE ...`` prints the tables from earlier ``--out`` files instead of running."""
    if args.report:
        res = [r for f in args.report for r in json.load(open(f))]
    else:
        jobs = TF_JOBS if args.jobs == "tf" else [
            d for d in available() if d.startswith(("scout-", "cherrypick-"))]
        labels = {LYNCEUS: ("lynceus", {"la": 2, "timeout": "tg"}), **{p: (p, {}) for p in PEERS}}
        if args.only:
            labels = {k: v for k, v in labels.items() if k in args.only.split(";")}
        tasks = [{"dataset": d, "optimizer": o, "params": p, "seed": s, "label": lab,
                  "stop_cno": args.stop_cno, "max_evals": args.max_evals,
                  "no_stop": args.no_stop}
                 for lab, (o, p) in labels.items() for d in jobs for s in range(args.seeds)]
        res = run_all(tasks, args.workers, args.out)
    found = [lab for lab in (LYNCEUS, *PEERS) if any(r["label"] == lab for r in res)]
    tf_jobs = [d for d in TF_JOBS if any(r["dataset"] == d for r in res)]
    pooled = sorted({r["dataset"] for r in res} - set(TF_JOBS))
    unit = {d: float(np.nanmean(Oracle(load(d)).true_cost[:, -1])) for d in pooled}
    groups = [(d, [d], 1.0) for d in tf_jobs]
    if pooled:
        groups.append(("Scout+CherryPick (mean-config-cost units)", pooled, None))
    print("\n| job | optimizer | seeds | p50 | p90 | not reached | p90 / Lynceus p90 |")
    print("|---|---|---|---|---|---|---|")
    for name, ds, scale in groups:
        p90 = {}
        for lab in found:
            vals = [r["reached"]["1.1"] / (scale or unit[r["dataset"]]) for r in res
                    if r["label"] == lab and r["dataset"] in ds]
            if not vals:
                continue
            p90[lab] = q(vals, .9)
            ratio = p90[lab] / p90[LYNCEUS] if LYNCEUS in p90 else math.nan
            print(f"| {name} | {lab} | {len(vals) // len(ds)} | {fmt(q(vals, .5))} | "
                  f"{fmt(p90[lab])} | {sum(map(math.isinf, vals))} | {ratio:.2f}x |")


def obol(args) -> None:
    """OBOL vs cherrypick-trees on lynceus-cnn at budget 20 x mean configuration cost."""
    d = "lynceus-cnn"
    o = Oracle(load(d))
    mean_cost = float(np.nanmean(o.true_cost[:, -1]))
    tasks = [{"dataset": d, "optimizer": name, "params": p, "seed": s, "label": lab,
              "budget": args.budget_factor * mean_cost}
             for lab, (name, p) in (("obol", ("obol", {})),
                                    ("cherrypick-trees", ("cherrypick-trees", {})))
             for s in range(args.seeds)]
    res = run_all(tasks, args.workers, args.out)
    print(f"\n## OBOL on {d}, budget {args.budget_factor} x mean config cost "
          f"(${args.budget_factor * mean_cost:.2f}), {args.seeds} seeds")
    print("| optimizer | median DOPT | p90 DOPT | mean NEX | median spent |")
    print("|---|---|---|---|---|")
    for lab in ("obol", "cherrypick-trees"):
        rs = [r for r in res if r["label"] == lab]
        dopt = [r["final_cno"] - 1.0 for r in rs]
        print(f"| {lab} | {fmt(q(dopt, .5))} | {fmt(q(dopt, .9))} | "
              f"{np.mean([r['n'] for r in rs]):.1f} | {np.median([r['spent'] for r in rs]):.2f} |")


def nephele(args) -> None:
    """Nephele vs Lynceus restricted to s = 1 on trimtuner-cnn/rnn (thesis ch. 6):
    min cost s.t. accuracy >= 0.85, time <= 300 s; CNO relative to the cheapest feasible
    (x, s) over every dataset size."""
    problem = {"objective": "min cost", "constraints": ("accuracy>=0.85", "time<=300")}
    rows = []
    for d, b_init, target in (("trimtuner-cnn", 5.0, 10.0), ("trimtuner-rnn", 1.0, 2.0)):
        spec = RunSpec(d, "nephele", **problem)
        ds = load(d)
        o = Oracle(ds, spec.problem(ds))
        fids = o.space.fidelities
        costs = [(o.true_cost[o.optimum(f), i], f) for i, f in enumerate(fids)
                 if o.optimum(f) is not None]
        best_all, best_s = min(costs)
        scale = o.true_cost[o.optimum(1.0), -1] / best_all  # CNO(any s) = scale x CNO(s=1)
        print(f"- {d}: cheapest feasible (x, s) at s = {best_s:.3g}, "
              f"{scale:.2f}x cheaper than the best s = 1 configuration")
        tasks = [{"dataset": d, "optimizer": name, "params": p, "seed": s, "label": lab,
                  "targets": (target, scale * 1.1, 1.1), "cno_scale": scale,
                  "stop_cno": min(1.1, scale * 1.1) if lab == "nephele" else scale * 1.1,
                  "max_evals": args.max_evals, "no_stop": args.no_stop, **problem}
                 for lab, (name, p) in (("nephele", ("nephele", {"b_init": b_init})),
                                        ("lynceus s=1", ("lynceus", {})))
                 for s in range(args.seeds)]
        res = run_all(tasks, args.workers, args.out and f"{args.out}.{d}")
        for lab in ("nephele", "lynceus s=1"):
            cells = [fmt(q(reach(res, lab, t), .5)) + " / " + fmt(q(reach(res, lab, t), .9))
                     for t in (target, scale * 1.1)]
            rows.append(f"| {d} | {lab} | CNO<={target:g}: {cells[0]} | CNO<={scale * 1.1:.2f}: "
                        f"{cells[1]} |")
    print("\n| job | optimizer | cost p50 / p90 to reach the paper's CNO | to reach the best "
          "s = 1 configuration |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    print("paper: s = 0.1 (CNN, 4.1x), s = 0.25 (RNN, 2.1x); Lynceus spends 1.75x (CNN, CNO 10) "
          "and 1.2x (RNN, CNO 2) more than Nephele")


def latency(args) -> None:
    """Median suggest() time (search steps) of Lynceus on lynceus-rnn for LA = 0..3, in this
    process (single-threaded numba: one core); wall clock and CPU time of the process (the
    latter is what an idle core would show when the machine is shared)."""
    print("| LA | median suggest wall (s) | median suggest CPU (s) | paper (s) | runs |")
    print("|---|---|---|---|---|")
    for la, paper in zip((0, 1, 2, 3), (0.05, 0.36, 0.99, 2.4)):
        drive({"dataset": "lynceus-rnn", "optimizer": "lynceus", "params": {"la": la},
               "seed": 99, "label": "warm-up", "max_evals": 14})  # numba compilation
        runs = [drive({"dataset": "lynceus-rnn", "optimizer": "lynceus", "params": {"la": la},
                       "seed": s, "label": f"LA={la}", "max_evals": args.max_evals,
                       "stop_cno": args.stop_cno}) for s in range(args.seeds)]
        wall = np.median([r["latency_median"] for r in runs])
        cpu = np.median([r["latency_cpu_median"] for r in runs])
        print(f"| {la} | {wall:.3f} | {cpu:.3f} | {paper} | {args.seeds} |", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    for name, fn, seeds in (("tf", tf, 30), ("scout-cherrypick", scout_cherrypick, 30),
                            ("obol", obol, 50), ("nephele", nephele, 30),
                            ("latency", latency, 3)):
        s = sub.add_parser(name)
        s.add_argument("--seeds", type=int, default=seeds)
        s.add_argument("--workers", type=int, default=2)
        s.add_argument("--stop-cno", type=float, default=1.1)
        s.add_argument("--max-evals", type=int, default=400)
        s.add_argument("--budget-factor", type=float, default=20.0)
        s.add_argument("--out", default=None, help="write per-run results as JSON")
        s.add_argument("--no-stop", action="store_true", help="disable the marginal-reward "
                       "stop (stop_threshold = 0): runs go on until the target CNO")
        s.add_argument("--only", default="", help="tf: variant labels separated by ';'")
        s.add_argument("--all", action="store_true", help="tf: also LA=2 without timeout, "
                       "and the ideal and linear timeout policies")
        s.set_defaults(func=fn)
    s = sub.add_parser("peers", help=peers.__doc__.split("\n")[0])
    s.add_argument("jobs", choices=("tf", "scout-cherrypick"))
    s.add_argument("--seeds", type=int, default=30)
    s.add_argument("--workers", type=int, default=2)
    s.add_argument("--stop-cno", type=float, default=1.1)
    s.add_argument("--max-evals", type=int, default=400)
    s.add_argument("--out", default=None, help="write per-run results as JSON")
    s.add_argument("--no-stop", action="store_true", help="Lynceus' stop off (stop_threshold=0)")
    s.add_argument("--only", default="", help="optimizer labels separated by ';'")
    s.add_argument("--report", nargs="+", help="print the tables of these --out files")
    s.set_defaults(func=peers)
    args = p.parse_args(argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
