"""The cost of following a cluster: a sweep on a joined loopback cluster (``farm cluster up``,
one node) without ``--max-in-flight`` against the same sweep with it.

    farm bench-farm --joined 20000 [--iterations 5] [--workers 2] [--repeats 2]

(the CLI starts the cluster, ``optfarm.farm.cluster.local``, and stops it after)

Joined to a cluster, the sweep asks the autoscaler for a CPU per run it could run at once
(``optfarm.farm.runtime.capacity``). Without ``--max-in-flight`` that was every run left: asked
after every run (20,000 entries each time for a 20,000-run sweep) it ran 9x slower than with
``--max-in-flight 2`` (6.9 against 62.8 runs/s). It is now asked when it moved by a tenth, at
most once a second, and capped at the cluster's CPUs plus 200 (``wanted_cpus``: 202 here).
Target: without within 1.2x of with. Both sweeps run on the same cluster, into new folders,
tracking off; the request each left behind is read back from the head (0: withdrawn).

Measured (20,000 runs, 5 evaluations each, 2 CPUs, load 7-25 from other work), runs/s
without / with: uncapped request 97.2 / 123.4 (1.27x); capped 118.7 / 105.0, 93.7 / 76.2,
81.3 / 76.4 with the "with" sweep first (0.88x, 0.81x, 0.94x), and 64.4 / 108.9 (1.69x) from
this command, its "without" sweep at load ~20, its "with" one as the load fell to 7: the
machine's load moves the ratio more than the request does. CPU-s of the head's processes
over each sweep: Ray's v1 autoscaler monitor 3.2 uncapped against 1.2-2.1 in the other five,
the driver 86-102 in all six. With this command's pairs in turns first after a warm-up, on
a machine otherwise quiet (load 0.3-5 from the bench itself), ``--repeats 2``: 147.7 / 134.6
and 187.5 / 149.0 runs/s without / with, 0.86x over both pairs (0.91x, 0.79x).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

# Ray as the farm imports it (before anything else here does: its servers, and this driver,
# on 127.0.0.1; the CLI starts the cluster after importing this module)
from optfarm.farm.runtime.ray_runtime import ray

__all__ = ["joined_cost"]

WARM_UP_RUNS = 100


def joined_cost(
    address: str,
    sizes: list[int],
    dataset: str = "synthetic",
    optimizer: str = "random",
    iterations: int | None = 5,
    workers: int = 2,
    pairs: int = 1,
) -> list[dict]:
    """One row per size, pair and case (no ``--max-in-flight``, and ``WORKERS``) of sweeps
    joined to the cluster at ``address``: runs/s, and the autoscaler request left on the head.
    The two cases of a pair run back to back, in turns first (ABBA...), so that a load that
    rises or falls through the pairs weighs on both cases alike, after an untimed warm-up
    sweep of ``WARM_UP_RUNS`` (300 runs, one pair: 10.0 s against 4.6 s without it, the first
    sweep starting the cluster's workers)."""
    from optfarm.farm.bench.overhead import _spec
    from optfarm.farm.sweep.runner import run_sweep

    rows = []
    with tempfile.TemporaryDirectory(prefix="of-bench-", dir="/tmp") as root:
        try:
            # untimed warm-up: the cluster's first sweep starts its workers and imports
            run_sweep(
                _spec(dataset, optimizer, WARM_UP_RUNS, iterations, workers),
                Path(root) / "warm-up",
                address=address,
                progress=False,
            )
            for n in sizes:
                for pair in range(1, pairs + 1):
                    for in_flight in (0, workers)[:: 1 if pair % 2 else -1]:
                        spec = _spec(dataset, optimizer, n, iterations, in_flight)
                        out = Path(root) / f"out-{n}-{pair}-{in_flight}"
                        t0 = time.perf_counter()
                        report = run_sweep(spec, out, address=address, progress=False)
                        wall = time.perf_counter() - t0
                        if not report.complete:
                            raise RuntimeError(f"{report.failed} runs failed")
                        rows.append(
                            {
                                "runs": n,
                                "pair": pair,
                                "max_in_flight": in_flight or "-",
                                "wall_s": wall,
                                "runs_per_s": n / wall,
                                "request_left": _request_left(),
                            }
                        )
        finally:
            ray.shutdown()
    return rows


def _request_left() -> int:
    """CPUs of the autoscaler request recorded by the head (the v1 autoscaler's key)."""
    from optfarm.farm.runtime.ray_private import autoscaler_v1_channel, internal_kv_get

    return len(json.loads(internal_kv_get(autoscaler_v1_channel()) or "[]"))
