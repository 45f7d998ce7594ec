"""Shared test set-up: the real datasets under ../shared/datasets and an isolated cache."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"the real datasets are expected at {SHARED}")
    return SHARED


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own empty dataset cache (OPTFARM_DATA)."""
    folder = tmp_path_factory.mktemp("optfarm-data")
    monkeypatch.setenv("OPTFARM_DATA", str(folder))
    return folder
