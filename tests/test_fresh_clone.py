"""A fresh clone passes the README's test command: the committed HEAD cloned into a temporary
folder with no ``../shared`` beside it, no network (``OPTFARM_OFFLINE=1``) and a temporary
HOME (no ``~/.ray``, an empty user cache). The real-data tests are skipped, each with one
short line naming the commands that provide the data, and everything else passes (exit 0).

It runs the README's ``python -m pytest`` (no ``-rs``: pyproject.toml's addopts show the skip
reasons) on a few files that mix real-data tests with others (the whole suite would take
minutes); the clone's packages come first on ``sys.path``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import NO_DATA

ROOT = Path(__file__).resolve().parents[1]
SELECTION = [
    "tests/oracle/test_registry_cli.py",
    "tests/oracle/test_formats.py",
    "tests/farm/test_run.py",
]


@pytest.mark.fresh_clone
def test_readme_test_command_on_a_fresh_clone_offline(tmp_path):
    clone, home = tmp_path / "optfarm", tmp_path / "home"
    home.mkdir()
    subprocess.run(
        ["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, capture_output=True
    )
    assert not (clone.parent / "shared").exists()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPTFARM_DATA", "OPTFARM_DATASETS_DIR", "RAY_AUTH_MODE", "PYTHONPATH")
    }
    env.update(HOME=str(home), OPTFARM_OFFLINE="1", XDG_CACHE_HOME=str(home / ".cache"))
    where = subprocess.run(
        [sys.executable, "-c", "import optfarm; print(optfarm.__file__)"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip().startswith(str(clone))  # the clone's code is under test
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SELECTION],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:]
    counts = dict((k, int(n)) for n, k in re.findall(r"(\d+) (passed|skipped|failed|error)", out))
    assert counts.get("passed", 0) > 10 and counts.get("skipped", 0) > 5, out[-1500:]
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert skips and all(line.endswith(NO_DATA) for line in skips), "\n".join(skips[:5])
    # short, and naming the offline command (they were ~300 characters, naming neither)
    assert "farm datasets fetch all --from DIR" in NO_DATA
    assert max(map(len, skips)) <= 160, max(skips, key=len)
