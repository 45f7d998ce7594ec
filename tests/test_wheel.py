"""The installed wheel (issue 43): built from the working tree, it holds one top-level package,
``optfarm``, with the built-in specs and baselines and without the checkout's mutation
catalogue; its metadata states ranges, no exact pin; installed non-editable in a fresh virtual
environment (no system site packages) with the lock as constraints, it runs ``farm run``,
``farm leaderboard --datasets synthetic --plan`` and ``farm regress --help`` from a folder that
is not the checkout, and ``farm regress --mutations`` says in one line that it needs the
checkout. Slow: the install downloads optfarm's dependencies (minutes; the network is needed
once, pip caches them).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"


def _build_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of the working tree (building writes build/ and egg-info), built
    in pip's isolated build environment (pyproject.toml's build requirements)."""
    src = tmp_path / "src"
    shutil.copytree(
        ROOT,
        src,
        symlinks=True,
        ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__"),
    )
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(src)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("optfarm-*.whl")
    return wheel


def _check_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"optfarm"}, top
    for data in ("leaderboard-first-look.yaml", "nightly-short.yaml", "nightly-baseline.json"):
        assert f"optfarm/sweeps/{data}" in names
    assert not any(n.startswith(("mutations/", "tests/", "sweeps/")) for n in names)
    core = [r for r in re.findall(r"^Requires-Dist: (.+)$", meta, re.M) if "extra ==" not in r]
    assert len(core) >= 19 and not [r for r in core if "==" in r], core


@pytest.mark.slow
def test_the_wheel_installed_alone_runs_from_another_folder(tmp_path):
    wheel = _build_wheel(tmp_path)
    _check_contents(wheel)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(LOCK), str(wheel)],
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    farm = str(venv / "bin" / "farm")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [farm, *args], cwd=elsewhere, capture_output=True, text=True, timeout=1800
        )

    for args in (
        ("run", "--iterations", "5"),
        ("leaderboard", "--datasets", "synthetic", "--plan"),
        ("regress", "--help"),
    ):
        done = run(*args)
        assert done.returncode == 0, (args, done.stdout[-1500:], done.stderr[-1500:])
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import optfarm; print(optfarm.__file__)"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.startswith(str(venv)), where.stdout  # the wheel's code, not the tree's
    gated = run("regress", "nightly-short", "--baseline", "nightly-baseline", "--mutations", "all")
    assert gated.returncode == 2 and "needs optfarm's checkout" in gated.stderr, gated.stderr
    assert len(gated.stderr.strip().splitlines()) == 1
