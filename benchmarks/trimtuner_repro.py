"""Reproduction of TrimTuner's comparison [TrimTuner Sec. IV, Fig. 1-3] on trimtuner-cnn and
trimtuner-rnn: TrimTuner (GP, DT), FABOLAS, EIc, EIc/USD, TrimTuner with the random, Direct
and CMA-ES filters and with the paper's text incumbent rule, over seeds, 44 iterations each.

    python benchmarks/trimtuner_repro.py run --out /tmp/tt_repro [--seeds 10] [--jobs 2]
        [--cases tt-dt,tt-gp,...] [--datasets trimtuner-cnn,trimtuner-rnn] [--hyper ml]
    python benchmarks/trimtuner_repro.py report --out /tmp/tt_repro

``run`` appends one JSON line per finished run to OUT/results.jsonl and skips runs already
there (resumable). ``report`` prints, per dataset and case: runs reaching 90% of the feasible
optimum's Accuracy_C, the mean (the paper's statistic: averages of 10 runs) and median
exploration cost to get there (unreached runs count as infinite), the final Accuracy_C, the
share of runs whose final recommendation violates the cost cap, mean cost per step, and the
median latency (suggest + model fit) per step; then the ratios of the baselines' (and other
filters') cost to reach 90% over TrimTuner's.

The datasets must be in the cache (``farm datasets fetch all --from ../shared/datasets``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

CASES = {
    "tt-gp": ("trimtuner", {"model": "gp", "filter": "cea", "beta": 0.1}),
    "tt-dt": ("trimtuner", {"model": "dt", "filter": "cea", "beta": 0.1}),
    "tt-gp-random": ("trimtuner", {"model": "gp", "filter": "random", "beta": 0.1}),
    "tt-dt-random": ("trimtuner", {"model": "dt", "filter": "random", "beta": 0.1}),
    "tt-gp-direct": ("trimtuner", {"model": "gp", "filter": "direct", "beta": 0.1}),
    "tt-gp-cmaes": ("trimtuner", {"model": "gp", "filter": "cmaes", "beta": 0.1}),
    "tt-gp-feasible": ("trimtuner", {"model": "gp", "incumbent_rule": "feasible"}),
    "tt-dt-feasible": ("trimtuner", {"model": "dt", "incumbent_rule": "feasible"}),
    "fabolas": ("fabolas", {}),
    "eic": ("eic", {}),
    "eic-usd": ("eic-usd-gp", {}),
    "fabulinus": ("fabulinus", {}),
}
GP_CASES = {case for case, (_, params) in CASES.items()     # the ones --hyper applies to
            if params.get("model", "gp") == "gp"}


def _one(job):
    from farm.run.loop import run_one
    from farm.run.spec import RunSpec

    dataset, case, seed, iterations, hyper = job
    optimizer, params = CASES[case]
    params = dict(params)
    if case in GP_CASES:
        params["hyper"] = hyper
    result = run_one(RunSpec(dataset, optimizer, seed=seed, params=params,
                             iterations=iterations))
    t = result.trace
    s = result.summary
    return {"dataset": dataset, "case": case, "seed": seed, "hyper": hyper if case in GP_CASES
            else None,
            "reach": s["exploration_cost_to_reach"]["acc_c>=0.9opt"],
            "final_acc_c": t.column("incumbent_accuracy_c").to_pylist()[-1],
            "final_feasible": t.column("incumbent_feasible").to_pylist()[-1],
            "cost": s["exploration_cost"], "steps": s["n_evaluations"],
            "latency": t.column("recommendation_latency_s").to_pylist(),
            "fit": t.column("model_fit_s").to_pylist(),
            "optimum": s["optimum"]}


def run(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.jsonl"
    done = set()
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            done.add((r["dataset"], r["case"], r["seed"]))
    jobs = [(d, c, s, args.iterations, args.hyper) for s in range(args.seeds)
            for c in args.cases.split(",") for d in args.datasets.split(",")
            if (d, c, s) not in done]   # seed-major: every case gets seeds early
    with ProcessPoolExecutor(args.jobs) as pool, path.open("a") as f:
        for r in pool.map(_one, jobs):
            f.write(json.dumps(r) + "\n")
            f.flush()
            print(r["dataset"], r["case"], r["seed"], r["reach"], round(r["final_acc_c"], 4),
                  flush=True)


def _reach(rows) -> np.ndarray:
    return np.array([math.inf if r["reach"] is None else r["reach"] for r in rows])


def report(args) -> None:
    rows = [json.loads(x) for x in (Path(args.out) / "results.jsonl").read_text().splitlines()]
    keys = sorted({(r["dataset"], r["case"]) for r in rows})
    head = (f"{'dataset':14} {'case':14} {'runs':>4} {'reached':>7} {'mean cost->90%':>14} "
            f"{'med cost->90%':>13} {'final AccC':>10} {'infeasible':>10} {'cost/step':>9} "
            f"{'lat s p50':>9} {'fit s p50':>9}")
    print(head)
    for d, c in keys:
        rs = [r for r in rows if r["dataset"] == d and r["case"] == c]
        reach = _reach(rs)
        lat = np.concatenate([np.array(r["latency"][1:]) for r in rs])
        fit = np.concatenate([np.array(r["fit"][1:]) for r in rs])
        print(f"{d:14} {c:14} {len(rs):4d} {np.isfinite(reach).sum():7d} "
              f"{np.mean(reach):14.4g} {np.median(reach):13.4g} "
              f"{np.mean([r['final_acc_c'] for r in rs]):10.4f} "
              f"{np.mean([not r['final_feasible'] for r in rs]):10.0%} "
              f"{np.mean([r['cost'] / r['steps'] for r in rs]):9.4g} "
              f"{np.median(lat):9.3g} {np.median(fit):9.3g}")
    _ratios(rows)


def _ratios(rows) -> None:
    """Cost to reach 90% of a baseline / of each TrimTuner case (the paper's Fig. 2b and 3
    savings; > 1: TrimTuner cheaper), by mean over seeds (the paper averages 10 runs) and by
    median."""
    by = {}
    for r in rows:
        by.setdefault((r["dataset"], r["case"]), []).append(r)
    pairs = [(b, t) for b in ("eic", "eic-usd") for t in ("tt-gp", "tt-dt")]
    pairs += [(b, t) for t in ("tt-gp", "tt-dt")
              for b in (f"{t}-random", f"{t}-direct", f"{t}-cmaes")]
    print(f"\n{'dataset':14} {'baseline / case':30} {'mean ratio':>10} {'median ratio':>12}")
    for d in sorted({r["dataset"] for r in rows}):
        for b, t in pairs:
            if (d, b) in by and (d, t) in by:
                rb, rt = _reach(by[(d, b)]), _reach(by[(d, t)])
                print(f"{d:14} {b + ' / ' + t:30} {np.mean(rb) / np.mean(rt):10.2f} "
                      f"{np.median(rb) / np.median(rt):12.2f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--cases", default="tt-dt,tt-gp,fabolas,eic,eic-usd,tt-dt-random,tt-gp-random")
    r.add_argument("--datasets", default="trimtuner-cnn,trimtuner-rnn")
    r.add_argument("--seeds", type=int, default=10)
    r.add_argument("--iterations", type=int, default=44)
    r.add_argument("--hyper", default="ml", choices=("ml", "mcmc"))
    r.add_argument("--jobs", type=int, default=1)
    q = sub.add_parser("report")
    q.add_argument("--out", required=True)
    args = p.parse_args(argv)
    unknown = set(getattr(args, "cases", "").split(",")) - set(CASES) - {""}
    if unknown:
        print(f"unknown case(s) {sorted(unknown)} (cases: {', '.join(CASES)})", file=sys.stderr)
        return 2
    run(args) if args.cmd == "run" else report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
