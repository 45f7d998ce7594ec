"""Search spaces: named dimensions, the enumerated configurations, and their model features.

Every space in optfarm is finite: a configuration is a row of ``SearchSpace.configs`` and is
identified by a stable integer ``config_id`` (its row number, in sorted dimension order).
An optimizer sees only this object (and the observations it asked for), never the dataset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = ["Dimension", "SearchSpace"]

Kind = Literal["categorical", "ordinal", "numeric"]


@dataclass(frozen=True)
class Dimension:
    """One configuration dimension.

    ``categorical`` values are unordered (one-hot encoded); ``ordinal`` and ``numeric`` values
    are ordered and encoded on [0, 1], on a log scale when ``log`` (e.g. a learning rate).
    Ordinal labels that are not numbers (e.g. VM sizes "t2.small" < "t2.medium") are encoded
    by their rank in ``values``.
    """

    name: str
    kind: Kind
    values: tuple
    log: bool = False

    def __post_init__(self):
        if self.kind not in ("categorical", "ordinal", "numeric"):
            raise ValueError(
                f"dimension {self.name!r}: unknown kind {self.kind!r} "
                "(expected categorical, ordinal or numeric)"
            )
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"dimension {self.name!r}: repeated values in {self.values!r}")
        if self.log:
            x = self._numbers()
            if x is None or np.any(x <= 0):
                raise ValueError(f"dimension {self.name!r}: log scale needs positive numbers")

    def _numbers(self) -> np.ndarray | None:
        """The values as floats, or None when they are labels (not all numbers)."""
        try:
            return np.asarray(self.values, dtype=float)
        except (TypeError, ValueError):
            return None

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "values": list(self.values), "log": self.log}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Dimension:
        return cls(d["name"], d["kind"], tuple(d["values"]), bool(d.get("log", False)))

    def encode(self, column: np.ndarray) -> np.ndarray:
        """Feature columns for the values in ``column``: shape (n, 1) or (n, n_values)."""
        index = {v: i for i, v in enumerate(self.values)}
        codes = np.array([index[v] for v in column.tolist()], dtype=np.int64)
        if self.kind == "categorical":
            return np.eye(len(self.values))[codes]
        x = self._numbers()
        if x is None:
            x = np.arange(len(self.values), dtype=float)  # ordered labels: their rank
        if self.log:
            x = np.log(x)
        span = x.max() - x.min()
        x = (x - x.min()) / span if span > 0 else np.zeros_like(x)
        return x[codes][:, None]


@dataclass(frozen=True, eq=False)
class SearchSpace:
    """The finite set of configurations of one job.

    Attributes:
        dimensions: the named dimensions.
        configs: dict of dimension name -> array (n_configs,) of values; row i is config_id i.
        price_per_s: (n_configs,) known price of running configuration i for one second of job
            time (the cluster's hourly price / 3600, in the dataset's cost unit). Optimizers may
            use it: it is the price list, not a measurement (Lynceus' U(x)).
        fidelities: sorted dataset-size levels s in (0, 1]; ``(1.0,)`` without sub-sampling.
    """

    dimensions: tuple[Dimension, ...]
    configs: Mapping[str, np.ndarray]
    price_per_s: np.ndarray
    fidelities: tuple[float, ...] = (1.0,)
    features: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        n = len(self.price_per_s)
        for d in self.dimensions:
            if len(self.configs[d.name]) != n:
                raise ValueError(
                    f"dimension {d.name!r}: {len(self.configs[d.name])} values "
                    f"for {n} configurations"
                )
        if not self.fidelities or max(self.fidelities) != 1.0:
            raise ValueError(f"fidelities must end at 1.0, got {self.fidelities!r}")
        feats = [d.encode(np.asarray(self.configs[d.name])) for d in self.dimensions]
        object.__setattr__(self, "features", np.hstack(feats) if feats else np.zeros((n, 0)))
        self.features.setflags(write=False)
        self.price_per_s.setflags(write=False)

    @classmethod
    def product(
        cls, dimensions: Sequence[Dimension], price_per_s, fidelities: Sequence[float] = (1.0,)
    ) -> SearchSpace:
        """Every combination of the dimensions' values, for tuning a real job with the
        ask/tell API; ``price_per_s(config) -> float`` is the price list (e.g. the cluster's
        hourly price / 3600)."""
        dims = tuple(dimensions)
        grids = np.meshgrid(*[np.arange(len(d.values)) for d in dims], indexing="ij")
        codes = [g.ravel() for g in grids]
        configs = {
            d.name: np.asarray(d.values, dtype=object if d.kind == "categorical" else None)[c]
            for d, c in zip(dims, codes)
        }
        n = len(codes[0]) if codes else 0
        rows = ({d.name: _plain(configs[d.name][i]) for d in dims} for i in range(n))
        prices = np.fromiter((float(price_per_s(r)) for r in rows), dtype=float, count=n)
        return cls(dims, configs, prices, tuple(sorted(fidelities)))

    @property
    def n_configs(self) -> int:
        return len(self.price_per_s)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions)

    @property
    def has_fidelity(self) -> bool:
        return len(self.fidelities) > 1

    def config(self, config_id: int) -> dict[str, Any]:
        """The configuration ``config_id`` as {dimension: value} (plain Python values)."""
        if not 0 <= config_id < self.n_configs:
            raise KeyError(f"config_id {config_id} is outside 0..{self.n_configs - 1}")
        return {d.name: _plain(self.configs[d.name][config_id]) for d in self.dimensions}

    def index(self, config: Mapping[str, Any]) -> int:
        """The config_id of ``config`` ({dimension: value}); KeyError naming the mismatch."""
        missing = [n for n in self.names if n not in config]
        if missing:
            raise KeyError(f"configuration {dict(config)!r} lacks dimension(s) {missing}")
        mask = np.ones(self.n_configs, dtype=bool)
        for n in self.names:
            mask &= np.asarray(self.configs[n]) == config[n]
        hits = np.flatnonzero(mask)
        if len(hits) == 0:
            raise KeyError(f"configuration {dict(config)!r} is not in the search space")
        return int(hits[0])

    def feature_rows(
        self,
        config_ids: Sequence[int] | np.ndarray,
        fidelities: Sequence[float] | np.ndarray | None = None,
    ) -> np.ndarray:
        """Model inputs for (config, s) pairs: the config features, plus a last column with
        s on a normalised log2 scale (0 at the smallest level, 1 at s = 1) when the space has
        fidelities and ``fidelities`` is given (TrimTuner's encoding of the dataset size)."""
        x = self.features[np.asarray(config_ids, dtype=np.int64)]
        if fidelities is None:
            return x
        return np.hstack([x, self.encode_fidelity(fidelities)[:, None]])

    def encode_fidelity(self, s: Sequence[float] | np.ndarray) -> np.ndarray:
        lo = np.log2(min(self.fidelities))
        s = np.log2(np.asarray(s, dtype=float))
        return (s - lo) / (0.0 - lo) if lo < 0 else np.ones_like(s)


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value (str, int, float) it holds."""
    return value.item() if isinstance(value, np.generic) else value
