"""Child seeds: the one place where a run's seed or generator hands seeds to the parts it drives
(a model's generator, a sampler restart, the oracle's noise). ARCHITECTURE.md, "Habits" 4:
each optimizer owns a ``numpy.random.Generator`` from its seed; child seeds are derived here,
never from the global generator.

New streams are children of the run seed's ``numpy.random.SeedSequence`` (``spawned_seed``):
SeedSequence mixes the seed with the child's index (its ``spawn_key``) through a hash, so
child k of seed s and child k - 1 of seed s + 1 are independent streams, unlike ``s + k``.

The papers' optimizers keep the derivations their golden sequences were recorded with
(tests/optimizers/test_results_unchanged.py, sweeps/nightly-baseline.json), each a function
here that returns today's values bit for bit: a seed drawn from the optimizer's generator
(``drawn_seed``), a generator keyed by a tuple of integers (``keyed_generator``, itself a
SeedSequence over the tuple), a generator's own ``spawn`` (``spawned_generator``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["drawn_seed", "keyed_generator", "spawned_generator", "spawned_seed"]


def spawned_seed(seed: int, child: int) -> int:
    """The 32-bit seed of child ``child`` of ``seed``: ``SeedSequence(seed).spawn``'s
    ``child``-th sequence, its first word (a seed for a library that takes an integer, e.g.
    an Optuna sampler)."""
    children = np.random.SeedSequence(int(seed)).spawn(int(child) + 1)
    return int(children[child].generate_state(1)[0])


def drawn_seed(rng: np.random.Generator, high: int = 2**63, low: int = 0) -> int:
    """A seed drawn from ``rng`` in [low, high): the papers' optimizers' model and kernel
    seeds (``rng.integers(2**63)``; ``[1, 2**31 - 1)`` for libraries that want a positive C
    int, ``2**32`` for numpy's legacy ``RandomState``)."""
    return int(rng.integers(low, high))


def keyed_generator(*key: int) -> np.random.Generator:
    """The generator of the integer tuple ``key`` (``default_rng([a, b])``: a SeedSequence
    over the tuple), e.g. the oracle's noise of run seed s, ``(s, 7)``, or TrimTuner's normals
    of candidate c, ``(e_seed, c)``."""
    return np.random.default_rng([int(k) for k in key])


def spawned_generator(rng: np.random.Generator) -> np.random.Generator:
    """A child generator of ``rng`` (``Generator.spawn``: a child of its SeedSequence)."""
    return rng.spawn(1)[0]
