"""Cost-aware pieces of the Lynceus family: the timeout cap. (The family's EIc over the cost
model is computed inside the numba look-ahead kernel, ``optfarm/optimizers/lookahead_kernels.py``;
its numpy form is the kernel's test reference, ``tests/optimizers/acquisition_reference.py``.)

References:
    [Lynceus] Casimiro et al. Lynceus, ICDCS 2020: Sec. V-B (timeouts).
"""

from __future__ import annotations

import numpy as np

__all__ = ["timeout_cap"]


def timeout_cap(incumbent_cost: float, price_per_s: float, factor: float = 1.0) -> float | None:
    """Time at which a run of a configuration priced ``price_per_s`` becomes costlier than
    ``factor`` x the incumbent [Lynceus Sec. V-B]: t = factor C(x*) / U(x); None without an
    incumbent."""
    if not np.isfinite(incumbent_cost):
        return None
    return factor * incumbent_cost / price_per_s
