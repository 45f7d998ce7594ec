"""BLAS thread limits for the optimizers' small matrices.

The GP and tree matrices of TrimTuner and the EIc baselines have tens of rows: multi-threaded
BLAS only adds contention there (60x slower on a busy 2-core machine), so their hot entry
points run it single-threaded.
"""

from __future__ import annotations

from threadpoolctl import threadpool_limits

__all__ = ["single_threaded"]

single_threaded = threadpool_limits.wrap(limits=1, user_api="blas")
