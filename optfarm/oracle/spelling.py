"""Close matches for a mistyped name: ``did_you_mean("seed", ["seeds", "datasets"])``."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``choices`` to ``word`` (difflib's
    ratio >= 0.6, or ``word`` a prefix of exactly one choice), else ``""``: short enough to end
    a one-line error."""
    choices = [str(c) for c in choices]
    close = difflib.get_close_matches(word, choices, n=2, cutoff=0.6)
    if not close:
        prefixed = [c for c in choices if word and c.startswith(word)]
        close = prefixed if len(prefixed) == 1 else []
    if not close:
        return ""
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)"
