"""Shared test set-up: the real datasets, found the way a user gets them, and an isolated cache.

The tests that need the papers' published files ask for ``shared_datasets``, a folder laid out
like the shared datasets folder (``trimtuner/cnn.csv``, ``scout/<workload>/...``). It is, in
order: ``$OPTFARM_DATASETS_DIR``; ``../shared/datasets`` beside the checkout (CI has it); the
files ``farm datasets fetch`` keeps in the user cache (``optfarm.oracle.sources.sources_dir()``),
downloaded now unless ``OPTFARM_OFFLINE`` is set (``farm datasets fetch all --from DIR`` keeps its
files there too). When none works those tests are skipped, each with one short line
(``NO_DATA``: the commands that provide the data), and the rest of the suite runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from optfarm.oracle.sources import SOURCES, download, sources_dir

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
USER_SOURCES = sources_dir()  # read before any test points OPTFARM_DATA at a temporary folder
NO_DATA = (
    "no real datasets: run `farm datasets fetch all --from DIR` (a copy) or `farm datasets "
    "fetch all`"
)


def find_datasets() -> tuple[Path | None, str]:
    """The real datasets' folder, or None and why not (``NO_DATA`` says what to do)."""
    given = os.environ.get("OPTFARM_DATASETS_DIR")
    if given:
        if not Path(given).is_dir():
            pytest.fail(f"OPTFARM_DATASETS_DIR={given} is not a folder")
        return Path(given), ""
    if SHARED.is_dir():
        return SHARED, ""
    why = download(list(SOURCES), USER_SOURCES)  # None: every file is there (now)
    return (USER_SOURCES, "") if why is None else (None, why)


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    folder, why = find_datasets()
    if folder is None:
        pytest.skip(NO_DATA)
    return folder


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own empty dataset cache (OPTFARM_DATA)."""
    folder = tmp_path_factory.mktemp("optfarm-data")
    monkeypatch.setenv("OPTFARM_DATA", str(folder))
    return folder
