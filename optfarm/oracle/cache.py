"""Where the dataset registry keeps its canonical Parquet files: ``$OPTFARM_DATA`` if set,
else the user cache dir (``~/.cache/optfarm``)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

__all__ = ["data_dir"]


def data_dir() -> Path:
    return Path(os.environ.get("OPTFARM_DATA") or platformdirs.user_cache_dir("optfarm"))
