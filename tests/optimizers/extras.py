"""Every registered optimizer as a pytest parameter; a peer whose optional extra is not
installed is skipped, with the one-line message naming the extra as the reason."""

from __future__ import annotations

import pytest

from optfarm.optimizers.base import MissingExtra
from optfarm.optimizers.registry import available, get


def missing_extra(name: str) -> str | None:
    try:
        get(name).resolve_params({})
    except MissingExtra as e:
        return str(e)
    return None


def optimizer_names(where=lambda cls: True) -> list:
    """The names of the optimizers whose class satisfies ``where``."""
    return [
        pytest.param(
            n, marks=pytest.mark.skipif(bool(missing_extra(n)), reason=missing_extra(n) or "")
        )
        for n in available()
        if where(get(n))
    ]
