"""CPU per run of the GP optimizers, before and after a change, with their choices compared
(issue 34, "Must show"): ``python -m optfarm.farm.bench.gp_fits --base TREE``.

For each optimizer, the same seeds are run to ``--evaluations`` by the run loop
(``optfarm.farm.run.loop.run_one``, as ``farm run`` and the serial sweeps run them) once with the
code of ``--base`` (a checkout of the "before", e.g. ``git worktree add ../base main``) and once
with this checkout's, in two child processes started together so that both see the same machine
load. Each child imports the optimizer and makes one untimed warm-up run (lazy imports: torch
for Optuna's GP; numba's caches), then times every seed's run in CPU seconds of its own process
(threads included: a library that spins two threads costs two). The table gives the median CPU
per run before and after, their ratio, and on how many seeds the two made the same sequence of
configurations. Nothing is written; ``--json FILE`` keeps every run's numbers and sequence.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["DEFAULT_OPTIMIZERS", "compare", "markdown_row", "measure", "main"]

DEFAULT_OPTIMIZERS = ("eic", "eic-usd-gp", "bo-ei", "optuna-gp")
_THIS_TREE = Path(__file__).resolve().parents[3]


def _child(optimizer: str, dataset: str, evaluations: int, seeds: list[int]) -> list[dict]:
    """In the child: one warm-up run, then each seed's run timed (CPU and wall seconds)."""
    from optfarm.farm.run.loop import run_one
    from optfarm.farm.run.spec import RunSpec

    def run(seed, iterations):
        return run_one(
            RunSpec(dataset=dataset, optimizer=optimizer, seed=seed, iterations=iterations)
        )

    run(max(seeds) + 1, min(evaluations, 12))  # past the initial designs: the models load
    rows = []
    for seed in seeds:
        c0, t0 = time.process_time(), time.perf_counter()
        trace = run(seed, evaluations).trace
        rows.append(
            {
                "seed": seed,
                "cpu_s": time.process_time() - c0,
                "wall_s": time.perf_counter() - t0,
                "configs": trace.column("config_id").to_pylist(),
            }
        )
    return rows


def measure(
    tree: Path, optimizer: str, dataset: str, evaluations: int, seeds: list[int]
) -> subprocess.Popen:
    """Start the child that runs ``optimizer``'s seeds with the code of ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--child",
            optimizer,
            "--dataset",
            dataset,
            "--evaluations",
            str(evaluations),
            "--seeds",
            ",".join(map(str, seeds)),
        ],
        env=env,
        cwd=tree,
        stdout=subprocess.PIPE,
        text=True,
    )


def _collect(child: subprocess.Popen, tree: Path) -> list[dict]:
    out, _ = child.communicate()
    if child.returncode != 0:
        raise RuntimeError(
            f"the benchmark's run with the code of {tree} failed "
            f"(exit {child.returncode}); see its error above"
        )
    return json.loads(out.splitlines()[-1])


def compare(
    base: Path, optimizers, dataset: str, evaluations: int, seeds: list[int]
) -> Iterator[dict]:
    """One row per optimizer as it is measured: median CPU per run before / after, ratio,
    identical sequences."""
    for optimizer in optimizers:
        children = [
            measure(tree, optimizer, dataset, evaluations, seeds) for tree in (base, _THIS_TREE)
        ]
        before, after = (_collect(c, t) for c, t in zip(children, (base, _THIS_TREE)))
        cpu_before = statistics.median(r["cpu_s"] for r in before)
        cpu_after = statistics.median(r["cpu_s"] for r in after)
        same = sum(b["configs"] == a["configs"] for b, a in zip(before, after))
        yield {
            "optimizer": optimizer,
            "seeds": len(seeds),
            "cpu_before_s": cpu_before,
            "cpu_after_s": cpu_after,
            "ratio": cpu_before / cpu_after,
            "identical": f"{same}/{len(seeds)}",
            "before": before,
            "after": after,
        }


HEADER = (
    "| optimizer | seeds | CPU-s per run before (median) | after | before / after "
    "| identical sequences |\n|---|---|---|---|---|---|"
)


def markdown_row(r: dict) -> str:
    return (
        f"| {r['optimizer']} | {r['seeds']} | {r['cpu_before_s']:.2f} | "
        f"{r['cpu_after_s']:.2f} | {r['ratio']:.1f}x | {r['identical']} |"
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m optfarm.farm.bench.gp_fits", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--base", type=Path, help="a checkout with the code before the change")
    p.add_argument("--optimizers", default=",".join(DEFAULT_OPTIMIZERS))
    p.add_argument("--dataset", default="cherrypick-kmeans")
    p.add_argument("--evaluations", type=int, default=30)
    p.add_argument("--seeds", default="0,1,2,3,4,5,6,7,8,9", help="comma-separated seeds")
    p.add_argument("--json", type=Path, help="also write every run's numbers here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.child:
        print(json.dumps(_child(args.child, args.dataset, args.evaluations, seeds)))
        return 0
    if args.base is None or not (args.base / "optfarm" / "optimizers" / "registry.py").is_file():
        print(
            f"--base {args.base}: not a checkout of optfarm (no optfarm/optimizers/registry.py)",
            file=sys.stderr,
        )
        return 2
    print(
        f"{args.dataset}, {args.evaluations} evaluations, seeds {args.seeds}; load average "
        f"{os.getloadavg()[0]:.1f} at the start"
    )
    print(HEADER, flush=True)
    rows = []
    for row in compare(
        args.base.resolve(), args.optimizers.split(","), args.dataset, args.evaluations, seeds
    ):
        print(markdown_row(row), flush=True)
        rows.append(row)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
