"""Entropy search's price before / after: CPU time of TrimTuner's (and FABOLAS', Fabulinus')
``suggest`` and of whole runs, this tree against another checkout, with the configuration
sequences compared (issue 34, "Must show").

Each (optimizer, seed) runs ``evaluations`` steps of the farm's loop (``Stepper``) on one
dataset in two fresh processes at the same time, one on each tree (``PYTHONPATH``), so both
see the same machine load; each process reports the CPU seconds (``time.process_time``) its
``suggest`` calls took, the whole run's, and the (config_id, fidelity) sequence. The numeric
libraries run on one thread. Usage::

    python -m optfarm.farm.bench.entropy_search --before /path/to/old/checkout \\
        --optimizers trimtuner,fabolas --seeds 10 --evaluations 10

The child runs this file as a script on the other tree, so it uses only what both trees
have: ``optfarm.oracle.formats``, ``optfarm.oracle.oracle.Oracle``,
``optfarm.optimizers.registry.make_optimizer`` and ``optfarm.farm.run.loop.Stepper``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ONE_THREAD = {
    name: "1"
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
}
TREE = Path(__file__).resolve().parents[3]


def measure(optimizer: str, dataset: str, seed: int, evaluations: int) -> dict:
    """One run in this process: suggest CPU, run CPU, the sequence."""
    from optfarm.farm.run.loop import Stepper
    from optfarm.optimizers.registry import make_optimizer
    from optfarm.oracle.formats import FORMATS
    from optfarm.oracle.oracle import Oracle

    folder = Path(os.environ.get("OPTFARM_DATASETS_DIR", "/work/shared/datasets")) / "trimtuner"
    ds = {d.name: d for d in FORMATS["trimtuner"](folder)}[dataset]
    oracle = Oracle(ds, ds.meta.problem)
    opt = make_optimizer(optimizer, oracle.space, oracle.problem, seed, None)
    suggest, spent = opt.suggest, [0.0]

    def timed_suggest():
        t0 = time.process_time()
        try:
            return suggest()
        finally:
            spent[0] += time.process_time() - t0

    opt.suggest = timed_suggest
    stepper, sequence = Stepper(opt, oracle, seed), []
    t0 = time.process_time()
    for _ in range(evaluations):
        s = stepper.step().suggestion
        if s is None:
            break
        sequence.append([int(s.config_id), round(float(s.fidelity), 6)])
    return {"suggest_cpu_s": spent[0], "run_cpu_s": time.process_time() - t0, "sequence": sequence}


def _child(tree: Path, optimizer: str, dataset: str, seed: int, evaluations: int) -> dict:
    env = {**os.environ, **ONE_THREAD, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, __file__, "--measure", optimizer, dataset, str(seed), str(evaluations)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{optimizer} seed {seed} on {tree}: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(before: Path, optimizers: list[str], dataset: str, seeds: int, evaluations: int):
    """Yields one row per (optimizer, seed): both trees' CPU seconds, ratios, same
    sequence."""
    for optimizer in optimizers:
        for seed in range(seeds):
            with ThreadPoolExecutor(2) as pool:
                runs = [
                    pool.submit(_child, tree, optimizer, dataset, seed, evaluations)
                    for tree in (before, TREE)
                ]
                old, new = (run.result() for run in runs)
            yield {
                "optimizer": optimizer,
                "seed": seed,
                "suggest_before_s": round(old["suggest_cpu_s"], 2),
                "suggest_after_s": round(new["suggest_cpu_s"], 2),
                "suggest_ratio": _ratio(old["suggest_cpu_s"], new["suggest_cpu_s"]),
                "run_before_s": round(old["run_cpu_s"], 2),
                "run_after_s": round(new["run_cpu_s"], 2),
                "run_ratio": _ratio(old["run_cpu_s"], new["run_cpu_s"]),
                "same_sequence": old["sequence"] == new["sequence"],
            }


def markdown(rows: list[dict]) -> str:
    """A Markdown table of ``rows`` (their keys as the header)."""
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join(lines + ["| " + " | ".join(str(v) for v in r.values()) + " |" for r in rows])


def _ratio(before: float, after: float) -> str:
    return f"{before / after:.2f}x" if after > 0 else "-"


def totals(rows: list[dict]) -> list[dict]:
    """Per optimizer: summed CPU seconds, ratios, sequences identical out of seeds."""
    out = []
    for optimizer in dict.fromkeys(r["optimizer"] for r in rows):
        mine = [r for r in rows if r["optimizer"] == optimizer]
        sums = {
            k: sum(r[k] for r in mine)
            for k in ("suggest_before_s", "suggest_after_s", "run_before_s", "run_after_s")
        }
        out.append(
            {
                "optimizer": optimizer,
                "seeds": len(mine),
                **{k: round(v, 1) for k, v in sums.items()},
                "suggest_ratio": _ratio(sums["suggest_before_s"], sums["suggest_after_s"]),
                "run_ratio": _ratio(sums["run_before_s"], sums["run_after_s"]),
                "same_sequences": f"{sum(r['same_sequence'] for r in mine)}/{len(mine)}",
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m optfarm.farm.bench.entropy_search", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--before", type=Path, required=True, help="the other checkout's root")
    p.add_argument("--optimizers", default="trimtuner", help="comma list")
    p.add_argument("--dataset", default="trimtuner-cnn")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--evaluations", type=int, default=10)
    args = p.parse_args(argv)
    if not (args.before / "optfarm" / "optimizers" / "trimtuner.py").is_file():
        print(
            f"--before {args.before}: not an optfarm checkout (no optfarm/optimizers/trimtuner.py)",
            file=sys.stderr,
        )
        return 2
    print(
        f"entropy search CPU seconds: {args.dataset}, {args.evaluations} evaluations per run, "
        f"before = {args.before}, after = {TREE}; both trees' runs of a seed at the same time,"
        f" one thread each; load average {os.getloadavg()[1]:.1f} at the start",
        flush=True,
    )
    rows = []
    for row in compare(
        args.before, args.optimizers.split(","), args.dataset, args.seeds, args.evaluations
    ):
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"load average {os.getloadavg()[1]:.1f} at the end\n")
    print(markdown(rows) + "\n\n" + markdown(totals(rows)))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:
        sys.path.pop(0)  # this folder: the tree comes from PYTHONPATH
        name, dataset, seed, evaluations = sys.argv[2:6]
        print(json.dumps(measure(name, dataset, int(seed), int(evaluations))))
    else:
        sys.exit(main())
