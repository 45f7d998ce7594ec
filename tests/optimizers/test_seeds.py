"""Child seeds have one home, ``optfarm/optimizers/seeds.py`` (issue 35): no other module of the
four packages derives one (a seed drawn as ``integers(2**63)``, a ``spawn``, a generator keyed by a
list, a ``SeedSequence``), and the home's functions give the papers' values bit for bit."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from optfarm.optimizers.seeds import drawn_seed, keyed_generator, spawned_generator

ROOT = Path(__file__).resolve().parents[2]
DERIVATIONS = re.compile(
    r"integers\(\s*(1\s*,\s*)?2\s*\*\*\s*(63|32|31)|\.spawn\(|"
    r"default_rng\(\s*\[|SeedSequence\("
)


def test_no_module_but_the_home_derives_a_child_seed():
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for package in ("farm", "optimizers", "oracle", "integrations")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != ROOT / "optimizers" / "seeds.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if DERIVATIONS.search(line)
    ]
    assert found == []


def test_the_home_gives_the_papers_values():
    a, b = np.random.default_rng(11), np.random.default_rng(11)
    assert [drawn_seed(a) for _ in range(3)] == [int(b.integers(2**63)) for _ in range(3)]
    assert drawn_seed(a, 2**31 - 1, 1) == int(b.integers(1, 2**31 - 1))
    assert (keyed_generator(5, 7).random(3) == np.random.default_rng([5, 7]).random(3)).all()
    assert (spawned_generator(a).random(3) == b.spawn(1)[0].random(3)).all()
