"""Thread limits for the optimizers' numeric libraries.

The GP and tree matrices of TrimTuner and the EIc baselines have tens of rows: multi-threaded
BLAS only adds contention there (60x slower on a busy 2-core machine), so their hot entry
points run it single-threaded (``single_threaded``).

On the farm the parallelism is across runs (a process or a Ray actor each), so a whole run
keeps every numeric library of its process on one thread (``OneThread``): BLAS, OpenMP (torch's
own included), and torch's intra-op pool, which Optuna's GP sampler otherwise spins on two
threads through its acquisition optimisation for the same choices at ten times the CPU. The
libraries loaded already are limited through threadpoolctl (and torch's pool by
``torch.set_num_threads``: torch is never imported here); one loaded during the run (torch on
the sampler's first ask) starts on one thread, from the environment (``ONE_THREAD_ENV``).
"""

from __future__ import annotations

import os
import sys

from threadpoolctl import threadpool_limits

__all__ = ["ONE_THREAD_ENV", "OneThread", "single_threaded"]

single_threaded = threadpool_limits.wrap(limits=1, user_api="blas")
# the thread counts numeric libraries read from the environment when they load
ONE_THREAD_ENV = {
    name: "1"
    for name in (
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "NUMBA_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "BLIS_NUM_THREADS",
    )
}


class OneThread:
    """Context manager: every numeric library of this process runs one thread until exit,
    when each gets its own limit (and the environment its values) back. A library loaded
    inside starts on one thread; ``refresh()`` also limits, through threadpoolctl, one whose
    thread count was fixed before (a library loaded by another, e.g. an OpenMP runtime); it
    costs a look at ``sys.modules`` when nothing was imported."""

    def __enter__(self) -> OneThread:
        self._environ = {name: os.environ.get(name) for name in ONE_THREAD_ENV}
        os.environ.update(ONE_THREAD_ENV)
        self._limits: list[threadpool_limits] = []
        self._modules = -1  # len(sys.modules) at the last refresh
        self._torch_threads = None  # torch's own count before, restored on exit
        self.refresh()
        return self

    def refresh(self) -> None:
        if len(sys.modules) == self._modules:
            return
        self._modules = len(sys.modules)
        self._limits.append(threadpool_limits(limits=1))
        torch = sys.modules.get("torch")
        if self._torch_threads is None and hasattr(torch, "set_num_threads"):
            self._torch_threads = torch.get_num_threads()
            torch.set_num_threads(1)

    def __exit__(self, *exc) -> None:
        if self._torch_threads is not None:
            sys.modules["torch"].set_num_threads(self._torch_threads)
        for limits in reversed(self._limits):
            limits.restore_original_limits()
        for name, value in self._environ.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
