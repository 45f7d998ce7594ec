"""The FIFO taboo memory of Guindani et al.'s hybrid BO (Sec. 3, after taboo search,
Cvijovic & Klinowski 2002): the last ``q`` visited configurations may not be chosen again
until they have shifted out of the queue, i.e. for ``q`` iterations."""

from __future__ import annotations

from collections import deque

import numpy as np

__all__ = ["TabooQueue"]


class TabooQueue:
    """First-in-first-out queue of the last ``q`` visited config_ids (``q = 0``: no memory)."""

    def __init__(self, q: int):
        if q < 0:
            raise ValueError(f"TabooQueue: q must be >= 0, got {q!r}")
        self.q = q
        self._items: deque[int] = deque(maxlen=q)

    def push(self, config_id: int) -> None:
        """Record a visit; the oldest entry leaves when the queue holds ``q``."""
        if self.q:
            self._items.append(int(config_id))

    def __contains__(self, config_id: int) -> bool:
        return int(config_id) in self._items

    def __len__(self) -> int:
        return len(self._items)

    def tolist(self) -> list[int]:
        """The queued config_ids, oldest first."""
        return list(self._items)

    def free(self, n_configs: int) -> np.ndarray:
        """Boolean mask (n_configs,) of the configurations that may be chosen now.

        When the queue covers the whole space (``n_configs <= q``), its oldest entries are
        released one by one until a configuration is free, so a choice always exists.
        """
        mask = np.ones(n_configs, dtype=bool)
        mask[self.tolist()] = False
        for oldest in self._items:
            if mask.any():
                break
            mask[oldest] = True
        return mask
