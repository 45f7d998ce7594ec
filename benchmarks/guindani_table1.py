"""Reproduction of Table 1 of Guindani et al. (ML-augmented constrained BO, seed 003):
variants A-D of ``guindani`` over repetitions (seeds) on the Spark datasets, each run a
recurring job of n0 + N = 33 executions; per variant the mean unfeasible executions, the mean
ratio of unfeasible cost, and the mean feasible cost normalised to variant A's, next to the
paper's numbers.

    python benchmarks/guindani_table1.py run --out /tmp/guindani [--seeds 30] [--jobs 1]
        [--datasets guindani-kmeans,guindani-query26-vm-ram] [--variants abcd]
        [--param k_rate=1 ...]
    python benchmarks/guindani_table1.py report --out /tmp/guindani

``run`` appends one JSON line per finished run to OUT/results.jsonl and skips runs already
there (resumable); ``--param`` applies to every variant (e.g. a sensitivity study of k).
The datasets must be in the cache (``farm datasets fetch all --from ../shared/datasets`` or
``farm datasets import guindani --from ../shared/datasets/guindani``).
"""

from __future__ import annotations

import argparse
import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

from farm.report.papers import PAPER_TABLE1
from farm.run.recurring_job import table1
from farm.run.loop import run_one
from farm.run.spec import RunSpec

VARIANTS = "abcd"
PAPER_NAME = {"guindani-kmeans": "K-means", "guindani-query26-vm-ram": "Query26",
              "guindani-query26": "Query26"}


def _one(job: tuple[str, str, int, dict]) -> dict:
    dataset, variant, seed, params = job
    summary = run_one(RunSpec(dataset, "guindani", seed=seed,
                              params={**params, "variant": variant})).summary
    return {"dataset": dataset, "variant": variant, "seed": seed, "params": params,
            **summary["recurring_job"]}


def cmd_run(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    params = dict(p.split("=", 1) for p in args.param)
    done = set()
    if results.exists():
        for line in results.read_text().splitlines():
            r = json.loads(line)
            done.add((r["dataset"], r["variant"], r["seed"], json.dumps(r["params"])))
    jobs = [(d, v, s, params) for d in args.datasets.split(",") for v in args.variants
            for s in range(args.seeds) if (d, v, s, json.dumps(params)) not in done]
    with ProcessPoolExecutor(args.jobs) as pool, results.open("a") as f:
        for r in pool.map(_one, jobs):
            f.write(json.dumps(r) + "\n")
            f.flush()


def cmd_report(args) -> None:
    rows = [json.loads(line) for line in (Path(args.out) / "results.jsonl").read_text()
            .splitlines()]
    groups = sorted({(r["dataset"], json.dumps(r["params"], sort_keys=True)) for r in rows})
    for dataset, params in groups:
        runs = {v: [r for r in rows if r["dataset"] == dataset and r["variant"] == v
                    and json.dumps(r["params"], sort_keys=True) == params] for v in VARIANTS}
        if not runs["a"]:  # a k sensitivity run (A does not use k): the A with the rest
            rest = {k: v for k, v in json.loads(params).items() if k != "k_rate"}
            runs["a"] = [r for r in rows if r["dataset"] == dataset and r["variant"] == "a"
                         and r["params"] == rest]
        table = table1({v: m for v, m in runs.items() if m}, reference="a")
        paper = PAPER_TABLE1[PAPER_NAME.get(dataset, "K-means")]
        print(f"\n{dataset} {params}  (paper: {PAPER_NAME.get(dataset)} in brackets)")
        print("variant  reps  unfeasible executions  ratio of unfeasible cost  "
              "norm. mean feasible cost")
        for t in table:
            p = paper[t["variant"]]
            print(f"{t['variant']:>7}  {t['repetitions']:>4}  {t['unfeasible_executions']:>8.2f}"
                  f" ({p[0]:>5.2f})      {t['unfeasible_cost_ratio']:>8.3f} ({p[1]:.2f})"
                  f"          {t['normalised_mean_feasible_cost']:>7.3f} ({p[2]:.2f})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--out", required=True)
    run.add_argument("--seeds", type=int, default=30)
    run.add_argument("--jobs", type=int, default=1)
    run.add_argument("--datasets", default="guindani-kmeans,guindani-query26-vm-ram")
    run.add_argument("--variants", default=VARIANTS, help="subset of abcd (default all)")
    run.add_argument("--param", action="append", default=[], help="key=value for guindani")
    report = sub.add_parser("report")
    report.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    (cmd_run if args.command == "run" else cmd_report)(args)


if __name__ == "__main__":
    main()
